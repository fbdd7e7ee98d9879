from __future__ import annotations

import random

import pytest

from kraftlake.raft.config import QuorumConfig
from kraftlake.raft.control import LEADER_CHANGE_CONTROL_TYPE, decode_leader_change, encode_leader_change
from kraftlake.raft.errors import IllegalTransitionError, InvalidConfigError, NotLeaderError
from kraftlake.raft.memory_log import MemoryRaftLog
from kraftlake.raft.messages import FetchRequest, VoteRequest, VoteResponse
from kraftlake.raft.node import RaftNode, ReplicaStatus
from kraftlake.raft.quorum_state import QuorumState
from kraftlake.raft.states import (
    ElectionState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
)

CONFIG = QuorumConfig(voters=frozenset({1, 2, 3}))


def _quorum(node_id: int = 1, stored: ElectionState | None = None, log_epoch: int = 0) -> QuorumState:
    return QuorumState(node_id, CONFIG, random.Random(0), stored, log_epoch, 0)


def test_defaults_are_kafkas() -> None:
    assert (
        CONFIG.election_timeout_ms,
        CONFIG.fetch_timeout_ms,
        CONFIG.election_backoff_max_ms,
        CONFIG.append_linger_ms,
        CONFIG.max_batch_bytes,
    ) == (1000, 2000, 1000, 25, 8 * 1024 * 1024)
    assert CONFIG.check_quorum_timeout_ms == 3000 and CONFIG.majority == 2
    with pytest.raises(InvalidConfigError):
        QuorumConfig(voters=frozenset())


def test_election_timeout_is_in_t_to_2t() -> None:
    quorum = _quorum()
    assert all(1000 <= quorum.random_election_timeout_ms() < 2000 for _ in range(200))


def test_prospective_candidate_leader_path() -> None:
    quorum = _quorum()
    assert isinstance(quorum.state, UnattachedState)
    quorum.transition_to_prospective(10)
    assert isinstance(quorum.state, ProspectiveState) and quorum.epoch == 0
    with pytest.raises(IllegalTransitionError):
        quorum.transition_to_candidate(10)  # one pre-vote of three
    quorum.state.granted.add(2)
    quorum.transition_to_candidate(20)
    assert quorum.epoch == 1 and quorum.take_pending_persist() == ElectionState(1, None, 1)
    with pytest.raises(IllegalTransitionError):
        quorum.transition_to_leader(0, 30)
    quorum.state.granted.add(3)  # type: ignore[attr-defined]
    assert isinstance(quorum.transition_to_leader(0, 30), LeaderState)
    with pytest.raises(IllegalTransitionError):
        quorum.transition_to_prospective(40)
    quorum.transition_to_resigned((2, 3), 50)
    assert isinstance(quorum.state, ResignedState)


def test_a_vote_is_cast_once_per_epoch() -> None:
    quorum = _quorum()
    quorum.transition_to_unattached(4, 0)
    quorum.transition_to_voted(4, 2, 0)
    assert quorum.take_pending_persist() == ElectionState(4, None, 2)
    with pytest.raises(IllegalTransitionError):
        quorum.transition_to_voted(4, 3, 0)
    quorum.transition_to_prospective(0)
    with pytest.raises(IllegalTransitionError):
        quorum.transition_to_voted(4, 3, 0)  # the Prospective state carries the vote forward


def test_epochs_never_go_back() -> None:
    quorum = _quorum()
    quorum.transition_to_follower(3, 2, 0)
    with pytest.raises(IllegalTransitionError):
        quorum.transition_to_unattached(2, 0)
    with pytest.raises(IllegalTransitionError):
        quorum.transition_to_follower(3, 3, 0)
    with pytest.raises(IllegalTransitionError):
        quorum.transition_to_follower(4, 1, 0)  # never follow ourselves


