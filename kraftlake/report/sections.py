"""The report's sections, each computed from the versions of a window (:class:`ReportInput`).

Every section's rows are also the answer of its SQL (:mod:`kraftlake.report.sql`) over the warehouse's
functions, so an operator can run the query behind any table of the report. Offsets are the records that made
each change; times are those records' timestamps; a window's rows hold at some offset of ``[lo, hi]``. Runs are
seen through the window: one that began before it starts at ``lo`` (``before_window``), one still holding at
``hi`` has no end (``to_offset`` None, ``ongoing``) and its duration counts up to ``hi``'s time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from concurrent.futures import Executor
from typing import Any

import numpy as np
import pandas as pd

from kraftlake.history import ENTITIES
from kraftlake.history.risk import EVENT_KINDS
from kraftlake.history.risk_intervals import risk_columns_from_history
from kraftlake.image.render import (
    ACL_OPERATIONS,
    ACL_PATTERN_TYPES,
    ACL_PERMISSION_TYPES,
    ACL_RESOURCE_TYPES,
    METADATA_VERSIONS,
    enum_name,
)
from kraftlake.report import sql
from kraftlake.report.column_rows import ColumnRows
from kraftlake.report.intervals import Row, Run, changes, in_window, rows_of, runs
from kraftlake.report.model import Report, ReportInput, Section, duration_text
from kraftlake.report.partition_columns import PartitionColumns, lengths
from kraftlake.report.run_columns import RUN_COLUMNS, availability_rows, risk_rows, sorted_codes

#: Topics (brokers) named one by one in a section's summary; the table has them all.
TOP = 10
#: ``LeaderRecoveryState.RECOVERING``: a leader elected uncleanly that has not yet recovered its log.
RECOVERING = 1


def _groups(data: ReportInput, entity: str) -> dict[Hashable, list[Row]]:
    return data.groups(entity, ENTITIES[entity].key)


def _run_cells(data: ReportInput, run: Run) -> dict[str, Any]:
    """A run's offsets, times and duration, clipped to the window: one that began before it starts at ``lo``
    (``before_window``), one still holding at ``hi`` has no end (``ongoing``) and lasts up to ``hi``'s time."""
    lo, hi = data.window.lo, data.window.hi
    start = max(run.from_offset, lo)
    end = run.to_offset if run.to_offset is not None and run.to_offset <= hi else None
    start_ms = data.time_of(start)
    end_ms = data.time_of(end) if end is not None else data.window.hi_ms
    duration = end_ms - start_ms if start_ms is not None and end_ms is not None else None
    return {
        "from_offset": start,
        "to_offset": end,
        "from_time_ms": start_ms,
        "to_time_ms": data.time_of(end) if end is not None else None,
        "duration_ms": duration,
        "before_window": run.from_offset < lo,
        "ongoing": end is None,
    }


def _longest(rows: list[dict[str, Any]]) -> str:
    durations = [r["duration_ms"] for r in rows if r["duration_ms"] is not None]
    return duration_text(max(durations)) if durations else "?"


def _total(rows: list[dict[str, Any]]) -> str:
    return duration_text(sum(r["duration_ms"] or 0 for r in rows))


def broker_state(v: Row) -> str:
    """A broker version's state, in the figures' precedence: fenced, else in controlled shutdown, else
    registered (Kafka keeps the shutdown flag on the fenced registration that ends a controlled shutdown)."""
    return "fenced" if v["fenced"] else "controlled shutdown" if v["in_controlled_shutdown"] else "registered"


