"""The warehouse: Delta tables by offset and their idempotent writes.

The tables: ``metadata_log`` (one row per committed record), one history table per entity
(:data:`kraftlake.history.ENTITIES`: versions valid on ``[from_offset, to_offset)``), ``closes`` (ends of versions
not yet folded into them), ``snapshots`` (whole images at offsets), ``offsets`` (each offset's epoch and time),
``bounds`` (what the SQL functions answer for), ``clusters`` (the registry); ``quarantine`` and ``fleet_status``
are made when first needed.

Every table lives at ``<warehouse>/<name>`` and holds the rows of many Kafka clusters, each row's cluster in its
first column, ``cluster``, which also leads its clustering and statistics columns: one cluster's queries skip the
others' files, and a writer changes only its cluster's rows, so writers of several clusters commit side by side.
Writes of a slice of a cluster's log ending at offset ``L`` carry the Delta transaction
id ``(txnAppId=kraftlake/<cluster>, txnVersion=L)``: Delta skips a write whose version is not above the one it
recorded for the table, so replaying a slice after a crash never duplicates rows. ``offsets`` is written last
in every slice: the cluster's highest offset there is its commit point.

The package's modules: :mod:`.layout` (names, schemas, paths), :mod:`.creation` (tables created and migrated),
:mod:`.writes` (idempotent appends, checkpoints, history writes, conflict retries), :mod:`.queries` (the readers'
SQL and its guards), :mod:`.fold` (pending closes into the history tables), :mod:`.bounds` (the commit point,
the retained history, gaps, offsets and snapshots), :mod:`.clusters` (the registry of the clusters held),
:mod:`.fleet_status` and :mod:`.fleet_compaction` (a fleet's status table).
"""
