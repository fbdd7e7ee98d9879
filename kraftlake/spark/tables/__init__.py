"""The warehouse: Delta tables by offset (DESIGN.md section 4) and their idempotent writes.

Every table lives at ``<warehouse>/<name>`` and holds the rows of many Kafka clusters, each row's cluster in its
first column, ``cluster``. Writes of a slice of a cluster's log ending at offset ``L`` carry the Delta transaction
id ``(txnAppId=kraftlake/<cluster>, txnVersion=L)``: Delta skips a write whose version is not above the one it
recorded for the table, so replaying a slice after a crash never duplicates rows. ``offsets`` is written last
in every slice: the cluster's highest offset there is its commit point.

The package's modules: :mod:`.layout` (names, schemas, paths), :mod:`.creation` (tables created and migrated),
:mod:`.writes` (idempotent appends, checkpoints, history writes, conflict retries), :mod:`.queries` (the readers'
SQL and its guards), :mod:`.fold` (pending closes into the history tables), :mod:`.bounds` (the commit point,
the retained history, gaps, offsets and snapshots), :mod:`.clusters` (the registry of the clusters held).
"""
