"""The window's partition versions as columns: what the partition sections (availability, elections, ISR,
reassignments) and the counts picture compute from, so a window with a hundred thousand partitions is not
turned into rows first."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kraftlake.history.column_order import is_lexsorted
from kraftlake.report.intervals import plain

_OPEN = -1


def lengths(column: pd.Series) -> np.ndarray:
    """The length of each array cell, 0 for a missing one."""
    cells = column.to_numpy(dtype=object)
    held = np.fromiter((v is not None for v in cells), dtype=bool, count=len(cells))
    out = np.zeros(len(cells), dtype=np.int64)
    out[held] = np.fromiter(map(len, cells[held]), dtype=np.int64, count=int(held.sum()))
    return out


def _in_order(frame: pd.DataFrame) -> bool:
    """Whether the versions are sorted by topic id, partition and start already (as the warehouse reader
    orders them)."""
    start = frame["from_offset"]
    if start.isna().any():
        return False
    keys = (start.to_numpy(dtype=np.int64), frame["partition"].to_numpy(), frame["topic_id"].to_numpy())
    return is_lexsorted(keys)


@dataclass(frozen=True)
class PartitionColumns:
    """``frame``: the versions sorted by topic id, partition and start; ``start``/``end`` their offsets (``end``
    -1 while open); ``follows``: the version before it, of the same partition, ended where it starts."""

    frame: pd.DataFrame
    start: np.ndarray
    end: np.ndarray
    leader: np.ndarray
    isr_len: np.ndarray
    replicas_len: np.ndarray
    follows: np.ndarray
    _cells: dict[str, list[Any]] = field(default_factory=dict, repr=False)

    @staticmethod
    def of(versions: pd.DataFrame | None) -> PartitionColumns:
        frame = pd.DataFrame() if versions is None else versions
        if len(frame) and not _in_order(frame):
            frame = frame.sort_values(["topic_id", "partition", "from_offset"], kind="stable")
        frame = frame.reset_index(drop=True)
        n = len(frame)
        if not n:
            empty = np.zeros(0, dtype=np.int64)
            return PartitionColumns(frame, empty, empty, empty, empty, empty, np.zeros(0, dtype=bool))
        start = frame["from_offset"].to_numpy(dtype=np.int64)
        end = pd.to_numeric(frame["to_offset"]).fillna(_OPEN).to_numpy(dtype=np.int64)
        same = (frame["topic_id"].to_numpy()[1:] == frame["topic_id"].to_numpy()[:-1]) & (
            frame["partition"].to_numpy()[1:] == frame["partition"].to_numpy()[:-1]
        )
        follows = np.zeros(n, dtype=bool)
        follows[1:] = same & (end[:-1] == start[1:])
        return PartitionColumns(
            frame,
            start,
            end,
            frame["leader"].to_numpy(dtype=np.int64),
            lengths(frame["isr"]),
            lengths(frame["replicas"]),
            follows,
        )

    def value(self, column: str, i: int) -> Any:
        """One cell as a plain value (tuples for arrays)."""
        cells = self._cells.get(column)
        if cells is None:
            cells = self._cells[column] = self.frame[column].tolist()
        return plain(cells[i])

    def to_offset(self, i: int) -> int | None:
        return None if self.end[i] == _OPEN else int(self.end[i])

    def run_bounds(self, holds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The first and last version of each maximal run of consecutive versions of a partition (each starting
        where the one before ended) for which ``holds``, in version order, as two arrays."""
        begins = holds & ~(self.follows & np.concatenate([[False], holds[:-1]]))
        # a run goes on while the next version holds and follows
        goes_on = np.concatenate([holds[1:] & self.follows[1:], [False]])
        return np.flatnonzero(begins), np.flatnonzero(holds & ~goes_on)

    def runs(self, holds: np.ndarray) -> list[tuple[int, int]]:
        """:meth:`run_bounds` as pairs."""
        firsts, ends = self.run_bounds(holds)
        return list(zip(firsts.tolist(), ends.tolist(), strict=True))
