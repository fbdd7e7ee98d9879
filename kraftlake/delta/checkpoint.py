"""Delta checkpoints written by kraftlake itself: the table's state at its latest version as one classic
checkpoint file (``<version>.checkpoint.parquet``), then ``_last_checkpoint``, then the expired log files cleaned
up, as Delta's ``checkpointAndCleanUpDeltaLog`` does.

Why not Spark: Delta computes a checkpoint with a Spark job (the log replayed as a Dataset, then written), about
two seconds a table even for a few dozen files, and the writers of this project commit to a dozen tables at once
(:mod:`.append`, :mod:`.rewrite`), so their checkpoints queued behind each other for longer than the commits
took. Here the state is the log replayed in Python (the newest checkpoint, then the commits after it: a few
hundred actions) and the file is a few hundred rows of pyarrow.

The state is what Delta's log replay keeps: the protocol and metadata, the latest ``txn`` of each application,
the live domain metadata, the live files (``add``), and the ``remove`` tombstones younger than
``delta.deletedFileRetentionDuration`` (``VACUUM`` keeps their files). The file has Delta's checkpoint columns
(its statistics as the commits' JSON; Delta parses them when it reads the checkpoint). It is written aside and
renamed into place, so a reader never finds half a checkpoint. The log files older than
``delta.logRetentionDuration`` are deleted up to the newest checkpoint that is itself that old, so the table
can always be read from a checkpoint on.

A table this writer cannot checkpoint correctly (the features :func:`~.append.check_supported` refuses, a v2
checkpoint policy, transactions that expire) raises :class:`~.append.Unsupported` before anything is written.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kraftlake.delta.append import (
    Unsupported,
    check_supported,
    checkpoint_actions,
    commits_after,
    file_key,
    log_segment,
)

LAST_CHECKPOINT = "_last_checkpoint"
#: Delta's defaults for the table properties that bound what a checkpoint keeps and what its cleanup deletes.
DEFAULT_TOMBSTONE_RETENTION = "interval 1 week"
DEFAULT_LOG_RETENTION = "interval 30 days"

_STR_MAP = pa.map_(pa.string(), pa.string())
_DV = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
        ("maxRowIndex", pa.int64()),
    ]
)
#: The columns of a classic checkpoint (Delta's ``PROTOCOL.md``, "Checkpoint Schema"), one action a row.
SCHEMA = pa.schema(
    [
        ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])),
        (
            "add",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("partitionValues", _STR_MAP),
                    ("size", pa.int64()),
                    ("modificationTime", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("tags", _STR_MAP),
                    ("deletionVector", _DV),
                    ("baseRowId", pa.int64()),
                    ("defaultRowCommitVersion", pa.int64()),
                    ("clusteringProvider", pa.string()),
                    ("stats", pa.string()),
                ]
            ),
        ),
        (
            "remove",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("deletionTimestamp", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("extendedFileMetadata", pa.bool_()),
                    ("partitionValues", _STR_MAP),
                    ("size", pa.int64()),
                    ("deletionVector", _DV),
                    ("baseRowId", pa.int64()),
                    ("defaultRowCommitVersion", pa.int64()),
                ]
            ),
        ),
        (
            "metaData",
            pa.struct(
                [
                    ("id", pa.string()),
                    ("name", pa.string()),
                    ("description", pa.string()),
                    ("format", pa.struct([("provider", pa.string()), ("options", _STR_MAP)])),
                    ("schemaString", pa.string()),
                    ("partitionColumns", pa.list_(pa.string())),
                    ("configuration", _STR_MAP),
                    ("createdTime", pa.int64()),
                ]
            ),
        ),
        (
            "protocol",
            pa.struct(
                [
                    ("minReaderVersion", pa.int32()),
                    ("minWriterVersion", pa.int32()),
                    ("readerFeatures", pa.list_(pa.string())),
                    ("writerFeatures", pa.list_(pa.string())),
                ]
            ),
        ),
        (
            "domainMetadata",
            pa.struct([("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]),
        ),
    ]
)

_UNIT_MS = {
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
    "week": 604_800_000,
}
_INTERVAL_PART = re.compile(r"(-?\d+)\s*([a-z]+?)s?\b")
_COMMIT_FILE = re.compile(r"^(\d{20})\.(?:json|crc|checkpoint(?:\.\d{10}\.\d{10})?\.parquet)$")


@dataclass
class TableState:
    """A Delta table's state at ``version``: what its checkpoint holds."""

    version: int
    protocol: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    txns: dict[str, dict[str, Any]] = field(default_factory=dict)
    domains: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    tombstones: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def apply(self, action: dict[str, Any]) -> None:
        if "add" in action:
            key = file_key(action["add"])
            self.files[key] = action["add"]
            self.tombstones.pop(key, None)
        elif "remove" in action:
            key = file_key(action["remove"])
            self.files.pop(key, None)
            self.tombstones[key] = action["remove"]
        elif "txn" in action:
            self.txns[action["txn"]["appId"]] = action["txn"]
        elif "domainMetadata" in action:
            dm = action["domainMetadata"]
            if dm.get("removed"):
                self.domains.pop(dm["domain"], None)
            else:
                self.domains[dm["domain"]] = dm
        elif "metaData" in action:
            self.metadata = action["metaData"]
        elif "protocol" in action:
            self.protocol = action["protocol"]


