"""The warehouse: Delta tables by offset (DESIGN.md section 4) and their idempotent writes.

Every table lives at ``<warehouse>/<name>``. Writes of a slice of the log ending at offset ``L`` carry the Delta
transaction id ``(txnAppId=kraftlake, txnVersion=L)``: Delta skips a write whose version is not above the one it
recorded for the table, so replaying a slice after a crash never duplicates rows. ``offsets`` is written last
in every slice: its highest offset is the pipeline's commit point.

The package's modules: :mod:`.layout` (names, schemas, paths), :mod:`.creation` (tables created and migrated),
:mod:`.writes` (idempotent appends, checkpoints, history writes, conflict retries), :mod:`.queries` (the readers'
SQL and its guards), :mod:`.fold` (pending closes into the history tables), :mod:`.bounds` (the commit point,
the retained history, gaps, offsets and snapshots).
"""
