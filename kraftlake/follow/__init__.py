"""Following a live KRaft controller quorum over Kafka's protocol, as an observer, into a mirrored log dir.

`observer.MetadataObserver` is the step machine (what to fetch, what is committed), `mirror.MetadataMirror`
the directory it writes (Kafka's layout, committed batches only), `follower.Follower` the loop that connects
them over `kraftlake.wire` connections.
"""