def test_restart_states() -> None:
    assert isinstance(_quorum(stored=ElectionState(5, 1, 1)).state, ResignedState)
    follower = _quorum(stored=ElectionState(5, 2, 2)).state
    assert isinstance(follower, FollowerState) and follower.voted_id == 2
    assert _quorum(stored=ElectionState(5, None, 3)).state.voted_id == 3
    assert _quorum(stored=ElectionState(2, 2, None), log_epoch=4).epoch == 4


def test_observers_only_follow() -> None:
    observer = _quorum(node_id=9)
    with pytest.raises(IllegalTransitionError):
        observer.transition_to_prospective(0)
    with pytest.raises(IllegalTransitionError):
        observer.transition_to_voted(0, 1, 0)
    observer.transition_to_follower(1, 2, 0)
    observer.transition_to_unattached(1, 0)  # its leader went silent


def test_append_on_a_follower_names_the_leader() -> None:
    node = RaftNode(2, CONFIG, MemoryRaftLog(), ElectionState(3, 1, None), random.Random(1), 0)
    with pytest.raises(NotLeaderError) as info:
        node.append([b"x"], 0)
    assert info.value.leader_id == 1 and info.value.epoch == 3


def test_single_voter_elects_itself_and_commits_after_flush() -> None:
    node = RaftNode(
        1, QuorumConfig(voters=frozenset({1}), append_linger_ms=0), MemoryRaftLog(), None, random.Random(1), 0
    )
    ready = node.tick(5000)
    assert node.is_leader and ready.quorum_state == ElectionState(1, 1, 1) and ready.flush_needed
    assert node.append([b"a"], 5000).last_offset == 1
    ready = node.flush(5001)
    assert [e.offset for e in ready.committed] == [0, 1] and ready.committed[0].is_control


def test_leader_change_body_round_trips() -> None:
    body = encode_leader_change(2, [3, 1, 2], [2, 3])
    assert decode_leader_change(body) == (2, (1, 2, 3), (2, 3))
    assert body[:6] == b"\x00\x00\x00\x00\x00\x02"


def test_leader_stamps_batches_and_marks_control_types() -> None:
    node = RaftNode(
        1,
        QuorumConfig(voters=frozenset({1}), append_linger_ms=0),
        MemoryRaftLog(),
        None,
        random.Random(1),
        0,
        timestamp_base_ms=1_700_000_000_000,
    )
    node.tick(5000)
    node.append([b"a", b"b"], 5007)
    ready = node.flush(5008)
    control, a, b = ready.committed
    assert control.control_type == LEADER_CHANGE_CONTROL_TYPE and control.batch_base == 0
    assert control.timestamp == 1_700_000_005_000
    assert (a.timestamp, a.batch_base, a.control_type) == (1_700_000_005_007, 1, -1)
    assert (b.timestamp, b.batch_base) == (1_700_000_005_007, 1)


def test_appends_piled_up_during_a_write_go_out_as_batches_of_at_most_max_batch_bytes() -> None:
    config = QuorumConfig(voters=frozenset({1}), append_linger_ms=10, max_batch_bytes=100)
    node = RaftNode(1, config, MemoryRaftLog(), None, random.Random(1), 0)
    node.tick(5000)
    node.flush(5000)
    for i in range(5):
        node.append([bytes([i]) * 30] * 3, 5001)  # 90 bytes each: 450 pending, above the batch size
    ready = node.flush(5100)
    bases = [e.batch_base for e in ready.committed if not e.is_control]
    sizes = {b: 30 * bases.count(b) for b in set(bases)}
    assert len(bases) == 15 and max(sizes.values()) <= 100 and len(sizes) == 5
    assert bases == sorted(bases)


