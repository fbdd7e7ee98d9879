"""Errors of following a controller quorum: each one stops the follower with a one-line cause."""

from __future__ import annotations

from kraftlake.errors import KraftlakeError


class FollowError(KraftlakeError):
    """Raised when following a quorum cannot go on (the mirrored log stays as it was committed)."""


class NotAControllerError(FollowError):
    """Raised when the address is a broker listener: it answers Fetch of the metadata topic UNKNOWN_TOPIC_ID."""


class AuthorizationError(FollowError):
    """Raised on CLUSTER_AUTHORIZATION_FAILED: the principal lacks CLUSTER_ACTION on the cluster."""


class ClusterIdMismatchError(FollowError):
    """Raised when the quorum's cluster id is not the mirror's (INCONSISTENT_CLUSTER_ID, or meta.properties)."""


class MirrorDivergedError(FollowError):
    """Raised when the leader's log diverges below what the mirror holds as committed."""


class NoProgressError(FollowError):
    """Raised when controllers answered for the give-up time but none of their answers let the mirror go on;
    says why (the observer's last reason, the leader, the last failures, the versions negotiated with each
    controller)."""


class ObserverProtocolError(FollowError):
    """Raised on an answer no Kafka controller sends: a bad batch, a gap, an unexpected error code."""


class UnsupportedReleaseError(FollowError):
    """Raised when a controller speaks no Fetch or FetchSnapshot version kraftlake speaks (Kafka before 3.3):
    names the release its ApiVersions ranges belong to and what kraftlake follows."""


class MirrorError(FollowError):
    """Raised when the mirror directory cannot be opened or written (names the file)."""
