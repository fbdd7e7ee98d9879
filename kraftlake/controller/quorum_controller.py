"""``QuorumController``: the metadata controller that runs on the active Raft leader.

After Kafka's ``QuorumController``: it holds the controller's state (the committed image, and while active the
image of its own appends), leadership (``activate`` / ``deactivate``), execution and the replay of committed
records. Commands are served by one manager per domain, each in its own module and each returning
``ControllerResult``s: ``ClusterControlManager`` (brokers), ``ReplicationControlManager`` (topics,
partitions, ISRs), ``ConfigurationControlManager`` (configs), ``FeatureControlManager`` (features) and
``ProducerIdControlManager``. The managers read the controller through ``ControllerState``
(``kraftlake.controller.state``); the ``handle_*`` methods here hand each command to its manager.

State changes only by replay. Every ``handle_*`` command reads the current image and returns a
``ControllerResult(records, response)``; nothing changes until ``execute(result)`` appends the records to the
metadata log, which replays them into the image (as Kafka's active controller replays its own records when it
appends them). Failed commands carry Kafka's error code and no records. The only state outside the image is
soft state that a new active controller rebuilds: broker heartbeat times and controlled-shutdown offsets.

Driving it (what the quorum service does):

- every controller, active or standby, gets committed records through ``handle_commit`` and keeps a hot
  image, so failover needs no bootstrap;
- on winning an election, ``activate(epoch, appender, now_ms)``: from then on commands are served against
  the committed image plus whatever this controller appends; bootstrap records (metadata.version and the
  other finalized features) are written if the log has none;
- on losing leadership, ``deactivate()``: uncommitted state is dropped and the controller goes back to
  replaying committed records.

Every result is all or nothing for readers: one batch, or, with more records than fit in one batch
(``max_records_per_batch``), a metadata transaction (Begin/EndTransactionRecord, metadata.version 3.6-IV1+)
appended as several batches. Kafka's ``ControllerResult`` has an ``atomic`` flag instead (an atomic result is
one batch or fails, a non-atomic one is split into plain batches); here the transaction gives every result
the atomic outcome, so there is no flag.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Generator, Iterable, Iterator, Sequence
from typing import Any, Protocol, cast

from kraftlake.controller.broker_index import BrokerPartitions
from kraftlake.controller.cluster_control import BrokerSession, ClusterControlManager
from kraftlake.controller.config import MV_3_6_IV1, ControllerConfig
from kraftlake.controller.configuration_control import ConfigurationControlManager
from kraftlake.controller.errors import NotActiveError
from kraftlake.controller.feature_control import FeatureControlManager
from kraftlake.controller.ids import TopicIdMinter
from kraftlake.controller.producer_id_control import ProducerIdControlManager
from kraftlake.controller.replication_control import ReplicationControlManager
from kraftlake.controller.requests import (
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ConfigChange,
    CreatableTopic,
    FeatureUpdate,
)
from kraftlake.controller.result import ControllerResult, RecordAndVersion, SimpleResponse, TopicsResponse
from kraftlake.controller.state import ControllerState
from kraftlake.image import EMPTY, ImageLoader, MetadataImage
from kraftlake.image.model import PartitionRegistration, TopicImage
from kraftlake.protocol import messages as m
from kraftlake.records.reader import MetadataRecord


class MetadataAppender(Protocol):
    """Where the active controller appends: one call = one batch; returns the batch's base offset."""

    def append(self, epoch: int, records: Sequence[RecordAndVersion]) -> int: ...

    def end_offset(self) -> int: ...


