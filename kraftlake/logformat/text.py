"""Reading Kafka's small text files as Kafka's Java readers do, with typed errors naming the file and line.

``quorum-state``, ``leader-epoch-checkpoint``, the log dir's offset checkpoints and ``partition.metadata`` are
read by Kafka through ``Files.newBufferedReader`` (UTF-8, malformed input refused), split into lines by
``BufferedReader.readLine`` (``\\n``, ``\\r`` or ``\\r\\n`` only, not Python's other line breaks), their fields
split on ``\\s+`` (ASCII whitespace) and their numbers parsed by ``Integer.parseInt`` / ``Long.parseLong``
(an optional sign and digits: no ``_``, no spaces, nothing out of range). ``meta.properties`` is read by
``Properties.load`` from ISO-8859-1 (every byte is a character).

One deliberate difference: ``Integer.parseInt`` also takes the decimal digits of other scripts (``"١٢"`` is 12);
Kafka never writes them, and here they are refused like any other non-digit.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from kraftlake.logformat.errors import FileAccessError, MalformedFileError

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")


def read_file_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a file.

    Raises
    ------
    FileAccessError
        If the file is missing, is a directory, or cannot be read.
    """
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise FileAccessError(f"cannot read: {exc.strerror or exc}", source=str(path)) from exc


def decode_utf8(data: bytes, source: str) -> str:
    """``data`` as UTF-8, refused (naming the line of the first bad byte) where Java's decoder refuses it.

    Raises
    ------
    MalformedFileError
        If ``data`` is not valid UTF-8; ``line`` is the line of the first bad byte.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise MalformedFileError(
            f"not UTF-8 (byte {exc.start} of the file: {exc.reason})", source=source, line=line
        ) from None


def read_text_lines(path: str | os.PathLike[str]) -> list[str]:
    """The lines of a UTF-8 text file as ``BufferedReader.readLine`` returns them (no trailing empty line).

    Raises
    ------
    FileAccessError, MalformedFileError
    """
    source = str(path)
    return split_lines(decode_utf8(read_file_bytes(path), source))


def split_lines(text: str) -> list[str]:
    """``text`` cut at ``\\n``, ``\\r`` and ``\\r\\n`` only; a final line break ends the last line."""
    if not text:
        return []
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def split_fields(line: str) -> list[str]:
    """Java's ``line.split("\\\\s+")``: leading whitespace gives an empty first field, trailing is dropped."""
    fields = _JAVA_WHITESPACE.split(line)
    while fields and fields[-1] == "":
        fields.pop()
    return fields


def parse_java_int(text: str, bounds: tuple[int, int] = INT32) -> int | None:
    """``text`` as ``Integer.parseInt`` (``bounds=INT32``) or ``Long.parseLong`` (``INT64``) reads it, or None
    where they throw (empty, spaces, ``_``, other characters, out of range; other scripts' digits too)."""
    if _JAVA_INTEGER.fullmatch(text) is None:
        return None
    value = int(text)
    lo, hi = bounds
    return value if lo <= value <= hi else None


def java_int(text: str, source: str, line: int, what: str, bounds: tuple[int, int] = INT32) -> int:
    """``parse_java_int`` or a `MalformedFileError` naming the file, the line and ``what`` was expected.

    Raises
    ------
    MalformedFileError
    """
    value = parse_java_int(text, bounds)
    if value is None:
        kind = "a 32-bit integer" if bounds == INT32 else "a 64-bit integer"
        raise MalformedFileError(f"{what} {text!r} is not {kind}", source=source, line=line)
    return value
