"""A report on a warehouse, read without Spark (:mod:`kraftlake.warehouse`): the window its bounds name among the
offsets the warehouse holds for the cluster, the versions in force in it (pending closes applied), the window's
record times and the controller elections of ``metadata_log``."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from kraftlake.delta.scan import Bound
from kraftlake.history import ENTITIES
from kraftlake.history.column_order import is_lexsorted
from kraftlake.plot.options import parse_bound
from kraftlake.report.errors import ReportError
from kraftlake.report.log_dir import window_offsets
from kraftlake.report.model import REPORT_ENTITIES, ReportInput, Window
from kraftlake.warehouse.answers import check_offset, limits
from kraftlake.warehouse.range_answers import elections
from kraftlake.warehouse.tables import (
    CLOSES,
    OFFSETS,
    Warehouse,
    WarehouseError,
    check_warehouse,
    close_key,
)

#: Columns no section reads, left in the files: a partition's log directories are three UUIDs a version, the
#: largest column of the largest table.
UNREAD = {"partitions": ("directories", "partition_epoch")}


def _pending_closes(wh: Warehouse, entity: str) -> dict[str, list[int]]:
    """The ``to_offset`` of every pending close of ``entity``'s keys (``closes``: a version's end not yet
    written into its row)."""
    rows = wh.read(CLOSES, (Bound("entity", "==", entity),), columns=["key", "to_offset"])
    out: dict[str, list[int]] = {}
    for key, to in zip(rows.column("key").to_pylist(), rows.column("to_offset").to_pylist(), strict=True):
        out.setdefault(key, []).append(int(to))
    return out


def _versions(wh: Warehouse, entity: str, lo: int, hi: int) -> pd.DataFrame:
    """The versions of ``entity`` valid at some offset of ``[lo - 1, hi]``, a still open one ending at the first
    pending close of its key after its start (as ``warehouse.answers.history``), read as columns, ordered by
    the entity's key and start."""
    bounds = (Bound("from_offset", "<=", hi), Bound("to_offset", ">=", lo, or_null=True))
    unread = UNREAD.get(entity, ())
    columns = [*(c for c in ENTITIES[entity].names if c not in unread), "from_offset", "to_offset"]
    # ordered as the sections walk them (by entity, then start) before pandas makes a Python object of each
    # array cell: made in that order, the cells lie in memory in the order they are read
    order = [(k, "ascending") for k in (*ENTITIES[entity].key, "from_offset")]
    frame = wh.read(entity, bounds, columns=columns).sort_by(order).to_pandas(integer_object_nulls=True)
    # column by column: a whole frame's astype copies (and consolidates) every other column too
    for name in ("from_offset", "to_offset"):
        frame[name] = frame[name].astype("Int64")
    closes = _pending_closes(wh, entity) if len(frame) else {}
    if closes:
        key = ENTITIES[entity].key
        open_rows = frame.index[frame["to_offset"].isna()]
        for i in open_rows:
            start = frame.at[i, "from_offset"]
            later = [x for x in closes.get(close_key(tuple(frame.at[i, k] for k in key)), ()) if x > start]
            if later:
                frame.at[i, "to_offset"] = min(later)
        frame = frame[frame["to_offset"].isna() | (frame["to_offset"] >= lo)].reset_index(drop=True)
    return frame


def _stamp(times: pd.DataFrame, offset: int) -> int | None:
    found = times["timestamp"][times["offset"] == offset]
    return int(found.iloc[0]) if len(found) else None


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
    held = wh.read(OFFSETS, columns=["offset", "timestamp"])
    offsets = held.column("offset").to_numpy()
    stamps = held.column("timestamp").to_numpy()
    if not is_lexsorted((offsets,)):  # a file's rows are in offset order; its files need not be
        order = np.argsort(offsets, kind="stable")
        offsets, stamps = offsets[order], stamps[order]
    first = max(int(offsets[0]), lim.retained) if len(offsets) else 0
    keep = offsets >= first
    if lim.committed is not None:
        keep &= offsets <= lim.committed
    offsets, stamps = offsets[keep], stamps[keep]
    where = f"warehouse {warehouse}" + (f" (cluster {cluster})" if cluster else "")
    lo, hi = window_offsets(offsets, stamps, bounds[0], bounds[1], where)
    for at in (lo, hi):
        try:
            check_offset(lim, at)
        except WarehouseError as exc:
            raise ReportError(str(exc)) from None
    versions = {entity: _versions(wh, entity, lo, hi) for entity in REPORT_ENTITIES}
    inside = (offsets >= lo - 1) & (offsets <= hi)
    times = pd.DataFrame({"offset": offsets[inside], "timestamp": stamps[inside]})
    return ReportInput(
        Window(lo, hi, _stamp(times, lo), _stamp(times, hi)),
        versions,
        times,
        pd.DataFrame(elections(wh, lo, hi), columns=["offset", "epoch", "leader_id"]),
        cluster,
    )
