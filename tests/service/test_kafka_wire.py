"""The service speaks Kafka's KRaft protocol: raft messages <-> Kafka's RPCs, and a live quorum on the wire.

Translation round trips for every raft message; ApiVersions, DescribeCluster and DescribeQuorum as Kafka's
clients ask them; Kafka's own ``kafka-metadata-quorum`` against a 3-voter `LocalQuorum`; kraftlake's Kafka
observer (`kraftlake.follow`) following a kraftlake quorum; malformed, oversized and unknown requests refused on
their own connection while commits go on.
"""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from service_helpers import CLUSTER, fast_config, wait_until_committed

from kraftlake.follow.observer import AppendBatches, Endpoint, MetadataObserver, Send, Wait, for_version
from kraftlake.logformat import RecordBatch, build_control_batch, build_data_batch, read_batches
from kraftlake.protocol import rpc
from kraftlake.protocol.rpc import ApiKey
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
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kraftlake.service import ClusterIdMismatchError, LocalQuorum, ObserverClient, QuorumClient
from kraftlake.service.append_rpc import (
    AppendRequest,
    AppendResponse,
    decode_append_request,
    decode_append_response,
    decode_refusal,
    encode_append_request,
    encode_append_response,
)
from kraftlake.service.batch_writer import kraft_data_batch, uniform_values
from kraftlake.service.entry_batches import decode_records, encode_entries
from kraftlake.service.kafka_rpc import (
    decode_raft_response,
    encode_raft_request,
    kafka_response,
    raft_request,
)
from kraftlake.service.rpc_common import APPEND_API_KEY, SERVED, RequestRefused, WireContext
from kraftlake.wire.connection import KafkaConnection

CTX = WireContext(
    CLUSTER,
    2,
    "hSCzevIQRUa-ojqTd_8C5w",
    {1: ("127.0.0.1", 9001), 2: ("127.0.0.1", 9002), 3: ("127.0.0.1", 9003)},
)
DIR = "T3J0aG9kb3hLYWZrYS0tLQ"


# -- translation -----------------------------------------------------------------------------------------------


def _over_the_wire(request: Message, sender: WireContext = CTX) -> tuple[int, int, Message]:
    """A raft request sent by `sender` as Kafka bytes and read back by its destination."""
    api_key, version, frame = encode_raft_request(request, 4242, sender)
    header, body = rpc.decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id) == (api_key, version, 4242)
    assert header.client_id == f"kraftlake-raft-{sender.node_id}"
    return api_key, version, raft_request(api_key, version, 4242, body, request.dst, CLUSTER)


@pytest.mark.parametrize(
    "request_",
    [
        VoteRequest(2, 1, 4242, 7, 2, 6, 1234, True),
        VoteRequest(2, 3, 4242, 8, 2, 6, 1234, False),
        BeginQuorumEpochRequest(2, 1, 4242, 9, 2),
        EndQuorumEpochRequest(2, 3, 4242, 9, 2, (3, 1)),
        FetchRequest(2, 1, 4242, 9, 2, 500, 8, 500, DIR),
        FetchRequest(2, 1, 4242, 9, 2, 0, 0, 0, ""),
        FetchSnapshotRequest(2, 1, 4242, 9, 2, SnapshotId(300, 8), 1 << 20, 1 << 20),
    ],
    ids=lambda m: type(m).__name__,
)
def test_every_raft_request_round_trips_through_kafkas_rpc(request_: Message) -> None:
    api_key, version, back = _over_the_wire(request_)
    assert (api_key, version) == {
        VoteRequest: (52, 2),
        BeginQuorumEpochRequest: (53, 1),
        EndQuorumEpochRequest: (54, 1),
        FetchRequest: (1, 18),
        FetchSnapshotRequest: (59, 1),
    }[type(request_)]
    assert back == request_


def _entries() -> list[Entry]:
    """A LeaderChange control batch at 10, a 3-record batch at 11 and a 2-record batch at 14, epoch 4."""
    new = tuple.__new__
    out = [new(Entry, (10, 4, True, b"\x00\x00\x00\x00\x00\x01", 1_700_000_000_000, 10, 2))]
    out += [new(Entry, (11 + i, 4, False, b"v%d" % i, 1_700_000_000_001, 11, -1)) for i in range(3)]
    out += [new(Entry, (14 + i, 4, False, b"w%d" % i * 50, 1_700_000_000_002, 14, -1)) for i in range(2)]
    return out


