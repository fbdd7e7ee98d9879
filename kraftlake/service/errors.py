"""The exceptions of the service layer (`kraftlake.service`)."""

from __future__ import annotations

from kraftlake.errors import KraftlakeError
from kraftlake.raft.errors import NotLeaderError as NotLeaderError
from kraftlake.raft.messages import OffsetAndEpoch


class ServiceError(KraftlakeError):
    """Raised for any failure of the raft service, its transport or its clients."""


class ClusterIdMismatchError(ServiceError):
    """Raised when a peer refuses a request because it carries another cluster id."""


class FrameTooLargeError(ServiceError):
    """Raised when a frame is larger than the configured maximum frame size (sent or refused by the peer);
    `size` is the size announced (-1 unknown)."""

    def __init__(self, message: str, size: int = -1) -> None:
        super().__init__(message)
        self.size = size


class CodecError(ServiceError):
    """Raised when a frame cannot be decoded (truncated, unknown api key, bad field)."""


class RequestTimeoutError(ServiceError):
    """Raised when a request gets no answer within its timeout."""


class TransportError(ServiceError):
    """Raised when no server of a client's bootstrap list can be reached."""


class ServiceStoppedError(ServiceError):
    """Raised when a request is made of (or pending in) a service that has stopped."""


class RemoteError(ServiceError):
    """Raised when a server answers a client request with an error code the client cannot handle itself."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"server error {code}: {message}")
        self.code = code


class SnapshotRequiredError(RemoteError):
    """Raised when an observer fetches below the log start offset; `snapshot_id` names the snapshot to load."""

    def __init__(self, code: int, message: str, snapshot_id: OffsetAndEpoch) -> None:
        super().__init__(code, message)
        self.snapshot_id = snapshot_id


class NotControllerError(ServiceError):
    """Raised when a controller command reaches a node whose controller is not the active one."""

    def __init__(self, node_id: int, leader_id: int | None, reason: str = "") -> None:
        self.node_id = node_id
        self.leader_id = leader_id
        text = f"node {node_id} is not the active controller (leader: {leader_id})"
        super().__init__(f"{text}: {reason}" if reason else text)


class AppendNotAuthorizedError(RemoteError):
    """Raised by `QuorumClient.append` when the voters refuse its append credential (none, or not theirs)."""
