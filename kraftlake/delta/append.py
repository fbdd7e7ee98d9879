"""Blind appends to a Delta table, committed by kraftlake itself as Delta's protocol defines them.

An append is one Parquet file written by pyarrow and one commit, ``_delta_log/<version>.json`` holding a
``commitInfo``, the writer's ``txn`` (``appId``, ``version``) and the ``add`` of the file with its statistics,
put in place as Delta's own log store does on a local filesystem: written aside, then linked to its name, which
fails when another writer took that version first (mutual exclusion without a lock, and a reader never sees a
commit half written). Losing that race is Delta's optimistic concurrency: the winning commits are read, and the
append is tried at the next version unless they change what a blind append depends on (the table's metadata
or protocol: :class:`CommitConflict`, which the callers retry) or already hold this writer's ``txn`` version
(the append is then done: a replay after a crash, or another process of ours). The file may also be written
apart from its commit, as Spark's own Delta writer has its executors write the files and the driver commit
them: :func:`write_data_file` where the rows are, :func:`commit_files` by the committer.

Why not Spark: through delta-spark a 100-row append costs about 0.55 s (planning, a Spark job, the commit
protocol in the JVM), and a micro-batch at a real cluster's rate is four or five of them one after another;
here it is a Parquet write and two small files. Delta's readers see these commits like any other (they list
``_delta_log`` on every query), and delta-spark's own writers (MERGE, DELETE, OPTIMIZE) go on working beside
them, their conflict checks reading the ``add`` actions written here.

What is not done here: checkpoints (every ``delta.checkpointInterval``-th version is reported to the caller,
who has :mod:`.checkpoint` write one), and any table this writer cannot append to correctly: a protocol feature or a
constraint it does not enforce (column mapping, CHECK constraints, invariants, generated or identity columns,
row tracking, in-commit timestamps...), or a schema other than the rows'. Those raise :class:`Unsupported`
before anything is written, and callers append through Spark instead.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kraftlake.delta.layout import ROW_GROUP_ROWS, laid_out
from kraftlake.errors import KraftlakeError

#: Writer features whose blind appends need nothing of the writer beyond what is written here: deletion
#: vectors, domain metadata and clustering concern other operations; invariants are refused below when the
#: schema has one, and appendOnly forbids only removals.
WRITER_FEATURES = frozenset({"appendOnly", "invariants", "deletionVectors", "domainMetadata", "clustering"})
#: Reader features that change nothing in an ``add`` of a new file.
READER_FEATURES = frozenset({"deletionVectors"})
#: Table properties whose semantics a writer must implement.
_REFUSED_PROPERTIES = (
    "delta.columnMapping.mode",
    "delta.enableRowTracking",
    "delta.enableInCommitTimestamps",
)
#: Field metadata marking a column the writer must compute or check.
_REFUSED_FIELD_METADATA = ("delta.invariants", "delta.generationExpression", "delta.identity.start")
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")
DEFAULT_CHECKPOINT_INTERVAL = 10
DEFAULT_INDEXED_COLUMNS = 32
#: Arrow types Delta keeps minimum and maximum values of in a file's statistics (others: null counts only).
_MIN_MAX = (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string)


class DeltaAppendError(KraftlakeError):
    """A Delta log this writer cannot read, or rows the table refuses."""


class Unsupported(DeltaAppendError):
    """The table needs a writer that implements more of Delta than blind appends: append through Spark."""


class CommitConflict(DeltaAppendError):
    """A concurrent commit changed the table's metadata or protocol: try the append again."""


@dataclass
class _Table:
    log: Path
    version: int
    txns: dict[str, int]
    protocol: dict[str, Any]
    metadata: dict[str, Any]
    tip: tuple[int, int] | None
    """Which file ``version``'s commit is (:func:`_tip`): a table deleted and created again under the same path
    has another one there, or none, and is read again. (Not the inode of ``_delta_log``: a directory created
    after one was deleted often gets the same inode back.)"""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def apply(self, action: dict[str, Any]) -> None:
        if "txn" in action:
            self.txns[action["txn"]["appId"]] = int(action["txn"]["version"])
        elif "metaData" in action:
            self.metadata = action["metaData"]
        elif "protocol" in action:
            self.protocol = action["protocol"]


@dataclass(frozen=True)
class Appended:
    """What an append did: the version it committed (None when its ``txn`` version was already there)."""

    version: int | None
    checkpoint_due: bool = False
    """Whether the version is one at which Delta writes a checkpoint (``delta.checkpointInterval``)."""