def test_replica_states_report_fetches_caught_up_times_and_directory_ids() -> None:
    config = QuorumConfig(voters=frozenset({1, 2, 3}), append_linger_ms=0)
    leader = RaftNode(
        1, config, MemoryRaftLog(), ElectionState(1, None, None), random.Random(1), 0, directory_id="dir-of-1"
    )
    requests = leader.tick(3000).messages  # prospective: pre-votes, then candidate: votes
    for _ in range(2):
        for req in list(requests):
            assert isinstance(req, VoteRequest)
            ready = leader.step(
                VoteResponse(
                    req.dst,
                    1,
                    req.correlation_id,
                    req.candidate_epoch - req.pre_vote,
                    None,
                    True,
                    req.pre_vote,
                    req.candidate_epoch,
                ),
                3001,
            )
            requests = [m for m in ready.messages if isinstance(m, VoteRequest)] or requests
    assert leader.is_leader and leader.replica_states(3002)[0].node_id == 1
    leader.flush(3003)
    leader.step(FetchRequest(2, 1, 10, 2, 2, 1, 2, 0, "dir-of-2"), 3010)  # at the log end: caught up
    leader.step(FetchRequest(3, 1, 11, 2, 3, 0, 0, 0), 3020)  # behind
    rows = {r.node_id: r for r in leader.replica_states(3030)}
    assert rows[1] == ReplicaStatus(1, "dir-of-1", 1, 3030, 3030, True)
    assert rows[2] == ReplicaStatus(2, "dir-of-2", 1, 3010, 3010, True)
    assert rows[3].last_fetch_ms == 3020 and rows[3].last_caught_up_ms is None and rows[3].directory_id == ""
    assert RaftNode(2, config, MemoryRaftLog(), None, random.Random(2), 0).replica_states(0) == ()


def test_fetch_positions_past_the_log_end_are_errors_and_never_count() -> None:
    """Issue 25: a Fetch claiming entries of the leader's own epoch past its log end moved the high watermark."""
    from kraftlake.raft.messages import Errors, FetchResponse

    config = QuorumConfig(voters=frozenset({1, 2, 3}), append_linger_ms=0)
    leader = RaftNode(1, config, MemoryRaftLog(), ElectionState(1, None, None), random.Random(1), 0)
    requests = leader.tick(3000).messages
    for _ in range(2):
        for req in list(requests):
            assert isinstance(req, VoteRequest)
            ready = leader.step(
                VoteResponse(
                    req.dst,
                    1,
                    req.correlation_id,
                    req.candidate_epoch - req.pre_vote,
                    None,
                    True,
                    req.pre_vote,
                    req.candidate_epoch,
                ),
                3001,
            )
            requests = [m for m in ready.messages if isinstance(m, VoteRequest)] or requests
    assert leader.is_leader and leader.epoch == 2
    leader.append([b"a", b"b"], 3002)
    leader.flush(3003)
    end = leader.log.end_offset
    assert end == 3 and leader.high_watermark == 0
    for corr, (offset, last_epoch, expected) in enumerate(
        (
            (end + 5, 2, Errors.OFFSET_OUT_OF_RANGE),  # entries of epoch 2 the leader never wrote
            (-1, 0, Errors.INVALID_REQUEST),
            (end, 3, Errors.INVALID_REQUEST),  # a last fetched epoch above the request's
        )
    ):
        ready = leader.step(FetchRequest(2, 1, corr, 2, 2, offset, last_epoch, 0, "d2"), 3010)
        (reply,) = [m for m in ready.messages if isinstance(m, FetchResponse)]
        assert reply.error is expected and leader.high_watermark == 0
    # a divergent tail of an older epoch past the end is answered with a DivergingEpoch and does not count
    ready = leader.step(FetchRequest(2, 1, 9, 2, 2, end + 5, 1, 0, "d2"), 3020)
    (reply,) = [m for m in ready.messages if isinstance(m, FetchResponse)]
    assert reply.error is Errors.NONE and reply.diverging_epoch is not None and leader.high_watermark == 0
    # and the fetch at the log end does
    leader.step(FetchRequest(2, 1, 10, 2, 2, end, 2, 0, "d2"), 3030)
    assert leader.high_watermark == end


