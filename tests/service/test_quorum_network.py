"""Issue 16, "the quorum's network": each attack, and the quorum unharmed by it (commits go on)."""

from __future__ import annotations

import socket
import struct

from service_helpers import CLUSTER

from kraftlake.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    Errors,
    Message,
    VoteRequest,
)
from kraftlake.service import LocalQuorum
from kraftlake.service.kafka_rpc import WireContext, decode_raft_response, encode_raft_request
from kraftlake.service.runner import METADATA_PARTITION_DIR


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
        for request in (BeginQuorumEpochRequest(other, node_id, 1, top, other),
                        VoteRequest(other, node_id, 2, top, other, top, 10**9, False)):
            assert _spoof(port, request, ctx) is Errors.INVALID_REQUEST
        # a leader or candidate that is not a voter, epoch 1,000,000
        stranger = WireContext(CLUSTER, 9, "", dict(quorum.endpoints))
        spoofed: tuple[Message, ...] = (BeginQuorumEpochRequest(9, node_id, 3, 1_000_000, 9),
                                         EndQuorumEpochRequest(9, node_id, 4, 1_000_000, 9, (node_id,)),
                                         VoteRequest(9, node_id, 5, 1_000_000, 9, 10**6, 10**9, False))
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
