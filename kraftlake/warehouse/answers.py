"""The answers of the SQL functions (:mod:`udfs.sql`, :mod:`kraftlake.spark.tables.queries`) computed from the
warehouse's Delta tables without Spark: the same rows, and the same refusals with the same messages.

- :func:`state_at`: ``<entity>_at(N)``: the versions with ``from_offset <= N < to_offset`` (a still open one left
  out when a pending close of its key lies in ``(from_offset, N]``), after :func:`check_offset`.
- :func:`state_at_time`: ``<entity>_at_time(ts)``: the same at the last offset whose record is at or before
  ``ts`` (:func:`offset_at_time`), after :func:`check_time`.
- :func:`partition_history`, :func:`isr_history`, :func:`leader_history`, :func:`broker_history`: the history
  views, each version's ``to_offset`` taken from the pending closes when the table has none, refused when the
  history reaches below the retained-from offset (:func:`check_history`).

An answer is an :class:`Answer`: its column names in the functions' order and its rows as dicts of Python
values (lists for arrays, dicts for structs), in no particular order, as the functions give them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kraftlake.delta.scan import Bound
from kraftlake.history import ENTITIES
from kraftlake.warehouse.tables import BOUNDS, OFFSETS, Warehouse, WarehouseError, close_key
from kraftlake.warehouse.versions import pending_closes, state_rows

# the messages' parts, as kraftlake.spark.tables.queries has them (tests check that both agree)
BEFORE_RETAINED = "before the retained history"
AFTER_COMMITTED = "is after the last committed offset"
NEGATIVE = "is negative"
IN_GAP = "lies in a gap of the log"
REFUSALS = (NEGATIVE, BEFORE_RETAINED, AFTER_COMMITTED, IN_GAP)


@dataclass(frozen=True)
class Answer:
    """Rows (dicts by column name) and their column names in order."""

    columns: list[str]
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class Limits:
    """What ``bounds`` says (:func:`kraftlake.spark.tables.queries.bounds_relation`): ``retained`` the
    retained-from offset (-1: the whole log), ``committed`` the published commit point (None before the first
    commit), and the first and the last recorded gap (None without one)."""

    retained: int
    committed: int | None
    first_gap: tuple[int, int] | None
    last_gap: tuple[int, int] | None


def limits(wh: Warehouse) -> Limits:
    rows = wh.read(BOUNDS, columns=["committed_to", "retained_from", "gap_from", "gap_to"])
    return limits_of_rows(rows.to_pydict())


def limits_of_rows(rows: dict[str, list[Any]]) -> Limits:
    """:class:`Limits` of ``bounds`` rows (its columns ``committed_to``, ``retained_from``, ``gap_from``,
    ``gap_to`` as lists)."""

    def agg(column: str, how: Any) -> int | None:
        values = [v for v in rows[column] if v is not None]
        return int(how(values)) if values else None

    retained = agg("retained_from", max)
    f1, t1, f2, t2 = (agg("gap_from", min), agg("gap_to", min), agg("gap_from", max), agg("gap_to", max))
    return Limits(
        -1 if retained is None else retained,
        agg("committed_to", max),
        None if f1 is None or t1 is None else (f1, t1),
        None if f2 is None or t2 is None else (f2, t2),
    )


def check_offset(lim: Limits, at: int) -> None:
    """Refuse an offset as :func:`kraftlake.spark.tables.queries.offset_guard` does (same order, same text)."""
    if at < 0:
        raise WarehouseError(f"offset {at} {NEGATIVE}")
    if at < lim.retained:
        raise WarehouseError(
            f"offset {at} lies {BEFORE_RETAINED}: the warehouse holds the states from offset {lim.retained} on"
        )
    if lim.committed is not None and at > lim.committed:
        raise WarehouseError(f"offset {at} {AFTER_COMMITTED} ({lim.committed})")
    for gap in (lim.first_gap, lim.last_gap):
        if gap is not None and gap[0] <= at <= gap[1]:
            raise WarehouseError(f"offset {at} {IN_GAP}: no state is known at {gap[0]}..{gap[1]}")


def check_time(lim: Limits, offset: int | None, cluster: str | None = None) -> None:
    """Refuse the time whose last offset is ``offset`` (of ``cluster``) as
    :func:`kraftlake.spark.tables.queries.retention_guard_at_time` does."""
    if (offset is None and lim.retained >= 0) or (offset is not None and offset < lim.retained):
        raise WarehouseError(
            f"the time lies {BEFORE_RETAINED} for cluster {cluster} (its last offset is "
            f"{'none' if offset is None else offset}): the warehouse holds its states from offset "
            f"{lim.retained} on"
        )
    if offset is None:
        return
    for gap in (lim.first_gap, lim.last_gap):
        if gap is not None and offset + 1 == gap[0]:
            raise WarehouseError(
                f"the time {IN_GAP} (its last offset is {offset}, after it no state is known up to {gap[1]})"
            )


def to_micros(at_time: datetime | str) -> int:
    """A time as microseconds since the epoch; a naive one (or ``YYYY-MM-DD HH:MM:SS[.ffffff]`` text, as
    ``jobs._cli.timestamp`` gives it) is UTC, as in the functions' UTC sessions."""
    moment = datetime.fromisoformat(at_time) if isinstance(at_time, str) else at_time
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def offset_at_time(wh: Warehouse, at_time: datetime | str) -> int | None:
    """The last offset whose record is at or before ``at_time`` (None before the first)."""
    # timestamp_millis(timestamp) <= t  <=>  timestamp * 1000 <= t (microseconds)  <=>  timestamp <= t // 1000
    ms = to_micros(at_time) // 1000
    rows = wh.read(OFFSETS, (Bound("timestamp", "<=", ms),), columns=["offset"])
    top = pc.max(rows.column("offset")).as_py() if rows.num_rows else None
    return None if top is None else int(top)