def test_a_partial_flush_commits_only_what_it_covers() -> None:
    """A driver that fsyncs off its loop reports the end offset its fsync covered; the rest stays unflushed."""
    node = RaftNode(
        1, QuorumConfig(voters=frozenset({1}), append_linger_ms=0), MemoryRaftLog(), None, random.Random(1), 0
    )
    node.tick(5000)
    node.flush(5001)  # the LeaderChange
    node.append([b"a"], 5002)
    covered = node.log.end_offset
    node.append([b"b", b"c"], 5003)
    ready = node.flush(5004, covered)
    assert [e.value for e in ready.committed] == [b"a"] and ready.flush_needed
    assert node.log.flushed_end_offset == covered == node.high_watermark
    ready = node.flush(5005, node.log.end_offset + 10)  # never past the log end
    assert [e.value for e in ready.committed] == [b"b", b"c"] and not ready.flush_needed


# issue 16: spoofed requests a voter cannot act on
def test_epochs_past_the_last_usable_one_are_refused_and_never_persisted() -> None:
    from kraftlake.raft.messages import (
        BeginQuorumEpochRequest,
        EndQuorumEpochRequest,
        Errors,
        FetchSnapshotRequest,
        OffsetAndEpoch,
    )
    from kraftlake.raft.quorum_state import MAX_USABLE_EPOCH

    top = 2**31 - 1
    assert top - 1 == MAX_USABLE_EPOCH
    node = RaftNode(2, CONFIG, MemoryRaftLog(), ElectionState(3, 1, None), random.Random(1), 0)
    spoofed = [
        BeginQuorumEpochRequest(1, 2, 7, top, 1),
        EndQuorumEpochRequest(1, 2, 8, top, 1, (2,)),
        VoteRequest(3, 2, 9, top, 3, 3, 0, False),
        VoteRequest(3, 2, 10, top, 3, 3, 0, True),
        FetchRequest(3, 2, 11, top, 3, 0, 0, 0),
        FetchSnapshotRequest(3, 2, 12, top, 3, OffsetAndEpoch(0, 0), 0, 100),
    ]
    for request in spoofed:
        ready = node.step(request, 10)
        assert ready.quorum_state is None
        (reply,) = [m for m in ready.messages if m.correlation_id == request.correlation_id]
        assert reply.error is Errors.INVALID_REQUEST and reply.epoch == 3  # type: ignore[attr-defined]
    assert node.epoch == 3 and node.leader_id == 1
    # the last usable epoch is reached only one election at a time (from the one before it)
    node = RaftNode(2, CONFIG, MemoryRaftLog(), ElectionState(top - 2, 1, None), random.Random(1), 0)
    ready = node.step(BeginQuorumEpochRequest(1, 2, 13, top - 1, 1), 20)
    assert ready.quorum_state is not None and ready.quorum_state.epoch == top - 1
    with pytest.raises(IllegalTransitionError):
        _quorum(stored=ElectionState(top - 1, None, None)).transition_to_unattached(top, 0)


def test_leaders_and_candidates_outside_the_voter_set_are_refused() -> None:
    from kraftlake.raft.messages import BeginQuorumEpochRequest, EndQuorumEpochRequest, Errors

    node = RaftNode(2, CONFIG, MemoryRaftLog(), ElectionState(3, 1, None), random.Random(1), 0)
    for request in (
        BeginQuorumEpochRequest(9, 2, 1, 1_000_000, 9),
        EndQuorumEpochRequest(9, 2, 2, 1_000_000, 9, (2,)),
        VoteRequest(9, 2, 3, 1_000_000, 9, 3, 0, False),
    ):
        ready = node.step(request, 10)
        assert ready.quorum_state is None
        (reply,) = [m for m in ready.messages if m.correlation_id == request.correlation_id]
        assert reply.error is Errors.INCONSISTENT_VOTER_SET  # type: ignore[attr-defined]
    assert node.epoch == 3 and node.leader_id == 1


