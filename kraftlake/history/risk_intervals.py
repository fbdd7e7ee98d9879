"""Risk windows from the history tables' rows, by interval intersection (no replay): the computation a report
without a JVM makes from the warehouse's tables, in column operations (numpy) rather than row by row.

Each kind is cut only where its attributes can change:

- ``isr_leader_only`` and ``recovering`` are conditions of a partition version alone;
- ``offline``: a version without a leader, or the parts of a version during which its leader's broker is not
  live (no registration, or a fenced one), an as-of join of the versions with the brokers' live spans;
- ``under_min_isr``: the effective ``min.insync.replicas`` is an as-of join in three stages: each version is cut
  by its topic's config spans (and the gaps between them); the pieces without a topic value by the leader's
  BROKER config spans; those still without one by the cluster default's; Kafka's 1 for the rest. A piece is
  judged by its value and source, and the version's leader and ISR.

Consecutive pieces of one partition and kind with equal attributes (leader, ISR, and for ``under_min_isr`` the
value and its source) merge into one window. The elections come from consecutive versions of a partition. The
definitions are :mod:`kraftlake.history.risk`'s (the oracle, which replays the log and shares no code with this
module); the results are equal to its ``risk_windows``. The SQL function ``risk_windows`` (``udfs.risk``)
answers the same by cutting each version at every boundary of its deciding configs and its leader's
registration, then merging.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from kraftlake.history.column_order import is_lexsorted, lexsort_order
from kraftlake.history.risk import EVENT_KINDS, KAFKA_DEFAULT_MIN_ISR, KINDS, RECOVERING, RiskWindow

Row = Mapping[str, Any]

# Positions on one line per key: an offset o is at o + _SHIFT (a window's ``lo - 1`` can be -1), 0 is before
# every offset and _OPEN after every one (an end still open). A key's position range is key * _SPAN + position.
_SHIFT = 2
_SPAN = 1 << 42
_OPEN = _SPAN - 1
_MAX_KEYS = 1 << 20
NONE = np.iinfo(np.int64).min
"""A missing ``min_isr`` or ``source`` in :class:`RiskColumns`."""
SOURCES = ("topic", "broker", "cluster", "default")
_PARTITION_COLUMNS = (
    "topic",
    "topic_id",
    "partition",
    "replicas",
    "isr",
    "leader",
    "leader_recovery_state",
    "eligible_leader_replicas",
    "last_known_elr",
    "from_offset",
    "to_offset",
)


def _tuple(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, np.ndarray):
        return tuple(value.tolist())
    return tuple(value)


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _positions(column: Any, open_end: bool) -> np.ndarray:
    """Offsets as positions; a NULL ``to_offset`` is the open end."""
    numbers = pd.to_numeric(pd.Series(column), errors="coerce")
    if open_end:
        numbers = numbers.fillna(_OPEN - _SHIFT)
    positions: np.ndarray = numbers.to_numpy(dtype=np.int64) + _SHIFT
    return positions


@dataclass(frozen=True)
class _Cover:
    """Per key, disjoint spans covering the whole line, sorted by key and start, each with a value
    (``NONE`` where no span of the input holds one)."""

    start: np.ndarray
    end: np.ndarray
    value: np.ndarray

    @staticmethod
    def of(keys: int, key: np.ndarray, lo: np.ndarray, hi: np.ndarray, value: np.ndarray) -> _Cover:
        """The cover of ``keys`` keys by the spans ``[lo, hi)`` of ``key`` (disjoint within a key) and the gaps
        around them."""
        if keys >= _MAX_KEYS:
            raise ValueError(f"{keys} keys: at most {_MAX_KEYS - 1} are joined at once")
        order = lexsort_order((lo, key))
        key, lo, hi, value = key[order], lo[order], hi[order], value[order]
        first = np.ones(len(key), dtype=bool)
        first[1:] = key[1:] != key[:-1]
        last = np.ones(len(key), dtype=bool)
        last[:-1] = key[1:] != key[:-1]
        inner = ~last
        inner[inner] = hi[:-1][inner[:-1]] < lo[1:][inner[:-1]]
        empty = np.setdiff1d(np.arange(keys), key)
        gap_key = np.concatenate([key[first], key[inner], key[last], empty])
        gap_lo = np.concatenate(
            [np.zeros(first.sum(), np.int64), hi[inner], hi[last], np.zeros(len(empty), np.int64)]
        )
        gap_hi = np.concatenate(
            [lo[first], lo[1:][inner[:-1]], np.full(last.sum(), _OPEN), np.full(len(empty), _OPEN)]
        )
        real = gap_lo < gap_hi
        all_key = np.concatenate([key, gap_key[real]])
        all_lo = np.concatenate([lo, gap_lo[real]])
        all_hi = np.concatenate([hi, gap_hi[real]])
        all_value = np.concatenate([value, np.full(int(real.sum()), NONE)])
        order = lexsort_order((all_lo, all_key))
        base = all_key[order] * _SPAN
        return _Cover(base + all_lo[order], base + all_hi[order], all_value[order])

    def join(self, key: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, ...]:
        """The pieces of the spans ``[lo, hi)`` of ``key`` cut by this cover: for each, the index of its span,
        its start, its end and the cover's value there."""
        base = key * _SPAN
        first = np.searchsorted(self.end, base + lo, side="right")
        stop = np.searchsorted(self.start, base + hi, side="left")
        counts = np.maximum(stop - first, 0)
        which = np.repeat(np.arange(len(key)), counts)
        step = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        seg = first[which] + step
        start = np.maximum(lo[which], self.start[seg] - base[which])
        end = np.minimum(hi[which], self.end[seg] - base[which])
        return which, start, end, self.value[seg]


