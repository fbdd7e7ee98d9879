"""Risk windows from the history tables' rows, by interval intersection (no replay): the computation a report
without a JVM makes from the warehouse's tables, and the one the SQL function ``risk_windows`` (``udfs.risk``)
makes in Spark, step for step.

Each partition version ``[from_offset, to_offset)`` is cut at every start and end, inside it, of a version of
the configs that decide its effective ``min.insync.replicas`` (the topic's, the leader's BROKER resource, the
cluster default) and of the leader's broker registration; each piece is judged at its first offset, and
consecutive pieces of one partition and kind with equal attributes merge into one window. The elections come
from consecutive versions of a partition. The definitions are :mod:`kraftlake.history.risk`'s (the oracle,
which replays the log and shares no code with this module); the results are equal to its ``risk_windows``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kraftlake.history.risk import RiskWindow

Row = Mapping[str, Any]
_Span = tuple[int, "int | None"]


def _covers(span: _Span, at: int) -> bool:
    return span[0] <= at and (span[1] is None or span[1] > at)


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _value_at(versions: Sequence[tuple[_Span, Any]], at: int) -> Any:
    for span, value in versions:
        if _covers(span, at):
            return value
    return None


def _cuts(spans: Iterable[_Span], lo: int, hi: int | None) -> set[int]:
    """The ends of ``spans`` strictly inside ``(lo, hi)``."""
    out = set()
    for f, t in spans:
        for x in (f, t):
            if x is not None and x > lo and (hi is None or x < hi):
                out.add(x)
    return out


def _tuple(value: Any) -> tuple[int, ...]:
    return tuple(value) if value is not None else ()


def risk_windows_from_history(
    partitions: Iterable[Row], configs: Iterable[Row], brokers: Iterable[Row], timestamps: Mapping[int, int]
) -> list[RiskWindow]:
    """The risk windows of the history tables' rows (``partitions``, ``configs``, ``brokers`` with their
    ``from_offset`` and ``to_offset``; ``timestamps``: a record's timestamp by offset, the ``offsets`` table),
    sorted as :func:`kraftlake.history.risk.risk_windows` sorts them."""
    min_isr: dict[tuple[str, str], list[tuple[_Span, int]]] = defaultdict(list)
    for c in configs:
        value = _int(c["value"]) if c["name"] == "min.insync.replicas" else None
        if value is not None and c["resource_type"] in ("TOPIC", "BROKER"):
            min_isr[(c["resource_type"], c["resource_name"])].append(
                ((c["from_offset"], c["to_offset"]), value)
            )
    fenced: dict[int, list[tuple[_Span, bool]]] = defaultdict(list)
    for b in brokers:
        fenced[b["id"]].append(((b["from_offset"], b["to_offset"]), bool(b["fenced"])))
    versions: dict[tuple[str, int], list[Row]] = defaultdict(list)
    for p in partitions:
        versions[(p["topic_id"], p["partition"])].append(p)

    pieces: dict[tuple[str, int, str], list[tuple[int, int | None, str, tuple[Any, ...]]]] = defaultdict(list)
    events: list[RiskWindow] = []
    for key, rows in versions.items():
        rows.sort(key=lambda r: r["from_offset"])
        previous: Row | None = None
        for p in rows:
            if previous is not None and previous["to_offset"] == p["from_offset"]:
                event = _election(previous, p)
                if event is not None:
                    ts = timestamps[p["from_offset"]]
                    events.append(
                        RiskWindow(
                            event,
                            p["topic"],
                            key[0],
                            key[1],
                            p["from_offset"],
                            p["from_offset"] + 1,
                            ts,
                            ts,
                            p["leader"],
                            _tuple(p["isr"]),
                            previous_leader=previous["leader"],
                            previous_isr=_tuple(previous["isr"]),
                        )
                    )
            previous = p
            for kind, f, t, attrs in _pieces(p, min_isr, fenced):
                pieces[(*key, kind)].append((f, t, p["topic"], attrs))

    out = events
    for (tid, pid, kind), runs in pieces.items():
        runs.sort(key=lambda r: r[0])
        merged: list[list[Any]] = []
        for f, t, topic, attrs in runs:
            last = merged[-1] if merged else None
            if last is not None and last[1] == f and last[3] == attrs:
                last[1] = t
            else:
                merged.append([f, t, topic, attrs])
        for f, t, topic, (leader, isr, mi, source) in merged:
            out.append(
                RiskWindow(
                    kind,
                    topic,
                    tid,
                    pid,
                    f,
                    t,
                    timestamps[f],
                    None if t is None else timestamps.get(t),
                    leader,
                    isr,
                    mi,
                    source,
                )
            )
    out.sort(key=RiskWindow.sort_key)
    return out


def _pieces(
    p: Row,
    min_isr: Mapping[tuple[str, str], list[tuple[_Span, int]]],
    fenced: Mapping[int, list[tuple[_Span, bool]]],
) -> Iterable[tuple[str, int, int | None, tuple[Any, ...]]]:
    """``(kind, from, to, attrs)`` of one partition version cut where a config or the leader's broker changes."""
    lo, hi = p["from_offset"], p["to_offset"]
    leader, isr = p["leader"], _tuple(p["isr"])
    levels = [(("TOPIC", p["topic"]), "topic")]
    if leader != -1:
        levels.append((("BROKER", str(leader)), "broker"))
    levels.append((("BROKER", ""), "cluster"))
    cuts = {lo}
    for level, _ in levels:
        cuts |= _cuts((span for span, _ in min_isr.get(level, ())), lo, hi)
    cuts |= _cuts((span for span, _ in fenced.get(leader, ())), lo, hi)
    starts = sorted(cuts)
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else hi
        mi, source = 1, "default"
        for level, name in levels:
            v = _value_at(min_isr.get(level, ()), s)
            if v is not None:
                mi, source = v, name
                break
        if leader == -1 or len(isr) < mi:
            yield "under_min_isr", s, e, (leader, isr, mi, source)
        if len(_tuple(p["replicas"])) > 1 and leader != -1 and isr == (leader,):
            yield "isr_leader_only", s, e, (leader, isr, None, None)
        live = _value_at(fenced.get(leader, ()), s) is False
        if leader == -1 or not live:
            yield "offline", s, e, (leader, isr, None, None)
        if p["leader_recovery_state"] == 1:
            yield "recovering", s, e, (leader, isr, None, None)


def _election(before: Row, after: Row) -> str | None:
    new_leader = after["leader"]
    elected = new_leader not in (-1, before["leader"])
    if after["leader_recovery_state"] == 1 and (before["leader_recovery_state"] != 1 or elected):
        return "unclean_election"
    if not elected or new_leader in _tuple(before["isr"]):
        return None
    eligible = (*_tuple(before["eligible_leader_replicas"]), *_tuple(before["last_known_elr"]))
    return "elr_election" if new_leader in eligible else "unclean_election"
