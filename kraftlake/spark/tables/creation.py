"""Creating the warehouse's tables (Delta's version 0 written by kraftlake) and migrating those an older
kraftlake made: columns a layout gained, ``bounds`` filled from the ``retention`` table it replaced, and a
warehouse of one cluster without the ``cluster`` column made a warehouse of that one named cluster
(:func:`migrate`)."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from kraftlake.delta import append as delta_append
from kraftlake.spark.tables import clusters
from kraftlake.spark.tables.bounds import append_bounds, last_offset
from kraftlake.spark.tables.clusters import ClusterError
from kraftlake.spark.tables.layout import (
    BOUNDS,
    CLOSES,
    CLUSTER,
    CLUSTERS,
    HISTORY_TABLES,
    LOG,
    OFFSETS,
    QUARANTINE,
    RETENTION,
    SNAPSHOTS,
    engine_info,
    never_written,
    sql_string,
    table_layout,
    table_path,
    table_ref,
)

_log = logging.getLogger(__name__)
_ENSURED: set[str] = set()

#: The protocol delta-spark 4.x gives a new clustered table (with deletion vectors, or without): the table
#: features clustering needs (domainMetadata) and the legacy ones writer version 7 lists (invariants, appendOnly).
_PROTOCOL_DV = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["deletionVectors"],
    "writerFeatures": ["deletionVectors", "domainMetadata", "invariants", "appendOnly", "clustering"],
}
_PROTOCOL = {
    "minReaderVersion": 1,
    "minWriterVersion": 7,
    "writerFeatures": ["domainMetadata", "clustering", "invariants", "appendOnly"],
}


def _has_commits(log: Path) -> bool:
    """Whether a ``_delta_log`` holds a table: a commit, a checkpoint (Delta removes commits older than its log
    retention once a checkpoint covers them), or the pointer to one."""
    if not log.is_dir():
        return False
    return any(
        p.name == "_last_checkpoint" or p.name.endswith(".json") or ".checkpoint" in p.name
        for p in log.iterdir()
    )


def create_table(spark: SparkSession, warehouse: str | Path, name: str) -> bool:
    """Create a warehouse table, empty, unless it exists; returns whether this call created it.

    Written as Delta's protocol defines a table: its version 0 (``_delta_log/00000000000000000000.json``: a
    ``commitInfo``, the ``metaData``, the ``protocol`` and the clustering columns as ``delta.clustering`` domain
    metadata), the very actions delta-spark's ``CREATE TABLE ... CLUSTER BY`` writes, put in place as any commit
    (:func:`kraftlake.delta.append.put_commit`: a second creator finds it there). Through Spark each
    creation is a Delta transaction of a second or more on a cold JVM, and a warehouse has 16 tables.
    """
    log = Path(table_path(warehouse, name), "_delta_log")
    if _has_commits(log):
        return False
    schema, cluster, props = table_layout(spark, name)
    log.mkdir(parents=True, exist_ok=True)
    now = int(time.time() * 1000)
    actions = [
        {
            "commitInfo": {
                "timestamp": now,
                "operation": "CREATE TABLE",
                "operationParameters": {
                    "partitionBy": "[]",
                    "clusterBy": json.dumps(cluster, separators=(",", ":")),
                    "description": None,
                    "isManaged": "false",
                    "properties": json.dumps(props, separators=(",", ":")),
                },
                "isolationLevel": "Serializable",
                "isBlindAppend": True,
                "operationMetrics": {},
                "engineInfo": engine_info(spark),
                "txnId": str(uuid.uuid4()),
            }
        },
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema.jsonValue(), separators=(",", ":")),
                "partitionColumns": [],
                "configuration": props,
                "createdTime": now,
            }
        },
        {"protocol": _PROTOCOL_DV if props.get("delta.enableDeletionVectors") == "true" else _PROTOCOL},
        {
            "domainMetadata": {
                "domain": "delta.clustering",
                "configuration": json.dumps(
                    {"clusteringColumns": [[c] for c in cluster], "domainName": "delta.clustering"},
                    separators=(",", ":"),
                ),
                "removed": False,
            }
        },
    ]
    return delta_append.put_commit(log, 0, actions)


def ensure_tables(spark: SparkSession, warehouse: str | Path) -> None:
    """Create the tables that do not exist yet (empty, with their schemas: :func:`create_table`); checked once
    per process."""
    root = str(Path(warehouse).resolve())
    if root in _ENSURED and Path(table_path(warehouse, OFFSETS), "_delta_log").is_dir():
        return
    Path(warehouse).mkdir(parents=True, exist_ok=True)
    for name in WAREHOUSE_TABLES:
        if not create_table(spark, warehouse, name):
            add_missing_columns(spark, warehouse, name)
    if not Path(table_path(warehouse, BOUNDS), "_delta_log").is_dir():
        create_table(spark, warehouse, BOUNDS)
    _ENSURED.add(root)


#: The tables of a warehouse, each created by :func:`ensure_tables`; every one but ``clusters`` has the
#: ``cluster`` column first.
WAREHOUSE_TABLES = (CLUSTERS, LOG, *HISTORY_TABLES, CLOSES, SNAPSHOTS, OFFSETS, BOUNDS)


def needs_migration(warehouse: str | Path) -> bool:
    """Whether ``warehouse`` was made before it held clusters (or its migration was cut short): it has
    committed offsets and no cluster registered (a writer registers its cluster before its first write)."""
    return not never_written(warehouse, OFFSETS) and never_written(warehouse, CLUSTERS)


def migrate(
    spark: SparkSession, warehouse: str | Path, name: str, cluster_id: str | None, source: str | None
) -> None:
    """Make a warehouse of one cluster made before the ``cluster`` column a warehouse of the cluster ``name``,
    in place: the column added to every table (:func:`ensure_tables`), every row's filled with ``name``, each
    table clustered by it first (its layout's clustering and statistics columns), ``bounds`` filled if it was
    never written (:func:`ensure_bounds`), and at last ``name`` registered in ``clusters``, which marks the
    migration done (:func:`needs_migration`). Every step is idempotent: a migration cut short is finished by
    the next writer or registration that opens the warehouse.

    Offsets stay what they were, so every answer is the same before and after; the Delta transaction ids of
    later writes are the cluster's (:func:`kraftlake.spark.tables.layout.app_id`), and resuming goes by the
    commit point, not by them.
    """
    clusters.check_name(name)
    ensure_tables(spark, warehouse)
    literal = sql_string(name)
    for table in WAREHOUSE_TABLES:
        if table == CLUSTERS:
            continue
        path = table_path(warehouse, table)
        if not never_written(warehouse, table):
            spark.sql(f"UPDATE delta.`{path}` SET {CLUSTER} = {literal} WHERE {CLUSTER} IS NULL")
        _, columns, props = table_layout(spark, table)
        if props:  # first: Delta clusters only by columns it keeps statistics on
            settings = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({settings})")
        spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY ({', '.join(columns)})")
    if not never_written(warehouse, QUARANTINE):
        add_cluster_column(spark, warehouse, QUARANTINE, name)
    ensure_bounds(spark, warehouse, name)
    clusters.register(spark, warehouse, name, cluster_id, source)
    _log.info("%s: migrated to a warehouse of clusters, its one cluster named %s", warehouse, name)


def add_cluster_column(spark: SparkSession, warehouse: str | Path, table: str, name: str) -> None:
    """Give ``table``, made before it held clusters (its rows all of the cluster ``name``), the ``cluster``
    column first, filled with ``name``; nothing if it has the column."""
    ref = table_ref(warehouse, table)
    if CLUSTER in spark.read.format("delta").load(table_path(warehouse, table)).columns:
        return
    spark.sql(f"ALTER TABLE {ref} ADD COLUMNS ({CLUSTER} STRING FIRST)")
    spark.sql(f"UPDATE {ref} SET {CLUSTER} = {sql_string(name)} WHERE {CLUSTER} IS NULL")


def open_for_writer(
    spark: SparkSession,
    warehouse: str | Path,
    name: str | None,
    cluster_id: str | None,
    source: str | None,
) -> str:
    """The cluster a writer writes into ``warehouse``: its tables created (or an old warehouse migrated to the
    writer's cluster: :func:`migrate`), the cluster named (``name``, else the source's ``cluster_id``:
    :func:`kraftlake.spark.tables.clusters.writer_name`) and registered, or refused
    (:class:`kraftlake.spark.tables.clusters.ClusterError`) before the writer writes anything."""
    names, refused = open_for_writers(spark, warehouse, [(name, cluster_id, source)])
    if refused is not None:
        raise refused
    return names[0]


def open_for_writers(
    spark: SparkSession,
    warehouse: str | Path,
    wanted: Sequence[tuple[str | None, str | None, str | None]],
) -> tuple[list[str], ClusterError | None]:
    """:func:`open_for_writer` of writers opened together, each ``(name, cluster_id, source)``: the tables
    created once (an old warehouse migrated to the first writer's cluster), the registry read once, the
    clusters named and checked in order as if each had registered before the next opened
    (:func:`kraftlake.spark.tables.clusters.chosen`), and the new ones registered in one commit. Returns the
    names of the writers up to the first one refused, and that refusal (nothing of it or of the writers after
    it is registered)."""
    ensure_tables(spark, warehouse)
    if wanted and needs_migration(warehouse):
        name, cluster_id, source = wanted[0]
        migrate(
            spark,
            warehouse,
            clusters.check_name(name or cluster_id or clusters.DEFAULT_NAME),
            cluster_id,
            source,
        )
    entries, new, refused = clusters.chosen(clusters.registered(spark, warehouse), warehouse, wanted)
    clusters.record(spark, warehouse, new)
    if entries:
        _fill_bounds(spark, warehouse)
    return [e.name for e in entries], refused


def _fill_bounds(spark: SparkSession, warehouse: str | Path) -> None:
    """:func:`ensure_bounds` in a warehouse made before ``bounds`` (which holds one cluster)."""
    if never_written(warehouse, BOUNDS) and not never_written(warehouse, OFFSETS):
        held = clusters.names(clusters.registered(spark, warehouse))
        if len(held) == 1:
            ensure_bounds(spark, warehouse, held[0])


def open_cluster(spark: SparkSession, warehouse: str | Path, name: str | None) -> str:
    """The cluster a command without a source works on (``compact``, the readers): ``name``, or the one cluster
    the warehouse holds (:func:`kraftlake.spark.tables.clusters.reader_name`); an old warehouse is migrated
    first (:func:`migrate`), its one cluster named ``name`` or
    :data:`kraftlake.spark.tables.clusters.DEFAULT_NAME`."""
    if Path(table_path(warehouse, OFFSETS), "_delta_log").is_dir():
        ensure_tables(spark, warehouse)
        if needs_migration(warehouse):
            migrate(spark, warehouse, clusters.check_name(name or clusters.DEFAULT_NAME), None, None)
        _fill_bounds(spark, warehouse)
    return clusters.reader_name(clusters.registered(spark, warehouse), warehouse, name)


def open_for_readers(spark: SparkSession, warehouse: str | Path) -> None:
    """Before the SQL functions are created over ``warehouse``: an old warehouse (:func:`needs_migration`) is
    migrated, its one cluster named :data:`kraftlake.spark.tables.clusters.DEFAULT_NAME` (no source tells its
    cluster id; a writer continues it with ``--cluster default``). Nothing is done to a directory without
    ``offsets``."""
    if not Path(table_path(warehouse, OFFSETS), "_delta_log").is_dir():
        return
    ensure_tables(spark, warehouse)
    if needs_migration(warehouse):
        migrate(spark, warehouse, clusters.DEFAULT_NAME, None, None)
    _fill_bounds(spark, warehouse)


def add_missing_columns(spark: SparkSession, warehouse: str | Path, name: str) -> bool:
    """Give a table made by an older kraftlake the columns its layout has gained since (``metadata_log`` gains a
    struct column with each record type a Kafka release adds); returns whether it did.

    One metadata-only commit (what ``ALTER TABLE ADD COLUMNS`` commits): the columns it has as they are, the new
    ones where the layout has them, so that appends to a table kraftlake created find its schema equal to their
    rows' again, and the rows already written read the new columns as null. A table holding a column the layout does not know
    (made by a newer kraftlake), or of another type, is left as it is: appends then refuse it.
    """
    path = table_path(warehouse, name)
    version, metadata = delta_append.table_metadata(path)
    stored = json.loads(metadata["schemaString"])
    schema, _, _ = table_layout(spark, name)
    wanted = schema.jsonValue()
    have = {f["name"]: f for f in stored["fields"]}
    names = {f["name"] for f in wanted["fields"]}
    added = [f["name"] for f in wanted["fields"] if f["name"] not in have]
    if (
        not added
        or not set(have) <= names
        or any(f["name"] in have and have[f["name"]]["type"] != f["type"] for f in wanted["fields"])
    ):
        return False
    # the columns it has stay as they are (nullability included), the new ones go where the layout has them
    merged = {**wanted, "fields": [have.get(f["name"], f) for f in wanted["fields"]]}
    actions = [
        {
            "commitInfo": {
                "timestamp": int(time.time() * 1000),
                "operation": "ADD COLUMNS",
                "operationParameters": {"columns": json.dumps(added)},
                "readVersion": version,
                "isolationLevel": "Serializable",
                "isBlindAppend": False,
                "operationMetrics": {},
                "engineInfo": engine_info(spark),
                "txnId": str(uuid.uuid4()),
            }
        },
        {"metaData": {**metadata, "schemaString": json.dumps(merged, separators=(",", ":"))}},
    ]
    if not delta_append.put_commit(Path(path, "_delta_log"), version + 1, actions):
        return add_missing_columns(spark, warehouse, name)  # another writer committed first: look again
    _log.info("%s: added the columns %s", path, ", ".join(added))
    return True


def ensure_bounds(spark: SparkSession, warehouse: str | Path, cluster: str) -> None:
    """Create ``bounds`` in a warehouse that has none, and fill it there from what the SQL functions read before
    it existed: the commit point (the highest offset in ``offsets``) and the ``retention`` table's retained-from
    offset, as the one cluster's (a warehouse that old holds one). Two file lookups once done."""
    if not Path(table_path(warehouse, OFFSETS), "_delta_log").is_dir():
        return
    if not create_table(spark, warehouse, BOUNDS):
        add_missing_columns(spark, warehouse, BOUNDS)  # made before gaps were recorded: gap_from, gap_to
    if not never_written(warehouse, BOUNDS):
        return
    committed = last_offset(spark, warehouse, cluster)
    retained = None
    if not never_written(warehouse, RETENTION):
        row = spark.sql(f"SELECT max(retained_from) AS r FROM {table_ref(warehouse, RETENTION)}").first()
        retained = None if row is None or row["r"] is None else int(row["r"])
    if committed >= 0 or retained is not None:
        # a concurrent writer's publish may land first: bounds are read as maxima, so both rows stand
        append_bounds(spark, warehouse, cluster, committed if committed >= 0 else None, retained)