def _codes(values: Iterable[Any]) -> tuple[np.ndarray, dict[Any, int]]:
    """A code per value (equal values, equal codes; numbered in order of first appearance), and the table."""
    column = values if isinstance(values, pd.Series) else pd.Series(list(values), dtype=object)
    codes, uniques = pd.factorize(column, sort=False)
    return codes.astype(np.int64), {u: i for i, u in enumerate(uniques.tolist())}


@dataclass(frozen=True)
class _Versions:
    """The partition versions as columns, sorted by partition and start."""

    rows: pd.DataFrame
    part: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    leader: np.ndarray
    isr: list[tuple[int, ...]]
    isr_code: np.ndarray
    isr_len: np.ndarray
    replicas_len: np.ndarray
    recovery: np.ndarray

    @staticmethod
    def of(partitions: pd.DataFrame) -> _Versions:
        lo = _positions(partitions["from_offset"], open_end=False)
        rows = partitions.assign(_lo=lo)
        # a reader's versions come in this order already
        if not is_lexsorted((lo, rows["partition"].to_numpy(), rows["topic_id"].to_numpy())):
            rows = rows.sort_values(["topic_id", "partition", "_lo"], kind="stable")
        rows = rows.reset_index(drop=True)
        topic_code, _ = _codes(rows["topic_id"])
        index = rows["partition"].to_numpy(dtype=np.int64)
        part = topic_code * (int(index.max()) + 1 if len(index) else 1) + index
        isr = [_tuple(v) for v in rows["isr"]]
        isr_code, _ = _codes(isr)
        return _Versions(
            rows,
            part,
            rows["_lo"].to_numpy(dtype=np.int64),
            _positions(rows["to_offset"], open_end=True),
            rows["leader"].to_numpy(dtype=np.int64),
            isr,
            isr_code,
            np.fromiter(map(len, isr), dtype=np.int64, count=len(isr)),
            np.fromiter(
                (0 if v is None else len(v) for v in rows["replicas"]), dtype=np.int64, count=len(rows)
            ),
            rows["leader_recovery_state"].to_numpy(dtype=np.int64),
        )


@dataclass
class _Pieces:
    """Pieces of versions of one kind: the version, the range, and the attributes besides leader and ISR."""

    version: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    min_isr: np.ndarray
    source: np.ndarray

    @staticmethod
    def whole(v: _Versions, where: np.ndarray) -> _Pieces:
        at = np.flatnonzero(where)
        none = np.full(len(at), NONE)
        return _Pieces(at, v.lo[at], v.hi[at], none, none)


