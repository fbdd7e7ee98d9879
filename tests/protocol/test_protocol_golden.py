"""Golden bytes, worked out by hand from Kafka's message specs, and the typed errors of the codec."""

from __future__ import annotations

import pytest

from kraftlake.protocol import ProtocolError
from kraftlake.protocol.codec import decode_body, encode_body
from kraftlake.protocol.control import (
    ControlRecordType,
    decode_control_body,
    decode_control_key,
    encode_control_body,
    encode_control_key,
)
from kraftlake.protocol.errors import (
    FrameVersionError,
    GarbageAtEndError,
    InvalidFieldError,
    LengthPastEndError,
    MalformedVarintError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from kraftlake.protocol.messages import (
    MESSAGE_CLASSES,
    spec_of,
)
from kraftlake.records.serde import decode_metadata_record, encode_metadata_record

M = MESSAGE_CLASSES
TOPIC_ID = "v9meXjI1RVKB-NSvF0GXDA"
TOPIC_ID_HEX = "bfd99e5e3235455281f8d4af1741970c"


def test_uuid_is_kafka_base64url() -> None:
    assert bytes.fromhex(TOPIC_ID_HEX) == __import__("base64").urlsafe_b64decode(TOPIC_ID + "==")


def test_partition_change_record_v0_golden() -> None:
    rec = M["PartitionChangeRecord"](partition_id=3, topic_id=TOPIC_ID, isr=[1, 2], leader=2)
    expected = bytes.fromhex(
        "01"
        "05"
        "00"  # frame 1, apiKey 5, version 0
        "00000003"
        + TOPIC_ID_HEX  # PartitionId, TopicId
        + "02"  # two tagged fields, ascending tags; the defaults (Replicas null, LeaderRecoveryState -1 ...) omitted
        "00"
        "09"
        "03"
        "00000001"
        "00000002"  # tag 0 Isr: size 9, compact array of 2
        "01"
        "04"
        "00000002"  # tag 1 Leader: size 4
    )
    assert encode_metadata_record(rec, 0) == expected
    assert decode_metadata_record(expected) == (rec, 0)


def test_topic_and_feature_level_golden() -> None:
    topic = M["TopicRecord"](name="foo", topic_id=TOPIC_ID)
    assert encode_metadata_record(topic, 0) == bytes.fromhex("01020004666f6f" + TOPIC_ID_HEX + "00")
    fl = M["FeatureLevelRecord"](name="metadata.version", feature_level=20)
    value = encode_metadata_record(fl, 0)
    assert value == bytes.fromhex("010c0011") + b"metadata.version" + bytes.fromhex("001400")
    assert len(value) == 23  # dump-log's valueSize for this record in the fixture logs


def test_register_broker_v0_drops_later_fields_and_fenced_defaults_true() -> None:
    cls = M["RegisterBrokerRecord"]
    rec = cls(
        broker_id=1,
        incarnation_id=TOPIC_ID,
        broker_epoch=7,
        end_points=[cls.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0)],
        rack=None,
    )
    assert rec.fenced is True and rec.is_migrating_zk_broker is False and rec.cordoned_log_dirs is None
    body = encode_body(rec, 0)
    assert body == bytes.fromhex(
        "00000001" + TOPIC_ID_HEX + "0000000000000007020a"
    ) + b"PLAINTEXT" + bytes.fromhex("02") + b"h" + bytes.fromhex(
        "2384"
        "0000"
        "00"  # port 9092 as uint16, SecurityProtocol, struct's tagged fields
        "01"  # Features: empty compact array
        "00"  # Rack null
        "01"  # Fenced true
        "00"
    )  # tagged fields
    assert decode_body(spec_of(cls), 0, body) == rec


def test_leader_change_and_snapshot_control_golden() -> None:
    lc = M["LeaderChangeMessage"]
    rec = lc(version=0, leader_id=1, voters=[lc.Voter(voter_id=1)], granting_voters=[lc.Voter(voter_id=1)])
    body = bytes.fromhex("00000000000102000000010002000000010000")
    assert encode_control_body(rec) == body
    assert decode_control_body(ControlRecordType.LEADER_CHANGE, body) == rec
    header = M["SnapshotHeaderRecord"](version=0, last_contained_log_timestamp=0)
    assert encode_control_body(header) == bytes(11)
    assert encode_control_body(M["SnapshotFooterRecord"]()) == bytes(3)
    assert encode_control_key(ControlRecordType.SNAPSHOT_HEADER) == bytes.fromhex("00000003")
    assert decode_control_key(bytes.fromhex("00000006")) is ControlRecordType.KRAFT_VOTERS
    assert decode_control_key(bytes.fromhex("00000063")) == 99


def test_leader_change_v1_carries_directory_ids() -> None:
    lc = M["LeaderChangeMessage"]
    rec = lc(version=1, leader_id=2, voters=[lc.Voter(voter_id=2, voter_directory_id=TOPIC_ID)])
    body = encode_body(rec, 1)
    assert TOPIC_ID_HEX in body.hex()
    assert decode_body(spec_of(lc), 1, body) == rec
    with pytest.raises(UnsupportedVersionError, match="VoterDirectoryId"):
        encode_body(rec, 0)


# --- typed errors ------------------------------------------------------------------------------------------

NOOP = bytes.fromhex("01140000")


