"""``meta.properties`` (Java properties) and ``partition.metadata`` (``version: 0`` / ``topic_id: ...``)."""

from __future__ import annotations

import base64
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from kraftlake.logformat.atomic import atomic_write
from kraftlake.logformat.errors import MalformedFileError
from kraftlake.logformat.text import (
    java_int,
    parse_java_int,
    read_file_bytes,
    read_text_lines,
    split_fields,
    split_lines,
)

META_PROPERTIES_FILE = "meta.properties"
PARTITION_METADATA_FILE = "partition.metadata"
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
"""Kafka's ``Uuid.METADATA_TOPIC_ID``, the topic id of ``__cluster_metadata``."""

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}", re.ASCII)
_BASE64URL = re.compile(r"[A-Za-z0-9_-]{22}(==)?", re.ASCII)


def parse_java_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: comments, ``=``/``:``/space separators, escapes, continuations."""
    logical: list[str] = []
    pending = ""
    for raw in split_lines(text):  # Java's LineReader: \n, \r, \r\n; leading blanks are ' ', \t, \f
        line = raw.lstrip(" \t\f")
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
            if _HEX4.fullmatch(body, 1) is None:  # Properties.load: "Malformed \\uxxxx encoding."
                raise ValueError(f"malformed \\uxxxx escape {m.group(0)!r}")
            return chr(int(body[1:], 16))
        return _ESCAPES.get(body, body)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|u.{0,4}|.)", repl, s)


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
    """Read a ``meta.properties`` file (ISO-8859-1, as ``Properties.load`` reads it).

    Raises
    ------
    FileAccessError
        The file cannot be read.
    MalformedFileError
        A malformed ``\\uxxxx`` escape, no or a bad ``version``, a ``node.id`` that is not a 32-bit integer
        (``Integer.parseInt``), or a ``directory.id`` that is not a uuid.
    """
    source = str(path)
    try:
        props = parse_java_properties(read_file_bytes(path).decode("latin-1"))
    except ValueError as exc:
        raise MalformedFileError(str(exc), source=source) from None
    if "version" not in props:
        raise MalformedFileError("no version", source=source)
    raw_version = props.pop("version")
    version = parse_java_int(raw_version)
    if version is None:
        raise MalformedFileError(f"version {raw_version!r} is not a 32-bit integer", source=source)
    node = props.pop("node.id", None)
    node_id = None if node is None else parse_java_int(node)
    if node is not None and node_id is None:
        raise MalformedFileError(f"node.id {node!r} is not a 32-bit integer", source=source)
    directory_id = props.pop("directory.id", None)
    if directory_id is not None and not is_uuid(directory_id):
        raise MalformedFileError(f"directory.id {directory_id!r} is not a uuid", source=source)
    return MetaProperties(
        cluster_id=props.pop("cluster.id", None),
        node_id=node_id,
        version=version,
        directory_id=directory_id,
        extra=tuple(sorted(props.items())),
    )


def write_meta_properties(path: str | os.PathLike[str], meta: MetaProperties, *, fsync: bool = True) -> None:
    """Write ``meta.properties`` atomically."""
    atomic_write(path, format_java_properties(meta.to_properties()).encode("latin-1"), fsync=fsync)


def read_partition_metadata(path: str | os.PathLike[str]) -> tuple[int, str]:
    """``(version, topic_id)`` of a ``partition.metadata`` file (Kafka's ``PartitionMetadataReadBuffer``).

    Raises
    ------
    FileAccessError
        The file cannot be read.
    MalformedFileError
        Not UTF-8, not ``version: 0`` then ``topic_id: <uuid>`` (naming the line), or the zero uuid.
    """
    source = str(path)
    lines = read_text_lines(path)
    if not lines or not lines[0].startswith("version: ") or len(split_fields(lines[0])) != 2:
        raise MalformedFileError(
            f"expected 'version: N', got {lines[0] if lines else ''!r}", source=source, line=1
        )
    version = java_int(split_fields(lines[0])[1], source, 1, "version")
    if version != 0:
        raise MalformedFileError(f"unsupported partition.metadata version {version}", source=source, line=1)
    if len(lines) < 2 or not lines[1].startswith("topic_id: ") or len(split_fields(lines[1])) != 2:
        raise MalformedFileError(
            f"expected 'topic_id: ID', got {lines[1] if len(lines) > 1 else ''!r}", source=source, line=2
        )
    topic_id = split_fields(lines[1])[1]
    if not is_uuid(topic_id):
        raise MalformedFileError(f"topic id {topic_id!r} is not a uuid", source=source, line=2)
    if topic_id == "AAAAAAAAAAAAAAAAAAAAAA":
        raise MalformedFileError("invalid topic id (the zero uuid)", source=source, line=2)
    return version, topic_id


def is_uuid(text: str) -> bool:
    """Whether ``text`` is a uuid as Kafka's ``Uuid.fromString`` reads it: base64url of 16 bytes."""
    if len(text) not in (22, 24) or not _BASE64URL.fullmatch(text):
        return False
    try:
        return len(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))) == 16
    except ValueError:
        return False


def write_partition_metadata(
    path: str | os.PathLike[str], topic_id: str = METADATA_TOPIC_ID, *, fsync: bool = True
) -> None:
    """Write ``partition.metadata`` (no trailing newline, as Kafka's PartitionMetadataFile)."""
    atomic_write(path, f"version: 0\ntopic_id: {topic_id}".encode(), fsync=fsync)
