"""The Spark-side readers of committed records build their envelopes with `kraftlake.records.envelope`: a corrupt
record names its source and offset (no byte position: the records come from the service or a table, not a
file). No Spark session is started."""

from __future__ import annotations

import pytest

from kraftlake.protocol import messages as m
from kraftlake.records import RecordDecodeError, encode_metadata_record
from kraftlake.spark.service_source import entry_record
from kraftlake.warehouse.images import decoded as _decoded

_GOOD = encode_metadata_record(m.TopicRecord(name="t", topic_id="AAAAAAAAAAAAAAAAAAAAAQ"), 0)
_BAD = b"\x01\x02\x00\x05"  # TopicRecord v0 whose name runs past the value


def test_a_service_entry_names_source_and_offset() -> None:
    assert entry_record((4, 1, False, _GOOD, 100, 4, -1), "svc").type == "TopicRecord"
    with pytest.raises(RecordDecodeError) as info:
        entry_record((5, 1, False, _BAD, 100, 4, -1), "kraftlake-service h:1")
    assert (info.value.source, info.value.position, info.value.offset) == ("kraftlake-service h:1", None, 5)
    with pytest.raises(RecordDecodeError) as info:
        entry_record((6, 1, True, b"\x00\x05", 100, 6, 2), "svc")
    assert (info.value.source, info.value.offset) == ("svc", 6)
    assert entry_record((7, 1, True, b"", 100, 7, 1), "svc").type == "COMMIT"


def _row(offset: int, raw: bytes, is_control: bool = False, api_key: int = 2) -> dict[str, object]:
    return {
        "offset": offset,
        "epoch": 1,
        "timestamp": 100,
        "batch_offset": offset,
        "is_control": is_control,
        "type": "TopicRecord",
        "api_key": api_key,
        "version": 0,
        "raw": raw,
    }


def test_a_warehouse_row_names_source_and_offset() -> None:
    good = list(_decoded([_row(1, _GOOD), _row(2, b"", True, 1)], "metadata_log of w"))
    assert [(r.type, r.api_key) for r in good] == [("TopicRecord", 2), ("COMMIT", 1)]
    with pytest.raises(RecordDecodeError) as info:
        list(_decoded([_row(1, _GOOD), _row(2, _BAD)], "metadata_log of w"))
    assert (info.value.source, info.value.position, info.value.offset) == ("metadata_log of w", None, 2)