_TABLES: dict[str, _Table] = {}
_TABLES_LOCK = threading.Lock()


def file_key(action: dict[str, Any]) -> tuple[str, str]:
    """A file as Delta's log replay tells files apart (its ``add`` or ``remove``): its path and deletion vector."""
    dv = action.get("deletionVector")
    dv_id = "" if not dv else f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}@{dv.get('offset')}"
    return action["path"], dv_id


def _commit_path(log: Path, version: int) -> Path:
    return log / f"{version:020d}.json"


def _read_commit(log: Path, version: int) -> list[dict[str, Any]]:
    path = _commit_path(log, version)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise DeltaAppendError(f"{path}: cannot read the commit: {exc}") from exc
    actions = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            actions.append(json.loads(line))
        except ValueError as exc:
            raise DeltaAppendError(f"{path}: line {n} is not a JSON action: {exc}") from exc
    return actions


def checkpoint_actions(
    log: Path, version: int, parts: int, kinds: tuple[str, ...] = ("txn", "metaData", "protocol")
) -> list[dict[str, Any]]:
    """The actions of these ``kinds`` in a classic checkpoint (single file or in parts), as ``{kind: value}``."""
    out: list[dict[str, Any]] = []
    for name in checkpoint_names(version, parts):
        path = log / name
        try:
            schema = pq.read_schema(path)
            cols = [c for c in kinds if c in schema.names]
            data = pq.read_table(path, columns=cols)
        except (OSError, pa.ArrowException) as exc:
            raise DeltaAppendError(f"{path}: cannot read the checkpoint: {exc}") from exc
        for col in cols:
            for value in data.column(col).to_pylist():
                if value is None:
                    continue
                if col == "metaData" and isinstance(value.get("configuration"), list):
                    value["configuration"] = dict(value["configuration"])
                out.append({col: value})
    return out


def log_segment(log: Path) -> tuple[int, int, int]:
    """``(latest, checkpoint, parts)``: a table's latest version and its newest complete classic checkpoint
    (-1 when none; ``parts`` 0 for a single file), from a listing of its ``_delta_log``."""
    try:
        names = os.listdir(log)
    except OSError as exc:
        raise DeltaAppendError(f"{log}: cannot list the Delta log: {exc}") from exc
    commits = sorted(int(m.group(1)) for n in names if (m := _COMMIT.match(n)))
    parts: dict[int, set[tuple[int, int]]] = {}
    for n in names:
        if m := _CHECKPOINT.match(n):
            parts.setdefault(int(m.group(1)), set()).add((int(m.group(2) or 0), int(m.group(3) or 0)))
    complete = {
        v: (0 if (0, 0) in ps else next(iter(ps))[1])
        for v, ps in parts.items()
        if (0, 0) in ps or any(len(ps) == total for _, total in ps)
    }
    latest = max([*commits, *complete], default=-1)
    if latest < 0:
        raise DeltaAppendError(f"{log}: no Delta table here (no commit, no checkpoint)")
    start = max((v for v in complete if v <= latest), default=-1)
    return latest, start, complete.get(start, 0)


def checkpoint_names(version: int, parts: int) -> list[str]:
    """The file names of a classic checkpoint (single file or in parts)."""
    if parts == 0:
        return [f"{version:020d}.checkpoint.parquet"]
    return [f"{version:020d}.checkpoint.{i:010d}.{parts:010d}.parquet" for i in range(1, parts + 1)]


def _load(log: Path) -> _Table:
    """A table's state from its log: the newest complete classic checkpoint, then the commits after it."""
    latest, start, parts = log_segment(log)
    table = _Table(log, latest, {}, {}, {}, _tip(log, latest))
    if start >= 0:
        for action in checkpoint_actions(log, start, parts):
            table.apply(action)
    for actions in commits_after(log, start, latest):
        for action in actions:
            table.apply(action)
    if not table.metadata or not table.protocol:
        raise DeltaAppendError(f"{log}: the log has no metaData or protocol up to version {latest}")
    return table


def commits_after(log: Path, start: int, latest: int) -> Iterator[list[dict[str, Any]]]:
    """The actions of every commit from ``start + 1`` to ``latest``, in order."""
    for version in range(start + 1, latest + 1):
        try:
            actions = _read_commit(log, version)
        except FileNotFoundError:
            # cleaned up before a checkpoint of ours could be read (e.g. a v2 checkpoint): Spark can read it
            raise Unsupported(f"{log}: commit {version} is missing after checkpoint {start}") from None
        yield actions


