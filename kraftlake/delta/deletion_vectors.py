"""The rows a Delta deletion vector marks deleted, read as Delta's protocol stores them.

A descriptor (``add.deletionVector``) names where the vector is: ``storageType`` ``u`` (a file
``deletion_vector_<uuid>.bin`` in the table's directory, under an optional prefix; the uuid is the last 20
characters of ``pathOrInlineDv``, Z85-encoded), ``p`` (an absolute path) or ``i`` (the vector itself, Z85-encoded,
in ``pathOrInlineDv``). In a file, the vector starts at ``offset``: its size (4 bytes, big-endian), the vector,
its CRC-32 (4 bytes, big-endian). The vector is a magic number (4 bytes, little-endian) and a
``RoaringBitmapArray`` in the portable format: the number of 32-bit bitmaps (8 bytes, little-endian), then each
one's high 32 bits (4 bytes) and the bitmap in Roaring's portable serialization (array, bitmap and run
containers).

Anything else (another magic number, a path outside the table, a vector whose CRC or cardinality does not match
its descriptor) raises: :class:`~.append.Unsupported` for what is valid but not read here,
:class:`~.append.DeltaAppendError` for a vector that is corrupt.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np

from kraftlake.delta.append import DeltaAppendError, Unsupported

#: ``RoaringBitmapArray`` in the portable format (Delta's ``PortableRoaringBitmapArraySerializationFormat``).
PORTABLE_MAGIC = 1681511377
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}
_SERIAL_COOKIE = 12347
_SERIAL_COOKIE_NO_RUN = 12346
_NO_OFFSET_THRESHOLD = 4
_ARRAY_MAX = 4096


def z85_decode(text: str, size: int | None = None) -> bytes:
    """Z85 (ZeroMQ's base-85) to bytes, ``size`` of them (the text pads the last group)."""
    if len(text) % 5:
        raise DeltaAppendError(f"Z85 text of {len(text)} characters (not a multiple of 5)")
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for c in text[i : i + 5]:
            digit = _Z85_VALUE.get(c)
            if digit is None:
                raise DeltaAppendError(f"Z85 text holds {c!r}")
            value = value * 85 + digit
        if value > 0xFFFFFFFF:
            raise DeltaAppendError(f"Z85 group {text[i : i + 5]!r} is out of range")
        out += value.to_bytes(4, "big")
    return bytes(out if size is None else out[:size])


def vector_bytes(table: Path, descriptor: dict[str, Any]) -> bytes:
    """The serialized vector (magic number and bitmap) that ``descriptor`` names."""
    kind = descriptor.get("storageType")
    where = str(descriptor.get("pathOrInlineDv", ""))
    size = int(descriptor.get("sizeInBytes", 0))
    if kind == "i":
        return z85_decode(where, size)
    if kind != "u":
        raise Unsupported(f"{table}: a deletion vector stored as {kind!r}")
    if len(where) < 20:
        raise DeltaAppendError(f"{table}: deletion vector path {where!r} is too short for a uuid")
    uuid = z85_decode(where[-20:]).hex()
    name = f"deletion_vector_{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:]}.bin"
    path = table / unquote(where[:-20]) / name
    offset = int(descriptor.get("offset") or 0)
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            head = f.read(4)
            data = f.read(size)
            crc = f.read(4)
    except OSError as exc:
        raise DeltaAppendError(f"{path}: cannot read the deletion vector: {exc}") from exc
    if len(head) < 4 or len(data) < size or len(crc) < 4:
        raise DeltaAppendError(f"{path}: the deletion vector at byte {offset} is cut short")
    if struct.unpack(">i", head)[0] != size:
        raise DeltaAppendError(f"{path}: the deletion vector at byte {offset} is not {size} bytes long")
    if struct.unpack(">I", crc)[0] != zlib.crc32(data):
        raise DeltaAppendError(f"{path}: the deletion vector at byte {offset} fails its CRC")
    return data


def deleted_rows(table: Path, descriptor: dict[str, Any]) -> np.ndarray:
    """The row indexes (``uint64``) the deletion vector of ``descriptor`` marks deleted."""
    data = vector_bytes(table, descriptor)
    where = f"{table}: deletion vector {descriptor.get('pathOrInlineDv')!r}"
    try:
        rows = _portable(data)
    except (struct.error, ValueError, IndexError) as exc:
        raise DeltaAppendError(f"{where} is corrupt: {exc}") from exc
    expected = descriptor.get("cardinality")
    if expected is not None and len(rows) != int(expected):
        raise DeltaAppendError(f"{where} holds {len(rows)} rows, its descriptor says {expected}")
    return rows


def _portable(data: bytes) -> np.ndarray:
    (magic,) = struct.unpack_from("<i", data, 0)
    if magic != PORTABLE_MAGIC:
        raise Unsupported(
            f"deletion vector format {magic} (only the portable one, {PORTABLE_MAGIC}, is read)"
        )
    (count,) = struct.unpack_from("<q", data, 4)
    pos = 12
    parts = []
    for _ in range(count):
        (high,) = struct.unpack_from("<I", data, pos)
        low, pos = _roaring32(data, pos + 4)
        parts.append((np.uint64(high) << np.uint64(32)) | low.astype(np.uint64))
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def _roaring32(data: bytes, pos: int) -> tuple[np.ndarray, int]:
    """One 32-bit Roaring bitmap in the portable serialization at ``pos``: its values and the end position."""
    (cookie,) = struct.unpack_from("<I", data, pos)
    pos += 4
    runs = b""
    if cookie & 0xFFFF == _SERIAL_COOKIE:
        size = (cookie >> 16) + 1
        runs = data[pos : pos + (size + 7) // 8]
        pos += (size + 7) // 8
        offsets = size >= _NO_OFFSET_THRESHOLD
    elif cookie == _SERIAL_COOKIE_NO_RUN:
        (size,) = struct.unpack_from("<I", data, pos)
        pos += 4
        offsets = True
    else:
        raise ValueError(f"unknown Roaring cookie {cookie}")
    header = np.frombuffer(data, "<u2", 2 * size, pos).reshape(size, 2) if size else np.zeros((0, 2), "<u2")
    pos += 4 * size
    if offsets:
        pos += 4 * size
    values = []
    for i in range(size):
        key = np.uint32(header[i, 0]) << np.uint32(16)
        cardinality = int(header[i, 1]) + 1
        if runs and runs[i // 8] >> (i % 8) & 1:
            (n,) = struct.unpack_from("<H", data, pos)
            pairs = np.frombuffer(data, "<u2", 2 * n, pos + 2).reshape(n, 2).astype(np.uint32)
            pos += 2 + 4 * n
            low = np.concatenate([np.arange(s, s + length + 1, dtype=np.uint32) for s, length in pairs])
        elif cardinality <= _ARRAY_MAX:
            low = np.frombuffer(data, "<u2", cardinality, pos).astype(np.uint32)
            pos += 2 * cardinality
        else:
            bits = np.unpackbits(np.frombuffer(data, np.uint8, 8192, pos), bitorder="little")
            low = np.flatnonzero(bits).astype(np.uint32)
            pos += 8192
        if len(low) != cardinality:
            raise ValueError(f"container {i} holds {len(low)} values, its header says {cardinality}")
        values.append(key | low)
    return (np.concatenate(values) if values else np.zeros(0, np.uint32)), pos
