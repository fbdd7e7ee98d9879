"""A fast writer of KRaft data batches for the service's log (byte-identical to `build_data_batch`).

The leader and every follower encode each batch they append, so this is on the hot path of replication:
varints of record sizes and value lengths come from tables instead of being computed per record, and the
record prefix (attributes, timestamp delta, offset delta, null key) from a table. Batches
with more records than the table, or very large values, go to `kraftlake.logformat.build_data_batch`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from kraftlake.logformat import build_data_batch
from kraftlake.logformat.batch import (
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
)
from kraftlake.logformat.varint import encode_varint

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
_VARINTS: tuple[bytes, ...] = tuple(encode_varint(i) for i in range(1 << 15))
_MAX_VALUE = (1 << 15) - 32
# attributes 0, timestamp delta 0, offset delta i, key length -1 (null)
KRAFT_RECORD_PREFIXES: tuple[bytes, ...] = tuple(b"\x00\x00" + encode_varint(i) + b"\x01" for i in range(8192))


def kraft_data_batch(base_offset: int, epoch: int, timestamp_ms: int, values: Sequence[bytes]) -> bytes:
    """A batch of record values as KRaft writes it (CreateTime, null keys, no headers, no compression)."""
    n = len(values)
    if n == 0 or n > len(KRAFT_RECORD_PREFIXES) or max(map(len, values)) > _MAX_VALUE:
        return build_data_batch(base_offset, epoch, timestamp_ms, values)
    varints, prefixes = _VARINTS, KRAFT_RECORD_PREFIXES
    parts: list[bytes] = []
    add = parts.append
    for i, value in enumerate(values):
        prefix = prefixes[i]
        vl = varints[len(value)]
        add(varints[len(prefix) + len(vl) + len(value) + 1])
        add(prefix)
        add(vl)
        add(value)
        add(b"\x00")
    body = b"".join(parts)
    head = bytearray(_HEADER.pack(base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body), epoch, MAGIC, 0, 0, n - 1,
                                  timestamp_ms, timestamp_ms, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, n))
    crc = crc32c.crc32c(body, crc32c.crc32c(memoryview(head)[CRC_START:]))
    _CRC.pack_into(head, 17, crc)
    return bytes(head) + body