def _tip(log: Path, version: int) -> tuple[int, int] | None:
    """The identity (inode, modification time) of ``version``'s commit file, else of its checkpoint (the commit
    cleaned up), None when neither is there."""
    for name in (f"{version:020d}.json", f"{version:020d}.checkpoint.parquet"):
        try:
            st = os.stat(log / name)
        except OSError:
            continue
        return st.st_ino, st.st_mtime_ns
    return None


def _state(log: Path) -> _Table:
    key = str(log)
    with _TABLES_LOCK:
        table = _TABLES.get(key)
    if table is not None:
        with table.lock:
            if _tip(log, table.version) == table.tip:
                return table
    table = _load(log)
    with _TABLES_LOCK:
        _TABLES[key] = table
    return table


def table_metadata(path: str | Path) -> tuple[int, dict[str, Any]]:
    """The latest version of the Delta table at ``path`` and its ``metaData`` action, read from its log."""
    table = _load(Path(path) / "_delta_log")
    return table.version, dict(table.metadata)


def forget(path: str | Path) -> None:
    """Drop what is known of a table (read again at its next append)."""
    with _TABLES_LOCK:
        _TABLES.pop(str(Path(path) / "_delta_log"), None)


def check_supported(
    where: Path, protocol: dict[str, Any], metadata: dict[str, Any], schema_string: str
) -> None:
    """Raise :class:`Unsupported` when the table at ``where`` needs more of a writer than kraftlake's commits
    give it, or its schema is not ``schema_string``."""
    writer = int(protocol.get("minWriterVersion", 1))
    reader = int(protocol.get("minReaderVersion", 1))
    if writer >= 7:
        extra = set(protocol.get("writerFeatures") or ()) - WRITER_FEATURES
    else:
        # legacy writer versions: 3+ adds CHECK constraints, 4 change data feed and generated columns, ...
        extra = {f"writer version {writer}"} if writer > 2 else set()
    if reader >= 3:
        extra |= set(protocol.get("readerFeatures") or ()) - READER_FEATURES
    elif reader > 1:
        extra.add(f"reader version {reader}")
    if extra:
        raise Unsupported(f"{where}: table features {sorted(extra)}")
    config = metadata.get("configuration") or {}
    props = [p for p in _REFUSED_PROPERTIES if str(config.get(p, "none")).lower() not in ("none", "false")]
    props += [k for k in config if k.startswith("delta.constraints.")]
    if props:
        raise Unsupported(f"{where}: table properties {props}")
    if metadata.get("partitionColumns"):
        raise Unsupported(f"{where}: a partitioned table")
    try:
        stored = json.loads(metadata["schemaString"])
    except (KeyError, ValueError) as exc:
        raise DeltaAppendError(f"{where}: the table's schema cannot be read: {exc}") from exc
    if stored != json.loads(schema_string):
        raise Unsupported(f"{where}: the table's schema is not the rows' schema")
    if _has_field_metadata(stored):
        raise Unsupported(f"{where}: a column with an invariant, a generation expression or an identity")