def _batches(entries: list[Entry]) -> dict[int, bytes]:
    """The batches a leader wrote for `_entries` (as `FileRaftLog` writes them)."""
    return {
        10: build_control_batch(10, 4, entries[0].timestamp, [(2, entries[0].value)]),
        11: build_data_batch(11, 4, entries[1].timestamp, [e.value for e in entries[1:4]]),
        14: build_data_batch(14, 4, entries[4].timestamp, [e.value for e in entries[4:]]),
    }


def _response_round_trip(response: Message, request: Message, raw: Any = None) -> tuple[Message, list[bytes]]:
    api_key, version, _ = encode_raft_request(request, 1, CTX)
    body = kafka_response(response, version, CTX, raw, log_start_offset=5)
    frame = rpc.encode_response(body, api_key, version, 99)
    return decode_raft_response(frame[4:], api_key, version, request)


@pytest.mark.parametrize(
    "response,request_",
    [
        (VoteResponse(1, 2, 55, 7, None, True, True, 7), VoteRequest(2, 1, 55, 7, 2, 6, 1234, True)),
        (
            VoteResponse(1, 2, 55, 8, 3, False, False, 9, Errors.NONE),
            VoteRequest(2, 1, 55, 9, 2, 6, 1234, False),
        ),
        (BeginQuorumEpochResponse(1, 2, 56, 9, 2), BeginQuorumEpochRequest(2, 1, 56, 9, 2)),
        (EndQuorumEpochResponse(1, 2, 57, 10, None), EndQuorumEpochRequest(2, 1, 57, 9, 2, (1, 3))),
        (
            FetchResponse(1, 2, 58, 9, 1, 300, (), OffsetAndEpoch(120, 7)),
            FetchRequest(2, 1, 58, 9, 2, 150, 8, 500),
        ),
        (
            FetchResponse(1, 2, 58, 9, 1, 300, (), OffsetAndEpoch(0, 0)),
            FetchRequest(2, 1, 58, 9, 2, 150, 8, 500),
        ),
        (
            FetchResponse(1, 2, 58, 9, 1, 300, (), None, SnapshotId(280, 8)),
            FetchRequest(2, 1, 58, 9, 2, 0, 0, 500),
        ),
        (
            FetchResponse(1, 2, 58, 10, 3, 0, error=Errors.FENCED_LEADER_EPOCH),
            FetchRequest(2, 1, 58, 9, 2, 0, 0, 0),
        ),
        (
            FetchResponse(1, 2, 58, 8, None, 0, error=Errors.UNKNOWN_LEADER_EPOCH),
            FetchRequest(2, 1, 58, 9, 2, 0, 0, 0),
        ),
        (
            FetchSnapshotResponse(1, 2, 59, 9, 1, SnapshotId(300, 8), 5000, 1024, b"chunk" * 10),
            FetchSnapshotRequest(2, 1, 59, 9, 2, SnapshotId(300, 8), 1024, 1 << 20),
        ),
        (
            FetchSnapshotResponse(1, 2, 59, 9, 1, SnapshotId(300, 8), 0, 0, b"", Errors.SNAPSHOT_NOT_FOUND),
            FetchSnapshotRequest(2, 1, 59, 9, 2, SnapshotId(300, 8), 0, 1 << 20),
        ),
    ],
    ids=lambda m: type(m).__name__,
)
def test_every_raft_response_round_trips_with_what_its_request_carried(
    response: Message, request_: Message
) -> None:
    back, raws = _response_round_trip(response, request_)
    assert back == response and raws == []