def brokers_section(data: ReportInput) -> Section:
    """Fencing and controlled shutdowns as runs with durations; registrations, restarts (a new epoch) and
    unregistrations as points."""
    lo, hi = data.window.lo, data.window.hi
    groups = _groups(data, "brokers")
    rows: list[dict[str, Any]] = []
    for state in ("fenced", "controlled shutdown"):
        for run in runs(groups, lambda v, s=state: broker_state(v) == s):  # type: ignore[misc]
            if in_window(run, lo, hi):
                rows.append({"broker": run.first["id"], "event": state, **_run_cells(data, run)})
    for change in changes(groups, lo, hi, value=lambda v: v["epoch"]):
        before, after = change.before, change.after
        event = "unregistered" if after is None else "registered" if before is None else "re-registered"
        rows.append(
            {
                "broker": (after or before or {})["id"],
                "event": event,
                "from_offset": change.offset,
                "to_offset": None,
                "from_time_ms": data.time_of(change.offset),
                "to_time_ms": None,
                "duration_ms": None,
                "before_window": False,
                "ongoing": False,
            }
        )
    rows.sort(key=lambda r: (r["from_offset"], r["broker"], r["event"]))
    summary = []
    for broker in sorted({r["broker"] for r in rows}):
        mine = [r for r in rows if r["broker"] == broker]
        parts = []
        for event in ("fenced", "controlled shutdown"):
            spans = [r for r in mine if r["event"] == event]
            if spans:
                ongoing = " (still at the window's end)" if any(r["ongoing"] for r in spans) else ""
                parts.append(
                    f"{event} {len(spans)}x, {_total(spans)} in all, longest {_longest(spans)}{ongoing}"
                )
        points = Counter(r["event"] for r in mine if r["duration_ms"] is None and r["to_offset"] is None)
        points.pop("fenced", None)
        points.pop("controlled shutdown", None)
        parts += [f"{event} {n}x" for event, n in sorted(points.items())]
        summary.append(f"broker {broker}: " + "; ".join(parts))
    return Section(
        "brokers",
        "Brokers: fencing, controlled shutdowns, registrations",
        summary or ["no broker was fenced, shut down, registered or unregistered"],
        ["broker", "event", *RUN_COLUMNS],
        rows,
        sql.BROKERS,
    )


def controller_section(data: ReportInput) -> Section:
    """Elections of the active controller: the LeaderChange records of the window."""
    frame = data.leader_changes.sort_values("offset")
    rows = [
        {
            "offset": int(r.offset),
            "time_ms": data.time_of(int(r.offset)),
            "epoch": int(r.epoch),
            "leader": int(r.leader_id),
        }
        for r in frame.itertuples(index=False)
    ]
    if rows:
        chain = " -> ".join(f"{r['leader']} (epoch {r['epoch']})" for r in rows[:12])
        more = f" and {len(rows) - 12} more" if len(rows) > 12 else ""
        summary = [f"{len(rows)} controller election(s): {chain}{more}"]
    else:
        summary = ["no controller election: the active controller stayed the same"]
    return Section(
        "controller",
        "Controller failovers",
        summary,
        ["offset", "time_ms", "epoch", "leader"],
        rows,
        sql.CONTROLLER,
    )


def partition_state(v: Row) -> str:
    """``offline`` (no leader), ``under-replicated`` (fewer in the ISR than assigned) or ``ok``."""
    if v["leader"] == -1:
        return "offline"
    return "under-replicated" if len(v["isr"] or ()) < len(v["replicas"] or ()) else "ok"


def availability_section(data: ReportInput) -> Section:
    """Runs in which a partition was under-replicated or offline, with their durations, summed up per topic
    (built as columns, :func:`~.run_columns.availability_rows`)."""
    found = availability_rows(data, data.partition_columns(), TOP)
    rows = found.rows
    summary = []
    if len(rows):
        summary.append(
            f"{found.offline} partition(s) offline and {found.under} under-replicated at some point, "
            f"in {found.topic_count} topic(s)"
        )
    # the topics with the longest windows first: what an operator looks at
    for topic, about in found.topics:
        parts = []
        for state in ("offline", "under-replicated"):
            if state in about:
                partitions, longest = about[state]
                most = "?" if longest is None else duration_text(longest)
                parts.append(f"{partitions} partition(s) {state}, longest {most}")
        summary.append(f"{topic}: " + "; ".join(parts))
    if found.topic_count > TOP:
        summary.append(f"... and {found.topic_count - TOP} more topic(s) (the table has every window)")
    return Section(
        "availability",
        "Under-replicated and offline partitions",
        summary or ["every partition was fully replicated and led throughout"],
        ["topic", "partition", "state", "isr", "replicas", *RUN_COLUMNS],
        rows,
        sql.AVAILABILITY,
    )


