"""What counts as activity for ``--idle-stop``: a committed metadata record other than a NoOpRecord.

A Kafka controller appends a NoOpRecord every 500 ms (``metadata.max.idle.interval.ms``), so a live quorum is
never silent; "idle" therefore means that nothing but NoOps (and control records: leader changes) was
committed for that long. `follow` and `stream --source kafka` both use this meaning.
"""

from __future__ import annotations

from collections.abc import Iterable

from kraftlake.follow.observer import FetchedBatch
from kraftlake.logformat.batch import decode_batch

NOOP_API_KEY = 20
"""NoOpRecord's apiKey."""


def _api_key(value: bytes) -> int:
    """The apiKey of a metadata record value: the uvarint after the uvarint frame version."""
    pos = 0
    while value[pos] & 0x80:  # the frame version
        pos += 1
    pos += 1
    key = shift = 0
    while True:
        b = value[pos]
        key |= (b & 0x7F) << shift
        if not b & 0x80:
            return key
        pos += 1
        shift += 7


def holds_activity(batches: Iterable[FetchedBatch]) -> bool:
    """Whether any of the (CRC-checked) batches holds a metadata record other than a NoOpRecord."""
    for fetched in batches:
        batch = decode_batch(fetched.data, verify_crc=False)
        if batch.is_control:
            continue
        values = batch.kraft_values()
        if values is None:
            values = [r.value for r in batch.records if r.value is not None]
        if any(v and _api_key(v) != NOOP_API_KEY for v in values):
            return True
    return False