def test_fetch_entries_travel_as_the_leaders_batches() -> None:
    entries = _entries()
    written = _batches(entries)
    request = FetchRequest(2, 1, 60, 4, 2, 10, 3, 500)
    response = FetchResponse(1, 2, 60, 4, 1, 16, tuple(entries))
    # with the leader's bytes (FileRaftLog.raw_batch) and without (encoded again): the same records
    for lookup in (written.get, None):
        back, raws = _response_round_trip(response, request, lookup)
        assert back == response
        assert raws == [written[10], written[11], written[14]]  # written by the follower as they are
    assert encode_entries(entries, written.get) == b"".join(written.values())
    assert encode_entries(entries) == b"".join(written.values())
    # a fetch from the middle of a batch gets the whole batch (as Kafka sends it); the receiver keeps the rest
    tail = FetchResponse(1, 2, 61, 4, 1, 16, tuple(entries[2:]))
    back, raws = _response_round_trip(tail, FetchRequest(2, 1, 61, 4, 2, 12, 4, 500), written.get)
    assert back == tail and raws == [written[14]]
    assert decode_records(encode_entries(entries[2:], written.get), 12, "t")[0] == entries[2:]
    # a batch cut by the read (no such bytes kept): encoded from its first entry
    cut, _ = decode_records(encode_entries(entries[1:3]), 0, "t")
    assert [(e.offset, e.batch_base, e.value) for e in cut] == [(11, 11, b"v0"), (12, 11, b"v1")]


@pytest.mark.parametrize(
    "values",
    [
        [b"r" * 256] * 500,
        [b"x" * 10] * 70,
        [b"q" * 100] * 8192,
        [b"z" * 5000] * 3,
        [b""] * 5,
        [b"a"],
        [b"a", b"bb"],
        [b"v%d" % i for i in range(200)],
    ],
    ids=lambda v: f"{len(v)}x{len(v[0])}",
)
def test_uniform_values_reads_what_kraft_values_reads(values: list[bytes]) -> None:
    raw = kraft_data_batch(100, 3, 1_700_000_000_000, values)
    uniform = len({len(v) for v in values}) == 1
    assert uniform_values(raw, len(values)) == (values if uniform else None)
    assert RecordBatch(raw).kraft_values() == values


def test_uniform_values_checks_every_framing_byte() -> None:
    values = [b"r" * 20] * 100
    raw = bytearray(kraft_data_batch(0, 1, 1, values))
    changed = 0
    for i in range(61, len(raw)):  # every byte after the batch header, one at a time
        original = raw[i]
        raw[i] = (original + 1) % 256
        got = uniform_values(bytes(raw), 100)
        raw[i] = original
        assert got != values  # a framing byte: refused (None); a value byte: that value differs
        changed += got is not None
    assert changed == 100 * 20


def test_refusals_name_the_senders_cluster_id_only() -> None:
    api_key, version, frame = encode_raft_request(
        FetchRequest(2, 1, 1, 4, 2, 0, 0, 0), 7, WireContext("other-cluster", 2, "", CTX.endpoints)
    )
    _, body = rpc.decode_request(frame[4:])
    with pytest.raises(RequestRefused) as info:
        raft_request(api_key, version, 7, body, 1, CLUSTER)
    assert info.value.code == Errors.INCONSISTENT_CLUSTER_ID == 104
    assert "other-cluster" in str(info.value) and CLUSTER not in str(info.value)
    # a refused request reaches the sender's node as an error, which backs off and asks again
    refusal = rpc.encode_response(rpc.make("FetchResponse", error_code=104), ApiKey.FETCH, 18, 7)
    back, _ = decode_raft_response(refusal[4:], ApiKey.FETCH, 18, FetchRequest(2, 1, 1, 4, 2, 0, 0, 0))
    assert (
        isinstance(back, FetchResponse)
        and back.error is Errors.INCONSISTENT_CLUSTER_ID
        and back.leader_id is None
    )


def test_the_append_rpc_in_kafkas_framing() -> None:
    frame = encode_append_request(AppendRequest(CLUSTER, (b"a", b"", b"c" * 300), "cred"), 31, "me")
    key, version, corr, client_id, start = rpc.peek_request(frame[4:])
    assert (key, version, corr, client_id) == (APPEND_API_KEY, 0, 31, "me")
    assert decode_append_request(frame[4:], start) == AppendRequest(CLUSTER, (b"a", b"", b"c" * 300), "cred")
    response = AppendResponse(0, None, 3, 3, "", 5, 100, 102)
    out = encode_append_response(response, 31)
    assert decode_append_response(out[4:]) == (31, response)
    assert out[8] == 0  # response header v1: the correlation id, then no tagged fields