def _has_field_metadata(node: Any) -> bool:
    if isinstance(node, dict):
        meta = node.get("metadata")
        if isinstance(meta, dict) and any(k in meta for k in _REFUSED_FIELD_METADATA):
            return True
        return any(_has_field_metadata(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_field_metadata(v) for v in node)
    return False


def _check_not_null(where: Path, schema: dict[str, Any], rows: pa.Table) -> None:
    """Delta's NOT NULL constraints on top-level columns (nested fields of our tables are nullable)."""
    for f in schema["fields"]:
        if not f.get("nullable", True) and rows.column(f["name"]).null_count:
            raise DeltaAppendError(f"{where}: NOT NULL column {f['name']!r} has null values")


def _stats_columns(metadata: dict[str, Any], rows: pa.Table) -> list[str]:
    """The columns Delta keeps statistics of: ``delta.dataSkippingStatsColumns``, else the first
    ``delta.dataSkippingNumIndexedCols`` (32) columns (our tables' columns there are top-level leaves)."""
    config = metadata.get("configuration") or {}
    named = config.get("delta.dataSkippingStatsColumns")
    if named:
        cols = [c.strip().strip("`") for c in named.split(",") if c.strip()]
    else:
        n = int(config.get("delta.dataSkippingNumIndexedCols", DEFAULT_INDEXED_COLUMNS))
        cols = rows.column_names if n < 0 else rows.column_names[:n]
    for c in cols:
        if c not in rows.column_names or pa.types.is_struct(rows.schema.field(c).type):
            raise Unsupported(f"statistics of column {c!r}: only top-level columns are collected here")
    return cols


def file_stats(rows: pa.Table, columns: list[str], tight_bounds: bool) -> dict[str, Any]:
    """A data file's statistics as Delta writes them in ``add.stats``: record count, per column the minimum and
    maximum (integers and strings, all-null columns left out) and the null count."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in columns:
        col = rows.column(name)
        nulls[name] = col.null_count
        if col.null_count < len(col) and any(is_(col.type) for is_ in _MIN_MAX):
            mm = pc.min_max(col)
            mins[name] = mm["min"].as_py()
            maxs[name] = mm["max"].as_py()
    stats: dict[str, Any] = {
        "numRecords": rows.num_rows,
        "minValues": mins,
        "maxValues": maxs,
        "nullCount": nulls,
    }
    if tight_bounds:
        stats["tightBounds"] = True
    return stats


def put_commit(log: Path, version: int, actions: list[dict[str, Any]]) -> bool:
    """Put a commit's actions in place as ``<log>/<version>.json`` unless that version exists; returns whether it
    did. Written aside, then linked to its name (atomic, and refused when the name exists), as Delta's local log
    store writes a temporary file and renames it: a reader never sees a commit half written."""
    text = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions)
    tmp = log / f".{version:020d}.json.{uuid.uuid4()}.tmp"
    tmp.write_text(text, encoding="utf-8")
    try:
        os.link(tmp, _commit_path(log, version))
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink()


def write_data_file(path: str | Path, rows: pa.Table, *, schema_string: str) -> dict[str, Any]:
    """Write ``rows`` as one Parquet file into the Delta table at ``path`` and return the file's ``add`` action
    (its statistics as the table's configuration asks), committed by nobody yet: :func:`commit_files` commits
    it, and a file never committed is an orphan that ``VACUUM`` removes, as it removes the files of Delta's own
    aborted writes.

    Runs wherever the table's directory is reachable (a Spark task, on a warehouse every executor shares).
    Raises :class:`Unsupported` before writing anything when the table needs more of a writer.
    """
    log = Path(path) / "_delta_log"
    table = _state(log)
    with table.lock:
        protocol, metadata = table.protocol, table.metadata
    check_supported(log.parent, protocol, metadata, schema_string)
    _check_not_null(log.parent, json.loads(metadata["schemaString"]), rows)
    stats = file_stats(
        rows,
        _stats_columns(metadata, rows),
        "deletionVectors" in (protocol.get("writerFeatures") or ()),
    )
    return write_parquet_add(log.parent, rows, stats)


def write_parquet_add(directory: Path, rows: pa.Table, stats: dict[str, Any]) -> dict[str, Any]:
    """Write ``rows`` as a new Parquet file of the table in ``directory`` and return its ``add`` action with
    ``stats``; a write that fails leaves no file behind. The rows are ordered and cut into row groups as
    :mod:`.layout` says, for readers of an offset window."""
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    data = directory / name
    try:
        pq.write_table(laid_out(rows), data, compression="snappy", row_group_size=ROW_GROUP_ROWS)
        st = data.stat()
    except BaseException:
        data.unlink(missing_ok=True)
        raise
    return {
        "path": name,
        "partitionValues": {},
        "size": st.st_size,
        "modificationTime": int(st.st_mtime * 1000),
        "dataChange": True,
        "stats": json.dumps(stats, separators=(",", ":")),
    }


def committed_version(path: str | Path, app_id: str) -> int:
    """The highest ``txn`` version of ``app_id`` the table at ``path`` holds as far as this process has read its
    log (-1: none); a later one may have been committed since (:func:`commit_files` finds it)."""
    table = _state(Path(path) / "_delta_log")
    with table.lock:
        return table.txns.get(app_id, -1)


def commit_files(
    path: str | Path,
    adds: list[dict[str, Any]],
    *,
    schema_string: str,
    app_id: str,
    txn_version: int,
    engine_info: str = "kraftlake",
) -> Appended:
    """Commit files already written into the Delta table at ``path`` (their ``add`` actions, from
    :func:`write_data_file`) as one blind append, once per ``(app_id, txn_version)`` as :func:`append`; when the
    table already holds that ``txn`` version the files are deleted (nothing refers to them).

    Raises :class:`Unsupported` when the table now needs more of a writer (nothing committed, the files left
    to ``VACUUM``), :class:`CommitConflict` as :func:`append` does.
    """
    log = Path(path) / "_delta_log"
    table = _state(log)
    with table.lock:
        if table.txns.get(app_id, -1) >= txn_version:
            _delete(log.parent, adds)
            return Appended(None)
        check_supported(log.parent, table.protocol, table.metadata, schema_string)
        if not _commit_locked(table, adds, app_id, txn_version, engine_info):
            _delete(log.parent, adds)
            return Appended(None)
        version = table.version
    config = table.metadata.get("configuration") or {}
    interval = int(config.get("delta.checkpointInterval", DEFAULT_CHECKPOINT_INTERVAL))
    return Appended(version, version % interval == 0)


def _delete(where: Path, adds: list[dict[str, Any]]) -> None:
    for add in adds:
        (where / add["path"]).unlink(missing_ok=True)


def append(
    path: str | Path,
    rows: pa.Table,
    *,
    schema_string: str,
    app_id: str,
    txn_version: int,
    engine_info: str = "kraftlake",
) -> Appended:
    """Append ``rows`` to the Delta table at ``path`` once per ``(app_id, txn_version)``: skipped when the table
    already holds that ``txn`` version or a later one, as delta-spark's ``txnAppId``/``txnVersion`` options do.

    ``schema_string``: the rows' schema as Delta stores it (Spark's ``StructType.json()``); the table's must be
    the same. Raises :class:`Unsupported` before writing anything when the table needs more of a writer, and
    :class:`CommitConflict` when a concurrent commit changed its metadata or protocol.
    """
    if committed_version(path, app_id) >= txn_version:
        return Appended(None)
    add = write_data_file(path, rows, schema_string=schema_string)
    try:
        return commit_files(
            path,
            [add],
            schema_string=schema_string,
            app_id=app_id,
            txn_version=txn_version,
            engine_info=engine_info,
        )
    except BaseException:
        _delete(Path(path), [add])
        raise


def _commit_locked(
    table: _Table, adds: list[dict[str, Any]], app_id: str, txn_version: int, engine_info: str
) -> bool:
    """Commit ``adds`` at the table's next free version (its lock held); False when a winning commit holds this
    ``txn`` version already."""
    rows = sum(json.loads(a["stats"])["numRecords"] for a in adds)
    size = sum(int(a["size"]) for a in adds)
    while True:
        version = table.version + 1
        now = int(time.time() * 1000)
        actions = [
            {
                "commitInfo": {
                    "timestamp": now,
                    "operation": "WRITE",
                    "operationParameters": {"mode": "Append", "partitionBy": "[]"},
                    "readVersion": table.version,
                    "isolationLevel": "Serializable",
                    "isBlindAppend": True,
                    "operationMetrics": {
                        "numFiles": str(len(adds)),
                        "numOutputRows": str(rows),
                        "numOutputBytes": str(size),
                    },
                    "engineInfo": engine_info,
                    "txnId": str(uuid.uuid4()),
                }
            },
            {"txn": {"appId": app_id, "version": txn_version, "lastUpdated": now}},
            *({"add": a} for a in adds),
        ]
        if put_commit(table.log, version, actions):
            table.version = version
            table.tip = _tip(table.log, version)
            table.txns[app_id] = txn_version
            return True
        if _catch_up(table, app_id, txn_version):
            return False


def _catch_up(table: _Table, app_id: str, txn_version: int) -> bool:
    """Read the commits that won the race; True when one of them holds this append's ``txn`` version."""
    while True:
        version = table.version + 1
        try:
            actions = _read_commit(table.log, version)
        except FileNotFoundError:
            return False
        changed = [a for a in actions if "metaData" in a or "protocol" in a]
        for action in actions:
            table.apply(action)
        table.version = version
        table.tip = _tip(table.log, version)
        if changed:
            forget(table.log.parent)
            raise CommitConflict(
                f"{table.log.parent}: version {version} changed the table's metadata or protocol"
            )
        if table.txns.get(app_id, -1) >= txn_version:
            return True
