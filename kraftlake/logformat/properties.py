"""``meta.properties`` (Java properties) and ``partition.metadata`` (``version: 0`` / ``topic_id: ...``)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kraftlake.logformat.atomic import atomic_write
from kraftlake.logformat.errors import MalformedFileError

META_PROPERTIES_FILE = "meta.properties"
PARTITION_METADATA_FILE = "partition.metadata"
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
"""Kafka's ``Uuid.METADATA_TOPIC_ID``, the topic id of ``__cluster_metadata``."""

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_java_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: comments, ``=``/``:``/space separators, escapes, continuations."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        # an odd number of trailing backslashes continues the line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    out: dict[str, str] = {}
    for line in logical:
        key_chars: list[str] = []
        i = 0
        n = len(line)
        while i < n:
            c = line[i]
            if c == "\\" and i + 1 < n:
                key_chars.append(line[i : i + 2])
                i += 2
                continue
            if c in "=: \t\f":
                break
            key_chars.append(c)
            i += 1
        # skip whitespace, then one separator, then whitespace
        while i < n and line[i] in " \t\f":
            i += 1
        if i < n and line[i] in "=:":
            i += 1
        while i < n and line[i] in " \t\f":
            i += 1
        out[_unescape("".join(key_chars))] = _unescape(line[i:])
    return out


def _unescape(s: str) -> str:
    def repl(m: re.Match[str]) -> str:
        body = m.group(1)
        if body.startswith("u"):
            return chr(int(body[1:], 16))
        return _ESCAPES.get(body, body)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", repl, s)


def _escape(s: str, is_key: bool) -> str:
    out = []
    for i, c in enumerate(s):
        if c == "\\":
            out.append("\\\\")
        elif c in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[c])
        elif c in "=:#!":
            out.append("\\" + c)
        elif c == " " and (is_key or i == 0):
            out.append("\\ ")
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return "".join(out)


def format_java_properties(props: Mapping[str, str], comment: str | None = "") -> str:
    """Java ``Properties.store`` text: the comment line, a date line, then ``key=value`` lines."""
    lines = []
    if comment is not None:
        lines.append("#" + comment)
    lines.append("#" + time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime()))
    lines += [f"{_escape(k, True)}={_escape(v, False)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class MetaProperties:
    """A log directory's ``meta.properties`` (version 1 in KRaft mode)."""

    cluster_id: str | None
    node_id: int | None
    version: int = 1
    directory_id: str | None = None
    extra: tuple[tuple[str, str], ...] = ()

    def to_properties(self) -> dict[str, str]:
        """The key/value pairs, in the order Kafka writes them."""
        props: dict[str, str] = {}
        if self.node_id is not None:
            props["node.id"] = str(self.node_id)
        if self.directory_id is not None:
            props["directory.id"] = self.directory_id
        props["version"] = str(self.version)
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        props.update(dict(self.extra))
        return props


def read_meta_properties(path: str | os.PathLike[str]) -> MetaProperties:
    """Read a ``meta.properties`` file.

    Raises
    ------
    MalformedFileError
        No or a bad ``version``, or a non-integer ``node.id``.
    """
    props = parse_java_properties(Path(path).read_text(encoding="latin-1"))
    try:
        version = int(props.pop("version"))
        node = props.pop("node.id", None)
        node_id = int(node) if node is not None else None
    except (KeyError, ValueError) as exc:
        raise MalformedFileError(f"bad or missing version/node.id: {exc}", source=str(path)) from None
    return MetaProperties(
        cluster_id=props.pop("cluster.id", None),
        node_id=node_id,
        version=version,
        directory_id=props.pop("directory.id", None),
        extra=tuple(sorted(props.items())),
    )


def write_meta_properties(path: str | os.PathLike[str], meta: MetaProperties, *, fsync: bool = True) -> None:
    """Write ``meta.properties`` atomically."""
    atomic_write(path, format_java_properties(meta.to_properties()).encode("latin-1"), fsync=fsync)


def read_partition_metadata(path: str | os.PathLike[str]) -> tuple[int, str]:
    """``(version, topic_id)`` of a ``partition.metadata`` file.

    Raises
    ------
    MalformedFileError
        If the file is not ``version: 0`` then ``topic_id: <id>``.
    """
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if len(lines) < 2 or not lines[0].startswith("version: ") or not lines[1].startswith("topic_id: "):
        raise MalformedFileError("expected 'version: N' and 'topic_id: ID' lines", source=str(path))
    try:
        version = int(lines[0][len("version: ") :])
    except ValueError:
        raise MalformedFileError(f"bad version line {lines[0]!r}", source=str(path), position=1) from None
    if version != 0:
        raise MalformedFileError(f"unsupported partition.metadata version {version}", source=str(path))
    return version, lines[1][len("topic_id: ") :].strip()


def write_partition_metadata(
    path: str | os.PathLike[str], topic_id: str = METADATA_TOPIC_ID, *, fsync: bool = True
) -> None:
    """Write ``partition.metadata`` (no trailing newline, as Kafka's PartitionMetadataFile)."""
    atomic_write(path, f"version: 0\ntopic_id: {topic_id}".encode(), fsync=fsync)
