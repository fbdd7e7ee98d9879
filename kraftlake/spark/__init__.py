"""The only package of kraftlake that imports pyspark and delta."""
