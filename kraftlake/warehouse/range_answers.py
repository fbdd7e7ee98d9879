"""The answers over a range of offsets, computed from the warehouse's Delta tables without Spark: what the
functions ``<entity>_versions``, ``leader_changes`` and ``risk_windows`` give (:mod:`udfs.table_functions`).

- :func:`versions_between`: every version of the entity valid at some offset of ``[range_from - 1, range_to]``
  (a version ending at ``range_from`` is the one its first record ended), the pending closes applied.
- :func:`leader_changes`: the controller's LeaderChange records of ``[range_from, range_to]``.
- :func:`risk_windows`: the data-at-risk windows (:mod:`kraftlake.history.risk`) overlapping
  ``[range_from, range_to]``, each with its whole range, computed over the whole retained history.

Each refuses a range end the warehouse does not hold (:func:`kraftlake.warehouse.answers.check_offset`),
``range_from`` first.
"""

from __future__ import annotations

from dataclasses import astuple, fields

import pyarrow as pa
import pyarrow.compute as pc

from kraftlake.delta.scan import Bound
from kraftlake.history import ENTITIES
from kraftlake.history.risk import RiskWindow
from kraftlake.history.risk_intervals import risk_windows_from_history
from kraftlake.warehouse.answers import Answer, check_offset, limits
from kraftlake.warehouse.tables import LOG, OFFSETS, Warehouse
from kraftlake.warehouse.versions import versions

#: The ``metadata_log`` column of the controller's LeaderChange records (``kraftlake.records.layout``).
LEADER_CHANGE = "leader_change_message"
RISK_COLUMNS = [f.name for f in fields(RiskWindow)]


def check_range(wh: Warehouse, range_from: int, range_to: int) -> None:
    lim = limits(wh)
    check_offset(lim, range_from)
    check_offset(lim, range_to)


def versions_between(wh: Warehouse, table: str, range_from: int, range_to: int) -> Answer:
    """``<table>_versions(range_from, range_to)``: the entity's attributes, ``from_offset``, ``to_offset``."""
    check_range(wh, range_from, range_to)
    columns = [*ENTITIES[table].names, "from_offset", "to_offset"]
    bounds = (Bound("from_offset", "<=", range_to), Bound("to_offset", ">=", range_from, or_null=True))
    rows = versions(wh, table, bounds)
    # a pending close may end an open version before the range
    ends = rows.column("to_offset")
    kept = rows.filter(
        pc.or_kleene(pc.is_null(ends), pc.greater_equal(ends, pa.scalar(range_from, ends.type)))
    )
    return Answer(columns, kept.select(columns).to_pylist())


def leader_changes(wh: Warehouse, range_from: int, range_to: int) -> Answer:
    """``leader_changes(range_from, range_to)``: ``offset``, ``epoch`` and the new ``leader`` of each election
    of the active controller in the range."""
    check_range(wh, range_from, range_to)
    rows = [{"offset": o, "epoch": e, "leader": m} for o, e, m in elections(wh, range_from, range_to)]
    return Answer(["offset", "epoch", "leader"], rows)


def elections(wh: Warehouse, range_from: int, range_to: int) -> list[tuple[int, int, int]]:
    """``(offset, epoch, leader_id)`` of each LeaderChange record of ``[range_from, range_to]``, in offset
    order; the range is not checked against what the warehouse holds."""
    log = wh.read(
        LOG,
        (
            Bound("type", "==", "LeaderChangeMessage"),
            Bound("offset", ">=", range_from),
            Bound("offset", "<=", range_to),
        ),
        columns=["offset", "epoch", LEADER_CHANGE],
    )
    return sorted(
        (o, e, m["leader_id"])
        for o, e, m in zip(
            log.column("offset").to_pylist(),
            log.column("epoch").to_pylist(),
            log.column(LEADER_CHANGE).to_pylist(),
            strict=True,
        )
    )


def risk_windows(wh: Warehouse, range_from: int, range_to: int) -> Answer:
    """``risk_windows(range_from, range_to)``: the windows with ``from_offset <= range_to`` that are still open
    or end after ``range_from``."""
    check_range(wh, range_from, range_to)
    partitions, configs, brokers = (versions(wh, t).to_pandas() for t in ("partitions", "configs", "brokers"))
    times = wh.read(OFFSETS, columns=["offset", "timestamp"])
    stamps = dict(zip(times.column("offset").to_pylist(), times.column("timestamp").to_pylist(), strict=True))
    found = risk_windows_from_history(partitions, configs, brokers, stamps)
    rows = [
        dict(zip(RISK_COLUMNS, _listed(astuple(w)), strict=True))
        for w in found
        if w.from_offset <= range_to and (w.to_offset is None or w.to_offset > range_from)
    ]
    return Answer(RISK_COLUMNS, rows)


def _listed(values: tuple[object, ...]) -> list[object]:
    """A window's values with its ISRs as lists (the functions' arrays)."""
    return [list(v) if isinstance(v, tuple) else v for v in values]