def _key(table: str, row: dict[str, Any]) -> str:
    return close_key(tuple(row[k] for k in ENTITIES[table].key))


def _rows(table: pa.Table, columns: list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = table.select(columns).to_pylist()
    return rows


def state_at(wh: Warehouse, table: str, at: int) -> Answer:
    """``<table>_at(at)``: the entity's attributes and ``from_offset``."""
    return _answer(state_table(wh, table, at))


def state_at_time(wh: Warehouse, table: str, at_time: datetime | str) -> Answer:
    """``<table>_at_time(at_time)``."""
    return _answer(state_table_at_time(wh, table, at_time))


def _answer(rows: pa.Table) -> Answer:
    return Answer(rows.column_names, _rows(rows, rows.column_names))


def state_table(wh: Warehouse, table: str, at: int) -> pa.Table:
    """:func:`state_at`'s rows as an Arrow table, its columns in the function's order."""
    check_offset(limits(wh), at)
    return _state(wh, table, at)


def state_table_at_time(wh: Warehouse, table: str, at_time: datetime | str) -> pa.Table:
    """:func:`state_at_time`'s rows as an Arrow table."""
    offset = offset_at_time(wh, at_time)
    check_time(limits(wh), offset, wh.cluster)
    if offset is None:
        return _state(wh, table, -1)  # before the first record: no version is valid
    return _state(wh, table, offset)


def _state(wh: Warehouse, table: str, at: int) -> pa.Table:
    return state_rows(wh, table, at).select([*ENTITIES[table].names, "from_offset"])


def history(wh: Warehouse, table: str, bounds: tuple[Bound, ...]) -> Answer:
    """The versions of ``table`` satisfying ``bounds``, each with its ``to_offset``, a still open one ending at
    the first pending close of its key after its ``from_offset`` (:func:`~kraftlake.spark.tables.queries.history_query`)."""
    columns = [*ENTITIES[table].names, "from_offset", "to_offset"]
    found = wh.read(table, bounds)
    closes = pending_closes(wh, table)
    rows = _rows(found, columns)
    for row in rows:
        if row["to_offset"] is None:
            later = [x for x in closes.get(_key(table, row), ()) if x > row["from_offset"]]
            row["to_offset"] = min(later) if later else None
    return Answer(columns, rows)


def check_history(wh: Warehouse, answer: Answer, what: str) -> None:
    """Refuse a history view's answer as ``udfs.sql``'s ``_history_guard`` does: the history was cut and the
    entity's versions start below the cut or are all gone."""
    lim = limits(wh)
    first = min((r["from_offset"] for r in answer.rows), default=None)
    if lim.retained >= 0 and (first is None or first < lim.retained):
        raise WarehouseError(
            f"the history of {what} reaches {BEFORE_RETAINED} ({'none left' if first is None else first}): "
            f"the warehouse holds the states from offset {lim.retained} on"
        )


def _of_partition(topic: str, partition: int) -> tuple[Bound, ...]:
    return (Bound("topic", "==", topic), Bound("partition", "==", int(partition)))


def partition_history(wh: Warehouse, topic: str, partition: int) -> Answer:
    """``partition_history(topic, partition)``."""
    answer = history(wh, "partitions", _of_partition(topic, partition))
    check_history(wh, answer, f"partition {topic}-{partition}")
    return answer


def _merged(wh: Warehouse, topic: str, partition: int, column: str) -> Answer:
    """The versions of a partition with consecutive equal values of ``column`` merged: a version continues the
    one before it (of the same topic id) when that one's value is equal and not NULL and it ends where this one
    starts."""
    versions = partition_history(wh, topic, partition)
    columns = ["topic", "topic_id", "partition", column, "from_offset", "to_offset"]
    by_id: dict[str, list[dict[str, Any]]] = {}
    for row in versions.rows:
        by_id.setdefault(row["topic_id"], []).append(row)
    out: list[dict[str, Any]] = []
    for rows in by_id.values():
        rows.sort(key=lambda r: r["from_offset"])
        prev: dict[str, Any] | None = None
        for row in rows:
            continues = (
                prev is not None
                and prev[column] is not None
                and row[column] is not None
                and prev[column] == row[column]
                and prev["to_offset"] is not None
                and prev["to_offset"] == row["from_offset"]
            )
            if continues:
                out[-1]["to_offset"] = row["to_offset"]
            else:
                out.append({c: row[c] for c in columns})
            prev = row
    return Answer(columns, out)


def isr_history(wh: Warehouse, topic: str, partition: int) -> Answer:
    """``isr_history(topic, partition)``: each ISR with the offsets it held for."""
    return _merged(wh, topic, partition, "isr")


def leader_history(wh: Warehouse, topic: str, partition: int) -> Answer:
    """``leader_history(topic, partition)``: each leader with the offsets it held for."""
    return _merged(wh, topic, partition, "leader")


def broker_history(wh: Warehouse, broker: int) -> Answer:
    """``broker_history(id)``."""
    answer = history(wh, "brokers", (Bound("id", "==", int(broker)),))
    check_history(wh, answer, f"broker {broker}")
    return answer
