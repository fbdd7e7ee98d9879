"""``QuorumController``: the metadata controller that runs on the active Raft leader.

After Kafka's ``QuorumController`` and its managers (``ClusterControlManager``, ``BrokerHeartbeatManager``,
``ReplicationControlManager``, ``ConfigurationControlManager``, ``FeatureControlManager``,
``ProducerIdControlManager``), folded into one class over one state: a ``kraftlake.image`` image.

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

import re
from collections import deque
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kraftlake.controller.broker_index import BrokerPartitions
from kraftlake.controller.config import (
    ELR_FEATURE,
    MV_3_3_IV2,
    MV_3_6_IV1,
    SUPPORTED_FEATURES,
    ControllerConfig,
    partition_record_version,
    register_broker_record_version,
)
from kraftlake.controller.errors import NotActiveError
from kraftlake.controller.ids import TopicIdMinter
from kraftlake.controller.partition_change import (
    RECOVERED,
    RECOVERING,
    UNDECIDED,
    Election,
    PartitionChangeBuilder,
    isr_removal,
)
from kraftlake.controller.placement import PlacementError, place
from kraftlake.controller.requests import (
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ConfigChange,
    ConfigOp,
    CreatableTopic,
    FeatureUpdate,
    ResourceType,
    UpgradeType,
)
from kraftlake.controller.result import (
    OK,
    ApiError,
    ControllerResult,
    Errors,
    RecordAndVersion,
    SimpleResponse,
    TopicResult,
    TopicsResponse,
)
from kraftlake.image import EMPTY, ImageLoader, MetadataImage
from kraftlake.image.delta import merge_partition
from kraftlake.image.model import MIGRATING_DIR, NO_LEADER, PartitionRegistration
from kraftlake.protocol import messages as m
from kraftlake.records.reader import MetadataRecord

METADATA_VERSION = "metadata.version"
TOPIC = int(ResourceType.TOPIC)
BROKER = int(ResourceType.BROKER)
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
UNASSIGNED_DIR = "AAAAAAAAAAAAAAAAAAAAAA"
_BROKER_CHANGE = m.BrokerRegistrationChangeRecord


def _int_at_least(lo: int) -> Callable[[str], bool]:
    def check(v: str) -> bool:
        try:
            return int(v) >= lo
        except ValueError:
            return False

    return check


def _bool(v: str) -> bool:
    return v.lower() in ("true", "false")


# Topic configs this controller validates (a subset of Kafka's LogConfig); unknown names are INVALID_CONFIG.
TOPIC_CONFIGS: dict[str, Callable[[str], bool]] = {
    "cleanup.policy": lambda v: all(p in ("delete", "compact") for p in v.split(",")),
    "compression.type": lambda v: v in ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "delete.retention.ms": _int_at_least(0),
    "max.message.bytes": _int_at_least(0),
    "min.insync.replicas": _int_at_least(1),
    "retention.bytes": _int_at_least(-1),
    "retention.ms": _int_at_least(-1),
    "segment.bytes": _int_at_least(14),
    "segment.ms": _int_at_least(1),
    "unclean.leader.election.enable": _bool,
    "message.timestamp.type": lambda v: v in ("CreateTime", "LogAppendTime"),
    "follower.replication.throttled.replicas": lambda v: True,
    "leader.replication.throttled.replicas": lambda v: True,
}


class MetadataAppender(Protocol):
    """Where the active controller appends: one call = one batch; returns the batch's base offset."""

    def append(self, epoch: int, records: Sequence[RecordAndVersion]) -> int: ...

    def end_offset(self) -> int: ...


@dataclass(slots=True)
class BrokerSession:
    """Soft state of one broker (Kafka's ``BrokerHeartbeatState``), rebuilt by a new active controller."""

    last_contact_ms: int
    controlled_shutdown_offset: int = -1


def _without(items: Sequence[int], drop: int) -> tuple[int, ...]:
    return tuple(x for x in items if x != drop)


def _error(code: Errors, message: str | None = None) -> ApiError:
    return ApiError(code, message)


