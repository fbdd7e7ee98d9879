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
from kraftlake.logformat.errors import MalformedFileError

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
        """Parse the file's text (only its first line counts, as in Kafka).

        Raises
        ------
        MalformedFileError
            Not JSON, no ``data_version``, an unsupported version, or a missing or mistyped field.
        """
        line = text.split("\n", 1)[0]
        if not line:
            raise MalformedFileError("file ended prematurely", source=source)
        try:
            doc = json.loads(line)
        except ValueError as exc:
            raise MalformedFileError(f"not JSON: {exc}", source=source) from exc
        if not isinstance(doc, dict):
            raise MalformedFileError("not a JSON object", source=source)
        if "data_version" not in doc:
            raise MalformedFileError("no data_version field", source=source)
        version = doc["data_version"]
        if version not in (0, 1) or isinstance(version, bool):
            raise MalformedFileError(f"data_version ({version}) is not within 0 and 1", source=source)

        def field(name: str, kind: type) -> Any:
            if name not in doc:
                raise MalformedFileError(f"version {version} requires field {name!r}", source=source)
            value = doc[name]
            if not isinstance(value, kind) or isinstance(value, bool):
                raise MalformedFileError(f"field {name!r} is not a {kind.__name__}: {value!r}", source=source)
            return value

        common = {
            "leader_id": field("leaderId", int),
            "leader_epoch": field("leaderEpoch", int),
            "voted_id": field("votedId", int),
        }
        if version == 1:
            return cls(data_version=1, voted_directory_id=field("votedDirectoryId", str), **common)
        voters = doc.get("currentVoters", "missing")
        if voters == "missing":
            raise MalformedFileError("version 0 requires field 'currentVoters'", source=source)
        if voters is not None:
            if not isinstance(voters, list) or not all(
                isinstance(v, dict) and isinstance(v.get("voterId"), int) for v in voters
            ):
                raise MalformedFileError(f"bad currentVoters: {voters!r}", source=source)
            voters = tuple(v["voterId"] for v in voters)
        return cls(
            data_version=0,
            cluster_id=field("clusterId", str),
            applied_offset=field("appliedOffset", int),
            current_voters=voters,
            **common,
        )


def read_quorum_state(path: str | os.PathLike[str]) -> QuorumStateFile | None:
    """Read a ``quorum-state`` file; None if it does not exist."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return QuorumStateFile.from_json(text, str(p))


def write_quorum_state(path: str | os.PathLike[str], state: QuorumStateFile, *, fsync: bool = True) -> None:
    """Write `state` through ``<path>.tmp`` and an atomic move, as Kafka does."""
    atomic_write(path, state.to_json().encode("utf-8"), tmp_suffix=".tmp", fsync=fsync)
