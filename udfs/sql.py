"""The SQL surface: table functions "state at offset N" over the warehouse's history tables, as SQL.

:func:`function_statements` gives each function as SQL (``CREATE FUNCTION ... RETURNS TABLE ... RETURN``):
what :mod:`udfs.catalog` stores permanently in a catalog database (``kraftlake.partitions_at(N)`` in every
``SparkSession`` over that metastore) and what ``serve`` gives every client session. :func:`register` gives a
session the same functions as Python UDTFs over the answers read without a JVM (:mod:`udfs.table_functions`):
nothing to analyse when they are made and no Delta table to plan when they are called.
:func:`register_sql_functions` makes the SQL ones temporary functions of a session instead.

- ``<entity>_at(offset)`` for every history table (``partitions_at``, ``brokers_at``, ``topics_at``,
  ``configs_at``, ``features_at``, ``controllers_at``, ``client_quotas_at``, ``producer_ids_at``, ``acls_at``,
  ``scram_at``, ``delegation_tokens_at``): the entity's attributes and ``from_offset``, a range filter with no
  replay (pending ``closes`` applied: :func:`kraftlake.spark.tables.queries.state_query`). State at N includes the
  record at N. An offset below the retained history (after ``compact`` deleted it, or before the snapshot a
  warehouse was seeded from) or below 0 raises (``raise_error``, USER_RAISED_EXCEPTION): there the tables hold
  only the part of the state that outlived the cut. So does an offset past the commit point (as published in
  ``bounds``: :func:`kraftlake.spark.tables.bounds.publish_commit_point`), which the tables do not hold. :func:`warehouse_errors` turns a refusal into
  ``WarehouseError``.
- ``<entity>_at_time(ts)``: the same at the last offset whose record timestamp is at or before ``ts``
  (a TIMESTAMP), through the ``offsets`` table; a time before the retained history raises the same way.
- Every function takes the cluster as its last argument (``in_cluster``, optional: ``DEFAULT NULL``). Left out,
  the functions answer for the one cluster the warehouse holds, and raise naming the clusters when it holds
  several; a cluster the warehouse does not hold raises too
  (:func:`kraftlake.spark.tables.queries.cluster_choice`). ``<entity>_at_time(ts)`` without it answers every
  cluster, each at its own last offset at or before ``ts``, with a ``cluster`` column first. The guards below are
  the named cluster's.
- History views: ``partition_history(topic, partition)`` (every version with its ``[from_offset, to_offset)``),
  ``isr_history(topic, partition)`` and ``leader_history(topic, partition)`` (each ISR / leader with the offset
  range it held for), ``broker_history(id)``. In a warehouse whose history was cut (``compact``, or seeded from
  a snapshot) a view raises as the ``_at`` functions do when the entity's history reaches below the retained-from
  offset, or when nothing of it is left: the versions that ended before the cut are gone, and the answer would
  be silently shorter (:func:`_history_guard`). An entity whose first version starts after the cut answers.
- ``fleet_status()``: each cluster's newest state as a fleet's streams record it (``state``, ``lag``,
  ``last_offset``, ``last_commit``, ``last_error``, ``updated``: :mod:`kraftlake.spark.tables.fleet_status`),
  in a warehouse that has the table (:func:`register` creates it in a warehouse).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from kraftlake.history import ENTITIES
from kraftlake.spark.tables.creation import open_for_readers
from kraftlake.spark.tables.fleet_status import ensure_fleet_status
from kraftlake.spark.tables.layout import (
    BOUNDS,
    CLOSES,
    CLUSTER,
    FLEET_STATUS,
    LOG,
    OFFSETS,
    WarehouseError,
    history_columns,
    table_path,
    table_ref,
)
from kraftlake.spark.tables.queries import (
    BEFORE_RETAINED,
    REFUSALS,
    bounds_relation,
    cluster_choice,
    cluster_named,
    cluster_refusal,
    history_query,
    offset_at_time,
    offset_guard,
    retention_guard_at_time,
    state_query,
)
from kraftlake.warehouse.guard_values import GuardValues
from kraftlake.warehouse.tables import Warehouse
from udfs.records import register_udfs
from udfs.risk import risk_statements
from udfs.table_functions import register_table_functions, table_functions
from udfs.versions import versions_statements

AT_FUNCTIONS = tuple(f"{t}_at" for t in ENTITIES)
#: The parameter naming the cluster, every function's last (optional: ``DEFAULT NULL``).
CLUSTER_ARG = "in_cluster"


def _returns(table: str, extra: str = "from_offset BIGINT") -> str:
    return ", ".join([*(f"{n} {t}" for n, t in history_columns(table)), extra])


def _cols(table: str, alias: str = "h") -> str:
    return ", ".join(f"{alias}.`{n}`" for n in ENTITIES[table].names)


def _history_guard(
    warehouse: str | Path,
    types: list[str],
    source: str,
    where: str,
    what: str,
    cluster: str,
    known: GuardValues | None = None,
    refusal: str = "",
) -> str:
    """A UNION ALL branch of a history view that yields no row (NULLs of ``types``) and raises when the
    cluster's history was cut (a retained-from offset is recorded) and the entity's versions in ``source``
    (alias ``h``, filtered by ``where``) start below it or are all gone; ``what`` is an SQL string expression
    naming it. ``cluster``: a :func:`kraftlake.spark.tables.queries.cluster_choice`, which raises here for a
    cluster the warehouse does not hold. ``known``: :func:`kraftlake.spark.tables.queries.bounds_relation`'s, and ``refusal``
    :func:`kraftlake.spark.tables.queries.cluster_refusal`'s branches, checked first."""
    nulls = ", ".join(f"CAST(NULL AS {t})" for t in types)
    return (
        f"SELECT {nulls} FROM (SELECT min(h.from_offset) AS f FROM {source} h WHERE {where}) s "
        f"CROSS JOIN {bounds_relation(warehouse, cluster, known)} WHERE CASE {refusal}WHEN {cluster} IS NULL THEN false "
        f"WHEN g.r >= 0 AND (s.f IS NULL OR s.f < g.r) "
        f"THEN raise_error(concat('the history of ', {what}, ' reaches {BEFORE_RETAINED} (', "
        f"coalesce(cast(s.f AS STRING), 'none left'), '): the warehouse holds the states from offset ', g.r, "
        f"' on')) ELSE false END"
    )