def _fail(code: Errors, message: str | None = None, **data: Any) -> ControllerResult[SimpleResponse]:
    return ControllerResult((), SimpleResponse(_error(code, message), data))


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
        self._placement_start = 0
        self.sessions: dict[int, BrokerSession] = {}
        # broker -> partitions, fed with every record this controller replays (see broker_index)
        self.broker_partitions = BrokerPartitions(image)
        self._sorted_brokers: tuple[object, list[int]] = (None, [])

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
        cs_offset = max(base.offset, 0)
        self.sessions = {
            bid: BrokerSession(now_ms, cs_offset if b.in_controlled_shutdown else -1)
            for bid, b in base.brokers.items()
        }
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
        records: list[RecordAndVersion] = [
            (m.FeatureLevelRecord(name=METADATA_VERSION, feature_level=self.config.metadata_version), 0)
        ]
        for name in sorted(self.config.features):
            if self.config.features[name] > 0:
                records.append((m.FeatureLevelRecord(name=name, feature_level=self.config.features[name]), 0))
        return ControllerResult(tuple(records), None)

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
        between the steps, so that a 60k-record controlled shutdown does not stall replication past the fetch
        timeout. It must run no other command in between (they would land inside the metadata transaction);
        if this controller is deactivated in between, the next step raises ``NotActiveError``.
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
        for rec, _ in result.records:
            change: Any = rec
            if type(rec) is _BROKER_CHANGE and change.in_controlled_shutdown == 1:
                session = self.sessions.get(change.broker_id)
                if session is not None:
                    session.controlled_shutdown_offset = last
        return first, last

    def _check_active(self) -> None:
        if not self._active or self._appender is None or self._latest is None:
            raise NotActiveError(f"controller {self.node_id} is not the active controller")

    def _records_len(self, n: int) -> int:
        """How many offsets ``n`` records take when executed (a transaction adds two)."""
        if n > self.config.max_records_per_batch and self.metadata_version() >= MV_3_6_IV1:
            return n + 2
        return n

    # -- helpers --------------------------------------------------------------------------------------------

    def metadata_version(self) -> int:
        mv = self.image.metadata_version
        return mv if mv is not None else self.config.metadata_version

    def elr_enabled(self) -> bool:
        return self.image.features.get(ELR_FEATURE, 0) >= 1 and self.metadata_version() >= 23

    def _config_value(self, img: MetadataImage, topic: str, name: str) -> str | None:
        cfg = img.configs.get((TOPIC, topic))
        if cfg and name in cfg:
            return cfg[name]
        cfg = img.configs.get((BROKER, ""))
        if cfg and name in cfg:
            return cfg[name]
        return None

    def min_isr(self, img: MetadataImage, topic: str) -> int:
        v = self._config_value(img, topic, "min.insync.replicas")
        return int(v) if v is not None else self.config.min_insync_replicas

    def unclean_enabled(self, img: MetadataImage, topic: str) -> bool:
        v = self._config_value(img, topic, "unclean.leader.election.enable")
        return v.lower() == "true" if v is not None else self.config.unclean_leader_election

    def _acceptable(self, img: MetadataImage, exclude: frozenset[int] = frozenset()) -> Callable[[int], bool]:
        brokers = img.brokers

        def ok(b: int) -> bool:
            reg = brokers.get(b)
            return reg is not None and not reg.fenced and not reg.in_controlled_shutdown and b not in exclude

        return ok

    def _default_dir(self, img: MetadataImage) -> Callable[[int], str]:
        def d(b: int) -> str:
            reg = img.brokers.get(b)
            if reg is None or not reg.directories:
                return MIGRATING_DIR
            return reg.directories[0] if len(reg.directories) == 1 else UNASSIGNED_DIR

        return d

    def _builder(
        self,
        img: MetadataImage,
        topic_name: str,
        topic_id: str,
        pid: int,
        p: PartitionRegistration,
        acceptable: Callable[[int], bool],
    ) -> PartitionChangeBuilder:
        b = PartitionChangeBuilder(
            p,
            topic_id,
            pid,
            acceptable,
            self.metadata_version(),
            self.min_isr(img, topic_name),
            elr_enabled=self.elr_enabled(),
            default_dir=self._default_dir(img),
        )
        if self.unclean_enabled(img, topic_name):
            b.set_election(Election.UNCLEAN)
        return b

    def _check_broker(self, img: MetadataImage, broker_id: int, epoch: int) -> ApiError | None:
        reg = img.brokers.get(broker_id)
        if reg is None:
            return _error(Errors.BROKER_ID_NOT_REGISTERED, f"Broker {broker_id} is not registered")
        if reg.epoch != epoch:
            return _error(
                Errors.STALE_BROKER_EPOCH, f"Expected broker epoch {reg.epoch}, but got broker epoch {epoch}"
            )
        return None

    def _fence_record(self, broker_id: int, epoch: int, fence: bool) -> RecordAndVersion:
        if self.metadata_version() >= MV_3_3_IV2:
            return m.BrokerRegistrationChangeRecord(
                broker_id=broker_id, broker_epoch=epoch, fenced=1 if fence else -1
            ), 0
        if fence:
            return m.FenceBrokerRecord(id=broker_id, epoch=epoch), 0
        return m.UnfenceBrokerRecord(id=broker_id, epoch=epoch), 0

    def _remove_from_isrs(
        self,
        img: MetadataImage,
        broker_id: int,
        records: list[RecordAndVersion],
        *,
        unclean_shutdown: bool = False,
    ) -> None:
        """Kafka's ``generateLeaderAndIsrUpdates`` removing ``broker_id``: shrink ISRs, move leadership off.

        Visits only the broker's partitions (``broker_partitions``); ``unclean_shutdown`` also drops the
        broker from ELR and last known ELR (it may have lost its log tail: KIP-966).
        """
        general = self._acceptable(img, frozenset((broker_id,)))
        verdicts: dict[int, bool] = {}  # a few hundred brokers answer for tens of thousands of partitions

        def acceptable(b: int) -> bool:
            ok = verdicts.get(b)
            if ok is None:
                ok = verdicts[b] = general(b)
            return ok

        mv = self.metadata_version()
        elr_enabled = self.elr_enabled()
        default_dir = self._default_dir(img)
        per_topic: dict[str, tuple[int, bool]] = {}
        add = records.append
        for t, pid, p in self._broker_partitions(broker_id, img):
            if not (
                broker_id in p.isr
                or p.leader == broker_id
                or (unclean_shutdown and (broker_id in p.elr or broker_id in p.last_known_elr))
            ):
                continue
            topic_args = per_topic.get(t.name)
            if topic_args is None:
                topic_args = per_topic[t.name] = (
                    self.min_isr(img, t.name),
                    self.unclean_enabled(img, t.name),
                )
            if not unclean_shutdown and not topic_args[1]:
                fast = isr_removal(p, t.id, pid, broker_id, acceptable, mv, topic_args[0], elr_enabled)
                if fast is not UNDECIDED:
                    if fast is not None:
                        add(fast)  # type: ignore[arg-type]
                    continue
            b = PartitionChangeBuilder(
                p, t.id, pid, acceptable, mv, topic_args[0], elr_enabled=elr_enabled, default_dir=default_dir
            )
            if topic_args[1]:
                b.set_election(Election.UNCLEAN)
            b.set_target_isr(_without(p.isr, broker_id))
            if unclean_shutdown:
                b.set_unclean_shutdown_replicas((broker_id,))
                b.set_target_elr(_without(p.elr, broker_id))
                b.target_last_known_elr = _without(p.last_known_elr, broker_id)
            rec = b.build()
            if rec is not None:
                records.append(rec)

    def _broker_partitions(self, broker_id: int, img: MetadataImage) -> Any:
        """The partitions of ``img`` that ``broker_id`` is a replica of; index entries the committed image
        still needs (this controller may lose leadership and fall back to it) are kept."""
        keep = (self._committed,) if self._active and self._committed is not img else ()
        return self.broker_partitions.partitions(broker_id, img, keep)

    def _elect_for_unfenced(
        self, img: MetadataImage, broker_id: int, records: list[RecordAndVersion]
    ) -> None:
        """Leaderless partitions the newly unfenced broker can lead get it (Kafka's handleBrokerUnfenced)."""
        brokers = img.brokers

        def acceptable(b: int) -> bool:
            if b == broker_id:
                return True
            reg = brokers.get(b)
            return reg is not None and not reg.fenced and not reg.in_controlled_shutdown

        for t, pid, p in self._broker_partitions(broker_id, img):
            if p.leader != NO_LEADER:
                continue
            rec = self._builder(img, t.name, t.id, pid, p, acceptable).build()
            if rec is not None:
                records.append(rec)

    # -- cluster: registration, heartbeats, fencing, controlled shutdown ------------------------------------

    def handle_register_broker(
        self, req: BrokerRegistrationRequest, now_ms: int
    ) -> ControllerResult[SimpleResponse]:
        """BrokerRegistration: a RegisterBrokerRecord (fenced) whose epoch is its own offset."""
        img = self.image
        mv = self.metadata_version()
        features = req.features if req.features is not None else SUPPORTED_FEATURES
        lo, hi = features.get(METADATA_VERSION, (0, 0))
        if not lo <= mv <= hi:
            return _fail(
                Errors.UNSUPPORTED_VERSION,
                f"Unable to register because the broker does not support finalized version {mv} of "
                f"metadata.version. The broker wants a version between {lo} and {hi}, inclusive.",
            )
        for name, level in img.features.items():
            if (
                name != METADATA_VERSION
                and name in features
                and not features[name][0] <= level <= features[name][1]
            ):
                return _fail(Errors.UNSUPPORTED_VERSION, f"broker does not support {name} level {level}")
        existing = img.brokers.get(req.broker_id)
        session = self.sessions.get(req.broker_id)
        if (
            existing is not None
            and existing.incarnation_id != req.incarnation_id
            and session is not None
            and not existing.fenced
            and now_ms - session.last_contact_ms < self.config.session_timeout_ms
        ):
            return _fail(
                Errors.DUPLICATE_BROKER_REGISTRATION,
                f"Another broker is registered with that broker id {req.broker_id}.",
            )
        records: list[RecordAndVersion] = []
        if existing is not None and req.previous_broker_epoch != existing.epoch:
            # an unclean shutdown: the broker may have lost its unflushed tail
            self._remove_from_isrs(img, req.broker_id, records, unclean_shutdown=self.elr_enabled())
        epoch = self._next_offset + len(records)
        if self._records_len(len(records) + 1) != len(records) + 1:
            epoch += 1  # a BeginTransactionRecord comes first
        version = register_broker_record_version(mv)
        rec = m.RegisterBrokerRecord(
            broker_id=req.broker_id,
            incarnation_id=req.incarnation_id,
            broker_epoch=epoch,
            end_points=tuple(
                m.RegisterBrokerRecord.BrokerEndpoint(
                    name=ep.name, host=ep.host, port=ep.port, security_protocol=ep.security_protocol
                )
                for ep in req.listeners
            ),
            features=tuple(
                m.RegisterBrokerRecord.BrokerFeature(
                    name=n, min_supported_version=lo_, max_supported_version=hi_
                )
                for n, (lo_, hi_) in sorted(features.items())
            ),
            rack=req.rack,
            fenced=True,
            in_controlled_shutdown=False,
            log_dirs=tuple(req.log_dirs) if version >= 3 else (),
        )
        records.append((rec, version))
        self.sessions[req.broker_id] = BrokerSession(now_ms)
        return ControllerResult(tuple(records), SimpleResponse(OK, {"broker_epoch": epoch}))

    def handle_heartbeat(self, req: BrokerHeartbeatRequest, now_ms: int) -> ControllerResult[SimpleResponse]:
        """BrokerHeartbeat: keeps the session, unfences a caught-up broker, drives controlled shutdown."""
        img = self.image
        err = self._check_broker(img, req.broker_id, req.broker_epoch)
        if err is not None:
            return ControllerResult((), SimpleResponse(err))
        reg = img.brokers[req.broker_id]
        session = self.sessions.setdefault(req.broker_id, BrokerSession(now_ms))
        session.last_contact_ms = now_ms
        caught_up = req.current_metadata_offset >= reg.epoch
        records: list[RecordAndVersion] = []
        fenced, shut_down = reg.fenced, False
        if reg.fenced:
            if req.want_shutdown:
                shut_down = True
            elif not req.want_fence and caught_up:
                records.append(self._fence_record(reg.id, reg.epoch, fence=False))
                self._elect_for_unfenced(img, reg.id, records)
                fenced = False
        elif reg.in_controlled_shutdown:
            if req.current_metadata_offset >= session.controlled_shutdown_offset >= 0:
                records.append(self._fence_record(reg.id, reg.epoch, fence=True))
                self._remove_from_isrs(img, reg.id, records)
                fenced = shut_down = True
        elif req.want_fence:
            records.append(self._fence_record(reg.id, reg.epoch, fence=True))
            self._remove_from_isrs(img, reg.id, records)
            fenced = True
        elif req.want_shutdown:
            # controlled shutdown: one result moving every leadership off and shrinking every ISR
            records.append(
                (
                    m.BrokerRegistrationChangeRecord(
                        broker_id=reg.id, broker_epoch=reg.epoch, in_controlled_shutdown=1
                    ),
                    1,
                )
            )
            self._remove_from_isrs(img, reg.id, records)
        return ControllerResult(
            tuple(records),
            SimpleResponse(
                OK, {"is_fenced": fenced, "should_shut_down": shut_down, "is_caught_up": caught_up}
            ),
        )

    def handle_fence_stale_broker(self, now_ms: int) -> ControllerResult[SimpleResponse] | None:
        """Fence the lowest-id unfenced broker silent for ``session_timeout_ms``; None if there is none.

        One broker per call, as Kafka's ``maybeFenceOneStaleBroker``: the next call must see this result
        executed, so call it again (after ``execute``) until it returns None.
        """
        img = self.image
        brokers = img.brokers
        if self._sorted_brokers[0] is not brokers:  # called every tick: sort only when the brokers change
            self._sorted_brokers = (brokers, sorted(brokers))
        sessions = self.sessions
        timeout = self.config.session_timeout_ms
        for bid in self._sorted_brokers[1]:
            reg = brokers[bid]
            session = sessions.get(bid)
            if session is None:
                session = sessions[bid] = BrokerSession(now_ms)
            if reg.fenced or now_ms - session.last_contact_ms < timeout:
                continue
            records = [self._fence_record(bid, reg.epoch, fence=True)]
            self._remove_from_isrs(img, bid, records)
            return ControllerResult(tuple(records), SimpleResponse(OK, {"broker_id": bid}))
        return None

    def handle_unregister_broker(self, broker_id: int) -> ControllerResult[SimpleResponse]:
        img = self.image
        reg = img.brokers.get(broker_id)
        if reg is None:
            return _fail(
                Errors.BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered"
            )
        records: list[RecordAndVersion] = []
        self._remove_from_isrs(img, broker_id, records)
        records.append((m.UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=reg.epoch), 0))
        self.sessions.pop(broker_id, None)
        return ControllerResult(tuple(records), SimpleResponse(OK))

    # -- topics ---------------------------------------------------------------------------------------------

    def _usable_brokers(self, img: MetadataImage) -> list[int]:
        return [b for b, r in img.brokers.items() if not r.fenced and not r.in_controlled_shutdown]

    def _partition_record(
        self, img: MetadataImage, topic_id: str, pid: int, replicas: tuple[int, ...]
    ) -> RecordAndVersion:
        usable = self._acceptable(img)
        isr = tuple(r for r in replicas if usable(r))
        version = partition_record_version(self.metadata_version())
        default_dir = self._default_dir(img)
        rec = m.PartitionRecord(
            partition_id=pid,
            topic_id=topic_id,
            replicas=replicas,
            isr=isr,
            removing_replicas=(),
            adding_replicas=(),
            leader=isr[0] if isr else NO_LEADER,
            leader_recovery_state=RECOVERED,
            leader_epoch=0,
            partition_epoch=0,
            directories=tuple(default_dir(r) for r in replicas) if version >= 1 else (),
            eligible_leader_replicas=() if version >= 2 else None,
            last_known_elr=() if version >= 2 else None,
        )
        return rec, version

    def _validate_assignment(self, img: MetadataImage, replicas: Sequence[int]) -> ApiError | None:
        if not replicas:
            return _error(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes an empty replica list.",
            )
        if len(set(replicas)) != len(replicas):
            return _error(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes duplicate replicas {list(replicas)}.",
            )
        for r in replicas:
            if r not in img.brokers:
                return _error(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {r}, but no such broker is registered.",
                )
        return None

    def handle_create_topics(self, topics: Sequence[CreatableTopic]) -> ControllerResult[TopicsResponse]:
        """CreateTopics: per topic a TopicRecord, its ConfigRecords and PartitionRecords (all or nothing per topic)."""
        img = self.image
        records: list[RecordAndVersion] = []
        results: list[TopicResult] = []
        seen: set[str] = set()
        for t in topics:
            err = self._validate_new_topic(img, t, seen)
            if err is not None:
                results.append(TopicResult(t.name, err))
                continue
            n = t.num_partitions if t.num_partitions != -1 else self.config.default_num_partitions
            rf = (
                t.replication_factor if t.replication_factor != -1 else self.config.default_replication_factor
            )
            if t.assignments:
                bad = next(
                    (e for e in (self._validate_assignment(img, r) for r in t.assignments.values()) if e),
                    None,
                )
                if bad is not None:
                    results.append(TopicResult(t.name, bad))
                    continue
                if sorted(t.assignments) != list(range(len(t.assignments))):
                    results.append(
                        TopicResult(
                            t.name,
                            _error(Errors.INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered 0..n-1"),
                        )
                    )
                    continue
                assignment = [tuple(t.assignments[p]) for p in range(len(t.assignments))]
                n, rf = len(assignment), len(assignment[0])
            else:
                if n <= 0:
                    results.append(
                        TopicResult(
                            t.name,
                            _error(
                                Errors.INVALID_PARTITIONS,
                                "Number of partitions was set to an invalid non-positive value.",
                            ),
                        )
                    )
                    continue
                if rf <= 0:
                    results.append(
                        TopicResult(
                            t.name,
                            _error(
                                Errors.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
                            ),
                        )
                    )
                    continue
                try:
                    assignment = place(self._usable_brokers(img), self._placement_start, n, rf)
                except PlacementError as exc:
                    results.append(TopicResult(t.name, _error(Errors.INVALID_REPLICATION_FACTOR, str(exc))))
                    continue
                self._placement_start += 1
            topic_id = self.topic_ids.mint(img)
            seen.add(t.name)
            records.append((m.TopicRecord(name=t.name, topic_id=topic_id), 0))
            for name in sorted(t.configs):
                records.append(
                    (
                        m.ConfigRecord(
                            resource_type=TOPIC, resource_name=t.name, name=name, value=t.configs[name]
                        ),
                        0,
                    )
                )
            for pid, replicas in enumerate(assignment):
                records.append(self._partition_record(img, topic_id, pid, replicas))
            results.append(TopicResult(t.name, OK, topic_id, n, rf))
        return ControllerResult(tuple(records), TopicsResponse(tuple(results)))

    def _validate_new_topic(self, img: MetadataImage, t: CreatableTopic, seen: set[str]) -> ApiError | None:
        name = t.name
        if not name or name in (".", "..") or len(name) > 249 or not _TOPIC_NAME.match(name):
            return _error(Errors.INVALID_TOPIC_EXCEPTION, f"Topic name {name!r} is illegal")
        if name in img.topics_by_name or name in seen:
            return _error(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if t.assignments and (t.num_partitions != -1 or t.replication_factor != -1):
            return _error(
                Errors.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set.",
            )
        for key, value in t.configs.items():
            check = TOPIC_CONFIGS.get(key)
            if check is None:
                return _error(Errors.INVALID_CONFIG, f"Unknown topic config name: {key}")
            if not check(value):
                return _error(Errors.INVALID_CONFIG, f"Invalid value {value} for configuration {key}")
        return None

    def handle_delete_topics(self, names: Sequence[str]) -> ControllerResult[TopicsResponse]:
        """DeleteTopics: one RemoveTopicRecord per topic (replay drops its partitions and configs)."""
        img = self.image
        records: list[RecordAndVersion] = []
        results = []
        done: set[str] = set()
        for name in names:
            t = img.topics_by_name.get(name)
            if t is None or name in done:
                results.append(
                    TopicResult(
                        name,
                        _error(
                            Errors.UNKNOWN_TOPIC_OR_PARTITION,
                            "This server does not host this topic-partition.",
                        ),
                    )
                )
                continue
            done.add(name)
            records.append((m.RemoveTopicRecord(topic_id=t.id), 0))
            results.append(TopicResult(name, OK, t.id))
        return ControllerResult(tuple(records), TopicsResponse(tuple(results)))

    def handle_create_partitions(
        self, counts: dict[str, int], assignments: dict[str, list[tuple[int, ...]]] | None = None
    ) -> ControllerResult[TopicsResponse]:
        """CreatePartitions: PartitionRecords for the new partitions of each topic."""
        img = self.image
        records: list[RecordAndVersion] = []
        results = []
        for name, count in counts.items():
            t = img.topics_by_name.get(name)
            if t is None:
                results.append(
                    TopicResult(
                        name,
                        _error(
                            Errors.UNKNOWN_TOPIC_OR_PARTITION,
                            "This server does not host this topic-partition.",
                        ),
                    )
                )
                continue
            current = len(t.partitions)
            if count < current:
                results.append(
                    TopicResult(
                        name,
                        _error(
                            Errors.INVALID_PARTITIONS,
                            f"The topic {name} currently has {current} partition(s); "
                            f"{count} would not be an increase.",
                        ),
                    )
                )
                continue
            if count == current:
                results.append(
                    TopicResult(
                        name, _error(Errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
                    )
                )
                continue
            rf = len(t.partitions[0].replicas) if t.partitions else 1
            manual = (assignments or {}).get(name)
            if manual is not None:
                if len(manual) != count - current:
                    results.append(
                        TopicResult(
                            name, _error(Errors.INVALID_REPLICA_ASSIGNMENT, "wrong number of assignments")
                        )
                    )
                    continue
                bad = next((e for e in (self._validate_assignment(img, r) for r in manual) if e), None)
                if bad is not None:
                    results.append(TopicResult(name, bad))
                    continue
                new = [tuple(r) for r in manual]
            else:
                try:
                    new = place(
                        self._usable_brokers(img), self._placement_start + current, count - current, rf
                    )
                except PlacementError as exc:
                    results.append(TopicResult(name, _error(Errors.INVALID_REPLICATION_FACTOR, str(exc))))
                    continue
            for i, replicas in enumerate(new):
                records.append(self._partition_record(img, t.id, current + i, replicas))
            results.append(TopicResult(name, OK, t.id, count, rf))
        return ControllerResult(tuple(records), TopicsResponse(tuple(results)))

    # -- partitions: AlterPartition, reassignments, elections -----------------------------------------------

    def handle_alter_partition(self, req: AlterPartitionRequest) -> ControllerResult[SimpleResponse]:
        """AlterPartition from a partition leader: ISR shrink/expand, checked against leader and partition epochs.

        The response's ``partitions`` maps ``(topic_id, partition)`` to ``(ApiError, PartitionRegistration or None)``:
        the partition as it will be once the records are replayed.
        """
        img = self.image
        err = self._check_broker(img, req.broker_id, req.broker_epoch)
        if err is not None:
            return ControllerResult((), SimpleResponse(err, {"partitions": {}}))
        records: list[RecordAndVersion] = []
        out: dict[tuple[str, int], tuple[ApiError, PartitionRegistration | None]] = {}
        acceptable = self._acceptable(img)
        for u in req.partitions:
            key = (u.topic_id, u.partition_id)
            t = img.topics_by_id.get(u.topic_id)
            if t is None:
                out[key] = (_error(Errors.UNKNOWN_TOPIC_ID), None)
                continue
            p = t.partitions.get(u.partition_id)
            if p is None:
                out[key] = (_error(Errors.UNKNOWN_TOPIC_OR_PARTITION), None)
                continue
            bad = self._validate_alter(p, u, req.broker_id, acceptable)
            if bad is not None:
                out[key] = (bad, None)
                continue
            b = self._builder(img, t.name, t.id, u.partition_id, p, acceptable)
            b.set_election(Election.ONLINE)  # an ISR change never triggers an unclean election
            b.set_target_isr(u.new_isr).set_target_leader_recovery_state(u.leader_recovery_state)
            rv = b.build()
            if rv is None:
                out[key] = (OK, p)
                continue
            records.append(rv)
            after = merge_partition(p, rv[0])
            if after.leader != req.broker_id:
                out[key] = (_error(Errors.NEW_LEADER_ELECTED, "A new leader was elected"), after)
            else:
                out[key] = (OK, after)
        return ControllerResult(tuple(records), SimpleResponse(OK, {"partitions": out}))

    def _validate_alter(
        self, p: PartitionRegistration, u: Any, broker_id: int, acceptable: Callable[[int], bool]
    ) -> ApiError | None:
        if u.leader_epoch != p.leader_epoch:
            return _error(
                Errors.FENCED_LEADER_EPOCH,
                f"leader epoch {u.leader_epoch} does not match the current {p.leader_epoch}",
            )
        if p.leader != broker_id:
            return _error(Errors.INVALID_REQUEST, f"broker {broker_id} is not the leader ({p.leader})")
        if u.partition_epoch != p.partition_epoch:
            return _error(
                Errors.INVALID_UPDATE_VERSION,
                f"partition epoch {u.partition_epoch} does not match the current {p.partition_epoch}",
            )
        isr = tuple(u.new_isr)
        if len(set(isr)) != len(isr) or not set(isr) <= set(p.replicas):
            return _error(
                Errors.INVALID_REQUEST, f"ISR {list(isr)} is not a set of replicas {list(p.replicas)}"
            )
        if p.leader not in isr:
            return _error(Errors.INVALID_REQUEST, "the new ISR must contain the leader")
        if u.leader_recovery_state == RECOVERING and len(isr) > 1:
            return _error(Errors.INVALID_REQUEST, "a recovering leader must be alone in the ISR")
        if p.leader_recovery_state == RECOVERED and u.leader_recovery_state == RECOVERING:
            return _error(
                Errors.INVALID_REQUEST, "leader recovery state cannot go from RECOVERED to RECOVERING"
            )
        for r in isr:
            if r not in p.isr and not acceptable(r):
                return _error(Errors.INELIGIBLE_REPLICA, f"replica {r} is fenced or shutting down")
        return None

    def handle_alter_reassignments(
        self, reassignments: dict[tuple[str, int], Sequence[int] | None]
    ) -> ControllerResult[SimpleResponse]:
        """AlterPartitionReassignments: start (target replicas) or cancel (None) a reassignment per partition."""
        img = self.image
        acceptable = self._acceptable(img)
        records: list[RecordAndVersion] = []
        out: dict[tuple[str, int], ApiError] = {}
        for (name, pid), target in reassignments.items():
            t = img.topics_by_name.get(name)
            p = t.partitions.get(pid) if t is not None else None
            if t is None or p is None:
                out[(name, pid)] = _error(Errors.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            original = tuple(r for r in p.replicas if r not in p.adding_replicas)
            b = self._builder(img, name, t.id, pid, p, acceptable)
            if target is None:
                if not p.adding_replicas and not p.removing_replicas:
                    out[(name, pid)] = _error(Errors.NO_REASSIGNMENT_IN_PROGRESS)
                    continue
                # Kafka's PartitionReassignmentRevert: the ISR keeps only original replicas; if none is left
                # the revert needs an unclean election, refused unless the topic allows it
                isr = tuple(r for r in p.isr if r not in p.adding_replicas and r in original)
                if not isr:
                    if not self.unclean_enabled(img, name):
                        out[(name, pid)] = _error(
                            Errors.INVALID_REPLICA_ASSIGNMENT,
                            f"Unable to revert partition assignment for {name}:{pid} because it would require an "
                            "unclean leader election.",
                        )
                        continue
                    b.set_election(Election.UNCLEAN)
                b.set_target_replicas(original).set_target_isr(isr).set_target_adding(()).set_target_removing(
                    ()
                )
            else:
                target = tuple(target)
                bad = self._validate_assignment(img, target)
                if bad is not None:
                    out[(name, pid)] = bad
                    continue
                replicas = (*target, *(r for r in original if r not in target))
                b.set_target_replicas(replicas)
                b.set_target_adding(tuple(r for r in target if r not in original))
                b.set_target_removing(tuple(r for r in original if r not in target))
            rv = b.build()
            if rv is not None:
                records.append(rv)
            out[(name, pid)] = OK
        return ControllerResult(tuple(records), SimpleResponse(OK, {"partitions": out}))

    def handle_elect_preferred_leaders(self) -> ControllerResult[SimpleResponse]:
        """ElectLeaders (PREFERRED) for every partition whose leader is not its first replica."""
        img = self.image
        acceptable = self._acceptable(img)
        records: list[RecordAndVersion] = []
        for t in img.topics_by_id.values():
            for pid, p in t.partitions.items():
                if (
                    p.replicas
                    and p.leader != p.replicas[0]
                    and p.replicas[0] in p.isr
                    and acceptable(p.replicas[0])
                ):
                    rv = (
                        self._builder(img, t.name, t.id, pid, p, acceptable)
                        .set_election(Election.PREFERRED)
                        .build()
                    )
                    if rv is not None:
                        records.append(rv)
        return ControllerResult(tuple(records), SimpleResponse(OK, {"elected": len(records)}))

    # -- configs, features, producer ids --------------------------------------------------------------------

    def handle_incremental_alter_configs(
        self, changes: Sequence[ConfigChange]
    ) -> ControllerResult[SimpleResponse]:
        """IncrementalAlterConfigs: ConfigRecords (a null value deletes); per-resource errors, all or nothing."""
        img = self.image
        by_resource: dict[tuple[int, str], list[ConfigChange]] = {}
        for c in changes:
            by_resource.setdefault((int(c.resource_type), c.resource_name), []).append(c)
        records: list[RecordAndVersion] = []
        out: dict[tuple[int, str], ApiError] = {}
        for (rtype, rname), items in by_resource.items():
            err, recs = self._config_records(img, rtype, rname, items)
            out[(rtype, rname)] = err or OK
            if err is None:
                records.extend(recs)
        return ControllerResult(tuple(records), SimpleResponse(OK, {"resources": out}))

    def _config_records(
        self, img: MetadataImage, rtype: int, rname: str, items: list[ConfigChange]
    ) -> tuple[ApiError | None, list[RecordAndVersion]]:
        if rtype == TOPIC:
            if rname not in img.topics_by_name:
                return _error(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{rname}' does not exist."), []
        elif rtype == BROKER:
            if rname and not rname.isdigit():
                return _error(Errors.INVALID_REQUEST, f"Illegal broker resource name {rname!r}"), []
        else:
            return _error(Errors.INVALID_REQUEST, f"Unsupported resource type {rtype}"), []
        current = dict(img.configs.get((rtype, rname)) or {})
        recs: list[RecordAndVersion] = []
        for c in items:
            if rtype == TOPIC:
                check = TOPIC_CONFIGS.get(c.name)
                if check is None:
                    return _error(Errors.INVALID_CONFIG, f"Unknown topic config name: {c.name}"), []
            else:
                check = None
            value: str | None
            if c.op == ConfigOp.SET:
                value = c.value
            elif c.op == ConfigOp.DELETE:
                value = None
            elif c.op in (ConfigOp.APPEND, ConfigOp.SUBTRACT):
                old = [v for v in (current.get(c.name) or "").split(",") if v]
                add = [v for v in (c.value or "").split(",") if v]
                new = (
                    old + [v for v in add if v not in old]
                    if c.op == ConfigOp.APPEND
                    else [v for v in old if v not in add]
                )
                value = ",".join(new)
            else:
                return _error(Errors.INVALID_REQUEST, f"Unknown config op {c.op}"), []
            if value is not None and check is not None and not check(value):
                return _error(Errors.INVALID_CONFIG, f"Invalid value {value} for configuration {c.name}"), []
            if value is None:
                current.pop(c.name, None)
            else:
                current[c.name] = value
            recs.append(
                (m.ConfigRecord(resource_type=rtype, resource_name=rname, name=c.name, value=value), 0)
            )
        return None, recs

    def handle_update_features(self, updates: Sequence[FeatureUpdate]) -> ControllerResult[SimpleResponse]:
        """UpdateFeatures: FeatureLevelRecords; any invalid update fails the request (INVALID_UPDATE_VERSION)."""
        img = self.image
        records: list[RecordAndVersion] = []
        out: dict[str, ApiError] = {}
        for u in updates:
            err = self._check_feature(img, u)
            out[u.name] = err or OK
            if err is None:
                records.append((m.FeatureLevelRecord(name=u.name, feature_level=u.max_version_level), 0))
                if (
                    u.name == ELR_FEATURE
                    and u.max_version_level == 0
                    and img.features.get(ELR_FEATURE, 0) > 0
                ):
                    records.append((m.ClearElrRecord(topic_name=""), 0))
        if any(not e.ok for e in out.values()):
            return ControllerResult(
                (), SimpleResponse(_error(Errors.INVALID_UPDATE_VERSION), {"features": out})
            )
        return ControllerResult(tuple(records), SimpleResponse(OK, {"features": out}))

    def _check_feature(self, img: MetadataImage, u: FeatureUpdate) -> ApiError | None:
        supported = SUPPORTED_FEATURES.get(u.name)
        if supported is None or u.name == "kraft.version":
            return _error(
                Errors.INVALID_UPDATE_VERSION, f"The controller does not support the feature {u.name}"
            )
        current = img.features.get(u.name, 0)
        level = u.max_version_level
        if u.name == METADATA_VERSION and level < 1:
            return _error(Errors.INVALID_UPDATE_VERSION, "metadata.version cannot be removed")
        if level > supported[1]:
            return _error(
                Errors.INVALID_UPDATE_VERSION, f"{u.name} level {level} is above the supported {supported[1]}"
            )
        for b in img.brokers.values():
            ranges = dict(b.supported_features)
            r = ranges.get(u.name)
            if level > 0 and (r is None or not r.min <= level <= r.max):
                return _error(
                    Errors.INVALID_UPDATE_VERSION, f"broker {b.id} does not support {u.name} level {level}"
                )
        if level < current:
            if u.upgrade_type == UpgradeType.UPGRADE:
                return _error(
                    Errors.INVALID_UPDATE_VERSION,
                    "Can't downgrade the version of this feature without setting the upgrade type "
                    "to either safe or unsafe downgrade.",
                )
            if u.name == METADATA_VERSION:
                return _error(Errors.INVALID_UPDATE_VERSION, "Unsupported metadata.version downgrade")
        return None

    def handle_allocate_producer_ids(
        self, broker_id: int, broker_epoch: int
    ) -> ControllerResult[SimpleResponse]:
        """AllocateProducerIds: the next block of ``producer_id_block_size`` ids as a ProducerIdsRecord."""
        img = self.image
        err = self._check_broker(img, broker_id, broker_epoch)
        if err is not None:
            return ControllerResult((), SimpleResponse(err))
        first = max(img.next_producer_id, 0)
        size = self.config.producer_id_block_size
        rec = m.ProducerIdsRecord(
            broker_id=broker_id, broker_epoch=broker_epoch, next_producer_id=first + size
        )
        return ControllerResult(
            ((rec, 0),), SimpleResponse(OK, {"producer_id_start": first, "producer_id_len": size})
        )