def _min_isr_cover(configs: pd.DataFrame, resource_type: str, names: dict[str, int]) -> _Cover:
    """The integer ``min.insync.replicas`` of each resource of ``resource_type`` named in ``names`` over time."""
    keys: list[int] = []
    values: list[int] = []
    lo = hi = np.zeros(0, dtype=np.int64)
    if len(configs):
        mine = configs[
            (configs["name"] == "min.insync.replicas")
            & (configs["resource_type"] == resource_type)
            & configs["resource_name"].isin(list(names))
        ]
        if len(mine):
            parsed = [_int(x) for x in mine["value"]]
            good = np.array([p is not None for p in parsed], dtype=bool)
            keys = [names[n] for n in mine["resource_name"][good]]
            lo = _positions(mine["from_offset"][good], open_end=False)
            hi = _positions(mine["to_offset"][good], open_end=True)
            values = [p for p in parsed if p is not None]
    return _Cover.of(
        len(names),
        np.asarray(keys, dtype=np.int64),
        np.asarray(lo, dtype=np.int64),
        np.asarray(hi, dtype=np.int64),
        np.asarray(values, dtype=np.int64),
    )


def _stage(
    cover: _Cover,
    key: np.ndarray,
    span: tuple[np.ndarray, np.ndarray, np.ndarray],
    source: int,
    found: list[tuple[np.ndarray, ...]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut the pieces ``span`` (version, start, end) of ``key`` by ``cover``: those with a value go to ``found``
    with ``source``, the others are returned for the next level."""
    which, lo, hi = span
    at, lo, hi, value = cover.join(key, lo, hi)
    which = which[at]
    has = value != NONE
    found.append((which[has], lo[has], hi[has], value[has], np.full(int(has.sum()), source)))
    return which[~has], lo[~has], hi[~has]


def _under_min_isr(v: _Versions, configs: pd.DataFrame) -> _Pieces:
    """The pieces of every version with the effective ``min.insync.replicas`` and its source (topic, the
    leader's broker, cluster, Kafka's default), kept where the partition has no leader or fewer replicas in its
    ISR than that."""
    found: list[tuple[np.ndarray, ...]] = []
    topic_code, topics = _codes(v.rows["topic"])
    span = (np.arange(len(v.lo)), v.lo, v.hi)
    which, lo, hi = _stage(_min_isr_cover(configs, "TOPIC", topics), topic_code, span, 0, found)
    led = v.leader[which] != -1
    ids, broker_code = np.unique(v.leader[which][led], return_inverse=True)
    brokers = {str(b): i for i, b in enumerate(ids.tolist())}
    led_span = (which[led], lo[led], hi[led])
    bw, blo, bhi = _stage(_min_isr_cover(configs, "BROKER", brokers), broker_code, led_span, 1, found)
    span = (
        np.concatenate([which[~led], bw]),
        np.concatenate([lo[~led], blo]),
        np.concatenate([hi[~led], bhi]),
    )
    cluster = _min_isr_cover(configs, "BROKER", {"": 0})
    which, lo, hi = _stage(cluster, np.zeros(len(span[0]), dtype=np.int64), span, 2, found)
    found.append((which, lo, hi, np.full(len(which), KAFKA_DEFAULT_MIN_ISR), np.full(len(which), 3)))
    which, lo, hi, value, source = (np.concatenate(c) for c in zip(*found, strict=True))
    held = (v.leader[which] == -1) | (v.isr_len[which] < value)
    return _Pieces(which[held], lo[held], hi[held], value[held], source[held])


def _offline(v: _Versions, brokers: pd.DataFrame) -> _Pieces:
    """Versions without a leader, and the parts of the others during which the leader's broker is not live."""
    led = np.flatnonzero(v.leader != -1)
    if len(brokers):
        live = brokers[~brokers["fenced"].astype(bool)]
        live_ids = live["id"].to_numpy(dtype=np.int64)
        lo = _positions(live["from_offset"], open_end=False)
        hi = _positions(live["to_offset"], open_end=True)
    else:
        live_ids = lo = hi = np.zeros(0, dtype=np.int64)
    # one code per broker id, live or only leading
    ids = np.unique(np.concatenate([live_ids, v.leader[led]]))
    key = np.searchsorted(ids, live_ids).astype(np.int64)
    leader_code = np.searchsorted(ids, v.leader[led]).astype(np.int64)
    cover = _Cover.of(len(ids), key, lo, hi, np.ones(len(key), dtype=np.int64))
    at, plo, phi, value = cover.join(leader_code, v.lo[led], v.hi[led])
    down = value == NONE
    leaderless = _Pieces.whole(v, v.leader == -1)
    return _Pieces(
        np.concatenate([leaderless.version, led[at][down]]),
        np.concatenate([leaderless.lo, plo[down]]),
        np.concatenate([leaderless.hi, phi[down]]),
        np.full(len(leaderless.lo) + int(down.sum()), NONE),
        np.full(len(leaderless.lo) + int(down.sum()), NONE),
    )


@dataclass(frozen=True)
class RiskColumns:
    """Risk windows as columns over the partition versions ``versions`` (sorted by partition and start): the
    ``kind`` (an index into ``KINDS``), the version ``at`` which the window starts (its partition, topic, leader
    and ISR; an election's new version), ``start`` and ``end`` offsets (``end`` -1 while open), the effective
    ``min_isr`` and its ``source`` (an index into ``SOURCES``; both ``NONE`` where the kind has none), and an
    election's ``previous`` version (-1 for the other kinds)."""

    versions: _Versions
    kind: np.ndarray
    at: np.ndarray
    start: np.ndarray
    end: np.ndarray
    min_isr: np.ndarray
    source: np.ndarray
    previous: np.ndarray

    def __len__(self) -> int:
        return len(self.kind)


def _merged(v: _Versions, kind: str, p: _Pieces) -> tuple[np.ndarray, ...]:
    """The pieces of one kind merged where one ends where the next of its partition starts with the same
    attributes: the windows' columns (see :class:`RiskColumns`)."""
    if not len(p.version):
        return _no_columns()
    order = lexsort_order((p.lo, v.part[p.version]))
    which, lo, hi, mi, source = p.version[order], p.lo[order], p.hi[order], p.min_isr[order], p.source[order]
    part, leader, isr = v.part[which], v.leader[which], v.isr_code[which]
    same = (
        (part[1:] == part[:-1])
        & (hi[:-1] == lo[1:])
        & (leader[1:] == leader[:-1])
        & (isr[1:] == isr[:-1])
        & (mi[1:] == mi[:-1])
        & (source[1:] == source[:-1])
    )
    first = np.flatnonzero(np.concatenate([[True], ~same]))
    last = np.concatenate([first[1:] - 1, [len(which) - 1]]).astype(np.int64)
    n = len(first)
    return (
        np.full(n, KINDS.index(kind), dtype=np.int64),
        which[first],
        lo[first] - _SHIFT,
        np.where(hi[last] == _OPEN, -1, hi[last] - _SHIFT),
        mi[first],
        source[first],
        np.full(n, -1, dtype=np.int64),
    )


def _no_columns() -> tuple[np.ndarray, ...]:
    return tuple(np.zeros(0, dtype=np.int64) for _ in range(7))


def _elections(v: _Versions) -> tuple[np.ndarray, ...]:
    """Unclean and ELR elections between consecutive versions of a partition, as columns."""
    n = len(v.lo)
    if n < 2:
        return _no_columns()
    after = np.arange(1, n)
    follows = (v.part[1:] == v.part[:-1]) & (v.hi[:-1] == v.lo[1:])
    leader, before_leader = v.leader[1:], v.leader[:-1]
    elected = (leader != -1) & (leader != before_leader)
    recovering = v.recovery[1:] == RECOVERING
    became = recovering & ((v.recovery[:-1] != RECOVERING) | elected)
    rows = v.rows
    found: list[int] = []
    kinds: list[int] = []
    unclean, elr = KINDS.index("unclean_election"), KINDS.index("elr_election")
    for i in after[follows & (became | elected)].tolist():
        prev = i - 1
        new_leader = int(v.leader[i])
        if became[prev]:
            event = unclean
        elif new_leader in v.isr[prev]:
            continue
        else:
            eligible = (
                *_tuple(rows["eligible_leader_replicas"].iat[prev]),
                *_tuple(rows["last_known_elr"].iat[prev]),
            )
            event = elr if new_leader in eligible else unclean
        found.append(i)
        kinds.append(event)
    at = np.asarray(found, dtype=np.int64)
    start = v.lo[at] - _SHIFT
    none = np.full(len(at), NONE)
    return np.asarray(kinds, dtype=np.int64), at, start, start + 1, none, none, at - 1


def _frame(rows: Iterable[Row] | pd.DataFrame) -> pd.DataFrame:
    return rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))