def election_kind(prev: Row, v: Row) -> str:
    """How ``v``'s leader was chosen, given the version before: ``offline`` (no leader left), ``unclean`` (from
    outside the ISR and the ELR, or a log still RECOVERING), ``elr`` (from the eligible leader replicas, KIP-966)
    or ``clean`` (from the ISR)."""
    leader = v["leader"]
    if leader == -1:
        return "offline"
    if v["leader_recovery_state"] == RECOVERING:
        return "unclean"
    if leader in (prev["isr"] or ()):
        return "clean"
    if leader in (prev["eligible_leader_replicas"] or ()) or leader in (prev["last_known_elr"] or ()):
        return "elr"
    return "unclean"


#: The partition version cells an election's row and kind are made of.
_ELECTION_CELLS = (
    "from_offset",
    "topic",
    "partition",
    "leader",
    "leader_epoch",
    "leader_recovery_state",
    "isr",
    "eligible_leader_replicas",
    "last_known_elr",
)


def elections_section(data: ReportInput) -> Section:
    """Every change of a partition's leader in the window, and how the new one was chosen."""
    lo, hi = data.window.lo, data.window.hi
    pc = data.partition_columns()
    changed = np.zeros(len(pc.leader), dtype=bool)
    changed[1:] = pc.leader[1:] != pc.leader[:-1]
    inside = (pc.start >= lo) & (pc.start <= hi)
    rows = []
    at = np.flatnonzero(pc.follows & changed & inside)
    befores, afters = (
        rows_of(pc.frame.iloc[i][list(_ELECTION_CELLS)]) if len(at) else [] for i in (at - 1, at)
    )
    for prev, v in zip(befores, afters, strict=True):
        rows.append(
            {
                "offset": v["from_offset"],
                "time_ms": data.time_of(v["from_offset"]),
                "topic": v["topic"],
                "partition": v["partition"],
                "previous_leader": prev["leader"],
                "leader": v["leader"],
                "kind": election_kind(prev, v),
                "leader_epoch": v["leader_epoch"],
                "previous_isr": list(prev["isr"] or ()),
            }
        )
    rows.sort(key=lambda r: (r["offset"], r["topic"], r["partition"]))
    kinds = Counter(r["kind"] for r in rows)
    summary = (
        [
            f"{len(rows)} leader change(s): "
            + ", ".join(f"{kinds[k]} {k}" for k in ("clean", "elr", "unclean", "offline") if kinds[k])
        ]
        if rows
        else ["no partition changed its leader"]
    )
    if kinds["unclean"]:
        summary.append(
            f"{kinds['unclean']} unclean election(s): a leader from outside the ISR may have lost acknowledged writes"
        )
    return Section(
        "elections",
        "Leader elections",
        summary,
        [
            "offset",
            "time_ms",
            "topic",
            "partition",
            "previous_leader",
            "leader",
            "kind",
            "leader_epoch",
            "previous_isr",
        ],
        rows,
        sql.ELECTIONS,
    )


