"""A report on a warehouse, read without Spark (:mod:`kraftlake.warehouse`): the window its bounds name among the
offsets the warehouse holds for the cluster, the versions in force in it (pending closes applied), the window's
record times and the controller elections of ``metadata_log``."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from kraftlake.delta.scan import Bound
from kraftlake.history import ENTITIES
from kraftlake.plot.options import parse_bound
from kraftlake.report.errors import ReportError
from kraftlake.report.log_dir import window_offsets
from kraftlake.report.model import REPORT_ENTITIES, ReportInput, Window
from kraftlake.warehouse.answers import check_offset, history, limits
from kraftlake.warehouse.tables import LOG, OFFSETS, Warehouse, WarehouseError, check_warehouse

#: The ``metadata_log`` column of the controller's LeaderChange records (``kraftlake.records.layout``).
LEADER_CHANGE = "leader_change_message"


def _versions(wh: Warehouse, entity: str, lo: int, hi: int) -> pd.DataFrame:
    """The versions of ``entity`` valid at some offset of ``[lo - 1, hi]``."""
    bounds = (Bound("from_offset", "<=", hi), Bound("to_offset", ">=", lo, or_null=True))
    answer = history(wh, entity, bounds)
    rows = [r for r in answer.rows if r["to_offset"] is None or r["to_offset"] >= lo]
    columns = [*ENTITIES[entity].names, "from_offset", "to_offset"]
    frame = pd.DataFrame([[r[c] for c in columns] for r in rows], columns=columns)
    return frame.astype({"from_offset": "Int64", "to_offset": "Int64"})


def report_input(
    warehouse: str | os.PathLike[str], start: str | None, end: str | None, cluster: str | None = None
) -> ReportInput:
    """The input of a report on ``warehouse`` (its ``cluster``, which a warehouse of several clusters needs)
    between the bounds ``start`` and ``end`` (offsets or ISO-8601 times).

    Raises
    ------
    ReportError
        No record in the window, or a bound outside the offsets the warehouse holds.
    WarehouseError
        Not a warehouse, an unknown cluster (or none named among several), a bound before the retained history
        or inside a gap of the log.
    """
    path = check_warehouse(Path(warehouse))
    wh = Warehouse(path, cluster)
    bounds = [parse_bound(t) if t is not None else None for t in (start, end)]
    lim = limits(wh)
    held = wh.read(OFFSETS, columns=["offset", "timestamp"]).sort_by("offset")
    offsets, stamps = held.column("offset").to_pylist(), held.column("timestamp").to_pylist()
    first = max(offsets[0], lim.retained) if offsets else 0
    times = [(o, t) for o, t in zip(offsets, stamps, strict=True) if o >= first]
    if lim.committed is not None:
        times = [(o, t) for o, t in times if o <= lim.committed]
    where = f"warehouse {warehouse}" + (f" (cluster {cluster})" if cluster else "")
    lo, hi = window_offsets(times, bounds[0], bounds[1], where)
    for at in (lo, hi):
        try:
            check_offset(lim, at)
        except WarehouseError as exc:
            raise ReportError(str(exc)) from None
    versions = {entity: _versions(wh, entity, lo, hi) for entity in REPORT_ENTITIES}
    in_window = {o: t for o, t in times if lo - 1 <= o <= hi}
    log = wh.read(
        LOG,
        (Bound("type", "==", "LeaderChangeMessage"), Bound("offset", ">=", lo), Bound("offset", "<=", hi)),
        columns=["offset", "epoch", LEADER_CHANGE],
    )
    elections = [
        (int(o), int(e), int(m["leader_id"]))
        for o, e, m in zip(
            log.column("offset").to_pylist(),
            log.column("epoch").to_pylist(),
            log.column(LEADER_CHANGE).to_pylist(),
            strict=True,
        )
    ]
    return ReportInput(
        Window(lo, hi, in_window.get(lo), in_window.get(hi)),
        versions,
        pd.DataFrame(sorted(in_window.items()), columns=["offset", "timestamp"]),
        pd.DataFrame(sorted(elections), columns=["offset", "epoch", "leader_id"]),
        cluster,
    )
