"""Helpers the generated codecs call: slow paths of varints, uuid conversion, error builders.

The generated functions inline the common cases (one-byte varints, fixed-width runs) and call these only
for the rare or failing ones, so these favour clarity over speed.
"""

from __future__ import annotations

import base64
import binascii
import struct

from kraftlake.protocol.errors import (
    InvalidFieldError,
    LengthPastEndError,
    MalformedVarintError,
    UnsupportedVersionError,
)

#: 16 raw bytes -> Kafka's string form; read directly (``.get``) by the generated decoders.
UUID_CACHE: dict[bytes, str] = {}
_UUID_CACHE = UUID_CACHE
_UUID_CACHE_MAX = 1 << 16
_UUID_BYTES_CACHE: dict[str, bytes] = {}

# Preallocated Structs for arrays of int32 of small sizes (the common replica lists).
INT32_ARRAYS: tuple[struct.Struct, ...] = tuple(struct.Struct(f">{n}i") for n in range(64))
UUID_ARRAYS: tuple[struct.Struct, ...] = tuple(struct.Struct("16s" * n) for n in range(64))
# One-byte uvarints as ready-made bytes.
SMALL_UVARINTS: tuple[bytes, ...] = tuple(bytes((n,)) for n in range(128))


def int32_array(n: int) -> struct.Struct:
    """The Struct for ``n`` big-endian int32 values."""
    return INT32_ARRAYS[n] if n < 64 else struct.Struct(f">{n}i")


def uuid_array(n: int) -> struct.Struct:
    """The Struct for ``n`` raw uuids."""
    return UUID_ARRAYS[n] if n < 64 else struct.Struct("16s" * n)


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read an unsigned varint starting at ``pos`` (Kafka's ``readUnsignedVarint``: at most 5 bytes)."""
    start = pos
    value = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise LengthPastEndError(f"varint runs past the end of the value ({len(buf)} bytes)", start)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise MalformedVarintError("unsigned varint is longer than 5 bytes", start)


def uvarint_bytes(value: int) -> bytes:
    """Encode an unsigned 32-bit varint."""
    if value < 128:
        return SMALL_UVARINTS[value]
    if value >> 32:
        raise InvalidFieldError(f"value {value} does not fit an unsigned 32-bit varint")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def uuid_str(raw: bytes) -> str:
    """16 bytes -> Kafka's ``Uuid.toString`` (base64url, unpadded, 22 characters)."""
    s = _UUID_CACHE.get(raw)
    if s is None:
        s = base64.urlsafe_b64encode(raw)[:22].decode("ascii")
        if len(_UUID_CACHE) < _UUID_CACHE_MAX:
            _UUID_CACHE[raw] = s
    return s


def uuid_bytes(text: object, field: str) -> bytes:
    """Kafka's base64url uuid string -> 16 bytes (``Uuid.fromString``)."""
    raw = _UUID_BYTES_CACHE.get(text) if isinstance(text, str) else None
    if raw is not None:
        return raw
    if not isinstance(text, str) or len(text) != 22:
        raise InvalidFieldError(f"field {field}: {text!r} is not a 22-character base64url uuid")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError) as exc:
        raise InvalidFieldError(f"field {field}: {text!r} is not a base64url uuid") from exc
    if len(raw) != 16 or uuid_str(raw) != text:
        raise InvalidFieldError(f"field {field}: {text!r} is not a canonical base64url uuid")
    if len(_UUID_BYTES_CACHE) < _UUID_CACHE_MAX:
        _UUID_BYTES_CACHE[text] = raw
    return raw


def past_end(what: str, pos: int, need: int, end: int) -> LengthPastEndError:
    return LengthPastEndError(f"{what} needs {need} bytes but only {max(end - pos, 0)} remain", pos)


def null_in_non_nullable(what: str, pos: int) -> InvalidFieldError:
    return InvalidFieldError(f"non-nullable field {what} was serialized as null", pos)


def bad_string_length(what: str, pos: int, length: int, end: int) -> InvalidFieldError | LengthPastEndError:
    if length > 0x7FFF:
        return InvalidFieldError(f"string field {what} had invalid length {length}", pos)
    return past_end(f"string field {what}", pos, length, end)


def tagged_size_mismatch(tag: int, start: int, size: int, used: int) -> InvalidFieldError:
    return InvalidFieldError(f"tagged field {tag} declared {size} bytes but its value used {used}", start)


def write_unsupported(message: str, field: str, version: int) -> UnsupportedVersionError:
    return UnsupportedVersionError(
        f"attempted to write a non-default {field} at version {version} of {message}"
    )


def write_null(field: str) -> InvalidFieldError:
    return InvalidFieldError(f"non-nullable field {field} was serialized as null")


def encode_string(value: object, field: str) -> bytes:
    if not isinstance(value, str):
        raise InvalidFieldError(f"field {field}: expected str, got {type(value).__name__}")
    raw = value.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise InvalidFieldError(f"string field {field} is {len(raw)} bytes, more than 32767")
    return raw


def utf8_error_position(value: bytes, exc: UnicodeDecodeError) -> int:
    """Where in ``value`` a failed string decode went wrong (the generated code decodes a slice)."""
    obj = exc.object
    start = value.find(obj) if isinstance(obj, bytes) and obj else -1
    return (start if start >= 0 else 0) + exc.start
