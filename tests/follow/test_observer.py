"""MetadataObserver as a step machine: Kafka's answers in, requests and committed effects out (no sockets)."""

from __future__ import annotations

from typing import Any

import pytest

from kraftlake.follow.errors import (
    AuthorizationError,
    ClusterIdMismatchError,
    MirrorDivergedError,
    NotAControllerError,
    ObserverProtocolError,
)
from kraftlake.follow.observer import (
    METADATA_TOPIC_ID,
    AppendBatches,
    Endpoint,
    InstallSnapshot,
    MetadataObserver,
    Send,
    Wait,
    for_version,
    parse_endpoints,
    split_batches,
)
from kraftlake.logformat import build_data_batch
from kraftlake.protocol import rpc
from kraftlake.protocol.rpc import ApiKey

A, B, C = Endpoint("127.0.0.1", 9001), Endpoint("127.0.0.1", 9002), Endpoint("127.0.0.1", 9003)
R = rpc.message_class("FetchResponse")
S = rpc.message_class("FetchSnapshotResponse")


def batch(base: int, epoch: int, n: int = 1) -> bytes:
    return build_data_batch(base, epoch, 1_700_000_000_000 + base, [b"v%d" % (base + i) for i in range(n)])


def fetch_response(
    *,
    error: int = 0,
    top_error: int = 0,
    leader: tuple[int, int] = (1, 5),
    hw: int = -1,
    records: bytes = b"",
    diverging: tuple[int, int] = (-1, -1),
    snapshot: tuple[int, int] = (-1, -1),
    endpoints: dict[int, Endpoint] | None = None,
    log_start: int = 0,
) -> Any:
    nodes = [R.NodeEndpoint(node_id=i, host=e.host, port=e.port) for i, e in (endpoints or {}).items()]
    partition = R.PartitionData(
        partition_index=0,
        error_code=error,
        high_watermark=hw,
        log_start_offset=log_start,
        diverging_epoch=R.EpochEndOffset(epoch=diverging[0], end_offset=diverging[1]),
        current_leader=R.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1]),
        snapshot_id=R.SnapshotId(end_offset=snapshot[0], epoch=snapshot[1]),
        records=records,
    )
    return R(
        error_code=top_error,
        responses=[R.FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=[partition])],
        node_endpoints=nodes,
    )


def wire(send: Send, response: Any) -> Any:
    """Both messages through the real codec at the versions Kafka 4.3.1 speaks."""
    version = 18 if send.api_key == ApiKey.FETCH else 1
    message = for_version(send, version)
    frame = rpc.encode_request(message, version, 1, "test")
    _, decoded = rpc.decode_request(frame[4:])
    assert decoded == message
    out = rpc.encode_response(response, send.api_key, version, 1)
    return rpc.decode_response(out[4:], send.api_key, version)[1]


def led_by_a(observer: MetadataObserver) -> Send:
    """Discover leader 1 at A in epoch 5 through a fenced fetch; return the first fetch to the leader."""
    send = observer.poll(0)
    assert isinstance(send, Send) and send.endpoint == A
    assert send.message.topics[0].partitions[0].current_leader_epoch == 0
    assert observer.on_response(send, wire(send, fetch_response(error=74, endpoints={1: A, 2: B})), 0) == []
    nxt = observer.poll(0)
    assert isinstance(nxt, Send) and nxt.endpoint == A and nxt.wait_ms == 500
    assert nxt.message.topics[0].partitions[0].current_leader_epoch == 5
    return nxt


def test_parse_endpoints() -> None:
    assert parse_endpoints("a:1, b:2") == [Endpoint("a", 1), Endpoint("b", 2)]
    assert parse_endpoints("[::1]:9093") == [Endpoint("::1", 9093)]
    for bad in ("a", "a:x", ":1", "a:70000", ""):
        with pytest.raises(ValueError):
            parse_endpoints(bad)


