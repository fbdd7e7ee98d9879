"""The typed configuration of a service node and the ``id@host:port`` voter list syntax."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kraftlake.raft.config import QuorumConfig
from kraftlake.service.authorizer import (
    ClusterAuthorizer,
    VoterPrincipals,
    authorizer_from_properties,
    voter_principals_from_properties,
)
from kraftlake.service.errors import ServiceError
from kraftlake.service.rpc_common import DEFAULT_MAX_FRAME_BYTES
from kraftlake.wire.client_config import ClientSecurity
from kraftlake.wire.listener_config import PLAINTEXT, ListenerSecurity

Endpoint = tuple[str, int]


def parse_voters(text: str) -> dict[int, Endpoint]:
    """``"1@127.0.0.1:9001,2@127.0.0.1:9002"`` -> ``{1: ("127.0.0.1", 9001), 2: ...}``.

    Raises
    ------
    ServiceError
        On a malformed item or a duplicate id.
    """
    voters: dict[int, Endpoint] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        try:
            node, _, address = item.partition("@")
            host, _, port = address.rpartition(":")
            node_id, port_no = int(node), int(port)
        except ValueError:
            raise ServiceError(f"bad voter {item!r}: expected id@host:port") from None
        if not host or node_id in voters:
            raise ServiceError(f"bad voter {item!r}: empty host or duplicate id")
        voters[node_id] = (host, port_no)
    if not voters:
        raise ServiceError(f"no voters in {text!r}")
    return voters


def format_endpoint(endpoint: Endpoint) -> str:
    """``host:port``."""
    return f"{endpoint[0]}:{endpoint[1]}"


@dataclass(frozen=True)
class NodeConfig:
    """One voter of a service quorum.

    Parameters
    ----------
    node_id
        This node's id; must be among `voters`.
    voters
        Every voter's id and its endpoint (port 0 in a `LocalQuorum` before binding); this node listens on its
        own.
    data_dir
        The node's Kafka log dir: ``meta.properties`` and ``__cluster_metadata-0/`` live in it.
    cluster_id
        Carried by every frame; a request with another cluster id is refused.
    fsync
        Whether log flushes fsync.
    max_frame_bytes
        Frames above this size are refused (the connection is closed after a typed error frame).
    quorum
        The raft timers and limits; its voter set must equal `voters`' ids.
    snapshot_max_bytes
        Committed record bytes after which a snapshot is written (Kafka's
        `metadata.log.max.record.bytes.between.snapshots`, 20 MiB).
    snapshot_interval_ms
        Time after which a snapshot is written if anything was committed (Kafka's
        `metadata.log.max.snapshot.interval.ms`, 1 hour; 0 disables it).
    segment_bytes
        Size at which the log rolls to a new segment (Kafka's `metadata.log.segment.bytes`, 1 GiB); segments
        wholly below the log start offset are deleted.
    retention_bytes
        Kafka's `metadata.max.retention.bytes` (100 MiB): after a snapshot, older snapshots and the log before
        them are deleted only while the log holds more than this, so an observer (the streaming source) that is
        behind the latest snapshot can still read the records; 0 deletes the log before each snapshot at once.
    listener_security
        The security of this node's listener (``--listener-config``: TLS, SASL, the authorizer and its ACLs in
        `ListenerSecurity.properties`); PLAINTEXT by default, which only a loopback address may use unless
        `allow_plaintext` says otherwise.
    peer_security
        How this node connects to the other voters (``--command-config``: Kafka's client properties); None is
        PLAINTEXT.
    allow_plaintext
        Listen in PLAINTEXT on a non-loopback address anyway (anyone who reaches the port can then vote in a
        voter's name).
    max_unsent_bytes
        A connection is not read while more than this of its replies is unsent (32 MiB).
    max_unsent_total_bytes
        The voter's budget for unsent replies across all its connections (128 MiB): past it, observer Fetches
        are answered only as replies drain, and a connection holding more than its share (the budget over the
        open connections) is not read.
    max_connections
        Inbound connections at most (Kafka's ``max.connections``); `reserved_connections` of them are kept for
        proven connections (authenticated by SASL or a client certificate, or that sent a voter's request or
        an append with the credential): a new connection past the rest closes the oldest unproven one instead
        of being refused.
    connections_max_idle_ms
        Kafka's ``connections.max.idle.ms`` (10 minutes): an inbound connection without a request for this
        long is closed.
    sasl_handshake_timeout_ms
        A SASL listener's connection that has not authenticated this long after it was accepted is closed.
    voter_directory_ids
        The other voters' directory ids (from their ``meta.properties``), when known: a Vote, Fetch or
        FetchSnapshot in a voter's name must carry its directory id. A voter not listed here is pinned to the
        directory id of the first such request in its name.
    """

    node_id: int
    voters: dict[int, Endpoint]
    data_dir: Path
    cluster_id: str
    fsync: bool = True
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    quorum: QuorumConfig | None = None
    seed: int | None = None
    reconnect_backoff_ms: tuple[int, int] = field(default=(20, 1000))
    snapshot_max_bytes: int = 20 * 1024 * 1024
    snapshot_interval_ms: int = 60 * 60 * 1000
    segment_bytes: int = 1024 * 1024 * 1024
    retention_bytes: int = 100 * 1024 * 1024
    max_connections: int = 200
    reserved_connections: int = 20
    connections_max_idle_ms: int = 600_000
    sasl_handshake_timeout_ms: int = 10_000
    max_unsent_bytes: int = 32 * 1024 * 1024
    max_unsent_total_bytes: int = 128 * 1024 * 1024
    listener_security: ListenerSecurity = PLAINTEXT
    peer_security: ClientSecurity | None = None
    allow_plaintext: bool = False
    voter_directory_ids: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.node_id not in self.voters:
            raise ServiceError(f"node {self.node_id} is not among the voters {sorted(self.voters)}")
        if self.quorum is not None and self.quorum.voters != frozenset(self.voters):
            raise ServiceError("the quorum config's voters differ from the endpoints' ids")
        if not self.cluster_id:
            raise ServiceError("a cluster id is required")
        if self.snapshot_max_bytes <= 0 or self.snapshot_interval_ms < 0 or self.segment_bytes <= 0:
            raise ServiceError("snapshot_max_bytes and segment_bytes must be > 0, snapshot_interval_ms >= 0")
        if self.retention_bytes < 0:
            raise ServiceError(f"retention_bytes must be >= 0, got {self.retention_bytes}")
        if self.max_connections <= 0 or self.max_unsent_bytes <= 0 or self.max_unsent_total_bytes <= 0:
            raise ServiceError("max_connections, max_unsent_bytes and max_unsent_total_bytes must be > 0")
        if not 0 <= self.reserved_connections < self.max_connections:
            raise ServiceError(
                f"reserved_connections {self.reserved_connections} must be in [0, max_connections)"
            )
        if self.connections_max_idle_ms <= 0 or self.sasl_handshake_timeout_ms <= 0:
            raise ServiceError("connections_max_idle_ms and sasl_handshake_timeout_ms must be > 0")
        self.authorizer  # noqa: B018 - its properties are checked now, not at the first request
        self.voter_principals  # noqa: B018 - likewise

    @property
    def authorizer(self) -> ClusterAuthorizer:
        """Who may send what (`kraftlake.service.authorizer`), from the listener's properties."""
        return authorizer_from_properties(self.listener_security.properties, self.listener_security.source)

    @property
    def voter_principals(self) -> VoterPrincipals:
        """Which principals speak for which voter (`kraftlake.service.authorizer.VoterPrincipals`)."""
        return voter_principals_from_properties(
            self.listener_security.properties, self.listener_security.source, frozenset(self.voters)
        )

    @property
    def quorum_config(self) -> QuorumConfig:
        """The raft configuration (Kafka's defaults unless given)."""
        return self.quorum if self.quorum is not None else QuorumConfig(voters=frozenset(self.voters))
