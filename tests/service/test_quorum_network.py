"""Issue 16, "the quorum's network": each attack, and the quorum unharmed by it (commits go on)."""

from __future__ import annotations

import contextlib
import socket
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from service_helpers import CLUSTER
from waiting import wait_until

from kraftlake.follow.observer import METADATA_TOPIC_ID, ZERO_UUID
from kraftlake.logformat import METADATA_PARTITION_DIR
from kraftlake.protocol import rpc
from kraftlake.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    Errors,
    FetchRequest,
    Message,
    VoteRequest,
)
from kraftlake.service import LocalQuorum, QuorumClient
from kraftlake.service.append_rpc import AppendRequest, decode_append_response, encode_append_request
from kraftlake.service.errors import AppendNotAuthorizedError
from kraftlake.service.kafka_rpc import decode_raft_response, encode_raft_request
from kraftlake.service.rpc_common import WireContext
from kraftlake.service.runner import new_uuid

#: How long a spoofed fetch gets to (wrongly) advance the leader's high watermark before the test checks that it
#: did not: the leader acts on a request in milliseconds, this is many times that.
SPOOF_EFFECT_S = 0.3


def _recv(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "connection closed early"
        out += chunk
    return out


def _spoof(port: int, request: Message, sender: WireContext) -> Errors:
    """Send a spoofed raft request; the error of its answer."""
    api_key, version, frame = encode_raft_request(request, 1, sender)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(frame)
        payload = _recv(sock, struct.unpack(">i", _recv(sock, 4))[0])
    answer, _ = decode_raft_response(payload, api_key, version, request)
    return answer.error  # type: ignore[attr-defined]


def test_spoofed_epochs_and_leaders_outside_the_voter_set_are_refused(quorum: LocalQuorum) -> None:
    leader = quorum.wait_for_leader()
    before = leader.append([b"before"]).result(10)
    epoch = leader.epoch
    for node_id, (_, port) in quorum.endpoints.items():
        other = node_id % 3 + 1
        ctx = WireContext(CLUSTER, other, "", dict(quorum.endpoints))
        top = 2**31 - 1
        # one spoofed BeginQuorumEpoch with epoch 2^31-1 per voter: the int32 maximum, no next election
        request: Message
        for request in (
            BeginQuorumEpochRequest(other, node_id, 1, top, other),
            VoteRequest(other, node_id, 2, top, other, top, 10**9, False),
        ):
            assert _spoof(port, request, ctx) is Errors.INVALID_REQUEST
        # a leader or candidate that is not a voter, epoch 1,000,000
        stranger = WireContext(CLUSTER, 9, "", dict(quorum.endpoints))
        spoofed: tuple[Message, ...] = (
            BeginQuorumEpochRequest(9, node_id, 3, 1_000_000, 9),
            EndQuorumEpochRequest(9, node_id, 4, 1_000_000, 9, (node_id,)),
            VoteRequest(9, node_id, 5, 1_000_000, 9, 10**6, 10**9, False),
        )
        for request in spoofed:
            assert _spoof(port, request, stranger) is Errors.INCONSISTENT_VOTER_SET
    after = leader.append([b"after"]).result(10)
    assert after[0] > before[1] and leader.is_leader and leader.epoch == epoch
    for node_id in quorum.endpoints:
        state = (quorum.data_dir / f"node-{node_id}" / METADATA_PARTITION_DIR / "quorum-state").read_text()
        assert str(2**31 - 1) not in state and "1000000" not in state
    # and the quorum still elects: a restart of the leader leads to a new epoch and commits
    quorum.stop_node(leader.node_id)
    successor = quorum.wait_for_leader(exclude=leader.node_id)
    assert successor.append([b"again"]).result(10)[0] > after[1]
    assert successor.epoch > epoch


def test_no_epoch_near_the_int32_ceiling_is_adopted_by_vote_or_begin_quorum_epoch(
    quorum: LocalQuorum, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 25: every epoch from 2^31-16 to 2^31-1, in a real voter's name (its directory id too)."""
    leader = quorum.wait_for_leader()
    before = leader.append([b"before"]).result(10)
    epoch = leader.epoch
    dirs = {i: s.runner.directory_id for i, s in quorum.services.items()}
    with caplog.at_level("WARNING", logger="kraftlake.service.raft_driver"):
        for spoofed_epoch in range(2**31 - 16, 2**31):
            for node_id, (_, port) in quorum.endpoints.items():
                other = node_id % 3 + 1
                ctx = WireContext(CLUSTER, other, dirs[other], dict(quorum.endpoints))
                request: Message
                for request in (
                    BeginQuorumEpochRequest(other, node_id, 1, spoofed_epoch, other),
                    VoteRequest(other, node_id, 2, spoofed_epoch, other, spoofed_epoch - 1, 10**9, False),
                ):
                    assert _spoof(port, request, ctx) is Errors.INVALID_REQUEST
    after = leader.append([b"after"]).result(10)
    assert after[0] > before[1] and leader.is_leader
    assert all(s.epoch == epoch for s in quorum.services.values())
    for node_id in quorum.endpoints:
        state = (quorum.data_dir / f"node-{node_id}" / METADATA_PARTITION_DIR / "quorum-state").read_text()
        assert f'"leaderEpoch":{epoch}' in state
    refusals = [r.getMessage() for r in caplog.records if "refused a" in r.getMessage()]
    # logged, once per cause (message type and sender) per minute: 2 kinds x 1 sender per voter
    assert len(refusals) == 6 and all(m.startswith(f"node {m[5]}: refused a ") for m in refusals)
    assert all(f"at epoch {2**31 - 16} in epoch {epoch}" in m for m in refusals)


_VOTER = r"""
import resource, sys, time
from pathlib import Path
from kraftlake.service import LocalQuorum
from kraftlake.raft.config import QuorumConfig
quorum = LocalQuorum(1, Path(sys.argv[1]), "svc-test-cluster", fsync=False,
                     quorum=QuorumConfig(voters=frozenset({1}), election_timeout_ms=300, fetch_timeout_ms=600,
                                         election_backoff_max_ms=300, request_timeout_ms=1000,
                                         max_fetch_wait_ms=200, append_linger_ms=5))
quorum.start()
leader = quorum.wait_for_leader()
for _ in range(16):  # 8 MiB committed: every observer fetch answer is as large as Kafka's max_fetch_bytes
    leader.append([b"v" * 1024] * 512).result(30)
print(quorum.endpoints[1][1], flush=True)
commits = 0
while True:
    line = sys.stdin.readline()
    if not line:
        break
    t = time.monotonic()
    while time.monotonic() < t + float(line):
        leader.append([b"c"]).result(10)
        commits += 1
    rss = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()
    print(commits, rss, flush=True)
quorum.stop()
"""


def _observer_fetch_frame(corr: int) -> bytes:
    f = rpc.message_class("FetchRequest")
    partition = f.FetchPartition(
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=64 << 20,
        replica_directory_id=ZERO_UUID,
    )
    request = f(
        cluster_id=CLUSTER,
        replica_state=f.ReplicaState(replica_id=-1, replica_epoch=-1),
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=64 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[f.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[partition])],
    )
    return rpc.encode_request(request, 17, corr, "greedy")


@pytest.mark.slow
def test_unread_fetches_half_sent_frames_and_connection_floods_keep_memory_bounded(tmp_path: Path) -> None:
    """Slow (about 10 s): a voter process under floods of connections and unread answers, its memory sampled
    while they last."""
    voter = subprocess.Popen(
        [sys.executable, "-c", _VOTER, str(tmp_path / "v")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert voter.stdin is not None and voter.stdout is not None
    socks: list[socket.socket] = []
    try:
        port = int(voter.stdout.readline())

        def measure(seconds: float) -> tuple[int, int]:
            assert voter.stdin is not None and voter.stdout is not None
            voter.stdin.write(f"{seconds}\n")
            voter.stdin.flush()
            commits, rss = voter.stdout.readline().split()
            return int(commits), int(rss)

        commits0, rss0 = measure(0.5)
        # one client sends 180 observer fetches (8 MiB answers each) and never reads
        greedy = socket.create_connection(("127.0.0.1", port))
        socks.append(greedy)
        greedy.setblocking(False)
        frames = b"".join(_observer_fetch_frame(i) for i in range(180))
        with contextlib.suppress(BlockingIOError):
            greedy.send(frames)
        # twenty connections each holding 15 MiB of a 16 MiB frame (sent in part: the rest never comes)
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", port))
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError, ConnectionError):
                s.send(struct.pack(">i", 16 * 1024 * 1024 - 16) + b"\0" * (15 * 1024 * 1024))
            socks.append(s)
        # and a flood of idle connections, beyond the cap of 200
        for _ in range(300):
            with contextlib.suppress(OSError):
                socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        commits1, rss1 = measure(4.0)
        closed = 0
        for s in socks[21:]:
            s.settimeout(0.01)
            with contextlib.suppress(TimeoutError, BlockingIOError):
                closed += s.recv(1) == b""
        growth = rss1 - rss0
        print(
            f"RSS {rss0 >> 20} MiB -> {rss1 >> 20} MiB, commits {commits0} then {commits1 - commits0} in 4 s, "
            f"{closed} of 300 extra connections closed"
        )
        assert commits1 - commits0 > 20
        assert growth < 200 * 1024 * 1024
        assert closed >= 100
    finally:
        for s in socks:
            s.close()
        voter.stdin.close()
        voter.wait(30)


@pytest.mark.slow
def test_unread_fetches_on_many_connections_share_one_budget_and_memory_returns(tmp_path: Path) -> None:
    """Issue 25: 70 connections each sending 200 observer Fetches (8 MiB answers) and never reading took a
    voter to 2.57 GB (32 MiB per connection); one budget (128 MiB) for all of them now. Slow (about 9 s): the
    70 connections' floods against a voter process."""
    # tuned as `kraftlake quorum start` tunes its process
    script = _VOTER.replace(
        "quorum.start()\n",
        "quorum.start()\nfrom kraftlake.service.gctune import tune_for_service\ntune_for_service()\n",
        1,
    )
    voter = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "v")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert voter.stdin is not None and voter.stdout is not None
    socks: list[socket.socket] = []
    try:
        port = int(voter.stdout.readline())

        def measure(seconds: float) -> tuple[int, int]:
            assert voter.stdin is not None and voter.stdout is not None
            voter.stdin.write(f"{seconds}\n")
            voter.stdin.flush()
            commits, rss = voter.stdout.readline().split()
            return int(commits), int(rss)

        commits0, rss0 = measure(0.3)
        frames = b"".join(_observer_fetch_frame(i) for i in range(200))
        for _ in range(70):
            s = socket.create_connection(("127.0.0.1", port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                s.send(frames)
            socks.append(s)
        commits1, rss1 = measure(4.0)
        for s in socks:
            s.close()
        socks.clear()
        # the voter's loop notices the resets beside the appends it serves: on a loaded machine, seconds
        returned = 100 * 1024 * 1024
        waited, rss2 = 0.0, rss1
        while waited < 12 and rss2 - rss0 >= returned:
            _, rss2 = measure(0.5)
            waited += 0.5
        print(
            f"RSS {rss0 >> 20} MiB -> {rss1 >> 20} MiB under the flood -> {rss2 >> 20} MiB {waited:g} s after it"
        )
        assert commits1 - commits0 > 20
        assert rss1 < 512 * 1024 * 1024
        assert rss2 - rss0 < returned
    finally:
        for s in socks:
            s.close()
        voter.stdin.close()
        voter.wait(30)


def test_appends_need_the_voters_credential_and_refusals_echo_nothing(quorum: LocalQuorum) -> None:
    leader = quorum.wait_for_leader()
    port = quorum.endpoints[leader.node_id][1]
    secret_file = quorum.append_secret_path
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    for node_id in quorum.endpoints:  # one credential for the quorum, a copy in each voter's data dir
        copy = quorum.data_dir / f"node-{node_id}" / "append.secret"
        assert copy.read_text() == secret_file.read_text()
    secret = secret_file.read_text().strip()
    before = leader.append([b"before"]).result(10)  # in-process appends need nothing
    for credential, cluster in (("", CLUSTER), ("guess", CLUSTER), (secret[:-1], CLUSTER), ("", "guess")):
        frame = encode_append_request(AppendRequest(cluster, (b"garbage",), credential), 7, None)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(frame)
            _, reply = decode_append_response(_recv(sock, struct.unpack(">i", _recv(sock, 4))[0]))
        assert reply.error == Errors.CLUSTER_AUTHORIZATION_FAILED
        assert reply.message is not None and CLUSTER not in reply.message and secret not in reply.message
    with pytest.raises(AppendNotAuthorizedError):
        QuorumClient([("127.0.0.1", port)], CLUSTER).append([b"garbage"])
    client = QuorumClient([("127.0.0.1", port)], CLUSTER, append_secret=secret_file)
    base, _ = client.append([b"allowed"])
    client.close()
    assert base > before[1]
    values = [e.value for e in leader.read_committed(0, 1000)]
    assert b"garbage" not in values and b"allowed" in values


def test_a_voter_stuck_in_the_last_usable_epoch_says_so_in_its_log_and_in_describe(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 25: a quorum-state left at 2^31-2 (by an older kraftlake, before the epoch bound) cannot elect."""
    from service_helpers import fast_config

    from kraftlake.logformat import QuorumStateFile, write_quorum_state

    node_dir = tmp_path / "q" / "node-1" / METADATA_PARTITION_DIR
    node_dir.mkdir(parents=True)
    write_quorum_state(node_dir / "quorum-state", QuorumStateFile(leader_epoch=2**31 - 2))
    q = LocalQuorum(1, tmp_path / "q", CLUSTER, fsync=False, quorum=fast_config(1))
    with caplog.at_level("ERROR", logger="kraftlake.service.raft_driver"):
        q.start()
        try:
            service = q.services[1]
            deadline = time.monotonic() + 10
            while service.runner.node.role != "Prospective" and time.monotonic() < deadline:  # type: ignore[union-attr]
                time.sleep(0.05)
            client = QuorumClient([q.endpoints[1]], CLUSTER)
            described, from_leader = client.describe()
            client.close()
        finally:
            q.stop()
    assert not from_leader and described.leader_id == -1
    (stuck,) = [line for line in described.status_lines() if line.startswith("Stuck:")]
    assert "Prospective in epoch 2147483646: no election can follow it" in stuck
    assert [r for r in caplog.records if "stuck: node 1 is" in r.getMessage()]


def test_a_fetch_in_a_followers_name_from_another_directory_never_acknowledges_an_append(
    quorum: LocalQuorum,
) -> None:
    """Issue 25: followers down, an append in flight, a third party fetches at the log end in a follower's name."""
    leader = quorum.wait_for_leader()
    leader.append([b"before"]).result(10)
    followers = [i for i in quorum.endpoints if i != leader.node_id]
    for follower in followers:
        quorum.stop_node(follower)
    store = leader.runner.log_store
    assert store is not None
    end_before = store.end_offset
    in_flight = leader.append([b"in flight"])
    wait_until(
        lambda: store.end_offset != end_before,
        5,
        f"the in-flight append in the leader's log (end {end_before})",
        0.005,
        seen=lambda: store.end_offset,
    )
    end, epoch = store.end_offset, leader.epoch
    port = quorum.endpoints[leader.node_id][1]
    for follower in followers:
        for directory, refusal in (("", Errors.INVALID_REQUEST), (new_uuid(), Errors.INCONSISTENT_VOTER_SET)):
            ctx = WireContext(CLUSTER, follower, directory, dict(quorum.endpoints))
            spoof = FetchRequest(follower, leader.node_id, 1, epoch, follower, end, epoch, 0, directory)
            assert _spoof(port, spoof, ctx) is refusal
            vote = VoteRequest(follower, leader.node_id, 2, epoch + 1, follower, epoch, end, False)
            assert _spoof(port, vote, ctx) is refusal
    time.sleep(SPOOF_EFFECT_S)  # time for what must not happen: no wait on a condition can show it did not
    assert leader.high_watermark < end
    assert not in_flight.done() or in_flight.exception() is not None