def test_records_wait_for_the_high_watermark() -> None:
    o = MetadataObserver([A], 2_000_000_001)
    send = led_by_a(o)
    data = batch(0, 5, 3) + batch(3, 5, 2)
    # the leader returns records past its high watermark: only the first batch is committed
    effects = o.on_response(send, wire(send, fetch_response(hw=3, records=data)), 1)
    assert [type(e) for e in effects] == [AppendBatches]
    assert [(b.base_offset, b.last_offset) for b in effects[0].batches] == [(0, 2)]
    assert (o.log_end, o.fetch_offset, len(o.pending)) == (3, 5, 1)
    # the next fetch starts after the pending batch; the high watermark then passes it
    send = o.poll(2)
    assert isinstance(send, Send)
    assert send.message.topics[0].partitions[0].fetch_offset == 5
    effects = o.on_response(send, wire(send, fetch_response(hw=5)), 3)
    assert [(b.base_offset, b.last_offset) for b in effects[0].batches] == [(3, 4)]
    assert effects[0].batches[0].data == data[len(batch(0, 5, 3)) :]
    assert (o.log_end, o.last_epoch, o.lag) == (5, 5, 0)


def test_diverging_epoch_truncates_pending_only() -> None:
    o = MetadataObserver([A], 7, log_end=0, last_epoch=0)
    send = led_by_a(o)
    o.on_response(send, wire(send, fetch_response(hw=2, records=batch(0, 4, 2) + batch(2, 4, 3))), 1)
    assert o.log_end == 2 and o.fetch_offset == 5 and o.fetch_epoch == 4
    send = o.poll(2)
    assert isinstance(send, Send)
    assert send.message.topics[0].partitions[0].last_fetched_epoch == 4
    # the new leader's epoch 4 ended at offset 3: the uncommitted batch 2..4 goes
    effects = o.on_response(send, wire(send, fetch_response(diverging=(4, 3))), 3)
    assert effects == [] and o.pending == [] and o.fetch_offset == 2
    # a divergence below what was committed means the mirror is not of this quorum
    send = o.poll(4)
    assert isinstance(send, Send)
    with pytest.raises(MirrorDivergedError, match="offset 1"):
        o.on_response(send, wire(send, fetch_response(diverging=(3, 1))), 5)


def test_snapshot_downloaded_in_chunks() -> None:
    o = MetadataObserver([A], 7)
    send = led_by_a(o)
    assert o.on_response(send, wire(send, fetch_response(snapshot=(40, 3), hw=45)), 1) == []
    data = batch(0, 3, 4) + batch(4, 3, 1)
    sent = []
    position = 0
    effects: list[Any] = []
    while not effects:
        send = o.poll(2)
        assert isinstance(send, Send) and send.api_key == ApiKey.FETCH_SNAPSHOT
        p = send.message.topics[0].partitions[0]
        assert (p.snapshot_id.end_offset, p.snapshot_id.epoch, p.position) == (40, 3, position)
        chunk = data[position : position + 50]
        sent.append(len(chunk))
        response = S(
            topics=[
                S.TopicSnapshot(
                    name="__cluster_metadata",
                    partitions=[
                        S.PartitionSnapshot(
                            index=0,
                            snapshot_id=S.SnapshotId(end_offset=40, epoch=3),
                            size=len(data),
                            position=position,
                            unaligned_records=chunk,
                        )
                    ],
                )
            ]
        )
        effects = o.on_response(send, wire(send, response), 3)
        position += len(chunk)
    assert effects == [InstallSnapshot(40, 3, data)]
    assert len(sent) == -(-len(data) // 50)
    assert (o.log_end, o.last_epoch) == (40, 3)
    send = o.poll(4)
    assert isinstance(send, Send) and send.api_key == ApiKey.FETCH
    assert send.message.topics[0].partitions[0].fetch_offset == 40


def test_leader_change_and_unreachable_leader() -> None:
    o = MetadataObserver([A, B, C], 7)
    send = led_by_a(o)
    o.on_response(send, wire(send, fetch_response(hw=1, records=batch(0, 5))), 1)
    # the leader dies: back off, then ask the next bootstrap controller
    o.on_failure(send, 10)
    assert o.leader is None
    assert isinstance(o.poll(10), Wait)
    send = o.poll(1000)
    assert isinstance(send, Send) and send.endpoint == B
    # B knows the new leader 2 in epoch 6
    o.on_response(send, wire(send, fetch_response(error=74, leader=(2, 6), endpoints={2: B})), 1001)
    send = o.poll(1001)
    assert isinstance(send, Send) and send.endpoint == B
    assert send.message.topics[0].partitions[0].current_leader_epoch == 6
    effects = o.on_response(
        send, wire(send, fetch_response(leader=(2, 6), hw=3, records=batch(1, 6, 2))), 1002
    )
    assert [(b.base_offset, b.epoch) for b in effects[0].batches] == [(1, 6)]


def test_election_without_leader_backs_off() -> None:
    o = MetadataObserver([A, B], 7)
    send = o.poll(0)
    assert isinstance(send, Send)
    o.on_response(send, wire(send, fetch_response(error=6, leader=(-1, 9))), 0)
    assert o.epoch == 9 and o.leader is None
    assert isinstance(o.poll(0), Wait)


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"top_error": 31}, AuthorizationError, "CLUSTER_ACTION"),
        ({"top_error": 104}, ClusterIdMismatchError, "cluster id"),
        ({"error": 100}, NotAControllerError, "not a controller listener"),
        ({"top_error": 42}, ObserverProtocolError, "error 42"),
    ],
)
def test_refusals_are_typed(kwargs: dict[str, Any], error: type[Exception], text: str) -> None:
    o = MetadataObserver([A], 7, cluster_id="x")
    send = o.poll(0)
    assert isinstance(send, Send)
    with pytest.raises(error, match=text):
        o.on_response(send, wire(send, fetch_response(**kwargs)), 0)


