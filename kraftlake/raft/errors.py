"""The exceptions of the raft layer."""

from __future__ import annotations

from kraftlake.errors import KraftlakeError


class RaftError(KraftlakeError):
    """Raised for any failure of the raft layer."""


class NotLeaderError(RaftError):
    """Raised when an append reaches a node that does not lead; carries the leader it knows of (or None).

    The raft node raises it with what it knows; the service adds the leader's endpoint and a reason when it
    answers a remote append, and clients raise the same class from the refusal they receive.
    """

    def __init__(
        self,
        node_id: int,
        epoch: int,
        leader_id: int | None,
        leader_endpoint: str | None = None,
        reason: str = "",
    ) -> None:
        where = f" at {leader_endpoint}" if leader_endpoint else ""
        extra = f": {reason}" if reason else ""
        super().__init__(
            f"node {node_id} is not the leader of epoch {epoch} (known leader: {leader_id}{where}){extra}"
        )
        self.node_id = node_id
        self.epoch = epoch
        self.leader_id = leader_id
        self.leader_endpoint = leader_endpoint


class IllegalTransitionError(RaftError):
    """Raised when `QuorumState` is asked for a transition its table does not allow."""


class EpochRefusedError(RaftError):
    """A message named an epoch this node must not adopt (`kraftlake.raft.quorum_state.epoch_reachable`).

    Never raised by `RaftNode.step`: the node answers a refused request with INVALID_REQUEST, ignores a refused
    response, and reports each refusal in `Ready.refused` for its driver to log.
    """

    def __init__(self, node_id: int, message: str, sender: int, epoch: int, current: int) -> None:
        super().__init__(
            f"node {node_id}: refused a {message} from node {sender} at epoch {epoch} in epoch {current}: "
            + epoch_refusal_reason(current, epoch)
        )
        self.node_id = node_id
        self.message = message
        self.sender = sender
        self.epoch = epoch
        self.current = current


def epoch_refusal_reason(current: int, epoch: int) -> str:
    """Why `epoch` may not be adopted from epoch `current` (the rule of `epoch_reachable`)."""
    if epoch >= 2**31 - 2:
        return "no election could follow it (Kafka's epochs are int32)"
    return "above 2^30 an epoch moves by one election at a time"


class LogTruncationError(RaftError):
    """Raised when the log would be truncated below the high watermark or below its log start offset."""


class RaftStorageError(RaftError):
    """Raised when the raft log or a snapshot is asked for something it does not hold."""


class InvalidConfigError(RaftError):
    """Raised when a `QuorumConfig` holds an impossible value."""