def function_statements(
    warehouse: str | Path,
    temporary: bool = True,
    database: str | None = None,
    known: GuardValues | None = None,
) -> list[str]:
    """The ``CREATE FUNCTION`` statements :func:`register` runs.

    ``temporary=False`` makes permanent functions, stored in the catalog (``database`` names the schema they go
    to, else the current one): see :mod:`udfs.catalog`. ``known``: the guards' values as literals, as they were
    read then (:func:`register_for_query`): for functions that answer one query and are dropped.
    """
    if temporary and database is not None:
        raise ValueError("temporary functions belong to the session, not to a database")
    kind = (
        "TEMPORARY FUNCTION " if temporary else "FUNCTION " if database is None else f"FUNCTION `{database}`."
    )
    out = []
    # every function's last argument names the cluster; NULL (left out) answers for the one cluster held, and
    # _at_time for every cluster
    named = f"{CLUSTER_ARG} STRING DEFAULT NULL"
    chosen = cluster_choice(warehouse, CLUSTER_ARG, known)
    refusal = cluster_refusal(warehouse, CLUSTER_ARG, known)
    # the rows read by the cluster named (a literal: Delta skips the others' files), checked by the guard
    read_by = cluster_named(CLUSTER_ARG, chosen)
    narrowed = f"CASE WHEN {CLUSTER_ARG} IS NULL THEN NULL ELSE {chosen} END"
    at = f"{offset_at_time(warehouse, 'at_time', f'coalesce({narrowed}, {CLUSTER})')} a"
    for table in ENTITIES:
        out.append(
            f"CREATE OR REPLACE {kind}{table}_at(at_offset BIGINT, {named}) RETURNS TABLE ({_returns(table)}) "
            "RETURN "
            + state_query(
                warehouse,
                table,
                "at_offset",
                read_by,
                guard=offset_guard(warehouse, table, "at_offset", chosen, read_by, known, refusal),
                known=known,
            )
        )
        out.append(
            f"CREATE OR REPLACE {kind}{table}_at_time(at_time TIMESTAMP, {named}) RETURNS TABLE "
            f"({CLUSTER} STRING, {_returns(table)}) RETURN "
            + state_query(
                warehouse,
                table,
                "a.o",
                None,
                joined=at,
                guard=retention_guard_at_time(
                    warehouse, table, "at_time", f"coalesce({narrowed}, {CLUSTER})", known
                ),
                # not ``known``: the offset at a time is not held to the commit point, and the closes past it
                # are not in ``known``
            )
        )

    def guard(types: list[str], source: str, where: str, what: str) -> str:
        return _history_guard(warehouse, types, source, where, what, chosen, known, refusal)

    parts = f"({history_query(warehouse, 'partitions', chosen)})"
    full = _returns("partitions", "from_offset BIGINT, to_offset BIGINT")
    of_partition = "h.topic = for_topic AND h.`partition` = for_partition"
    partition_named = "concat('partition ', for_topic, '-', for_partition)"
    part_types = [t for _, t in history_columns("partitions")]
    out.append(
        f"CREATE OR REPLACE {kind}partition_history(for_topic STRING, for_partition INT, {named}) "
        f"RETURNS TABLE ({full}) "
        f"RETURN SELECT {_cols('partitions')}, h.from_offset, h.to_offset FROM {parts} h "
        f"WHERE {of_partition} UNION ALL "
        + guard([*part_types, "BIGINT", "BIGINT"], parts, of_partition, partition_named)
    )
    for what, col, typ in (("isr", "isr", "ARRAY<INT>"), ("leader", "leader", "INT")):
        # versions in which the value did not change are merged (gaps and islands over the version order)
        out.append(
            f"CREATE OR REPLACE {kind}{what}_history(for_topic STRING, for_partition INT, {named}) RETURNS TABLE "
            f"(topic STRING, topic_id STRING, `partition` INT, {col} {typ}, from_offset BIGINT, to_offset BIGINT) "
            f"RETURN SELECT topic, topic_id, `partition`, {col}, min(from_offset) AS from_offset, "
            f"max_by(to_offset, from_offset) AS to_offset FROM ("
            f"  SELECT *, sum(CASE WHEN prev IS NOT NULL AND prev = {col} AND prev_to = from_offset THEN 0 "
            f"  ELSE 1 END) OVER (PARTITION BY topic_id ORDER BY from_offset) AS island FROM ("
            f"    SELECT h.topic, h.topic_id, h.`partition`, h.{col}, h.from_offset, h.to_offset, "
            f"    lag(h.{col}) OVER (PARTITION BY h.topic_id ORDER BY h.from_offset) AS prev, "
            f"    lag(h.to_offset) OVER (PARTITION BY h.topic_id ORDER BY h.from_offset) AS prev_to "
            f"    FROM {parts} h WHERE h.topic = for_topic AND h.`partition` = for_partition)) "
            f"GROUP BY topic, topic_id, `partition`, {col}, island UNION ALL "
            + guard(
                ["STRING", "STRING", "INT", typ, "BIGINT", "BIGINT"], parts, of_partition, partition_named
            )
        )
    brokers = f"({history_query(warehouse, 'brokers', chosen)})"
    out.append(
        f"CREATE OR REPLACE {kind}broker_history(for_id INT, {named}) RETURNS TABLE "
        f"({_returns('brokers', 'from_offset BIGINT, to_offset BIGINT')}) "
        f"RETURN SELECT {_cols('brokers')}, h.from_offset, h.to_offset FROM {brokers} h WHERE h.id = for_id "
        "UNION ALL "
        + guard(
            [*(t for _, t in history_columns("brokers")), "BIGINT", "BIGINT"],
            brokers,
            "h.id = for_id",
            "concat('broker ', for_id)",
        )
    )
    out.extend(risk_statements(warehouse, kind, named, chosen))
    out.extend(versions_statements(warehouse, kind, named, chosen))
    if Path(table_path(warehouse, FLEET_STATUS), "_delta_log").is_dir():
        out.append(fleet_status_statement(warehouse, kind))
    return out


