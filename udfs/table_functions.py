"""The table functions of a session: Python UDTFs that ask the answers read without a JVM.

Each function (the names, parameters, columns and refusals of :mod:`udfs.sql`'s SQL functions) is a
``pyspark.sql.functions.udtf`` class whose ``eval`` calls :mod:`kraftlake.warehouse.answers` or
:mod:`kraftlake.warehouse.range_answers` and yields the rows in the function's column order. Spark plans one
Python scan per call, with no Delta table to resolve and nothing to analyse when the functions are made; the
answers are those of the commands that run without Spark (``state``, ``report``), the one implementation.

The SQL functions (:func:`udfs.sql.function_statements`) remain what a catalog stores (a metastore holds SQL,
not Python) and what ``serve`` gives its clients.

A refusal (an offset the warehouse does not hold, an unknown cluster) is a
:class:`kraftlake.warehouse.tables.WarehouseError` raised in the Python worker: Spark reports it as a
``PythonException`` whose text ends with ``WarehouseError: <message>`` (:func:`udfs.sql.raised_message`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from pyspark.sql import SparkSession
from pyspark.sql.functions import udtf
from pyspark.sql.udtf import UserDefinedTableFunction

from kraftlake.history import ENTITIES
from kraftlake.spark.tables.layout import CLUSTER, FLEET_STATUS, history_columns, table_path
from kraftlake.spark.tables.queries import NAME_ONE, NO_SUCH_CLUSTER
from kraftlake.warehouse import answers, range_answers
from kraftlake.warehouse.answers import Answer
from kraftlake.warehouse.fleet_status import newest_rows
from kraftlake.warehouse.tables import Warehouse, WarehouseError
from udfs.risk import RETURNS as RISK_COLUMNS

Row = tuple[Any, ...]
RANGED = "from_offset BIGINT, to_offset BIGINT"


def _schema(table: str, extra: str) -> str:
    return ", ".join([*(f"`{n}` {t}" for n, t in history_columns(table)), extra])


def _rows(answer: Answer, prefix: Row = ()) -> Iterator[Row]:
    for row in answer.rows:
        yield (*prefix, *(row[c] for c in answer.columns))


def _held(root: str, cluster: str | None, held: list[str] | None = None) -> Warehouse:
    """The warehouse at ``root`` read for ``cluster``, refused as the SQL functions refuse it
    (:func:`kraftlake.spark.tables.queries.cluster_refusal`): a cluster not held, or none named among several
    (``held``: the clusters it holds, when already read)."""
    wh = Warehouse(Path(root), cluster)
    held = wh.clusters() if held is None else held
    listed = ", ".join(held)
    if cluster is not None and cluster not in held:
        raise WarehouseError(f"cluster {cluster} {NO_SUCH_CLUSTER} ({listed})")
    if cluster is None and len(held) > 1:
        raise WarehouseError(f"the warehouse holds {len(held)} clusters ({listed}): {NAME_ONE}")
    wh.resolve_cluster(held)
    return wh


def _moment(at_time: datetime | str) -> datetime | str:
    """A TIMESTAMP argument as an aware time: pyspark hands a UDTF a naive time in the worker's local zone."""
    if isinstance(at_time, datetime) and at_time.tzinfo is None:
        return at_time.astimezone(UTC)
    return at_time


def _at(root: str, table: str) -> type:
    class At:
        def eval(self, at_offset: int | None, in_cluster: str | None = None) -> Iterator[Row]:
            if at_offset is not None:
                yield from _rows(answers.state_at(_held(root, in_cluster), table, int(at_offset)))

    return At


def _at_time(root: str, table: str) -> type:
    class AtTime:
        def eval(self, at_time: datetime | str | None, in_cluster: str | None = None) -> Iterator[Row]:
            if at_time is None:
                return
            # left out: every cluster, each at its own last offset at or before the time
            held = Warehouse(Path(root)).clusters()
            for cluster in held if in_cluster is None else [in_cluster]:
                wh = _held(root, cluster, held)
                yield from _rows(answers.state_at_time(wh, table, _moment(at_time)), (wh.cluster,))

    return AtTime