# -- a live quorum ----------------------------------------------------------------------------------------------


def _raw_exchange(port: int, frame: bytes) -> tuple[bytes, bool]:
    """Send `frame`, read one answer; also whether the server then closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(frame)
        size = struct.unpack(">i", _recv(sock, 4))[0]
        payload = _recv(sock, size)
        sock.settimeout(2)
        try:
            closed = sock.recv(1) == b""
        except TimeoutError:
            closed = False
    return payload, closed


def _recv(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "connection closed early"
        out += chunk
    return out


def test_bad_frames_are_refused_on_their_own_connection_while_commits_go_on(quorum: LocalQuorum) -> None:
    leader = quorum.wait_for_leader()
    port = quorum.endpoints[leader.node_id][1]
    before = leader.append([b"before"]).result(10)
    # garbage: not even a request header
    payload, closed = _raw_exchange(port, struct.pack(">i", 3) + b"\x01\x02\x03")
    corr, code, text = decode_refusal(payload)
    assert (corr, code, closed) == (-1, Errors.INVALID_REQUEST, True) and "not a Kafka request" in text
    # an unknown API key: refused with its correlation id
    payload, closed = _raw_exchange(port, struct.pack(">ihhih", 10, 999, 0, 77, -1))
    corr, code, text = decode_refusal(payload)
    assert (corr, code, closed) == (77, Errors.UNSUPPORTED_VERSION, True) and "API key 999" in text
    # a known API at a version we lack, and a body that does not parse
    payload, closed = _raw_exchange(port, struct.pack(">ihhih", 10, ApiKey.DESCRIBE_QUORUM, 9, 78, -1))
    assert decode_refusal(payload)[:2] == (78, Errors.UNSUPPORTED_VERSION) and closed
    payload, closed = _raw_exchange(
        port, struct.pack(">ihhih", 13, ApiKey.FETCH, 18, 79, -1) + b"\x00\xff\xff"
    )
    corr, code, text = decode_refusal(payload)
    assert (corr, code, closed) == (79, Errors.INVALID_REQUEST, True) and "malformed Fetch v18" in text
    # an oversized frame: refused before its body is read
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(struct.pack(">ihhi", 64 * 1024 * 1024, ApiKey.FETCH, 18, 80) + b"\x00" * 100)
        size = struct.unpack(">i", _recv(sock, 4))[0]
        corr, code, text = decode_refusal(_recv(sock, size))
        assert (corr, code) == (80, Errors.MESSAGE_TOO_LARGE) and "67108864 bytes" in text
        assert sock.recv(1) == b""
    # an append of another cluster: answered (not closed), naming only the sender's id
    secret = quorum.append_secret_path.read_text().strip()
    other = encode_append_request(AppendRequest("other-cluster", (b"x",), secret), 81, None)
    payload, closed = _raw_exchange(port, other)
    corr, reply = decode_append_response(payload)
    assert (corr, reply.error, closed) == (81, Errors.INCONSISTENT_CLUSTER_ID, False)
    assert reply.message is not None and CLUSTER not in reply.message
    with pytest.raises(ClusterIdMismatchError):
        QuorumClient([("127.0.0.1", port)], "other-cluster", append_secret=quorum.append_secret_path).append(
            [b"x"]
        )
    with pytest.raises(ClusterIdMismatchError, match="other-cluster"):
        ObserverClient([("127.0.0.1", port)], "other-cluster").fetch(0, 10, 0)
    # the quorum never noticed
    after = leader.append([b"after"]).result(10)
    assert after[0] > before[1]
    assert ObserverClient([("127.0.0.1", port)], CLUSTER).fetch(0, 10, 2000) != []


def test_api_versions_describe_cluster_and_describe_quorum_as_kafka_clients_ask(quorum: LocalQuorum) -> None:
    leader = quorum.wait_for_leader()
    leader.append([b"x"]).result(10)
    follower = next(i for i in quorum.services if i != leader.node_id)
    host, port = quorum.endpoints[follower]
    # ApiVersions at a version we lack: UNSUPPORTED_VERSION in a v0 body with our ranges, header v0
    payload, closed = _raw_exchange(port, struct.pack(">ihhih", 10, ApiKey.API_VERSIONS, 9, 5, -1))
    corr, body = rpc.decode_response(payload, ApiKey.API_VERSIONS, 0)
    assert corr == 5 and body.error_code == Errors.UNSUPPORTED_VERSION and not closed
    assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys} == {
        k: (v.lowest, v.highest) for k, v in SERVED.items()
    }
    with KafkaConnection(host, port) as conn:  # ApiVersions v4 first, as Kafka's clients do
        assert conn.versions[ApiKey.FETCH] == 18 and conn.versions[ApiKey.DESCRIBE_QUORUM] == 2
        cluster = conn.request(ApiKey.DESCRIBE_CLUSTER, rpc.make("DescribeClusterRequest", endpoint_type=2))
        assert (cluster.error_code, cluster.endpoint_type, cluster.cluster_id, cluster.controller_id) == (
            0,
            2,
            CLUSTER,
            leader.node_id,
        )
        assert sorted((b.broker_id, b.host, b.port) for b in cluster.brokers) == sorted(
            (i, h, p) for i, (h, p) in quorum.endpoints.items()
        )
        assert (
            conn.request(
                ApiKey.DESCRIBE_CLUSTER, rpc.make("DescribeClusterRequest", endpoint_type=1)
            ).error_code
            == Errors.MISMATCHED_ENDPOINT_TYPE
        )
        q = rpc.message_class("DescribeQuorumRequest")
        ask = q(
            topics=[
                q.TopicData(topic_name="__cluster_metadata", partitions=[q.PartitionData(partition_index=0)])
            ]
        )
        answer = conn.request(ApiKey.DESCRIBE_QUORUM, ask)
        p = answer.topics[0].partitions[0]
        assert p.error_code == Errors.NOT_LEADER_OR_FOLLOWER and p.leader_id == leader.node_id
    with KafkaConnection(*quorum.endpoints[leader.node_id]) as conn:
        p = conn.request(ApiKey.DESCRIBE_QUORUM, ask).topics[0].partitions[0]
        assert p.error_code == 0 and p.leader_epoch == leader.epoch
        assert [v.replica_id for v in p.current_voters] == [1, 2, 3]
        assert all(v.replica_directory_id != "AAAAAAAAAAAAAAAAAAAAAA" for v in p.current_voters)
    description, from_leader = QuorumClient([(host, port)], CLUSTER).describe()
    assert from_leader and description.leader_id == leader.node_id and description.cluster_id == CLUSTER
    assert [v.endpoint for v in description.voters] == [f"{h}:{p}" for h, p in quorum.endpoints.values()]
    with pytest.raises(ClusterIdMismatchError):
        QuorumClient([(host, port)], "other-cluster").describe()


def test_followers_write_the_leaders_batches_byte_for_byte(tmp_path: Path) -> None:
    with LocalQuorum(3, tmp_path, CLUSTER, fsync=False, quorum=fast_config()) as q:
        leader = q.wait_for_leader()
        end = 0
        for i in range(20):
            end = leader.append([b"%d-%d" % (i, k) for k in range(1 + i % 7)]).result(10)[1] + 1
        wait_until_committed(q, end)
        logs = {
            i: b"".join(
                p.read_bytes()
                for p in sorted((tmp_path / f"node-{i}" / "__cluster_metadata-0").glob("*.log"))
            )
            for i in q.services
        }
    assert len({len(b) for b in logs.values()}) == 1
    assert logs[1] == logs[2] == logs[3]  # CRCs and timestamps included
    assert len(read_batches(logs[1], "log")) == 21  # the LeaderChange batch and one batch per append


def test_a_kafka_observer_follows_a_kraftlake_quorum_and_is_listed(quorum: LocalQuorum) -> None:
    """kraftlake.follow's observer asks as a Kafka broker does: epoch 0 first (fenced: the answer names the
    leader and its endpoint), then the leader; with replica id 100 it appears in DescribeQuorum's observers."""
    leader = quorum.wait_for_leader()
    end = leader.append([b"a", b"b", b"c"]).result(10)[1] + 1
    follower = next(i for i in quorum.services if i != leader.node_id)
    host, port = quorum.endpoints[follower]
    observer = MetadataObserver(
        [Endpoint(host, port)], 100, cluster_id=CLUSTER, max_wait_ms=100, directory_id=DIR
    )
    conns: dict[Endpoint, KafkaConnection] = {}
    got: list[Any] = []
    deadline = time.monotonic() + 15
    asked_at_end = False  # until a fetch from the end was answered: that offset is the observer's log end
    try:
        while not asked_at_end and time.monotonic() < deadline:
            step = observer.poll(int(time.monotonic() * 1000))
            if isinstance(step, Wait):
                time.sleep(0.01)
                continue
            assert isinstance(step, Send)
            conn = conns.get(step.endpoint) or conns.setdefault(
                step.endpoint, KafkaConnection(step.endpoint.host, step.endpoint.port).open()
            )
            body = conn.request(
                step.api_key, for_version(step, conn.version(step.api_key)), extra_wait_s=step.wait_ms / 1000
            )
            asked_at_end = (
                step.api_key == ApiKey.FETCH and step.message.topics[0].partitions[0].fetch_offset == end
            )
            for effect in observer.on_response(step, body, int(time.monotonic() * 1000)):
                assert isinstance(effect, AppendBatches)
                got.extend(effect.batches)
    finally:
        for conn in conns.values():
            conn.close()
    assert observer.leader is not None and observer.leader.leader_id == leader.node_id
    assert observer.log_end == end and got[0].base_offset == 0
    assert sorted(b.data for b in got) == sorted(
        b.raw
        for b in read_batches(
            b"".join(
                p.read_bytes()
                for p in sorted(
                    (quorum.data_dir / f"node-{leader.node_id}" / "__cluster_metadata-0").glob("*.log")
                )
            ),
            "leader",
        )
        if b.base_offset < end
    )
    description = leader.describe()
    assert description.observers == (100,)
    row = next(r for r in description.replicas if r.node_id == 100)
    assert (row.status, row.directory_id, row.log_end_offset) == ("Observer", DIR, end)