def fleet_status_statement(warehouse: str | Path, kind: str) -> str:
    """``fleet_status()``: the newest row of each cluster in ``fleet_status``."""
    cols = "state, lag, last_offset, last_commit_ms, last_error"
    return (
        f"CREATE OR REPLACE {kind}fleet_status() RETURNS TABLE ({CLUSTER} STRING, state STRING, lag BIGINT, "
        "last_offset BIGINT, last_commit TIMESTAMP, last_error STRING, updated TIMESTAMP) "
        f"RETURN SELECT {CLUSTER}, r.state, r.lag, r.last_offset, timestamp_millis(r.last_commit_ms), "
        "r.last_error, timestamp_millis(r.updated_ms) FROM ("
        f"SELECT {CLUSTER}, max_by(struct({cols}, updated_ms), updated_ms) AS r "
        f"FROM {table_ref(warehouse, FLEET_STATUS)} GROUP BY {CLUSTER})"
    )


def register(
    spark: SparkSession, warehouse: str | Path, temporary: bool = True, database: str | None = None
) -> list[str]:
    """Create the table functions over ``warehouse`` for ``spark``; returns their (qualified) names.

    Temporary by default (``spark`` only): the Python UDTFs of :mod:`udfs.table_functions`, with the record
    UDFs (``decode_record``, ``kafka_json``: :mod:`udfs.records`); where the answers without a JVM cannot read
    one of the warehouse's tables (a Delta feature their reader does not implement), the SQL functions, which
    Delta's own reader serves. ``temporary=False`` stores the SQL functions in ``spark``'s catalog, in
    ``database`` (:func:`udfs.catalog.create_functions` is the way to do that), where Python functions cannot
    go.
    """
    _open(spark, warehouse)
    if not temporary:
        return _run(spark, function_statements(warehouse, temporary, database))
    if database is not None:
        raise ValueError("temporary functions belong to the session, not to a database")
    if Warehouse(Path(warehouse)).unreadable(READ_TABLES) is None:
        return _replace(spark, register_table_functions, warehouse) + register_udfs(spark)
    return _replace(spark, _sql_functions, warehouse) + register_udfs(spark)


