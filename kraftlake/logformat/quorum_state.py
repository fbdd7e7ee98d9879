"""The ``quorum-state`` file as Kafka's ``FileQuorumStateStore`` writes it.

One line of compact JSON (``QuorumStateData`` plus ``data_version``), no trailing newline, replaced atomically
through ``quorum-state.tmp`` (write, flush, fsync, move). Version 0 (static quorums)::

    {"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0}

Version 1 (kraft.version 1, KIP-853)::

    {"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftlake.logformat.atomic import atomic_write
from kraftlake.logformat.errors import FileAccessError, MalformedFileError
from kraftlake.logformat.properties import is_uuid
from kraftlake.logformat.text import INT32, INT64, decode_utf8, read_file_bytes, split_lines

QUORUM_STATE_FILE = "quorum-state"
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
"""Kafka's ``Uuid.ZERO_UUID`` in base64url: "no directory id"."""


@dataclass(frozen=True)
class QuorumStateFile:
    """The contents of a ``quorum-state`` file.

    Attributes
    ----------
    leader_id, leader_epoch, voted_id : int
        -1 when unknown / not voted.
    data_version : int
        0 or 1.
    voted_directory_id : str
        Version 1 only (ZERO_UUID when none).
    cluster_id : str
        Version 0 only (Kafka writes "").
    applied_offset : int
        Version 0 only (Kafka writes 0).
    current_voters : tuple of int, or None
        Version 0 only.
    """

    leader_id: int = -1
    leader_epoch: int = -1
    voted_id: int = -1
    data_version: int = 1
    voted_directory_id: str = ZERO_UUID
    cluster_id: str = ""
    applied_offset: int = 0
    current_voters: tuple[int, ...] | None = ()

    def to_json(self) -> str:
        """The file's exact text."""
        doc: dict[str, Any]
        if self.data_version == 0:
            doc = {
                "clusterId": self.cluster_id,
                "leaderId": self.leader_id,
                "leaderEpoch": self.leader_epoch,
                "votedId": self.voted_id,
                "appliedOffset": self.applied_offset,
                "currentVoters": None
                if self.current_voters is None
                else [{"voterId": v} for v in self.current_voters],
            }
        elif self.data_version == 1:
            doc = {
                "leaderId": self.leader_id,
                "leaderEpoch": self.leader_epoch,
                "votedId": self.voted_id,
                "votedDirectoryId": self.voted_directory_id,
            }
        else:
            raise ValueError(f"quorum-state data_version {self.data_version} is not 0 or 1")
        doc["data_version"] = self.data_version
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str, source: str = "<quorum-state>") -> QuorumStateFile:
        """Parse the file's text (only its first line counts, as in Kafka's ``FileQuorumStateStore``).

        Numbers are range-checked as Kafka's JSON converter reads them: ids and epochs are int32 (an epoch of
        2^31 is refused), ``appliedOffset`` int64.

        Raises
        ------
        MalformedFileError
            Not JSON, no ``data_version``, an unsupported version, or a missing, mistyped or out-of-range field.
        """
        lines = split_lines(text)
        line = lines[0] if lines else ""
        if not line:
            raise MalformedFileError("file ended prematurely", source=source, line=1)
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise MalformedFileError(f"not JSON: {exc}", source=source, line=1) from None
        if not isinstance(doc, dict):
            raise MalformedFileError("not a JSON object", source=source, line=1)
        if "data_version" not in doc:
            raise MalformedFileError("no data_version field", source=source, line=1)
        version = doc["data_version"]
        if version not in (0, 1) or isinstance(version, bool):
            raise MalformedFileError(f"data_version ({version}) is not within 0 and 1", source=source, line=1)

        def field(name: str, kind: type, bounds: tuple[int, int] = INT32) -> Any:
            if name not in doc:
                raise MalformedFileError(f"version {version} requires field {name!r}", source=source, line=1)
            value: Any = doc[name]
            if not isinstance(value, kind) or isinstance(value, bool):
                raise MalformedFileError(
                    f"field {name!r} is not a {kind.__name__}: {value!r}", source=source, line=1
                )
            if kind is int and not _in_range(value, bounds):
                bits = 32 if bounds == INT32 else 64
                raise MalformedFileError(
                    f"field {name!r} is out of the range of an int{bits}: {value}", source=source, line=1
                )
            return value

        common = {
            "leader_id": field("leaderId", int),
            "leader_epoch": field("leaderEpoch", int),
            "voted_id": field("votedId", int),
        }
        if version == 1:
            directory = field("votedDirectoryId", str)
            if not is_uuid(directory):
                raise MalformedFileError(
                    f"field 'votedDirectoryId' is not a uuid: {directory!r}", source=source, line=1
                )
            return cls(data_version=1, voted_directory_id=directory, **common)
        voters = doc.get("currentVoters", "missing")
        if voters == "missing":
            raise MalformedFileError("version 0 requires field 'currentVoters'", source=source, line=1)
        if voters is not None:
            ids = (
                [v.get("voterId") if isinstance(v, dict) else None for v in voters]
                if isinstance(voters, list)
                else [None]
            )
            if not all(_is_int32(i) for i in ids):
                raise MalformedFileError(f"bad currentVoters: {voters!r}", source=source, line=1)
            voters = tuple(ids)
        return cls(
            data_version=0,
            cluster_id=field("clusterId", str),
            applied_offset=field("appliedOffset", int, INT64),
            current_voters=voters,
            **common,
        )


def _in_range(value: Any, bounds: tuple[int, int]) -> bool:
    return bool(bounds[0] <= value <= bounds[1])


def _is_int32(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and INT32[0] <= value <= INT32[1]


def read_quorum_state(path: str | os.PathLike[str]) -> QuorumStateFile | None:
    """Read a ``quorum-state`` file; None if it does not exist.

    Raises
    ------
    FileAccessError
        The file exists but cannot be read (a directory, no permission).
    MalformedFileError
        Not UTF-8 (Kafka reads it as UTF-8), or as `QuorumStateFile.from_json`.
    """
    p = Path(path)
    try:
        data = read_file_bytes(p)
    except FileAccessError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            return None
        raise
    return QuorumStateFile.from_json(decode_utf8(data, str(p)), str(p))


def write_quorum_state(path: str | os.PathLike[str], state: QuorumStateFile, *, fsync: bool = True) -> None:
    """Write `state` through ``<path>.tmp`` and an atomic move, as Kafka does."""
    atomic_write(path, state.to_json().encode("utf-8"), tmp_suffix=".tmp", fsync=fsync)