def test_split_batches_checks_crc_and_drops_a_partial_tail() -> None:
    data = batch(0, 1, 2) + batch(2, 1, 3)
    assert [b.base_offset for b in split_batches(data + data[:30], "t")] == [0, 2]
    bad = bytearray(data)
    bad[-1] ^= 0xFF
    with pytest.raises(ObserverProtocolError, match="CRC"):
        split_batches(bytes(bad), "t")


def test_a_gap_in_the_records_is_refused() -> None:
    o = MetadataObserver([A], 7)
    send = led_by_a(o)
    with pytest.raises(ObserverProtocolError, match="expected 0"):
        o.on_response(send, wire(send, fetch_response(hw=9, records=batch(4, 5))), 1)


def test_request_fields_by_version() -> None:
    o = MetadataObserver([A], 1234, directory_id="AAAAAAAAAAAAAAAAAAAAAg")
    send = o.poll(0)
    assert isinstance(send, Send)
    v18 = for_version(send, 18)
    assert v18.replica_state.replica_id == 1234 and v18.replica_id == -1
    assert v18.topics[0].partitions[0].replica_directory_id == "AAAAAAAAAAAAAAAAAAAAAg"
    v14 = for_version(send, 14)
    assert v14.replica_id == 1234 and v14.replica_state.replica_id == -1
    assert v14.topics[0].partitions[0].replica_directory_id == "AAAAAAAAAAAAAAAAAAAAAA"
    for version in range(13, 19):
        rpc.encode_request(for_version(send, version), version, 1, None)


def test_a_divergence_at_or_past_the_committed_end_fetches_on_as_the_leaders_epoch() -> None:
    """Issue 29: the leader says its epoch 3 ends at 12, past the mirror's committed end 10 whose last batch the
    mirror holds as epoch 4: as Kafka's follower truncates to min(12, its end) and fetches on with the epoch the
    leader named, the observer asks again with LastFetchedEpoch 3 (it used to ask the same question for ever)."""
    o = MetadataObserver([A], 7, log_end=10, last_epoch=4)
    send = led_by_a(o)
    assert send.message.topics[0].partitions[0].last_fetched_epoch == 4
    assert o.on_response(send, wire(send, fetch_response(diverging=(3, 12))), 1) == []
    assert (o.log_end, o.divergences, o.last_divergence) == (10, 1, (3, 12))
    nxt = o.poll(2)
    assert isinstance(nxt, Send)
    part = nxt.message.topics[0].partitions[0]
    assert (part.fetch_offset, part.last_fetched_epoch) == (10, 3)
    effects = o.on_response(nxt, wire(nxt, fetch_response(hw=12, records=batch(10, 5, 2))), 3)
    assert [(b.base_offset, b.last_offset) for b in effects[0].batches] == [(10, 11)]


def test_pending_batches_of_a_later_epoch_than_the_divergence_go() -> None:
    o = MetadataObserver([A], 7, log_end=0, last_epoch=0)
    send = led_by_a(o)
    o.on_response(send, wire(send, fetch_response(hw=2, records=batch(0, 3, 2) + batch(2, 5, 3))), 1)
    send = o.poll(2)
    assert isinstance(send, Send)
    # epoch 3 ends at 9 on the leader: the pending batch of epoch 5 at 2..4 is not the leader's
    o.on_response(send, wire(send, fetch_response(diverging=(3, 9))), 3)
    assert o.pending == [] and o.fetch_offset == 2 and o.fetch_epoch == 3