@pytest.mark.kafka
def test_kafka_metadata_quorum_describes_a_kraftlake_quorum(tmp_path: Path) -> None:
    from kraftlake.kafka_tools import run_class

    with LocalQuorum(3, tmp_path, CLUSTER, fsync=False) as q:
        leader = q.wait_for_leader()
        leader.append([b"x"] * 10).result(10)
        follower = next(i for i in q.services if i != leader.node_id)
        bootstrap = f"127.0.0.1:{q.endpoints[follower][1]}"  # not the leader: DescribeCluster names it
        status = run_class(
            "org.apache.kafka.tools.MetadataQuorumCommand",
            ["--bootstrap-controller", bootstrap, "describe", "--status"],
            timeout=120,
        )
        replication = run_class(
            "org.apache.kafka.tools.MetadataQuorumCommand",
            ["--bootstrap-controller", bootstrap, "describe", "--replication"],
            timeout=120,
        )
        description = leader.describe()
    fields = dict(line.split(":", 1) for line in status.strip().splitlines())
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    assert fields["ClusterId"] == CLUSTER
    assert fields["LeaderId"] == str(leader.node_id) and fields["LeaderEpoch"] == str(leader.epoch)
    assert int(fields["HighWatermark"]) >= 11
    for v in description.voters:
        assert (
            f'{{"id": {v.node_id}, "directoryId": "{v.directory_id}", "endpoints": '
            f'["CONTROLLER://{v.endpoint}"]}}' in fields["CurrentVoters"]
        )
    assert fields["CurrentObservers"] == "[]"
    rows = [line.split() for line in replication.strip().splitlines()]
    assert rows[0] == [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    followers = sorted((i, "Follower") for i in (1, 2, 3) if i != leader.node_id)
    assert [(int(r[0]), r[-1]) for r in rows[1:]] == [(leader.node_id, "Leader"), *followers]
    assert {r[1] for r in rows[1:]} == {v.directory_id for v in description.voters}
