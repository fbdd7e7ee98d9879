"""One record of a v2 batch (``DefaultRecord``) and the control records' key.

Record layout: varint length | int8 attributes | varlong timestampDelta | varint offsetDelta |
varint keyLength (-1 = null) | key | varint valueLength (-1 = null) | value | varint headerCount |
headers (varint keyLength | utf-8 key | varint valueLength | value). Varints are zigzag-encoded.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from kraftlake.logformat.varint import encode_varint


class TimestampType(enum.IntEnum):
    """Bit 3 of the attributes."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(enum.IntEnum):
    """The type in a control record's 4-byte key (Kafka's ``ControlRecordType``)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class Record(NamedTuple):
    """One record of a batch, with its absolute offset and timestamp (an immutable named tuple).

    Attributes
    ----------
    offset : int
        batch base offset + offset delta.
    timestamp : int
        batch base timestamp + timestamp delta (milliseconds).
    key, value : bytes or None
    headers : tuple of (str, bytes or None)
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def control_record_type(key: bytes | None) -> int:
    """The control type held in a control record's key (version int16, type int16).

    Raises
    ------
    ValueError
        If the key is shorter than 4 bytes.
    """
    if key is None or len(key) < 4:
        raise ValueError(f"a control record key has 4 bytes, got {key!r}")
    return int.from_bytes(key[2:4], "big", signed=True)


def control_record_key(control_type: int, version: int = 0) -> bytes:
    """The 4-byte key of a control record of `control_type`."""
    return struct.pack(">hh", version, control_type)


# Record i of a KRaft data batch starts (after its length) with attributes 0, timestamp delta 0, offset delta i
# and a null key: these exact bytes (4 of them below i = 64, 5 below 8192). Batches hold at most a few thousand
# records; longer ones use the general loop. `bytes.startswith(prefix, pos)` compares them in place: no slice.
KRAFT_PREFIXES: tuple[bytes, ...] = tuple(b"\x00\x00" + encode_varint(i) + b"\x01" for i in range(8192))
# The same with their lengths, for the framing loop to iterate instead of indexing and testing i < 64.
KRAFT_PREFIX_PAIRS: tuple[tuple[bytes, int], ...] = tuple((p, len(p)) for p in KRAFT_PREFIXES)
SMALL_VARINTS: tuple[bytes, ...] = tuple(encode_varint(n) for n in range(8192))
"""The varints of 0..8191, for writers that encode lengths and offset deltas by the million."""

# The smallest record v2: one byte each for its length, attributes, timestamp delta, offset delta, key length,
# value length and header count.
MIN_RECORD_SIZE = 7