# issue 25: no epoch the quorum can never leave is adopted from the network
def _voter_in(epoch: int, leader: int | None = 1) -> RaftNode:
    return RaftNode(2, CONFIG, MemoryRaftLog(), ElectionState(epoch, leader, None), random.Random(1), 0)


@pytest.mark.parametrize("epoch", range(2**31 - 16, 2**31))
def test_no_vote_or_begin_quorum_epoch_near_the_int32_ceiling_moves_a_voter(epoch: int) -> None:
    from kraftlake.raft.errors import EpochRefusedError
    from kraftlake.raft.messages import BeginQuorumEpochRequest, Errors

    for request in (
        BeginQuorumEpochRequest(3, 2, 1, epoch, 3),
        VoteRequest(3, 2, 2, epoch, 3, epoch - 1, 10**9, False),
        VoteRequest(3, 2, 3, epoch, 3, epoch - 1, 10**9, True),
    ):
        node = _voter_in(7)
        ready = node.step(request, 10)
        assert ready.quorum_state is None and node.epoch == 7 and node.leader_id == 1
        (reply,) = [m for m in ready.messages if m.correlation_id == request.correlation_id]
        assert reply.error is Errors.INVALID_REQUEST and reply.epoch == 7  # type: ignore[attr-defined]
        (refusal,) = ready.refused
        assert isinstance(refusal, EpochRefusedError) and refusal.epoch == epoch and refusal.sender == 3
        assert f"at epoch {epoch} in epoch 7" in str(refusal)


def test_answers_with_an_unreachable_epoch_are_ignored_and_reported() -> None:
    from kraftlake.raft.messages import BeginQuorumEpochResponse, FetchResponse

    node = _voter_in(7)
    for answer in (
        BeginQuorumEpochResponse(3, 2, 1, 2**31 - 2, 3),
        VoteResponse(3, 2, 2, 2**30 + 5, 3, False, False, 7),
        FetchResponse(1, 2, 3, 2**31 - 3, 1, 0),
    ):
        ready = node.step(answer, 10)
        assert node.epoch == 7 and ready.quorum_state is None and len(ready.refused) == 1


def test_a_voter_far_behind_still_joins_and_above_the_ceiling_epochs_move_by_one() -> None:
    from kraftlake.raft.messages import BeginQuorumEpochRequest, Errors
    from kraftlake.raft.quorum_state import NETWORK_EPOCH_CEILING

    # a voter restored from an old disk: the quorum is a million elections ahead of it
    node = _voter_in(3)
    ready = node.step(BeginQuorumEpochRequest(1, 2, 1, 1_000_003, 1), 10)
    assert node.epoch == 1_000_003 and node.leader_id == 1 and not ready.refused
    node = _voter_in(5)
    node.step(BeginQuorumEpochRequest(1, 2, 1, NETWORK_EPOCH_CEILING, 1), 10)
    assert node.epoch == NETWORK_EPOCH_CEILING
    for step, accepted in ((2, False), (1, True), (1, True), (3, False)):
        before = node.epoch
        ready = node.step(BeginQuorumEpochRequest(3, 2, 2, before + step, 3), 20)
        assert node.epoch == (before + step if accepted else before)
        if not accepted:
            (reply,) = [m for m in ready.messages if m.correlation_id == 2]
            assert reply.error is Errors.INVALID_REQUEST  # type: ignore[attr-defined]


def test_a_voter_in_the_last_usable_epoch_says_it_is_stuck() -> None:
    node = _voter_in(2**31 - 2, leader=None)
    assert node.stuck is None or "no election can follow" in node.stuck
    node.tick(10_000)
    assert node.role == "Prospective" and node.stuck is not None and "2147483646" in node.stuck
    assert _voter_in(2**31 - 3, leader=None).stuck is None