def register_sql_functions(spark: SparkSession, warehouse: str | Path) -> list[str]:
    """The SQL functions (:func:`function_statements`) as temporary functions of ``spark``, in place of
    :func:`register`'s; returns their names. What a catalog stores, in one session: to compare them with
    :func:`register`'s, and to measure them."""
    _open(spark, warehouse)
    return _replace(spark, _sql_functions, warehouse)


#: The tables the table functions read.
READ_TABLES = (*ENTITIES, BOUNDS, CLOSES, OFFSETS, LOG, FLEET_STATUS)


def _sql_functions(spark: SparkSession, warehouse: str | Path) -> list[str]:
    return _run(spark, function_statements(warehouse))


def _replace(
    spark: SparkSession, make: Callable[[SparkSession, str | Path], list[str]], warehouse: str | Path
) -> list[str]:
    """``make``'s temporary functions in ``spark``, those of the same names dropped first: Spark replaces a
    Python UDTF with a Python UDTF and an SQL function with an SQL function, but not one kind with the other."""
    for name in _temporary_functions(spark, warehouse):
        spark.sql(f"DROP TEMPORARY FUNCTION IF EXISTS `{name}`")
    return make(spark, warehouse)


def _temporary_functions(spark: SparkSession, warehouse: str | Path) -> list[str]:
    """The names of the table functions over ``warehouse`` that are temporary functions of ``spark`` now."""
    ours = set(table_functions(warehouse))
    # not spark.catalog.listFunctions(): it makes an object of each of Spark's 500 built-in functions (4 s)
    return [r[0] for r in spark.sql("SHOW USER FUNCTIONS").collect() if r[0] in ours]


def _run(spark: SparkSession, statements: list[str]) -> list[str]:
    names = []
    for stmt in statements:
        spark.sql(stmt)
        names.append(_created(stmt))
    return names


def _open(spark: SparkSession, warehouse: str | Path) -> None:
    """What the functions need of a warehouse before they are created: an old one migrated
    (:func:`kraftlake.spark.tables.creation.open_for_readers`), ``fleet_status`` created."""
    open_for_readers(spark, warehouse)
    if Path(table_path(warehouse, OFFSETS), "_delta_log").is_dir():
        ensure_fleet_status(spark, warehouse)


