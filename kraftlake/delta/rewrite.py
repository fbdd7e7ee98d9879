"""Commits that replace data files of a Delta table, written by kraftlake itself (see :mod:`.append`).

What the fold of the pending closes needs (:func:`kraftlake.spark.tables.fold_closes`): read a table's live
files, rewrite those that hold versions a close ends, and commit the old files' ``remove`` with the new
files' ``add`` in one version. Through Spark the same is a MERGE per table, most of whose cost does not depend
on the closes (materializing the source, scanning the table for matches, writing deletion vectors).

The snapshot is Delta's log replay, reduced to what a rewrite needs: the newest complete classic checkpoint
(its ``add`` column), then every commit after it, a file being live when its last action is an ``add`` (files
are told apart by path and deletion vector, as Delta does). A commit that loses the race for its version is
tried at the next one unless a winning commit removed one of the files it replaces or changed the table's
metadata or protocol (:class:`~.append.CommitConflict`: the caller starts again from a new snapshot).

A file with a deletion vector is read less the rows it marks (:mod:`.deletion_vectors`), and its ``remove``
names the vector. Not handled here: a path that is not relative to the table, a deletion vector in another
format than the portable one, and every table :mod:`.append` refuses. Those raise
:class:`~.append.Unsupported` before anything is written.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kraftlake.delta.append import (
    DEFAULT_CHECKPOINT_INTERVAL,
    CommitConflict,
    DeltaAppendError,
    Unsupported,
    _read_commit,
    _stats_columns,
    check_supported,
    checkpoint_actions,
    commits_after,
    file_key,
    file_stats,
    log_segment,
    put_commit,
    write_parquet_add,
)
from kraftlake.delta.deletion_vectors import deleted_rows

#: The fields of an ``add`` that its ``remove`` repeats (Delta's ``AddFile.removeWithTimestamp``).
_REMOVE_FIELDS = (
    "path",
    "partitionValues",
    "size",
    "tags",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
)


@dataclass(frozen=True)
class Snapshot:
    """A table's live files at one version (their ``add`` actions), with its metadata and protocol."""

    path: Path
    version: int
    files: dict[tuple[str, str], dict[str, Any]]
    metadata: dict[str, Any]
    protocol: dict[str, Any]

    @property
    def checkpoint_interval(self) -> int:
        config = self.metadata.get("configuration") or {}
        return int(config.get("delta.checkpointInterval", DEFAULT_CHECKPOINT_INTERVAL))


