"""The typed quorum configuration (Kafka's `QuorumConfig` defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from kraftlake.raft.errors import InvalidConfigError

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class QuorumConfig:
    """Static quorum configuration, shared by every node of a quorum.

    Parameters
    ----------
    voters
        The ids of the voters (a static voter set, `controller.quorum.voters`).
    election_timeout_ms
        Base election timeout T; each election waits a random time in [T, 2T).
    fetch_timeout_ms
        A voter that hears nothing from its leader for this long starts an election; a leader that has not
        been fetched from by a majority for 1.5 times this long resigns (check-quorum).
    election_backoff_max_ms
        Upper bound of the randomized backoff after a lost election.
    append_linger_ms
        How long the leader waits to fill a batch before writing it.
    append_when_idle
        Write appends at once while nothing the leader wrote is uncommitted, and what accumulated meanwhile
        as soon as it is (group commit); the linger time stays the upper bound. Low latency at low load,
        large batches under load. False: always linger (Kafka's BatchAccumulator).
    max_batch_bytes
        Size at which the leader writes a batch without waiting for the linger time.
    request_timeout_ms
        Time after which an unanswered request is sent again.
    retry_backoff_ms
        Wait before retrying after an error response.
    max_fetch_wait_ms
        How long the leader holds (long-polls) a fetch that has nothing new to return.
    max_fetch_bytes
        Upper bound of the record bytes in one fetch response.
    snapshot_chunk_bytes
        Bytes per FetchSnapshot response.
    """

    voters: frozenset[int]
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    append_linger_ms: int = 25
    append_when_idle: bool = True
    max_batch_bytes: int = 8 * MIB
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    max_fetch_wait_ms: int = 500
    max_fetch_bytes: int = 8 * MIB
    snapshot_chunk_bytes: int = MIB

    def __post_init__(self) -> None:
        if not self.voters:
            raise InvalidConfigError("a quorum needs at least one voter")
        if any(v < 0 for v in self.voters):
            raise InvalidConfigError(f"voter ids must be >= 0: {sorted(self.voters)}")
        for name in (
            "election_timeout_ms",
            "fetch_timeout_ms",
            "request_timeout_ms",
            "max_batch_bytes",
            "max_fetch_bytes",
            "snapshot_chunk_bytes",
        ):
            if getattr(self, name) <= 0:
                raise InvalidConfigError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("election_backoff_max_ms", "append_linger_ms", "retry_backoff_ms", "max_fetch_wait_ms"):
            if getattr(self, name) < 0:
                raise InvalidConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.max_fetch_wait_ms >= self.request_timeout_ms:
            raise InvalidConfigError("max_fetch_wait_ms must be below request_timeout_ms")

    @property
    def majority(self) -> int:
        """The number of voters that makes a majority."""
        return len(self.voters) // 2 + 1

    @property
    def check_quorum_timeout_ms(self) -> int:
        """The time within which a majority must have fetched from the leader (1.5 x fetch timeout)."""
        return self.fetch_timeout_ms * 3 // 2
