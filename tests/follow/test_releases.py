"""Following releases before 3.9, as a step machine and at the connection: a leader named by id only, Kafka's
voter string, the release an ApiVersions answer belongs to, and the refusal of a release too old to follow."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from follow.test_observer import A, B, C, batch, fetch_response

from kraftlake.follow.bootstrap import parse_bootstrap
from kraftlake.follow.errors import UnsupportedReleaseError
from kraftlake.follow.follower import Follower
from kraftlake.follow.mirror import MetadataMirror
from kraftlake.follow.observer import AppendBatches, Endpoint, MetadataObserver, Send, Wait, for_version
from kraftlake.follow.releases import describe_ranges, guess_release
from kraftlake.protocol import rpc, rpc_messages
from kraftlake.protocol.rpc import ApiKey


def wire13(send: Send, response: Any) -> Any:
    """Both messages through the codec at Fetch v13, what a 3.3/3.4 controller speaks (no NodeEndpoints)."""
    assert send.api_key == ApiKey.FETCH
    message = for_version(send, 13)
    frame = rpc.encode_request(message, 13, 1, "test")
    _, decoded = rpc.decode_request(frame[4:])
    assert decoded == message and decoded.replica_id == message.replica_id
    out = rpc.encode_response(response, send.api_key, 13, 1)
    return rpc.decode_response(out[4:], send.api_key, 13)[1]


def next_send(o: MetadataObserver, now: int) -> tuple[Send, int]:
    while True:
        action = o.poll(now)
        if isinstance(action, Send):
            return action, now
        assert isinstance(action, Wait)
        now = action.until_ms


def test_a_leader_named_by_id_only_is_found_among_the_bootstrap_controllers() -> None:
    o = MetadataObserver([A, B, C], 7)
    send, now = next_send(o, 0)
    assert send.endpoint == A
    # A is a follower: fenced, leader 2 of epoch 5, and (Fetch v13) no endpoint for it
    assert o.on_response(send, wire13(send, fetch_response(error=74, leader=(2, 5))), now) == []
    assert o.leader is not None and o.leader.leader_id == 2 and o.leader.endpoint is None
    assert "without its endpoint" in o.stall_reason
    send, now = next_send(o, now)
    assert send.endpoint == B and send.message.topics[0].partitions[0].current_leader_epoch == 5
    # B answers at epoch 5 without an error: only the leader does, so B is leader 2
    effects = o.on_response(
        send, wire13(send, fetch_response(leader=(2, 5), hw=2, records=batch(0, 5, 2))), now
    )
    assert [type(e) for e in effects] == [AppendBatches]
    assert o.leader.endpoint == B and o.endpoints[2] == B and o.stall_reason == ""
    send, now = next_send(o, now)
    assert send.endpoint == B and send.wait_ms == 500


def test_a_probe_of_a_follower_moves_on() -> None:
    o = MetadataObserver([A, B, C], 7)
    send, now = next_send(o, 0)
    o.on_response(send, wire13(send, fetch_response(error=74, leader=(3, 5))), now)
    send, now = next_send(o, now)
    assert send.endpoint == B
    o.on_response(send, wire13(send, fetch_response(error=6, leader=(3, 5))), now)
    send, now = next_send(o, now)
    assert send.endpoint == C
    o.on_response(send, wire13(send, fetch_response(leader=(3, 5), hw=1, records=batch(0, 5))), now)
    assert o.leader is not None and o.leader.endpoint == C and o.log_end == 1


def test_voters_name_the_leaders_endpoint_at_once_and_a_wrong_one_is_dropped() -> None:
    o = MetadataObserver([A, B, C], 7, voters={1: A, 2: B, 3: C})
    send, now = next_send(o, 0)
    o.on_response(send, wire13(send, fetch_response(error=74, leader=(2, 5))), now)
    send, now = next_send(o, now)
    assert send.endpoint == B and send.wait_ms == 500
    # a voter string that puts 2 at C: C says it is not the leader, and the follower looks again
    wrong = MetadataObserver([A, B, C], 7, voters={2: C})
    send, now = next_send(wrong, 0)
    wrong.on_response(send, wire13(send, fetch_response(error=74, leader=(2, 5))), now)
    send, now = next_send(wrong, now)
    assert send.endpoint == C
    wrong.on_response(send, wire13(send, fetch_response(error=6, leader=(2, 5))), now)
    assert 2 not in wrong.endpoints and "NOT_LEADER_OR_FOLLOWER" in wrong.stall_reason
    assert wrong.leader is not None and wrong.leader.endpoint is None


def test_parse_bootstrap() -> None:
    b = parse_bootstrap("1@ctrl1:9093, 2@[::1]:9094,ctrl3:9095")
    assert b.endpoints == [Endpoint("ctrl1", 9093), Endpoint("::1", 9094), Endpoint("ctrl3", 9095)]
    assert b.voters == {1: Endpoint("ctrl1", 9093), 2: Endpoint("::1", 9094)}
    for bad in ("x@h:1", "1@h", "1@h:1,1@h:2", "", "@h:1"):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


# KRaft RPC ranges of each release's controller (common/message/*.json of its kafka-clients jar)
RANGES = {
    "3.0.2": {
        ApiKey.FETCH: (0, 12),
        ApiKey.FETCH_SNAPSHOT: (0, 0),
        ApiKey.DESCRIBE_QUORUM: (0, 0),
        ApiKey.VOTE: (0, 0),
    },
    "3.3.2": {
        ApiKey.FETCH: (0, 13),
        ApiKey.FETCH_SNAPSHOT: (0, 0),
        ApiKey.DESCRIBE_QUORUM: (0, 1),
        ApiKey.VOTE: (0, 0),
    },
    "3.6.2": {
        ApiKey.FETCH: (0, 15),
        ApiKey.FETCH_SNAPSHOT: (0, 0),
        ApiKey.DESCRIBE_QUORUM: (0, 1),
        ApiKey.VOTE: (0, 0),
    },
    "3.8.1": {
        ApiKey.FETCH: (0, 16),
        ApiKey.FETCH_SNAPSHOT: (0, 0),
        ApiKey.DESCRIBE_QUORUM: (0, 1),
        ApiKey.VOTE: (0, 0),
    },
    "3.9.1": {
        ApiKey.FETCH: (0, 17),
        ApiKey.FETCH_SNAPSHOT: (0, 1),
        ApiKey.DESCRIBE_QUORUM: (0, 2),
        ApiKey.VOTE: (0, 1),
    },
    "4.0.2": {
        ApiKey.FETCH: (4, 17),
        ApiKey.FETCH_SNAPSHOT: (0, 1),
        ApiKey.DESCRIBE_QUORUM: (0, 2),
        ApiKey.VOTE: (0, 2),
    },
    "4.4.0": {
        ApiKey.FETCH: (4, 18),
        ApiKey.FETCH_SNAPSHOT: (0, 1),
        ApiKey.DESCRIBE_QUORUM: (0, 2),
        ApiKey.VOTE: (0, 2),
    },
}


@pytest.mark.parametrize(
    ("release", "guess"),
    [
        ("3.0.2", "Kafka older than 3.3"),
        ("3.3.2", "Kafka 3.3-3.4"),
        ("3.6.2", "Kafka 3.5-3.6"),
        ("3.8.1", "Kafka 3.7-3.8"),
        ("3.9.1", "Kafka 3.9"),
        ("4.0.2", "Kafka 4.0"),
        ("4.4.0", "Kafka 4.1 or later"),
    ],
)
def test_guess_release(release: str, guess: str) -> None:
    assert guess_release(RANGES[release]) == guess
    assert describe_ranges(RANGES[release]).startswith(f"Fetch v{RANGES[release][ApiKey.FETCH][0]}-")


def test_a_controller_too_old_is_refused_in_one_line(tmp_path: Path) -> None:
    """A listener answering ApiVersions with Kafka 3.0.2's controller ranges (Fetch up to v12, topics by name):
    refused at once, naming the ranges and what kraftlake follows; nothing is fetched."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    port = server.getsockname()[1]
    done = threading.Event()
    keys = [
        rpc_messages.ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in {**RANGES["3.0.2"], ApiKey.API_VERSIONS: (0, 3)}.items()
    ]

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                for _ in range(2):
                    size = int.from_bytes(conn.recv(4), "big")
                    data = b""
                    while len(data) < size:
                        data += conn.recv(size - len(data))
                    api_key, version = int.from_bytes(data[:2], "big"), int.from_bytes(data[2:4], "big")
                    corr = int.from_bytes(data[4:8], "big")
                    assert api_key == ApiKey.API_VERSIONS
                    if version > 3:  # as Kafka does: UNSUPPORTED_VERSION in v0, with its ranges
                        answer = rpc_messages.ApiVersionsResponse(error_code=35, api_keys=keys)
                        conn.sendall(rpc.encode_response(answer, ApiKey.API_VERSIONS, 0, corr))
                        continue
                    answer = rpc_messages.ApiVersionsResponse(error_code=0, api_keys=keys)
                    conn.sendall(rpc.encode_response(answer, ApiKey.API_VERSIONS, version, corr))
                    break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    started = time.monotonic()
    try:
        with (
            MetadataMirror(tmp_path, fsync=False) as mirror,
            pytest.raises(UnsupportedReleaseError) as err,
        ):
            Follower([Endpoint("127.0.0.1", port)], mirror, timeout_s=5, give_up_s=30).run()
    finally:
        done.set()
        thread.join(5)
        server.close()
    assert time.monotonic() - started < 10
    text = str(err.value)
    assert "\n" not in text
    assert "Kafka older than 3.3" in text and "Fetch v0-12" in text and "Kafka 3.3 and later" in text
    assert "Fetch v13-18" in text
    assert mirror.position.log_end == 0