def _ranged(root: str, ask: Callable[[Warehouse, int, int], Answer]) -> type:
    class Ranged:
        def eval(
            self, range_from: int | None, range_to: int | None, in_cluster: str | None = None
        ) -> Iterator[Row]:
            if range_from is not None and range_to is not None:
                yield from _rows(ask(_held(root, in_cluster), int(range_from), int(range_to)))

    return Ranged


def _versions(table: str) -> Callable[[Warehouse, int, int], Answer]:
    def ask(wh: Warehouse, range_from: int, range_to: int) -> Answer:
        return range_answers.versions_between(wh, table, range_from, range_to)

    return ask


def _of_partition(root: str, ask: Callable[[Warehouse, str, int], Answer]) -> type:
    class OfPartition:
        def eval(
            self, for_topic: str | None, for_partition: int | None, in_cluster: str | None = None
        ) -> Iterator[Row]:
            if for_topic is not None and for_partition is not None:
                yield from _rows(ask(_held(root, in_cluster), for_topic, int(for_partition)))

    return OfPartition


def _of_broker(root: str) -> type:
    class OfBroker:
        def eval(self, for_id: int | None, in_cluster: str | None = None) -> Iterator[Row]:
            if for_id is not None:
                yield from _rows(answers.broker_history(_held(root, in_cluster), int(for_id)))

    return OfBroker


def _fleet_status(root: str) -> type:
    def at(ms: int | None) -> datetime | None:
        return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC)

    class FleetStatus:
        def eval(self) -> Iterator[Row]:
            for r in newest_rows(root):
                yield (
                    r[CLUSTER],
                    r["state"],
                    r["lag"],
                    r["last_offset"],
                    at(r["last_commit_ms"]),
                    r["last_error"],
                    at(r["updated_ms"]),
                )

    return FleetStatus


def table_functions(warehouse: str | Path) -> dict[str, tuple[type, str]]:
    """Each function's UDTF class over ``warehouse`` and its columns (a DDL schema), by name."""
    root = str(Path(warehouse).resolve())
    made: dict[str, tuple[type, str]] = {}
    for table in ENTITIES:
        made[f"{table}_at"] = (_at(root, table), _schema(table, "from_offset BIGINT"))
        made[f"{table}_at_time"] = (
            _at_time(root, table),
            f"{CLUSTER} STRING, {_schema(table, 'from_offset BIGINT')}",
        )
        made[f"{table}_versions"] = (_ranged(root, _versions(table)), _schema(table, RANGED))
    made["partition_history"] = (
        _of_partition(root, answers.partition_history),
        _schema("partitions", RANGED),
    )
    for what, typ in (("isr", "ARRAY<INT>"), ("leader", "INT")):
        made[f"{what}_history"] = (
            _of_partition(root, getattr(answers, f"{what}_history")),
            f"topic STRING, topic_id STRING, `partition` INT, {what} {typ}, {RANGED}",
        )
    made["broker_history"] = (_of_broker(root), _schema("brokers", RANGED))
    made["leader_changes"] = (
        _ranged(root, range_answers.leader_changes),
        "offset BIGINT, epoch INT, leader INT",
    )
    made["risk_windows"] = (_ranged(root, range_answers.risk_windows), RISK_COLUMNS)
    if Path(table_path(warehouse, FLEET_STATUS), "_delta_log").is_dir():
        made["fleet_status"] = (
            _fleet_status(root),
            f"{CLUSTER} STRING, state STRING, lag BIGINT, last_offset BIGINT, last_commit TIMESTAMP, "
            "last_error STRING, updated TIMESTAMP",
        )
    return made


def register_table_functions(spark: SparkSession, warehouse: str | Path) -> list[str]:
    """Register the table functions over ``warehouse`` as temporary functions of ``spark``; returns their
    names."""
    made = table_functions(warehouse)
    for name, (cls, schema) in made.items():
        spark.udtf.register(name, cast(UserDefinedTableFunction, udtf(cls, returnType=schema)))
    return list(made)
