"""Kafka's variable-length integers: unsigned LEB128 varints and zigzag-encoded signed varints/varlongs."""

from __future__ import annotations


class VarintError(ValueError):
    """Raised when a varint is cut short or longer than its type allows; callers wrap it in a located error."""


def read_uvarint(buf: bytes, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Decode an unsigned varint at `pos`; return ``(value, next_pos)``.

    `max_bytes` is 5 for a 32-bit varint and 10 for a 64-bit varlong, as in Kafka's ByteUtils.
    """
    value = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise VarintError("varint runs past the end of the data")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise VarintError(f"varint longer than {max_bytes} bytes")


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode a zigzag signed 32-bit varint at `pos`; return ``(value, next_pos)``."""
    v, pos = read_uvarint(buf, pos, 5)
    return (v >> 1) ^ -(v & 1), pos


def read_varlong(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode a zigzag signed 64-bit varlong at `pos`; return ``(value, next_pos)``."""
    v, pos = read_uvarint(buf, pos, 10)
    return (v >> 1) ^ -(v & 1), pos


_SMALL = [bytes([i]) for i in range(128)]


def encode_uvarint(value: int) -> bytes:
    """Encode a non-negative integer as an unsigned varint."""
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Encode a signed 32-bit integer as a zigzag varint."""
    return encode_uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """Encode a signed 64-bit integer as a zigzag varlong."""
    return encode_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)
