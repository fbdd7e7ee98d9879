"""Real peers the tests check kraftlake against (a real KRaft Kafka built from the cached Maven jars)."""