def risk_columns_from_history(
    partitions: Iterable[Row] | pd.DataFrame,
    configs: Iterable[Row] | pd.DataFrame,
    brokers: Iterable[Row] | pd.DataFrame,
) -> RiskColumns | None:
    """The risk windows of the history tables' rows (``partitions``, ``configs``, ``brokers`` with their
    ``from_offset`` and ``to_offset``, as rows or frames) as columns, in no particular order; None without
    partitions."""
    frame = _frame(partitions)
    if not len(frame):
        return None
    v = _Versions.of(frame[list(_PARTITION_COLUMNS)])
    configs_frame, brokers_frame = _frame(configs), _frame(brokers)
    leader_only = (v.replicas_len > 1) & (v.leader != -1) & (v.isr_len == 1)
    leader_only[leader_only] = [v.isr[i][0] == v.leader[i] for i in np.flatnonzero(leader_only).tolist()]
    parts = [
        _elections(v),
        _merged(v, "under_min_isr", _under_min_isr(v, configs_frame)),
        _merged(v, "isr_leader_only", _Pieces.whole(v, leader_only)),
        _merged(v, "offline", _offline(v, brokers_frame)),
        _merged(v, "recovering", _Pieces.whole(v, v.recovery == RECOVERING)),
    ]
    return RiskColumns(v, *(np.concatenate(c).astype(np.int64) for c in zip(*parts, strict=True)))


