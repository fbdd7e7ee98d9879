"""The report's inputs and outputs: the window, the versions it is computed from, and its sections."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kraftlake.plot.time_axis import utc_text
from kraftlake.report.intervals import Row, by_entity, rows_of
from kraftlake.report.partition_columns import PartitionColumns

#: The history tables a report reads (``kraftlake.history.ENTITIES`` names their columns).
REPORT_ENTITIES = (
    "brokers",
    "partitions",
    "topics",
    "configs",
    "client_quotas",
    "acls",
    "scram",
    "features",
    "delegation_tokens",
)


def duration_text(ms: Any) -> str:
    """Milliseconds as an operator reads a duration: ``850 ms``, ``12.4 s``, ``3 min 05 s``, ``2 h 10 min``,
    ``3 d 4 h``; empty for None/NA."""
    if ms is None or pd.isna(ms):
        return ""
    ms = int(ms)
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    s = ms // 1000
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


@dataclass(frozen=True)
class Window:
    """The offsets a report covers, both included, and the record timestamps at its ends (epoch ms)."""

    lo: int
    hi: int
    lo_ms: int | None = None
    hi_ms: int | None = None

    def text(self) -> str:
        return f"offsets {self.lo}..{self.hi}, {utc_text(self.lo_ms) or '?'} .. {utc_text(self.hi_ms) or '?'}"


@dataclass
class ReportInput:
    """What a report is computed from.

    ``versions[entity]``: the versions of that history table (its attribute columns, ``from_offset``,
    ``to_offset`` NA while current) valid at some offset of ``[lo - 1, hi]``: those in force during the window
    and those the window's first record ended. ``times``: ``offset, timestamp`` (epoch ms, the ``offsets``
    table) of every offset in ``[lo, hi]``. ``leader_changes``: ``offset, epoch, leader_id`` of the
    ``LeaderChangeMessage`` control records in ``[lo, hi]`` (``metadata_log``).
    """

    window: Window
    versions: Mapping[str, pd.DataFrame]
    times: pd.DataFrame
    leader_changes: pd.DataFrame
    cluster: str | None = None
    _stamps: dict[int, int] = field(default_factory=dict, repr=False)
    _groups: dict[str, dict[Hashable, list[Row]]] = field(default_factory=dict, repr=False)
    _partitions: list[PartitionColumns] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._stamps = dict(
            zip(self.times["offset"].astype(int), self.times["timestamp"].astype(int), strict=True)
        )

    def groups(self, entity: str, key: Sequence[str]) -> dict[Hashable, list[Row]]:
        """The versions of ``entity`` as plain rows grouped by ``key`` (:func:`~.intervals.by_entity`), made
        once for every section that reads them."""
        if entity not in self._groups:
            frame = self.versions.get(entity)
            self._groups[entity] = by_entity([] if frame is None else rows_of(frame), key)
        return self._groups[entity]

    def partition_columns(self) -> PartitionColumns:
        """The partition versions as columns, made once for every section that reads them."""
        if not self._partitions:
            self._partitions.append(PartitionColumns.of(self.versions.get("partitions")))
        return self._partitions[0]

    def time_of(self, offset: int | None) -> int | None:
        """The record timestamp of ``offset``; None when ``times`` does not hold it."""
        return None if offset is None else self._stamps.get(offset)

    def times_of(self, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The record timestamps of ``offsets`` and where ``times`` holds them (elsewhere the stamp is 0)."""
        held = self.times["offset"].to_numpy(dtype=np.int64)
        stamps = self.times["timestamp"].to_numpy(dtype=np.int64)
        order = np.argsort(held, kind="stable")
        held, stamps = held[order], stamps[order]
        at = np.minimum(np.searchsorted(held, offsets), max(len(held) - 1, 0))
        found = held[at] == offsets if len(held) else np.zeros(len(offsets), dtype=bool)
        return np.where(found, stamps[at] if len(held) else 0, 0), found


@dataclass
class Section:
    """One part of the report: a title, lines that sum it up, a table (``columns`` in order, rows of plain
    values; a large table's held as columns, :class:`~.column_rows.ColumnRows`), and the SQL over the warehouse's
    functions that gives the same rows."""

    key: str
    title: str
    summary: list[str]
    columns: list[str]
    rows: Sequence[dict[str, Any]]
    sql: str

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(list(self.rows), columns=self.columns)


@dataclass
class Report:
    """The sections of one window of one cluster's history."""

    window: Window
    sections: list[Section]
    cluster: str | None = None
    warehouse: str = ""

    def headlines(self) -> list[str]:
        """The first line of each section that found something: the report at a glance."""
        return [s.summary[0] for s in self.sections if s.rows and s.summary]

    def section(self, key: str) -> Section:
        for s in self.sections:
            if s.key == key:
                return s
        raise KeyError(key)