def _created(stmt: str) -> str:
    """The (qualified) name a ``CREATE FUNCTION`` statement creates."""
    return stmt.split(" FUNCTION ", 1)[1].split("(", 1)[0].replace("`", "")


def register_for_query(
    spark: SparkSession, warehouse: str | Path, query: str, known: GuardValues | None
) -> list[str]:
    """Create the table functions ``query`` names, as temporary functions of ``spark`` (they shadow the
    catalog's of the same name), with the guards' values as the literals of ``known``; returns their names.

    For a session that answers this one query (a server's request): its functions read ``clusters`` and
    ``bounds`` no more (each table a query reads costs a Delta scan planning and a Spark job), a guard that
    passes folds away, a warehouse's one cluster is a literal Delta skips files by, and ``closes`` is read only
    for the clusters that have a pending close of the entity. A query qualifying a function's name
    (``default.partitions_at``) gets the catalog's, which read the tables. ``known`` None creates them as
    :func:`register` does, reading the tables.
    """
    named = []
    for stmt in function_statements(warehouse, temporary=True, known=known):
        name = _created(stmt)
        if _names_in(name, query):
            spark.sql(stmt)
            named.append(name)
    return named


def _names_in(name: str, query: str) -> bool:
    """Whether ``query`` calls the function ``name`` (function names are case-insensitive)."""
    return re.search(rf"\b{name}\s*\(", query, re.IGNORECASE) is not None


def _ours(text: str) -> bool:
    return any(refusal in text for refusal in REFUSALS)


#: The message of a raise_error in Spark's text ``... [USER_RAISED_EXCEPTION] message SQLSTATE: P0001``: the last
#: such tag on its line (the Thrift server's text repeats it), up to the SQLSTATE or the line's end (Spark
#: Connect's exceptions append the server's JVM stack trace on the lines below).
_RAISED = re.compile(
    r"\[USER_RAISED_EXCEPTION\] (?!.*\[USER_RAISED_EXCEPTION\])(.*?)(?: SQLSTATE: \w+)?$", re.M
)


def _message_of(text: str) -> str:
    match = _RAISED.search(text)
    return match.group(1).strip() if match else ""


#: A refusal of :mod:`udfs.table_functions`' UDTFs in the Python worker's traceback that Spark carries: the
#: exception's last line, ``kraftlake.warehouse.tables.WarehouseError: message``.
_REFUSED = re.compile(r"(?:^|[\s.])WarehouseError: (.*)$", re.M)


def raised_message(exc: BaseException) -> str | None:
    """The message of a refusal of the table functions (an offset outside what the warehouse holds: negative,
    before the retained history, past the commit point; a cluster the warehouse does not hold) carried by a
    Spark exception, else None: a ``raise_error`` of the SQL functions, or a ``WarehouseError`` raised in a
    UDTF of :mod:`udfs.table_functions` (a ``PythonException``).

    Works on the exceptions of a local session (py4j's, with the Java cause chain) and on Spark Connect's
    (``pyspark.errors.exceptions.connect``: the condition and parameters travel in the gRPC error's details;
    where the parameters did not arrive, the message is read from the text).
    """
    refused = _REFUSED.findall(str(exc))
    if refused and "PythonException" in type(exc).__name__ + str(exc)[:200]:
        return str(refused[-1]).strip()
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        get_condition = getattr(cause, "getCondition", None) or getattr(cause, "getErrorClass", None)
        condition = get_condition() if callable(get_condition) else None
        if condition == "USER_RAISED_EXCEPTION":
            params = cause.getMessageParameters() or {}  # type: ignore[attr-defined]
            text = str(params.get("errorMessage", "")) or _message_of(str(cause))
            return text if _ours(text) else None
        cause = cause.__cause__ or cause.__context__
    text = _message_of(str(exc))
    return text if _ours(text) else None


@contextmanager
def warehouse_errors() -> Iterator[None]:
    """Run queries over the table functions, turning their refusal of an offset the warehouse does not hold
    into :class:`kraftlake.spark.tables.layout.WarehouseError` (one line for the commands), other errors unchanged."""
    try:
        yield
    except Exception as exc:
        message = raised_message(exc)
        if message is None:
            raise
        raise WarehouseError(message) from None
