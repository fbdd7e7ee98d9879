"""The wire codec round-trips every message type; malformed frames raise typed errors."""

from __future__ import annotations

import pytest

from kraftlake.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    Errors,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    OffsetAndEpoch,
    VoteRequest,
    VoteResponse,
)
from kraftlake.service.codec import MESSAGE_TYPES, decode_frame, encode_frame
from kraftlake.service.errors import CodecError, FrameTooLargeError
from kraftlake.service.messages import (
    AppendRequest,
    AppendResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    ErrorCode,
    ErrorResponse,
    ObserverFetchRequest,
    ObserverFetchResponse,
    ObserverFetchSnapshotRequest,
    ObserverFetchSnapshotResponse,
    QuorumDescription,
    ReplicaInfo,
    VoterInfo,
)

ENTRIES = (Entry(7, 2, True, b"\x00\x01", 1_700_000_000_000, 7, 2), Entry(8, 2, False, b"v" * 300, 5, 8))
DESCRIPTION = QuorumDescription(
    "cid", 2, 5, 100, 3, 40,
    (VoterInfo(1, "AAAAAAAAAAAAAAAAAAAAAA", "127.0.0.1:9001"), VoterInfo(2, "", "127.0.0.1:9002")),
    (-1, 7),
    (ReplicaInfo(2, "x", 100, 0, 1, 2, "Leader"), ReplicaInfo(1, "", 97, 3, -1, -1, "Follower")),
)
SAMPLES: list[Message] = [
    VoteRequest(1, 2, 1 << 40, 3, 1, 2, 99, True),
    VoteResponse(2, 1, 5, 3, None, False, True, 3, Errors.FENCED_LEADER_EPOCH),
    BeginQuorumEpochRequest(1, 3, 6, 4, 1),
    BeginQuorumEpochResponse(3, 1, 6, 4, 1),
    EndQuorumEpochRequest(1, 2, 7, 4, 1, (3, 2)),
    EndQuorumEpochResponse(2, 1, 7, 5, None, Errors.NOT_LEADER_OR_FOLLOWER),
    FetchRequest(2, 1, 8, 4, 2, 1234, 3, 500, "hSCzevIQRUa-ojqTd_8C5w"),
    FetchResponse(1, 2, 8, 4, 1, 1200, ENTRIES),
    FetchResponse(1, 2, 9, 4, 1, 1200, (), OffsetAndEpoch(10, 3), None),
    FetchResponse(1, 2, 9, 4, None, 0, (), None, OffsetAndEpoch(100, 2), Errors.UNKNOWN_LEADER_EPOCH),
    FetchSnapshotRequest(2, 1, 10, 4, 2, OffsetAndEpoch(100, 2), 4096, 1 << 20),
    FetchSnapshotResponse(1, 2, 10, 4, 1, OffsetAndEpoch(100, 2), 9000, 4096, b"chunk", Errors.NONE),
    DescribeQuorumRequest(-1, -1, 11),
    DescribeQuorumResponse(1, -1, 11, ErrorCode.NOT_LEADER_OR_FOLLOWER, "127.0.0.1:9002", DESCRIPTION),
    AppendRequest(-1, -1, 12, (b"a", b"", b"\xff" * 1000)),
    AppendResponse(1, -1, 12, ErrorCode.NONE, 1, "", 4, 10, 12, ""),
    AppendResponse(1, -1, 12, ErrorCode.NOT_LEADER_OR_FOLLOWER, None, "", 4, message="nope \u00e9"),
    ObserverFetchRequest(-1, -1, 13, 50, 100, 500, 1 << 20),
    ObserverFetchResponse(1, -1, 13, ErrorCode.NONE, 1, 4, 60, 0, ENTRIES),
    ObserverFetchResponse(1, -1, 13, ErrorCode.OFFSET_OUT_OF_RANGE, 1, 4, 60, 40, (), OffsetAndEpoch(40, 3)),
    ObserverFetchSnapshotRequest(-1, -1, 15, OffsetAndEpoch(40, 3), 4096, 1 << 20),
    ObserverFetchSnapshotResponse(1, -1, 15, ErrorCode.NONE, OffsetAndEpoch(40, 3), 9000, 4096, b"\x01" * 100),
    ErrorResponse(1, -1, 14, ErrorCode.INCONSISTENT_CLUSTER_ID, "other cluster"),
]


def test_every_message_type_has_a_sample() -> None:
    assert {type(m) for m in SAMPLES} == set(MESSAGE_TYPES)


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip(message: Message) -> None:
    frame = encode_frame(message, "cluster-\u00e9")
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    cluster_id, decoded = decode_frame(frame[4:])
    assert cluster_id == "cluster-\u00e9"
    assert decoded == message


def test_entries_keep_timestamp_batch_base_and_control_type() -> None:
    message = FetchResponse(1, 2, 3, 4, 1, 5, (Entry(0, 1, False, b"x"), Entry(1, 1, True, b"y", 99, 1, 2)))
    _, decoded = decode_frame(encode_frame(message, "c")[4:])
    assert isinstance(decoded, FetchResponse)
    assert decoded.entries == (Entry(0, 1, False, b"x", -1, -1, -1), Entry(1, 1, True, b"y", 99, 1, 2))
    assert decoded.entries[1].control_type == 2


def test_oversized_frame_is_refused_by_the_encoder() -> None:
    with pytest.raises(FrameTooLargeError):
        encode_frame(AppendRequest(-1, -1, 1, (b"x" * 2000,)), "c", max_frame_bytes=1000)


@pytest.mark.parametrize("cut", [1, 10, 30, -1])
def test_truncated_frames_raise_codec_errors(cut: int) -> None:
    payload = encode_frame(SAMPLES[7], "c")[4:]
    with pytest.raises(CodecError):
        decode_frame(payload[:cut])


def test_unknown_api_key_and_trailing_bytes() -> None:
    payload = bytearray(encode_frame(SAMPLES[0], "c")[4:])
    with pytest.raises(CodecError, match="trailing"):
        decode_frame(bytes(payload) + b"\x00")
    payload[2:4] = (999).to_bytes(2, "big")
    with pytest.raises(CodecError, match="unknown api key"):
        decode_frame(bytes(payload))


def test_unknown_error_code() -> None:
    payload = bytearray(encode_frame(ErrorResponse(1, 2, 3, ErrorCode.NONE, ""), "c")[4:])
    payload[-6:-4] = (12345).to_bytes(2, "big")
    with pytest.raises(CodecError, match="unknown ErrorCode"):
        decode_frame(bytes(payload))


def test_entries_of_several_leader_writes_travel_as_runs() -> None:
    entries = (Entry(5, 1, True, b"lc", 10, 5, 2), Entry(6, 1, False, b"a", 11, 6), Entry(7, 1, False, b"", 11, 6),
               Entry(8, 2, False, b"c" * 70_000, 12, 8), Entry(9, 2, False, b"d", 13, 9))
    message = FetchResponse(1, 2, 3, 4, 1, 5, entries)
    _, decoded = decode_frame(encode_frame(message, "c")[4:])
    assert isinstance(decoded, FetchResponse) and decoded.entries == entries
    assert all(type(e.value) is bytes for e in decoded.entries)