class QuorumController:
    """The quorum controller; see the module docstring for how to drive it.

    Parameters
    ----------
    config : ControllerConfig
    node_id : int
        This controller's node id (for messages only).
    seed : int or None
        Seeds the generator of topic ids (one stream per term, see ``kraftlake.controller.ids``), so that
        simulations are reproducible; None draws them from the operating system's generator, as Kafka does.
    image : MetadataImage
        The committed image to start from (a snapshot's), EMPTY for a new log.

    Attributes
    ----------
    cluster, replication, configuration, features, producer_ids
        The managers serving the commands (``ClusterControlManager``, ``ReplicationControlManager``,
        ``ConfigurationControlManager``, ``FeatureControlManager``, ``ProducerIdControlManager``).
    broker_partitions : BrokerPartitions
        Broker -> partitions, fed with every record this controller replays.
    topic_ids : TopicIdMinter
        Where new topic ids come from.
    """

    def __init__(
        self,
        config: ControllerConfig | None = None,
        *,
        node_id: int = 0,
        seed: int | None = None,
        image: MetadataImage = EMPTY,
    ) -> None:
        self.config = config or ControllerConfig()
        self.node_id = node_id
        self.topic_ids = TopicIdMinter(seed, node_id, image)
        # None while active: the committed image then moves by whole images (``_pending``), and a loader is
        # built only when replay resumes (``deactivate``)
        self._committed_loader: ImageLoader | None = ImageLoader(image)
        self._committed = image
        self._active = False
        self._epoch = -1
        self._appender: MetadataAppender | None = None
        self._latest: ImageLoader | None = None
        self._latest_image: MetadataImage | None = None
        self._pending: deque[tuple[int, MetadataImage]] = deque()  # (last offset, image after it)
        self._committed_upto = image.offset
        self._next_offset = image.offset + 1
        # broker -> partitions, fed with every record this controller replays (see broker_index)
        self.broker_partitions = BrokerPartitions(image)
        # the managers read this controller through a weak proxy: no reference cycle, so a controller that
        # is replaced (a snapshot loaded into a new one) is freed with its image at once
        state: ControllerState = self
        view = cast(ControllerState, weakref.proxy(state))
        self.features = FeatureControlManager(view)
        self.configuration = ConfigurationControlManager(view)
        self.replication = ReplicationControlManager(view, self.features, self.configuration)
        self.cluster = ClusterControlManager(view, self.features, self.replication)
        self.producer_ids = ProducerIdControlManager(view)

    # -- state ----------------------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self._active

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def image(self) -> MetadataImage:
        """The state commands are served against: committed plus (when active) this controller's appends."""
        if self._active:
            if self._latest_image is None:
                assert self._latest is not None
                self._latest_image = self._latest.image()
            return self._latest_image
        return self.committed_image

    @property
    def committed_image(self) -> MetadataImage:
        loader = self._committed_loader
        if loader is not None and loader.provenance != self._committed.provenance:
            self._committed = loader.image()
        return self._committed

    @property
    def next_offset(self) -> int:
        return self._next_offset

    # -- replay of committed records ------------------------------------------------------------------------

    def replay_committed(
        self, records: Sequence[Any], base_offset: int, epoch: int, timestamps: int | Sequence[int]
    ) -> None:
        """Committed metadata records (typed, no control records) at consecutive offsets from ``base_offset``:
        a standby's ``handle_commit`` of their envelopes, without building them."""
        if self._active:
            self.commit_upto(base_offset + len(records) - 1)
            return
        loader = self._standby_loader()
        loader.feed_batch(records, base_offset, epoch, timestamps)
        self.broker_partitions.observe_all(records)
        self.topic_ids.observe_all(records)
        self._committed = loader.image()

    def handle_commit(self, records: Iterable[MetadataRecord]) -> None:
        """Committed records, in log order (every controller, active or not).

        A standby replays them into its hot image. The active controller already replayed what it appended:
        it only moves its committed image forward.
        """
        if not self._active:
            loader = self._standby_loader()
            feed = loader.feed
            observe = self.broker_partitions.observe
            taken = self.topic_ids.observe_all
            for mr in records:
                feed(mr)
                if not mr.is_control:
                    observe(mr.type, mr.record)
                    if mr.type == "TopicRecord":
                        taken((mr.record,))
            # publish per batch (as Kafka's loader does) so the image stays hot for a failover
            self._committed = loader.image()
            return
        last = -1
        for mr in records:
            last = mr.offset
        self.commit_upto(last)

    def commit_upto(self, offset: int) -> None:
        """The active controller's records through ``offset`` are committed (it replayed them on append)."""
        if not self._active:
            raise NotActiveError(
                f"controller {self.node_id} is not active: committed records must be replayed"
            )
        if offset > self._committed_upto:
            self._committed_upto = offset
        self._advance_committed()

    def _standby_loader(self) -> ImageLoader:
        if self._committed_loader is None:
            self._committed_loader = ImageLoader(self._committed)
        return self._committed_loader

    def _advance_committed(self) -> None:
        # the log may commit a batch before ``execute`` has replayed it: pending entries wait for both
        while self._pending and self._pending[0][0] <= self._committed_upto:
            _, img = self._pending.popleft()
            self._committed = img
            self._committed_loader = None

    # -- leadership -----------------------------------------------------------------------------------------

    def activate(self, epoch: int, appender: MetadataAppender, now_ms: int) -> ControllerResult[None] | None:
        """Become the active controller at ``epoch``; appends go to ``appender`` from its end offset on.

        Serves commands at once from the hot committed image. A metadata transaction left open by the previous
        leader is aborted first. Returns the bootstrap result if the log held no metadata.version (it is
        executed already), else None.
        """
        base = self.committed_image
        self._active = True
        self._epoch = epoch
        self._appender = appender
        self.topic_ids.start_term(epoch, appender.end_offset())
        self._latest = ImageLoader(base)
        self._latest_image = base
        self._pending.clear()
        self._committed_upto = base.offset
        self._next_offset = appender.end_offset()
        self.cluster.activate(base, now_ms)
        if base.transaction is not None:
            # the previous leader died inside a metadata transaction: Kafka's new active controller aborts it
            # before anything else (KIP-868), or its own records would land inside it
            self.execute(
                ControllerResult(((m.AbortTransactionRecord(reason="Controller failover"), 0),), None)
            )
        if base.metadata_version is None:
            result = self.bootstrap_result()
            self.execute(result)
            return result
        return None

    def deactivate(self) -> None:
        """Stop being active: drop uncommitted state and replay committed records again."""
        self._active = False
        self._appender = None
        self._latest = None
        self._latest_image = None
        self._pending.clear()
        self._committed_loader = None  # built from the committed image by the next replay (_standby_loader)

    def bootstrap_result(self) -> ControllerResult[None]:
        """metadata.version first, then the other finalized features (Kafka's bootstrap metadata)."""
        return self.features.bootstrap_result()

    # -- execution ------------------------------------------------------------------------------------------

    def execute(self, result: ControllerResult[Any]) -> tuple[int, int]:
        """Append ``result``'s records (one batch, or a metadata transaction of several) and replay them.

        Returns ``(first offset, last offset)``, ``(-1, -1)`` when there is nothing to write.
        """
        steps = self.execute_steps(result)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                offsets: tuple[int, int] = done.value
                return offsets

    def execute_steps(
        self, result: ControllerResult[Any], step_records: int | None = None
    ) -> Generator[None, None, tuple[int, int]]:
        """``execute`` one batch at a time: the generator yields after each appended and replayed batch but
        the last, and returns ``(first offset, last offset)``.

        A driver that shares its thread with raft I/O (``kraftlake.service.ControllerHost``) runs other work
        between the steps, so that the controlled shutdown of a broker with many partitions does not stall
        replication past the fetch timeout. It must run no other command in between (they would land inside
        the metadata transaction); if this controller is deactivated in between, the next step raises
        ``NotActiveError``.
        ``step_records`` appends a metadata transaction in batches of at most that many records (shorter
        steps); a result that fits in one batch is always appended as one.
        """
        self._check_active()
        loader = self._latest  # replaced when this controller is deactivated (and activated again)
        records = list(result.records)
        if not records:
            return -1, -1
        limit = self.config.max_records_per_batch
        if len(records) > limit and self.metadata_version() >= MV_3_6_IV1:
            records = [(m.BeginTransactionRecord(name=None), 0), *records, (m.EndTransactionRecord(), 0)]
            if step_records is not None:
                limit = max(1, min(limit, step_records))
        first = -1
        last = -1
        for i in range(0, len(records), limit):
            if i:
                self._latest_image = (
                    None  # readers in between see the loader's state (before the transaction)
                )
                yield
                self._check_active()
                if self._latest is not loader:
                    raise NotActiveError(
                        f"controller {self.node_id} lost the epoch its command was appending in"
                    )
            latest, appender = self._latest, self._appender
            assert latest is not None and appender is not None
            chunk = records[i : i + limit]
            base = appender.append(self._epoch, chunk)
            if first < 0:
                first = base
            typed = [rec for rec, _ in chunk]
            latest.feed_batch(typed, base, self._epoch, 0)
            self.broker_partitions.observe_all(typed)
            self.topic_ids.observe_all(typed)
            last = base + len(chunk) - 1
            self._next_offset = last + 1
            if i + limit < len(records):
                # the committed state if the log commits this batch and not the next ones (a leader lost
                # mid-transaction): the transaction open, these records in it
                self._pending.append((last, latest.image()))
                self._advance_committed()  # a log may have committed it during the append
        assert self._latest is not None
        self._latest_image = self._latest.image()
        self._pending.append((last, self._latest_image))
        self._advance_committed()
        self.cluster.on_appended(result.records, last)
        return first, last

    def _check_active(self) -> None:
        if not self._active or self._appender is None or self._latest is None:
            raise NotActiveError(f"controller {self.node_id} is not the active controller")

    def records_len(self, n: int) -> int:
        """How many offsets ``n`` records take when executed (a transaction adds two)."""
        if n > self.config.max_records_per_batch and self.metadata_version() >= MV_3_6_IV1:
            return n + 2
        return n

    # -- what the managers read (``ControllerState``) and callers ask -----------------------------------------

    @property
    def sessions(self) -> dict[int, BrokerSession]:
        """Each registered broker's session (soft state of the cluster manager)."""
        return self.cluster.sessions

    def metadata_version(self) -> int:
        """The finalized metadata.version, or the configured one before the bootstrap records."""
        return self.features.metadata_version()

    def elr_enabled(self) -> bool:
        """Whether eligible leader replicas (KIP-966) are on."""
        return self.features.elr_enabled()

    def min_isr(self, img: MetadataImage, topic: str) -> int:
        """``min.insync.replicas`` of ``topic`` in ``img``."""
        return self.configuration.min_isr(img, topic)

    def unclean_enabled(self, img: MetadataImage, topic: str) -> bool:
        """``unclean.leader.election.enable`` of ``topic`` in ``img``."""
        return self.configuration.unclean_enabled(img, topic)

    def partitions_of(
        self, broker_id: int, img: MetadataImage
    ) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
        """The partitions of ``img`` that ``broker_id`` is a replica of; index entries the committed image
        still needs (this controller may lose leadership and fall back to it) are kept."""
        keep = (self._committed,) if self._active and self._committed is not img else ()
        return self.broker_partitions.partitions(broker_id, img, keep)

    # -- commands, each served by its manager ---------------------------------------------------------------

    def handle_register_broker(
        self, req: BrokerRegistrationRequest, now_ms: int
    ) -> ControllerResult[SimpleResponse]:
        return self.cluster.handle_register_broker(req, now_ms)

    def handle_heartbeat(self, req: BrokerHeartbeatRequest, now_ms: int) -> ControllerResult[SimpleResponse]:
        return self.cluster.handle_heartbeat(req, now_ms)

    def handle_fence_stale_broker(self, now_ms: int) -> ControllerResult[SimpleResponse] | None:
        return self.cluster.handle_fence_stale_broker(now_ms)

    def handle_unregister_broker(self, broker_id: int) -> ControllerResult[SimpleResponse]:
        return self.cluster.handle_unregister_broker(broker_id)

    def handle_create_topics(self, topics: Sequence[CreatableTopic]) -> ControllerResult[TopicsResponse]:
        return self.replication.handle_create_topics(topics)

    def handle_delete_topics(self, names: Sequence[str]) -> ControllerResult[TopicsResponse]:
        return self.replication.handle_delete_topics(names)

    def handle_create_partitions(
        self, counts: dict[str, int], assignments: dict[str, list[tuple[int, ...]]] | None = None
    ) -> ControllerResult[TopicsResponse]:
        return self.replication.handle_create_partitions(counts, assignments)

    def handle_alter_partition(self, req: AlterPartitionRequest) -> ControllerResult[SimpleResponse]:
        return self.replication.handle_alter_partition(req)

    def handle_alter_reassignments(
        self, reassignments: dict[tuple[str, int], Sequence[int] | None]
    ) -> ControllerResult[SimpleResponse]:
        return self.replication.handle_alter_reassignments(reassignments)

    def handle_elect_preferred_leaders(self) -> ControllerResult[SimpleResponse]:
        return self.replication.handle_elect_preferred_leaders()

    def handle_incremental_alter_configs(
        self, changes: Sequence[ConfigChange]
    ) -> ControllerResult[SimpleResponse]:
        return self.configuration.handle_incremental_alter_configs(changes)

    def handle_update_features(self, updates: Sequence[FeatureUpdate]) -> ControllerResult[SimpleResponse]:
        return self.features.handle_update_features(updates)

    def handle_allocate_producer_ids(
        self, broker_id: int, broker_epoch: int
    ) -> ControllerResult[SimpleResponse]:
        return self.producer_ids.handle_allocate_producer_ids(broker_id, broker_epoch)