def _add_action(value: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's ``add`` as a commit's JSON has it: maps as objects, no null fields, no parsed stats."""
    out = {k: v for k, v in value.items() if v is not None and k != "stats_parsed"}
    for name in ("partitionValues", "tags"):
        if isinstance(out.get(name), list):
            out[name] = dict(out[name])
    if isinstance(out.get("deletionVector"), dict):
        out["deletionVector"] = {k: v for k, v in out["deletionVector"].items() if v is not None}
    return out


def snapshot(path: str | Path) -> Snapshot:
    """The live files of the Delta table at ``path``, at its latest version."""
    table = Path(path)
    log = table / "_delta_log"
    latest, start, parts = log_segment(log)
    files: dict[tuple[str, str], dict[str, Any]] = {}
    metadata: dict[str, Any] = {}
    protocol: dict[str, Any] = {}

    def apply(action: dict[str, Any]) -> None:
        nonlocal metadata, protocol
        if "add" in action:
            files[file_key(action["add"])] = action["add"]
        elif "remove" in action:
            files.pop(file_key(action["remove"]), None)
        elif "metaData" in action:
            metadata = action["metaData"]
        elif "protocol" in action:
            protocol = action["protocol"]

    if start >= 0:
        for action in checkpoint_actions(log, start, parts, ("add", "metaData", "protocol")):
            if "add" in action:
                add = _add_action(action["add"])
                files[file_key(add)] = add
            else:
                apply(action)
    for actions in commits_after(log, start, latest):
        # a commit's removes and adds of one file are told apart by the deletion vector, not by their order
        for action in actions:
            if "remove" in action:
                apply(action)
        for action in actions:
            if "remove" not in action:
                apply(action)
    if not metadata or not protocol:
        raise DeltaAppendError(f"{log}: the log has no metaData or protocol up to version {latest}")
    if isinstance(metadata.get("configuration"), list):
        metadata["configuration"] = dict(metadata["configuration"])
    return Snapshot(table, latest, files, metadata, protocol)


def stats_of(add: dict[str, Any]) -> dict[str, Any] | None:
    """A file's statistics (``add.stats`` parsed), None when it has none."""
    text = add.get("stats")
    if not text:
        return None
    try:
        stats = json.loads(text)
    except ValueError:
        return None
    return stats if isinstance(stats, dict) else None


def read_file(snap: Snapshot, add: dict[str, Any], columns: list[str] | None = None) -> pa.Table:
    """The live rows of one live file: its rows less those its deletion vector marks deleted."""
    rel = unquote(add["path"])
    if ":" in rel or rel.startswith("/"):
        raise Unsupported(f"{snap.path}: {add['path']} is not a path inside the table")
    where = snap.path / rel
    try:
        rows = pq.read_table(where, columns=columns)
    except (OSError, pa.ArrowException) as exc:
        raise DeltaAppendError(f"{where}: cannot read the data file: {exc}") from exc
    dv = add.get("deletionVector")
    if not dv:
        return rows
    deleted = deleted_rows(snap.path, dv)
    if len(deleted) and int(deleted.max()) >= rows.num_rows:
        raise DeltaAppendError(
            f"{where}: its deletion vector marks row {int(deleted.max())} of {rows.num_rows}"
        )
    keep = np.ones(rows.num_rows, dtype=bool)
    keep[deleted.astype(np.int64)] = False
    return rows.filter(pa.array(keep))


@dataclass(frozen=True)
class Replaced:
    version: int
    checkpoint_due: bool


def replace(
    snap: Snapshot,
    removed: list[dict[str, Any]],
    added: list[pa.Table],
    *,
    operation: str,
    parameters: dict[str, str] | None = None,
    engine_info: str = "kraftlake",
) -> Replaced:
    """Commit the ``remove`` of the live files ``removed`` and the ``add`` of a new file per table in ``added``
    (rows of the table's schema), one version after ``snap`` or after the commits that won the race meanwhile.

    Raises :class:`Unsupported` (nothing written) when the table needs more of a writer, and
    :class:`CommitConflict` when a winning commit removed one of ``removed`` or changed the metadata or protocol.
    """
    log = snap.path / "_delta_log"
    check_supported(snap.path, snap.protocol, snap.metadata, snap.metadata.get("schemaString", "{}"))
    tight = "deletionVectors" in (snap.protocol.get("writerFeatures") or ())
    written: list[Path] = []
    try:
        adds = []
        for rows in added:
            add = write_parquet_add(
                snap.path, rows, file_stats(rows, _stats_columns(snap.metadata, rows), tight)
            )
            written.append(snap.path / add["path"])
            adds.append({"add": add})
        now = int(time.time() * 1000)
        removes = [
            {
                "remove": {
                    **{k: add[k] for k in _REMOVE_FIELDS if add.get(k) is not None},
                    "deletionTimestamp": now,
                    "dataChange": True,
                    "extendedFileMetadata": True,
                }
            }
            for add in removed
        ]
        info = {
            "commitInfo": {
                "timestamp": now,
                "operation": operation,
                "operationParameters": parameters or {},
                "readVersion": snap.version,
                "isolationLevel": "Serializable",
                "isBlindAppend": False,
                "operationMetrics": {
                    "numRemovedFiles": str(len(removed)),
                    "numAddedFiles": str(len(added)),
                    "numOutputRows": str(sum(t.num_rows for t in added)),
                },
                "engineInfo": engine_info,
                "txnId": str(uuid.uuid4()),
            }
        }
        mine = {file_key(a) for a in removed}
        version = snap.version + 1
        while not put_commit(log, version, [info, *removes, *adds]):
            for action in _read_commit(log, version):
                if "metaData" in action or "protocol" in action:
                    raise CommitConflict(
                        f"{snap.path}: version {version} changed the table's metadata or protocol"
                    )
                if "remove" in action and file_key(action["remove"]) in mine:
                    raise CommitConflict(f"{snap.path}: version {version} removed {action['remove']['path']}")
            version += 1
    except BaseException:
        for data in written:
            data.unlink(missing_ok=True)
        raise
    return Replaced(version, version % snap.checkpoint_interval == 0)
