"""A report's input replayed from committed records (a log directory's, or any reader's), without a warehouse:
the history builder's versions, the records' times and the controller elections."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

from kraftlake.history import ENTITIES, HistoryBatch, HistoryBuilder
from kraftlake.image import EMPTY, MetadataImage
from kraftlake.protocol.messages import LeaderChangeMessage
from kraftlake.records.envelope import MetadataRecord
from kraftlake.report.model import REPORT_ENTITIES, ReportInput, Window


def _apply(tables: dict[str, list[dict[str, Any]]], batch: HistoryBatch) -> None:
    """A slice's closes (ending the open version of each key begun before them), then its new versions."""
    for table in REPORT_ENTITIES:
        key = ENTITIES[table].key
        rows = tables[table]
        for close in batch.closes.get(table, []):
            for row in rows:
                if (
                    row["to_offset"] is None
                    and row["from_offset"] < close["to_offset"]
                    and all(row[k] == close[k] for k in key)
                ):
                    row["to_offset"] = close["to_offset"]
        rows.extend(dict(v) for v in batch.versions.get(table, []))


def input_from_records(
    records: Iterable[MetadataRecord],
    lo: int,
    hi: int,
    cluster: str | None = None,
    start: MetadataImage = EMPTY,
    on_gap: Callable[[int, int], MetadataImage] | None = None,
) -> ReportInput:
    """The input of a report on offsets ``[lo, hi]`` of a log whose records follow the image ``start`` (a
    snapshot, else the empty image: records from offset 0); ``on_gap`` as :class:`HistoryBuilder`'s. Records
    after ``hi`` are not read."""
    builder = HistoryBuilder(start, on_gap=on_gap)
    tables: dict[str, list[dict[str, Any]]] = {t: [] for t in REPORT_ENTITIES}
    if start is not EMPTY:
        _apply(tables, builder.seed())
    kept: list[MetadataRecord] = []
    times: dict[int, int] = {}
    elections = []
    for rec in records:
        if rec.offset > hi:
            break
        kept.append(rec)
        if rec.offset >= lo - 1:
            times[rec.offset] = rec.timestamp
        if isinstance(rec.record, LeaderChangeMessage) and rec.offset >= lo:
            elections.append((rec.offset, rec.epoch, rec.record.leader_id))
    _apply(tables, builder.feed(kept))
    versions = {}
    for entity in REPORT_ENTITIES:
        columns = [*ENTITIES[entity].names, "from_offset", "to_offset"]
        rows = [
            r
            for r in tables[entity]
            if r["from_offset"] <= hi and (r["to_offset"] is None or r["to_offset"] >= lo)
        ]
        frame = pd.DataFrame([[r[c] for c in columns] for r in rows], columns=columns)
        versions[entity] = frame.astype({"from_offset": "Int64", "to_offset": "Int64"})
    times_frame = pd.DataFrame(sorted(times.items()), columns=["offset", "timestamp"])
    window = Window(lo, hi, times.get(lo), times.get(hi))
    return ReportInput(
        window,
        versions,
        times_frame,
        pd.DataFrame(elections, columns=["offset", "epoch", "leader_id"]),
        cluster,
    )
