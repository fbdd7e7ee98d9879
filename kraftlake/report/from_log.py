"""A report's input replayed from committed records (a log directory's, or any reader's), without a warehouse:
the history builder's versions, the records' times and the controller elections."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from kraftlake.history import ENTITIES, HistoryBuilder
from kraftlake.protocol.messages import LeaderChangeMessage
from kraftlake.records.envelope import MetadataRecord
from kraftlake.report.model import REPORT_ENTITIES, ReportInput, Window


def input_from_records(
    records: Iterable[MetadataRecord], lo: int, hi: int, cluster: str | None = None
) -> ReportInput:
    """The input of a report on offsets ``[lo, hi]`` of a log whose records from offset 0 are ``records``
    (those after ``hi`` are not read)."""
    builder = HistoryBuilder()
    kept: list[MetadataRecord] = []
    times: dict[int, int] = {}
    elections = []
    for rec in records:
        if rec.offset > hi:
            break
        kept.append(rec)
        times[rec.offset] = rec.timestamp
        if isinstance(rec.record, LeaderChangeMessage) and rec.offset >= lo:
            elections.append((rec.offset, rec.epoch, rec.record.leader_id))
    batch = builder.feed(kept)
    versions = {}
    for entity in REPORT_ENTITIES:
        columns = [*ENTITIES[entity].names, "from_offset", "to_offset"]
        rows = [
            r
            for r in batch.versions.get(entity, [])
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