def _members(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The members of each array cell (None: empty) as (cell position, member) pairs."""
    parts = [np.asarray(() if x is None else x, dtype=np.int64) for x in cells.tolist()]
    sizes = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return np.repeat(np.arange(len(parts)), sizes), flat


def isr_section(data: ReportInput) -> Section:
    """ISR shrinks and expansions per topic: a new version whose ISR lost (shrink) or gained (expansion)
    members, found by column operations over the window's changes (members as (change, broker) pairs)."""
    lo, hi = data.window.lo, data.window.hi
    pc = data.partition_columns()
    at = np.flatnonzero(pc.follows & (pc.start >= lo) & (pc.start <= hi))
    rows: list[dict[str, Any]] = []
    if len(at):
        cells = pc.frame["isr"].to_numpy()
        (was, old), (now, new) = _members(cells[at - 1]), _members(cells[at])
        low = min(int(old.min(initial=0)), int(new.min(initial=0)))
        width = max(int(old.max(initial=0)), int(new.max(initial=0))) - low + 1
        before, after = was * width + (old - low), now * width + (new - low)
        shrink = np.bincount(was[~np.isin(before, after)], minlength=len(at)) > 0
        expand = np.bincount(now[~np.isin(after, before)], minlength=len(at)) > 0
        changed = shrink | expand
        names, topic = sorted_codes(pc.frame["topic"].to_numpy()[at][changed])
        partition = pc.frame["partition"].to_numpy(dtype=np.int64)[at][changed]
        shrinks = np.bincount(topic, weights=shrink[changed], minlength=len(names)).astype(np.int64)
        expands = np.bincount(topic, weights=expand[changed], minlength=len(names)).astype(np.int64)
        pairs = np.unique(topic * (int(partition.max(initial=0)) + 1) + partition)
        parts = np.bincount(pairs // (int(partition.max(initial=0)) + 1), minlength=len(names))
        for t in np.lexsort((np.arange(len(names)), -(shrinks + expands))).tolist():
            rows.append(
                {
                    "topic": str(names[t]),
                    "shrinks": int(shrinks[t]),
                    "expands": int(expands[t]),
                    "partitions": int(parts[t]),
                }
            )
    shrinks, expands = sum(r["shrinks"] for r in rows), sum(r["expands"] for r in rows)
    summary = (
        [f"{shrinks} ISR shrink(s) and {expands} expansion(s) over {len(rows)} topic(s)"]
        if rows
        else ["no ISR changed"]
    )
    return Section(
        "isr",
        "ISR shrinks and expansions",
        summary,
        ["topic", "shrinks", "expands", "partitions"],
        rows,
        sql.ISR,
    )


def _version(pc: PartitionColumns, i: int) -> Row:
    """One partition version as a plain row."""
    return {c: pc.value(c, i) for c in pc.frame.columns}


def reassignments_section(data: ReportInput) -> Section:
    """Runs in which a partition had replicas being added or removed, with the assignment before and the
    target."""
    lo, hi = data.window.lo, data.window.hi
    pc = data.partition_columns()
    moving = np.zeros(len(pc.start), dtype=bool)
    if len(pc.frame):
        moving = (lengths(pc.frame["adding_replicas"]) > 0) | (lengths(pc.frame["removing_replicas"]) > 0)
    rows = []
    for i, j in pc.runs(moving):
        run = Run(None, int(pc.start[i]), pc.to_offset(j), {}, {})
        if not in_window(run, lo, hi):
            continue
        first, last = _version(pc, i), _version(pc, j)
        original = [r for r in first["replicas"] if r not in (first["adding_replicas"] or ())]
        target = [r for r in last["replicas"] if r not in (last["removing_replicas"] or ())]
        rows.append(
            {
                "topic": first["topic"],
                "partition": first["partition"],
                "replicas_before": original,
                "target": target,
                **_run_cells(data, run),
            }
        )
    rows.sort(key=lambda r: (r["from_offset"], r["topic"], r["partition"]))
    done = [r for r in rows if not r["ongoing"]]
    summary = (
        [
            f"{len(rows)} reassignment(s), {len(done)} completed in the window"
            + (f", longest {_longest(done)}" if done else "")
        ]
        if rows
        else ["no partition was reassigned"]
    )
    return Section(
        "reassignments",
        "Partition reassignments",
        summary,
        ["topic", "partition", "replicas_before", "target", *RUN_COLUMNS],
        rows,
        sql.REASSIGNMENTS,
    )


def _change_rows(
    data: ReportInput,
    entity: str,
    describe: Callable[[Row], dict[str, Any]],
    value: Callable[[Row], Any],
) -> list[dict[str, Any]]:
    lo, hi = data.window.lo, data.window.hi
    out = []
    for c in changes(_groups(data, entity), lo, hi, value=value):
        row = describe(c.after or c.before or {})
        row.update(
            offset=c.offset,
            time_ms=data.time_of(c.offset),
            change="created" if c.before is None else "removed" if c.after is None else "changed",
            before=None if c.before is None else value(c.before),
            after=None if c.after is None else value(c.after),
        )
        out.append(row)
    return out


_CHANGE_COLUMNS = ["offset", "time_ms", "change"]


def topics_section(data: ReportInput) -> Section:
    rows = _change_rows(
        data, "topics", lambda v: {"topic": v["name"], "topic_id": v["topic_id"]}, lambda v: v["name"]
    )
    for r in rows:
        r["change"] = {"created": "created", "removed": "deleted"}.get(r["change"], r["change"])
        del r["before"], r["after"]
    made = sum(r["change"] == "created" for r in rows)
    summary = (
        [f"{made} topic(s) created, {len(rows) - made} deleted"] if rows else ["no topic created or deleted"]
    )
    return Section(
        "topics",
        "Topics created and deleted",
        summary,
        [*_CHANGE_COLUMNS, "topic", "topic_id"],
        rows,
        sql.TOPICS,
    )


def configs_section(data: ReportInput) -> Section:
    rows = _change_rows(
        data,
        "configs",
        lambda v: {
            "resource_type": v["resource_type"],
            "resource_name": v["resource_name"],
            "name": v["name"],
        },
        lambda v: v["value"],
    )
    resources = {(r["resource_type"], r["resource_name"]) for r in rows}
    summary = (
        [f"{len(rows)} config change(s) on {len(resources)} resource(s)"] if rows else ["no config changed"]
    )
    return Section(
        "configs",
        "Config changes",
        summary,
        [*_CHANGE_COLUMNS, "resource_type", "resource_name", "name", "before", "after"],
        rows,
        sql.CONFIGS,
    )


def quotas_section(data: ReportInput) -> Section:
    rows = _change_rows(
        data, "client_quotas", lambda v: {"entity": v["entity_key"], "key": v["key"]}, lambda v: v["value"]
    )
    summary = [f"{len(rows)} client quota change(s)"] if rows else ["no client quota changed"]
    return Section(
        "quotas",
        "Client quota changes",
        summary,
        [*_CHANGE_COLUMNS, "entity", "key", "before", "after"],
        rows,
        sql.QUOTAS,
    )


def _acl_text(v: Row) -> dict[str, Any]:
    return {
        "principal": v["principal"],
        "host": v["host"],
        "operation": enum_name(ACL_OPERATIONS, v["operation"]),
        "permission": enum_name(ACL_PERMISSION_TYPES, v["permission_type"]),
        "resource": f"{enum_name(ACL_RESOURCE_TYPES, v['resource_type'])}:{v['resource_name']}",
        "pattern": enum_name(ACL_PATTERN_TYPES, v["pattern_type"]),
    }


def acls_section(data: ReportInput) -> Section:
    rows = _change_rows(data, "acls", _acl_text, lambda v: v["id"])
    for r in rows:
        r["change"] = {"created": "added"}.get(r["change"], r["change"])
        del r["before"], r["after"]
    added = sum(r["change"] == "added" for r in rows)
    summary = [f"{added} ACL(s) added, {len(rows) - added} removed"] if rows else ["no ACL changed"]
    return Section(
        "acls",
        "ACL changes",
        summary,
        [*_CHANGE_COLUMNS, "principal", "host", "operation", "permission", "resource", "pattern"],
        rows,
        sql.ACLS,
    )


def scram_section(data: ReportInput) -> Section:
    """SCRAM credentials added, changed (a new salt: a password set again) or removed; never the secrets."""
    rows = _change_rows(
        data,
        "scram",
        lambda v: {"user": v["user"], "mechanism": v["mechanism"], "iterations": v["iterations"]},
        lambda v: v["salt"],
    )
    for r in rows:
        del r["before"], r["after"]
    summary = [f"{len(rows)} SCRAM credential change(s)"] if rows else ["no SCRAM credential changed"]
    return Section(
        "scram",
        "SCRAM credential changes",
        summary,
        [*_CHANGE_COLUMNS, "user", "mechanism", "iterations"],
        rows,
        sql.SCRAM,
    )


def feature_level_text(name: str, level: Any) -> Any:
    if level is None:
        return None
    if name == "metadata.version":
        return f"{level} ({METADATA_VERSIONS.get(level, '?')})"
    return str(level)


def features_section(data: ReportInput) -> Section:
    rows = _change_rows(data, "features", lambda v: {"feature": v["name"]}, lambda v: v["level"])
    for r in rows:
        r["before"] = feature_level_text(r["feature"], r["before"])
        r["after"] = feature_level_text(r["feature"], r["after"])
    summary = [
        f"{r['feature']}: {r['before'] or 'unset'} -> {r['after'] or 'unset'} at offset {r['offset']}"
        for r in rows
    ] or ["no feature level changed"]
    return Section(
        "features",
        "Features and metadata.version",
        summary,
        [*_CHANGE_COLUMNS, "feature", "before", "after"],
        rows,
        sql.FEATURES,
    )


def tokens_section(data: ReportInput) -> Section:
    rows = _change_rows(
        data,
        "delegation_tokens",
        lambda v: {"token_id": v["token_id"], "owner": v["owner"]},
        lambda v: v["expiration_timestamp"],
    )
    for r in rows:
        r["change"] = {"changed": "renewed", "removed": "expired or cancelled"}.get(r["change"], r["change"])
        r["expires_ms"] = r.pop("after")
        del r["before"]
    summary = [f"{len(rows)} delegation token change(s)"] if rows else ["no delegation token changed"]
    return Section(
        "delegation_tokens",
        "Delegation tokens",
        summary,
        [*_CHANGE_COLUMNS, "token_id", "owner", "expires_ms"],
        rows,
        sql.TOKENS,
    )


def _from_window(data: ReportInput, entity: str) -> pd.DataFrame:
    """The versions of ``entity`` in force from ``lo - 1`` on, each starting no earlier than ``lo - 1``: what
    the risk windows are judged on (a version's first offset is where its piece is judged, and from ``lo - 1``
    the configs and brokers deciding it are all in the input)."""
    frame = data.versions.get(entity)
    if frame is None:
        return pd.DataFrame()
    first = data.window.lo - 1
    return frame.assign(from_offset=frame["from_offset"].where(frame["from_offset"] >= first, first))


RISK_KINDS = ("under_min_isr", "isr_leader_only", "offline", "recovering", "unclean_election", "elr_election")
_RISK_TEXT = {
    "under_min_isr": "below min.insync.replicas (acks=all writes refused or at risk)",
    "isr_leader_only": "ISR = the leader alone",
    "offline": "offline",
    "recovering": "leader recovering after an unclean election",
    "unclean_election": "unclean election",
    "elr_election": "election from the ELR",
}


def risk_section(data: ReportInput) -> Section:
    """Windows in which a partition could lose acknowledged writes (:mod:`kraftlake.history.risk`), through the
    window as the other runs are; elections as points. Built as columns (:mod:`~.run_columns`): a day of a
    large cluster holds hundreds of thousands of windows."""
    found = risk_rows(
        data,
        risk_columns_from_history(
            _from_window(data, "partitions"), _from_window(data, "configs"), _from_window(data, "brokers")
        ),
    )
    rows = found.rows
    summary = []
    if len(rows):
        summary.append(f"{found.partitions} partition(s) could have lost acknowledged writes or refused them")
        for kind in RISK_KINDS:
            if found.counts.get(kind):
                most = found.longest.get(kind)
                extra = (
                    "" if kind in EVENT_KINDS else f", longest {'?' if most is None else duration_text(most)}"
                )
                summary.append(
                    f"{_RISK_TEXT[kind]}: {found.partitions_of[kind]} partition(s), {found.counts[kind]} window(s)"
                    f"{extra}"
                )
    return Section(
        "risk",
        "Data at risk",
        summary
        or [
            "no partition was below its min.insync.replicas, led by its ISR alone, offline or elected uncleanly"
        ],
        [
            "kind",
            "topic",
            "partition",
            "leader",
            "isr",
            "min_isr",
            "min_isr_source",
            "previous_leader",
            *RUN_COLUMNS,
        ],
        rows,
        sql.RISK,
    )


SECTIONS: tuple[Callable[[ReportInput], Section], ...] = (
    risk_section,
    brokers_section,
    controller_section,
    availability_section,
    elections_section,
    isr_section,
    reassignments_section,
    topics_section,
    configs_section,
    quotas_section,
    acls_section,
    scram_section,
    features_section,
    tokens_section,
)


def build_report(data: ReportInput, warehouse: str = "", json_pool: Executor | None = None) -> Report:
    """Every section of the window ``data`` describes. With ``json_pool``, the first pieces of the JSON of the
    sections held as columns are written on it while the next sections are computed
    (:meth:`ColumnRows.encode_ahead`)."""
    sections = []
    for make in SECTIONS:
        s = make(data)
        s.sql = sql.query(s.sql, data.window.lo, data.window.hi, data.cluster)
        if json_pool is not None and isinstance(s.rows, ColumnRows):
            s.rows.encode_ahead(s.columns, json_pool)
        sections.append(s)
    return Report(data.window, sections, data.cluster, warehouse)
