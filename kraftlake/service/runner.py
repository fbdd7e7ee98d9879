"""`NodeRunner`: one voter on an asyncio loop, composed of its raft driver, request server and observer server.

`RaftDriver` drives the raft node (timers, raft peers, the log's flush, snapshots, commits), `RequestServer`
serves the listener's connections (admission, authentication, authorization, the voters' raft RPCs, the
append RPC, ApiVersions, DescribeCluster and DescribeQuorum), `ObserverServer` answers observers' Fetch and
FetchSnapshot, and `ConnectionTable` holds the connections and their unsent-reply budget. The runner builds
them, prepares the data dir and runs their life cycle: `bind`, `start`, `stop`.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Callable
from pathlib import Path

from kraftlake.logformat import MetaProperties, read_meta_properties, write_meta_properties
from kraftlake.raft.messages import SnapshotId
from kraftlake.raft.node import AppendResult, RaftNode
from kraftlake.service.config import NodeConfig
from kraftlake.service.connections import ConnectionTable
from kraftlake.service.errors import ServiceError
from kraftlake.service.file_log import FileRaftLog
from kraftlake.service.limited_log import mono_ms
from kraftlake.service.listener import Listener
from kraftlake.service.messages import CommittedEntry, QuorumDescription
from kraftlake.service.observer_server import ObserverServer
from kraftlake.service.raft_driver import RaftDriver
from kraftlake.service.request_server import RequestServer
from kraftlake.service.rpc_common import warm_up
from kraftlake.service.snapshots import SnapshotPolicy, SnapshotProvider

HOST = "127.0.0.1"


APPEND_SECRET_FILE = "append.secret"
"""The append credential in each voter's data dir (0600): what `QuorumClient` must send with an append."""


def ensure_append_secret(data_dir: Path, secret: str | None = None) -> str:
    """The voter's append credential, created (`secret`, or random; mode 0600) at its first start."""
    path = data_dir / APPEND_SECRET_FILE
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(encoding="ascii").strip()
    secret = secret or secrets.token_urlsafe(32)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(secret + "\n")
        f.flush()
        os.fsync(f.fileno())
    return secret


def ensure_directory_id(data_dir: Path, cluster_id: str, node_id: int) -> str:
    """The voter's directory id from ``meta.properties`` in `data_dir`, which is written (with a new random id)
    when absent.

    Raises
    ------
    ServiceError
        If the file belongs to another cluster or node.
    """
    meta_path = data_dir / "meta.properties"
    if meta_path.exists():
        meta = read_meta_properties(meta_path)
        if meta.cluster_id != cluster_id or meta.node_id != node_id:
            raise ServiceError(
                f"{meta_path} belongs to cluster {meta.cluster_id} node {meta.node_id}, not "
                f"{cluster_id} node {node_id}"
            )
        return meta.directory_id or ""
    data_dir.mkdir(parents=True, exist_ok=True)
    directory_id = new_uuid()
    write_meta_properties(meta_path, MetaProperties(cluster_id, node_id, directory_id=directory_id))
    return directory_id


def new_uuid() -> str:
    """A random uuid in Kafka's base64url form (22 characters)."""
    return urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


class NodeRunner:
    """One voter on the running asyncio loop: its server, peer channels, log files and raft node."""

    def __init__(
        self,
        config: NodeConfig,
        listeners: list[Listener] | None = None,
        snapshot_provider: SnapshotProvider | None = None,
    ) -> None:
        self.config = config
        self.snapshot_provider = snapshot_provider
        self.node_id = config.node_id
        self.listeners: list[Listener] = list(listeners or [])
        self.server: asyncio.Server | None = None
        self.port = config.voters[config.node_id][1]
        self._driver = RaftDriver(config, self.listeners, snapshot_provider)
        self._connections = ConnectionTable(config)
        self._observers = ObserverServer(config, self._driver, self._connections.unsent_total)
        self._requests = RequestServer(
            config, self._driver, self._observers, self._connections, self.describe
        )

    @property
    def node(self) -> RaftNode | None:
        """The raft node (from `start` on)."""
        return self._driver.node

    @property
    def log_store(self) -> FileRaftLog | None:
        """The log in Kafka's layout (from `start` on)."""
        return self._driver.log_store

    @property
    def directory_id(self) -> str:
        """This voter's directory id from ``meta.properties`` ("" before `start`)."""
        return self._driver.directory_id

    @property
    def voters(self) -> dict[int, tuple[str, int]]:
        """The voters' endpoints by id."""
        return self._driver.voters

    @property
    def partition_dir(self) -> Path:
        """The metadata partition's directory in the data dir."""
        return self._driver.partition_dir

    @property
    def snapshot_policy(self) -> SnapshotPolicy:
        """When snapshots are written (Kafka's bytes-or-interval policy)."""
        return self._driver.snapshot_policy

    # -- life cycle ----------------------------------------------------------------------------------------
    async def bind(self) -> int:
        """Start listening (before `start`, so a local quorum can learn the ports); return the port. Requests
        that arrive before `start` has finished wait for it."""
        self.server = await self._requests.bind(self.voters[self.node_id][0], self.port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def start(self, voters: dict[int, tuple[str, int]] | None = None) -> None:
        """Open the log and quorum-state, build the node, connect to the peers."""
        if voters is not None:
            self._driver.voters = dict(voters)
        if self.server is None:
            await self.bind()
        self.partition_dir.mkdir(parents=True, exist_ok=True)
        append_secret = ensure_append_secret(self.config.data_dir)
        directory_id = ensure_directory_id(self.config.data_dir, self.config.cluster_id, self.node_id)
        warm_up()
        self._driver.start(directory_id)
        self._requests.open(append_secret)

    async def stop(self) -> None:
        """Stop serving, close the log; pending appends fail with `ServiceStoppedError`."""
        self._driver.halt()
        self._requests.close()
        await self._driver.stop_peers()
        await self._requests.wait_closed()
        self._driver.close()

    # -- API (on the loop) ---------------------------------------------------------------------------------
    def append(self, values: list[bytes], resolve: Callable[[tuple[int, int] | BaseException], None]) -> None:
        """Append on the leader; `resolve` gets (base offset, last offset) once committed, or an exception."""
        self._driver.append(values, resolve)

    def append_assigned(
        self, values: list[bytes], resolve: Callable[[tuple[int, int] | BaseException], None]
    ) -> AppendResult:
        """Append on the leader and return where the values will land (base, last offset, epoch) at once.

        `resolve` gets (base offset, last offset) once they are committed in that epoch, or `NotLeaderError`
        if they never are (leadership lost before they were written, or replaced by another leader's
        entries). A state machine that replays its own uncommitted records (the quorum controller) needs the
        offsets now, not at commit time.

        Raises
        ------
        NotLeaderError, ServiceStoppedError
            Nothing was appended (`resolve` is not called).
        """
        return self._driver.append_assigned(values, resolve)

    def read_committed(self, from_offset: int, max_records: int) -> list[CommittedEntry]:
        """Committed entries from `from_offset` (at most `max_records`)."""
        return self._driver.read_committed(from_offset, max_records)

    def snapshot_now(self) -> SnapshotId | None:
        """Write a snapshot of everything applied now, synchronously (None if nothing is past the log start)."""
        return self._driver.snapshot_now()

    def describe(self) -> QuorumDescription:
        """The status as this node knows it (replication rows only on the leader, observers included)."""
        return self._driver.describe(self._observers.tracked(mono_ms()))