def _raises(exc: type[ProtocolError], value: bytes, position: int | None) -> ProtocolError:
    with pytest.raises(exc) as info:
        decode_metadata_record(value)
    assert info.value.position == position
    if position is not None:
        assert f"at byte {position}" in str(info.value)
    return info.value


def test_unknown_api_key() -> None:
    err = _raises(UnknownApiKeyError, bytes.fromhex("01060000"), 2)
    assert "apiKey 6" in str(err)


def test_unsupported_version() -> None:
    err = _raises(UnsupportedVersionError, bytes.fromhex("01030900"), 2)
    assert "PartitionRecord" in str(err) and "9" in str(err)


def test_frame_version_zero_and_other() -> None:
    _raises(FrameVersionError, bytes.fromhex("00140000"), 0)
    _raises(FrameVersionError, bytes.fromhex("02140000"), 0)


def test_malformed_varint() -> None:
    _raises(MalformedVarintError, bytes.fromhex("01ffffffffff7f00"), 1)


def test_length_past_end() -> None:
    topic = encode_metadata_record(M["TopicRecord"](name="foo", topic_id=TOPIC_ID), 0)
    # Name claims 100 characters.
    err = _raises(LengthPastEndError, topic[:3] + bytes([101]) + topic[4:], 4)
    assert "Name" in str(err)
    # truncated in the middle of the uuid
    _raises(LengthPastEndError, topic[:10], 7)
    # huge array counts are rejected before allocating
    _raises(LengthPastEndError, bytes.fromhex("010e00ffffffff0f"), 8)
    _raises(InvalidFieldError, bytes.fromhex("011a00ffffffff0f"), 8)  # a string longer than 32767


def test_garbage_at_end() -> None:
    err = _raises(GarbageAtEndError, NOOP + b"\x00\x00", 4)
    assert "2 bytes" in str(err)


def test_null_in_non_nullable_and_bad_utf8() -> None:
    _raises(InvalidFieldError, bytes.fromhex("01020000") + bytes(17), 4)
    _raises(InvalidFieldError, bytes.fromhex("01020002ff") + bytes(17), 4)


def test_tagged_field_size_must_match() -> None:
    value = bytes.fromhex("01050000000003" + TOPIC_ID_HEX + "0101050000000200")
    with pytest.raises(InvalidFieldError, match="tagged field 1"):
        decode_metadata_record(value)


def test_unknown_tags_are_skipped() -> None:
    value = bytes.fromhex("01050000000003" + TOPIC_ID_HEX + "011e02abcd")
    rec, _ = decode_metadata_record(value)
    assert rec == M["PartitionChangeRecord"](partition_id=3, topic_id=TOPIC_ID)


def test_write_errors() -> None:
    pr = M["PartitionRecord"](topic_id=TOPIC_ID, directories=[TOPIC_ID])
    with pytest.raises(UnsupportedVersionError, match="Directories"):
        encode_metadata_record(pr, 0)
    with pytest.raises(UnsupportedVersionError):
        encode_metadata_record(pr, 7)
    with pytest.raises(InvalidFieldError, match="non-nullable"):
        encode_metadata_record(M["TopicRecord"](name=None, topic_id=TOPIC_ID), 0)  # type: ignore[arg-type]
    with pytest.raises(InvalidFieldError):
        encode_metadata_record(M["TopicRecord"](name="x", topic_id="not-a-uuid"), 0)
    with pytest.raises(InvalidFieldError):
        encode_metadata_record(M["FeatureLevelRecord"](name="x", feature_level=1 << 20), 0)
    with pytest.raises(InvalidFieldError):
        encode_metadata_record(M["LeaderChangeMessage"](), 0)


def test_records_are_immutable_values() -> None:
    a = M["TopicRecord"](name="t", topic_id=TOPIC_ID)
    assert a == M["TopicRecord"](name="t", topic_id=TOPIC_ID) and hash(a) == hash(
        M["TopicRecord"](name="t", topic_id=TOPIC_ID)
    )
    assert a != M["RemoveTopicRecord"](topic_id=TOPIC_ID) and a != ("t", TOPIC_ID)
    with pytest.raises(AttributeError):
        a.name = "u"  # type: ignore[misc]
    assert a._replace(name="u").name == "u"
    assert repr(a) == f"TopicRecord(name='t', topic_id='{TOPIC_ID}')"
    import pickle

    assert pickle.loads(pickle.dumps(a)) == a
    voters = M["VotersRecord"]
    assert voters.Endpoint.__qualname__ == "VotersRecord.Endpoint"
    v = voters(voters=[voters.Voter(endpoints=[voters.Endpoint(name="C", host="h", port=1)])])
    assert pickle.loads(pickle.dumps(v)) == v


def test_control_record_errors() -> None:
    with pytest.raises(GarbageAtEndError) as info:
        decode_control_body(ControlRecordType.SNAPSHOT_FOOTER, bytes(4))
    assert info.value.position == 3
    with pytest.raises(LengthPastEndError):
        decode_control_body(ControlRecordType.SNAPSHOT_HEADER, bytes(5))
    with pytest.raises(LengthPastEndError):
        decode_control_key(b"\x00\x00")
    with pytest.raises(UnsupportedVersionError):
        decode_control_key(bytes.fromhex("ffff0002"))
    with pytest.raises(UnknownApiKeyError):
        decode_control_body(ControlRecordType.COMMIT, bytes(6))
    with pytest.raises(InvalidFieldError):
        encode_control_body(M["NoOpRecord"]())