def risk_windows_from_history(
    partitions: Iterable[Row] | pd.DataFrame,
    configs: Iterable[Row] | pd.DataFrame,
    brokers: Iterable[Row] | pd.DataFrame,
    timestamps: Mapping[int, int],
) -> list[RiskWindow]:
    """The risk windows of the history tables' rows (:func:`risk_columns_from_history`; ``timestamps``: a
    record's timestamp by offset, the ``offsets`` table), sorted as :func:`kraftlake.history.risk.risk_windows`
    sorts them."""
    c = risk_columns_from_history(partitions, configs, brokers)
    if c is None:
        return []
    v, rows = c.versions, c.versions.rows
    topics = rows["topic"].to_numpy()[c.at].tolist()
    tids = rows["topic_id"].to_numpy()[c.at].tolist()
    pids = rows["partition"].to_numpy()[c.at].tolist()
    out = []
    for k, i, f, t, m, src, prev, topic, tid, pid in zip(
        c.kind.tolist(),
        c.at.tolist(),
        c.start.tolist(),
        c.end.tolist(),
        c.min_isr.tolist(),
        c.source.tolist(),
        c.previous.tolist(),
        topics,
        tids,
        pids,
        strict=True,
    ):
        kind = KINDS[k]
        event = kind in EVENT_KINDS
        out.append(
            RiskWindow(
                kind,
                topic,
                tid,
                pid,
                f,
                None if t == -1 else t,
                timestamps.get(f),
                timestamps.get(f) if event else None if t == -1 else timestamps.get(t),
                int(v.leader[i]),
                v.isr[i],
                None if m == NONE else m,
                None if src == NONE else SOURCES[src],
                int(v.leader[prev]) if prev >= 0 else None,
                v.isr[prev] if prev >= 0 else None,
            )
        )
    out.sort(key=RiskWindow.sort_key)
    return out
