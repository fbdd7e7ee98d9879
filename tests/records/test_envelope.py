"""One envelope builder: the same rules for data and control records wherever they come from, and every decode
error naming its source, position and offset."""

from __future__ import annotations

import pytest

from kraftlake.logformat import build_control_batch, build_data_batch, read_batches
from kraftlake.protocol import messages as m
from kraftlake.protocol.control import ControlRecordType, encode_control_body
from kraftlake.records import (
    RecordDecodeError,
    control_envelope,
    data_envelope,
    decode_data_envelope,
    encode_metadata_record,
    iter_records,
    typed_control_envelope,
)
from kraftlake.service.controller_host import batch_records
from kraftlake.service.listener import Batch
from kraftlake.service.messages import CommittedEntry

_TOPIC = m.TopicRecord(name="t", topic_id="AAAAAAAAAAAAAAAAAAAAAQ")
_GOOD = encode_metadata_record(_TOPIC, 0)
_BAD = b"\x01\x02\x00\x05"  # TopicRecord v0 whose name runs past the value
_VOTER = m.LeaderChangeMessage.Voter(voter_id=1)
_LEADER_CHANGE = m.LeaderChangeMessage(version=0, leader_id=1, voters=(_VOTER,), granting_voters=(_VOTER,))


def test_data_envelopes_name_the_class_and_the_api_key() -> None:
    a = data_envelope(5, 2, 100, 4, _TOPIC, 0, _GOOD)
    b = decode_data_envelope(_GOOD, 5, 2, 100, 4, source="s", position=0)
    assert a == b
    assert (a.type, a.api_key, a.version, a.is_control) == ("TopicRecord", 2, 0, False)


@pytest.mark.parametrize(
    ("ctype", "name"),
    [(0, "ABORT"), (1, "COMMIT"), (99, "UNKNOWN(99)"), (-1, "UNKNOWN(-1)")],
)
def test_control_types_without_a_message_are_named_and_carry_no_record(ctype: int, name: str) -> None:
    e = control_envelope(ctype, b"\x00\x00", 7, 1, 100, 7, source="s", position=None)
    assert (e.type, e.api_key, e.version, e.record, e.is_control) == (name, ctype, 0, None, True)


def test_control_messages_are_decoded() -> None:
    body = encode_control_body(_LEADER_CHANGE)
    e = control_envelope(int(ControlRecordType.LEADER_CHANGE), body, 0, 1, 100, 0, source="s", position=0)
    assert e == typed_control_envelope(0, 1, 100, 0, _LEADER_CHANGE, body)
    assert (e.type, e.api_key, e.record) == ("LeaderChangeMessage", 2, _LEADER_CHANGE)


def _names(exc: RecordDecodeError, source: str, position: int | None, offset: int) -> None:
    assert (exc.source, exc.position, exc.offset) == (source, position, offset)
    assert source in str(exc) and f"offset {offset}" in str(exc)


def test_a_corrupt_value_in_a_file_names_source_position_and_offset() -> None:
    first = build_data_batch(0, 1, 100, [_GOOD, _GOOD])
    data = first + build_data_batch(2, 1, 100, [_GOOD, _BAD, _GOOD])
    with pytest.raises(RecordDecodeError) as info:
        list(iter_records(read_batches(data, "seg.log")))
    _names(info.value, "seg.log", len(first), 3)


def test_a_corrupt_control_body_in_a_file_names_source_position_and_offset() -> None:
    first = build_data_batch(0, 1, 100, [_GOOD])
    control = build_control_batch(1, 1, 100, [(int(ControlRecordType.LEADER_CHANGE), b"\x00\x05")])
    with pytest.raises(RecordDecodeError) as info:
        list(iter_records(read_batches(first + control, "seg.log")))
    _names(info.value, "seg.log", len(first), 1)


def test_a_corrupt_committed_entry_names_source_and_offset() -> None:
    good = CommittedEntry(10, 1, 100, False, _GOOD)
    batch = Batch(10, 1, 100, (good, CommittedEntry(11, 1, 100, False, _BAD)))
    with pytest.raises(RecordDecodeError) as info:
        batch_records(batch, "<node 1 log>")
    _names(info.value, "<node 1 log>", None, 11)
    marker = Batch(12, 1, 100, (CommittedEntry(12, 1, 100, True, b"\x00\x05", 2),))
    with pytest.raises(RecordDecodeError) as info:
        batch_records(marker, "<node 1 log>")
    _names(info.value, "<node 1 log>", None, 12)


def test_committed_markers_are_named_as_in_files() -> None:
    entries = (CommittedEntry(3, 1, 100, True, b"", 0), CommittedEntry(4, 1, 100, True, b"", 1))
    assert [r.type for r in batch_records(Batch(3, 1, 100, entries))] == ["ABORT", "COMMIT"]