#: The map columns of a checkpoint's actions (pyarrow reads a map as a list of key-value pairs).
_MAPS = frozenset({"partitionValues", "tags", "configuration", "options"})


def _from_checkpoint(value: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint cell as a commit's JSON has it: maps as objects, no null fields."""
    out: dict[str, Any] = {}
    for k, v in value.items():
        if v is None or k == "stats_parsed":
            continue
        if k in _MAPS and isinstance(v, list):
            v = dict(v)
        elif isinstance(v, dict):
            v = _from_checkpoint(v)
        out[k] = v
    return out


def table_state(path: str | Path) -> TableState:
    """The state of the Delta table at ``path`` at its latest version (its newest checkpoint, then the commits
    after it; each commit's removes before its adds, as files are told apart by deletion vector)."""
    log = Path(path) / "_delta_log"
    latest, start, parts = log_segment(log)
    state = TableState(latest)
    if start >= 0:
        kinds = ("txn", "add", "remove", "metaData", "protocol", "domainMetadata")
        for action in checkpoint_actions(log, start, parts, kinds):
            state.apply({k: _from_checkpoint(v) for k, v in action.items()})
    for actions in commits_after(log, start, latest):
        for action in actions:
            if "remove" in action:
                state.apply(action)
        for action in actions:
            if "remove" not in action:
                state.apply(action)
    return state


def interval_ms(text: str, where: Path, name: str) -> int:
    """A Delta interval property (``interval 1 week``, ``30 days``...) in milliseconds."""
    body = text.strip().lower()
    body = body[len("interval") :].strip() if body.startswith("interval") else body
    parts = _INTERVAL_PART.findall(body)
    if not parts or _INTERVAL_PART.sub("", body).strip():
        raise Unsupported(f"{where}: {name} = {text!r} is not an interval read here")
    total = 0
    for n, unit in parts:
        if unit not in _UNIT_MS:
            raise Unsupported(f"{where}: {name} = {text!r}: unit {unit!r} is not read here")
        total += int(n) * _UNIT_MS[unit]
    return total


def _rows(state: TableState, min_tombstone_ms: int) -> list[dict[str, Any]]:
    """The checkpoint's rows: one action each, ``{column: value}`` (maps as key-value pairs)."""

    def maps(value: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
        out = dict(value)
        for n in names:
            if isinstance(out.get(n), dict):
                out[n] = list(out[n].items())
        return out

    meta = maps(state.metadata, ("configuration",))
    if isinstance(meta.get("format"), dict):
        meta["format"] = maps(meta["format"], ("options",))
    rows: list[dict[str, Any]] = [{"protocol": state.protocol}, {"metaData": meta}]
    rows += [{"txn": t} for t in state.txns.values()]
    rows += [{"domainMetadata": d} for d in state.domains.values()]
    rows += [
        {"add": maps({**a, "dataChange": False}, ("partitionValues", "tags"))} for a in state.files.values()
    ]
    rows += [
        {"remove": maps({**r, "dataChange": False}, ("partitionValues",))}
        for r in state.tombstones.values()
        if int(r.get("deletionTimestamp") or 0) > min_tombstone_ms
    ]
    return rows


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    columns = []
    for f in SCHEMA:
        values = [r.get(f.name) for r in rows]
        wanted = {c.name for c in f.type}
        # fields this writer does not know (a newer Delta's) would be dropped silently: refuse instead
        extra = {k for v in values if v is not None for k in v} - wanted - {"stats_parsed"}
        if extra:
            raise Unsupported(f"{f.name} actions with fields {sorted(extra)} are not written here")
        columns.append(pa.array(values, type=f.type))
    return pa.Table.from_arrays(columns, schema=SCHEMA)


def _check_checkpointable(where: Path, state: TableState) -> None:
    check_supported(where, state.protocol, state.metadata, state.metadata.get("schemaString", "{}"))
    config = state.metadata.get("configuration") or {}
    if str(config.get("delta.checkpointPolicy", "classic")).lower() != "classic":
        raise Unsupported(f"{where}: delta.checkpointPolicy {config['delta.checkpointPolicy']!r}")
    if config.get("delta.setTransactionRetentionDuration"):
        raise Unsupported(f"{where}: delta.setTransactionRetentionDuration (expiring transactions)")


@dataclass(frozen=True)
class Checkpointed:
    """A checkpoint written: its version, its actions and the expired log files deleted after it."""

    version: int
    actions: int
    cleaned: int


def write_checkpoint(path: str | Path, now_ms: int | None = None) -> Checkpointed | None:
    """Write the checkpoint of the Delta table at ``path`` at its latest version (None when that version has
    one already), then clean up its expired log files as Delta does after a checkpoint. ``now_ms``: the clock
    the retention durations are measured from (the wall clock when None)."""
    table = Path(path)
    log = table / "_delta_log"
    latest, start, _ = log_segment(log)
    if start == latest:
        return None
    state = table_state(table)
    _check_checkpointable(table, state)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    config = state.metadata.get("configuration") or {}
    tombstone_ms = interval_ms(
        config.get("delta.deletedFileRetentionDuration", DEFAULT_TOMBSTONE_RETENTION),
        table,
        "delta.deletedFileRetentionDuration",
    )
    data = _table(_rows(state, now - tombstone_ms))
    name = f"{state.version:020d}.checkpoint.parquet"
    tmp = log / f".{name}.{uuid.uuid4()}.tmp"
    try:
        pq.write_table(data, tmp, compression="snappy")
        os.replace(tmp, log / name)
    finally:
        tmp.unlink(missing_ok=True)
    _put_last_checkpoint(log, state.version, data.num_rows, (log / name).stat().st_size, len(state.files))
    cleaned = 0
    if str(config.get("delta.enableExpiredLogCleanup", "true")).lower() == "true":
        log_ms = interval_ms(
            config.get("delta.logRetentionDuration", DEFAULT_LOG_RETENTION),
            table,
            "delta.logRetentionDuration",
        )
        cleaned = clean_up_expired_logs(log, now - log_ms)
    return Checkpointed(state.version, data.num_rows, cleaned)


def _put_last_checkpoint(log: Path, version: int, actions: int, size: int, adds: int) -> None:
    """Point ``_last_checkpoint`` at this checkpoint unless it already names a newer one."""
    target = log / LAST_CHECKPOINT
    try:
        current = json.loads(target.read_text(encoding="utf-8"))
        if int(current.get("version", -1)) >= version:
            return
    except (OSError, ValueError):
        pass
    text = json.dumps(
        {"version": version, "size": actions, "sizeInBytes": size, "numOfAddFiles": adds},
        separators=(",", ":"),
    )
    tmp = log / f".{LAST_CHECKPOINT}.{uuid.uuid4()}.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)


def clean_up_expired_logs(log: Path, cutoff_ms: int) -> int:
    """Delete the commits, checksums and checkpoints older than ``cutoff_ms`` that precede the newest complete
    checkpoint which is itself older than it (so the table is still read from that checkpoint on); returns
    how many files were deleted."""
    by_version: dict[int, list[Path]] = {}
    for entry in os.scandir(log):
        if m := _COMMIT_FILE.match(entry.name):
            by_version.setdefault(int(m.group(1)), []).append(Path(entry.path))

    def old(p: Path) -> bool:
        try:
            return p.stat().st_mtime * 1000 <= cutoff_ms
        except FileNotFoundError:
            return False

    checkpoints = sorted(
        (v for v, ps in by_version.items() if any(p.name.endswith(".checkpoint.parquet") for p in ps)),
        reverse=True,
    )
    keep_from = next((v for v in checkpoints if all(old(p) for p in by_version[v])), None)
    if keep_from is None:
        return 0
    deleted = 0
    for version in sorted(v for v in by_version if v < keep_from):
        for p in by_version[version]:
            if old(p):
                p.unlink(missing_ok=True)
                deleted += 1
    return deleted
