"""Fast paths for KRaft data batches on the service's replication path.

`kraft_data_batch` writes a batch (byte-identical to `build_data_batch`): the leader encodes each batch it
appends, so varints of record sizes and value lengths come from tables instead of being computed per record, and
the record prefix (attributes, timestamp delta, offset delta, null key) from a table. Batches with more records
than the table, or very large values, go to `kraftlake.logformat.build_data_batch`.

`uniform_values` reads the values of a batch whose values all have one length (Kafka's TestRaftServer and the
raft benchmark write such records) without a per-record loop: every framing byte is checked column by column
with C-level slicing, and the values are sliced at a fixed stride. Other batches return None (the caller then
uses `RecordBatch.kraft_values`, which walks the records one by one).
"""

from __future__ import annotations

from collections.abc import Sequence

import crc32c

from kraftlake.logformat import build_data_batch
from kraftlake.logformat.framing import (
    CRC,
    CRC_AT,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
)
from kraftlake.logformat.record import KRAFT_PREFIXES
from kraftlake.logformat.varint import encode_varint

_VARINTS: tuple[bytes, ...] = tuple(encode_varint(i) for i in range(1 << 15))
_MAX_VALUE = (1 << 15) - 32


def kraft_data_batch(base_offset: int, epoch: int, timestamp_ms: int, values: Sequence[bytes]) -> bytes:
    """A batch of record values as KRaft writes it (CreateTime, null keys, no headers, no compression)."""
    n = len(values)
    if n == 0 or n > len(KRAFT_PREFIXES) or max(map(len, values)) > _MAX_VALUE:
        return build_data_batch(base_offset, epoch, timestamp_ms, values)
    varints, prefixes = _VARINTS, KRAFT_PREFIXES
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
    head = bytearray(
        HEADER.pack(
            base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(body),
            epoch,
            MAGIC,
            0,
            0,
            n - 1,
            timestamp_ms,
            timestamp_ms,
            NO_PRODUCER_ID,
            NO_PRODUCER_EPOCH,
            NO_SEQUENCE,
            n,
        )
    )
    crc = crc32c.crc32c(body, crc32c.crc32c(memoryview(head)[CRC_START:]))
    CRC.pack_into(head, CRC_AT, crc)
    return bytes(head) + body


_DELTA1 = bytes(2 * i for i in range(64))  # zigzag offset deltas 0..63: one byte each
_DELTA2_LOW = bytes(((2 * i) & 0x7F) | 0x80 for i in range(64, 8192))  # 64..8191: two bytes each
_DELTA2_HIGH = bytes((2 * i) >> 7 for i in range(64, 8192))
_ZONES = ((0, 64, 1), (64, 8192, 2))  # (first offset delta, end, bytes of its varint)


def uniform_values(raw: bytes, count: int) -> list[bytes] | None:
    """The `count` values of the uncompressed data batch `raw` if they all have one length and every record
    is shaped as KRaft writes it (attributes 0, timestamp delta 0, offset delta i, null key, no headers); else
    None. Every byte outside the values is checked."""
    data = raw
    if count < 1 or count > 8192 or len(data) < HEADER_SIZE + 7:
        return None
    pos = HEADER_SIZE
    first = data[pos]
    if first >= 0x80:
        if data[pos + 1] >= 0x80:
            return None
        first = (first & 0x7F) | (data[pos + 1] << 7)
    rec0 = first >> 1
    # record 0 after its length: 00 00 00 01 <value length> <value> 00
    n = -1
    for vls in (1, 2, 3):
        cand = rec0 - 5 - vls
        if cand >= 0 and len(encode_varint(cand)) == vls:
            n = cand
            break
    if first & 1 or n < 0:
        return None
    tail = b"\x01" + encode_varint(n)
    out: list[bytes] = []
    for lo, hi, dls in _ZONES:
        if lo >= count:
            break
        hi = min(hi, count)
        m = hi - lo
        rec = 2 + dls + len(tail) + n + 1
        head = encode_varint(rec) + b"\x00\x00"
        stride = len(head) - 2 + rec
        end = pos + stride * m
        if end > len(data):
            return None
        k = pos
        for b in head:
            if data[k:end:stride] != bytes((b,)) * m:
                return None
            k += 1
        if dls == 1:
            if data[k:end:stride] != _DELTA1[lo:hi]:
                return None
        elif (
            data[k:end:stride] != _DELTA2_LOW[lo - 64 : hi - 64]
            or data[k + 1 : end : stride] != _DELTA2_HIGH[lo - 64 : hi - 64]
        ):
            return None
        k += dls
        for b in tail:
            if data[k:end:stride] != bytes((b,)) * m:
                return None
            k += 1
        if data[k + n : end : stride] != bytes(m):  # the headers count of every record: 0
            return None
        out += [data[s : s + n] for s in range(k, end, stride)]
        pos = end
    return out if pos == len(data) else None
