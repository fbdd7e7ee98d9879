"""``ReplicationControlManager``: topics, partitions and their leaders and ISRs (Kafka's
``ReplicationControlManager``).

It holds every command that writes TopicRecords, PartitionRecords or PartitionChangeRecords: CreateTopics
(placement, topic ids from the controller's ``TopicIdMinter``), DeleteTopics, CreatePartitions,
AlterPartition from partition leaders, reassignments and preferred leader elections, and the two changes
the cluster manager asks for when a broker's state changes: removing a broker from its partitions' ISRs and
leaderships (fencing, controlled shutdown, an unclean restart), and electing leaderless partitions onto a
broker that was just unfenced. Those two visit only that broker's partitions, through the controller's
broker -> partitions index.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence

from kraftlake.controller.brokers import acceptable, check_broker_epoch, default_dir, usable_brokers
from kraftlake.controller.config import partition_record_version
from kraftlake.controller.configuration_control import (
    TOPIC,
    ConfigurationControlManager,
    topic_configs_error,
)
from kraftlake.controller.feature_control import FeatureControlManager
from kraftlake.controller.partition_change import (
    RECOVERED,
    RECOVERING,
    UNDECIDED,
    Election,
    PartitionChangeBuilder,
    isr_removal,
)
from kraftlake.controller.placement import PlacementError, place
from kraftlake.controller.requests import AlterPartitionRequest, CreatableTopic, PartitionIsrUpdate
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
from kraftlake.controller.state import ControllerState
from kraftlake.image import MetadataImage
from kraftlake.image.delta import merge_partition
from kraftlake.image.model import NO_LEADER, PartitionRegistration
from kraftlake.protocol import messages as m

_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")


def _without(items: Sequence[int], drop: int) -> tuple[int, ...]:
    return tuple(x for x in items if x != drop)


def _unknown_topic(name: str) -> TopicResult:
    return TopicResult(
        name, ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
    )


class ReplicationControlManager:
    """Topics, partitions, ISRs and leaders.

    Parameters
    ----------
    state : ControllerState
    features : FeatureControlManager
        For the metadata.version the records are written at, and whether ELR is on.
    configuration : ConfigurationControlManager
        For each topic's ``min.insync.replicas`` and unclean election setting.
    """

    def __init__(
        self,
        state: ControllerState,
        features: FeatureControlManager,
        configuration: ConfigurationControlManager,
    ) -> None:
        self._state = state
        self._features = features
        self._configuration = configuration
        self._placement_start = 0  # advanced by every placement, so successive topics start apart

    # -- changes a broker's state asks for ------------------------------------------------------------------

    def remove_from_isrs(
        self,
        img: MetadataImage,
        broker_id: int,
        records: list[RecordAndVersion],
        *,
        unclean_shutdown: bool = False,
    ) -> None:
        """Kafka's ``generateLeaderAndIsrUpdates`` removing ``broker_id``: shrink ISRs, move leadership off;
        the records are appended to ``records``.

        Visits only the broker's partitions; ``unclean_shutdown`` also drops the broker from ELR and last
        known ELR (it may have lost its log tail: KIP-966).
        """
        general = acceptable(img, frozenset((broker_id,)))
        verdicts: dict[int, bool] = {}  # a few brokers answer for all of one broker's partitions

        def ok(b: int) -> bool:
            verdict = verdicts.get(b)
            if verdict is None:
                verdict = verdicts[b] = general(b)
            return verdict

        mv = self._features.metadata_version()
        elr_enabled = self._features.elr_enabled()
        dirs = default_dir(img)
        configuration = self._configuration
        per_topic: dict[str, tuple[int, bool]] = {}
        add = records.append
        for t, pid, p in self._state.partitions_of(broker_id, img):
            if not (
                broker_id in p.isr
                or p.leader == broker_id
                or (unclean_shutdown and (broker_id in p.elr or broker_id in p.last_known_elr))
            ):
                continue
            topic_args = per_topic.get(t.name)
            if topic_args is None:
                topic_args = per_topic[t.name] = (
                    configuration.min_isr(img, t.name),
                    configuration.unclean_enabled(img, t.name),
                )
            if not unclean_shutdown and not topic_args[1]:
                fast = isr_removal(p, t.id, pid, broker_id, ok, mv, topic_args[0], elr_enabled)
                if fast is not UNDECIDED:
                    if fast is not None:
                        add(fast)  # type: ignore[arg-type]
                    continue
            b = PartitionChangeBuilder(
                p, t.id, pid, ok, mv, topic_args[0], elr_enabled=elr_enabled, default_dir=dirs
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
                add(rec)

    def elect_for_unfenced(self, img: MetadataImage, broker_id: int, records: list[RecordAndVersion]) -> None:
        """Leaderless partitions the newly unfenced broker can lead get it (Kafka's ``handleBrokerUnfenced``);
        the records are appended to ``records``."""
        brokers = img.brokers

        def ok(b: int) -> bool:
            if b == broker_id:
                return True
            reg = brokers.get(b)
            return reg is not None and not reg.fenced and not reg.in_controlled_shutdown

        for t, pid, p in self._state.partitions_of(broker_id, img):
            if p.leader != NO_LEADER:
                continue
            rec = self._builder(img, t.name, t.id, pid, p, ok).build()
            if rec is not None:
                records.append(rec)

    def _builder(
        self,
        img: MetadataImage,
        topic_name: str,
        topic_id: str,
        pid: int,
        p: PartitionRegistration,
        ok: Callable[[int], bool],
    ) -> PartitionChangeBuilder:
        """A change of ``p`` with the topic's min ISR and election setting."""
        b = PartitionChangeBuilder(
            p,
            topic_id,
            pid,
            ok,
            self._features.metadata_version(),
            self._configuration.min_isr(img, topic_name),
            elr_enabled=self._features.elr_enabled(),
            default_dir=default_dir(img),
        )
        if self._configuration.unclean_enabled(img, topic_name):
            b.set_election(Election.UNCLEAN)
        return b

    # -- topics ---------------------------------------------------------------------------------------------

    def handle_create_topics(self, topics: Sequence[CreatableTopic]) -> ControllerResult[TopicsResponse]:
        """CreateTopics: per topic a TopicRecord, its ConfigRecords and PartitionRecords (all or nothing per topic)."""
        img = self._state.image
        records: list[RecordAndVersion] = []
        results: list[TopicResult] = []
        seen: set[str] = set()
        for t in topics:
            err = _validate_new_topic(img, t, seen)
            assignment = self._assignment(img, t) if err is None else err
            if isinstance(assignment, ApiError):
                results.append(TopicResult(t.name, assignment))
                continue
            topic_id = self._state.topic_ids.mint(img)
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
            records.extend(self._partition_records(img, topic_id, 0, assignment))
            results.append(TopicResult(t.name, OK, topic_id, len(assignment), len(assignment[0])))
        return ControllerResult(tuple(records), TopicsResponse(tuple(results)))

    def _assignment(self, img: MetadataImage, t: CreatableTopic) -> ApiError | list[tuple[int, ...]]:
        """The replicas of each partition of a new topic: its own assignment, checked, or placed."""
        if t.assignments:
            bad = next((e for e in (_validate_assignment(img, r) for r in t.assignments.values()) if e), None)
            if bad is not None:
                return bad
            if sorted(t.assignments) != list(range(len(t.assignments))):
                return ApiError(Errors.INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered 0..n-1")
            return [tuple(t.assignments[p]) for p in range(len(t.assignments))]
        config = self._state.config
        n = t.num_partitions if t.num_partitions != -1 else config.default_num_partitions
        rf = t.replication_factor if t.replication_factor != -1 else config.default_replication_factor
        if n <= 0:
            return ApiError(
                Errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
            )
        if rf <= 0:
            return ApiError(Errors.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
        try:
            assignment = place(usable_brokers(img), self._placement_start, n, rf)
        except PlacementError as exc:
            return ApiError(Errors.INVALID_REPLICATION_FACTOR, str(exc))
        self._placement_start += 1
        return assignment

    def _partition_records(
        self, img: MetadataImage, topic_id: str, first: int, assignment: Sequence[tuple[int, ...]]
    ) -> Iterator[RecordAndVersion]:
        """PartitionRecords of new partitions ``first``, ``first + 1``, ... with these replicas."""
        usable = acceptable(img)
        version = partition_record_version(self._features.metadata_version())
        dirs = default_dir(img)
        for i, replicas in enumerate(assignment):
            isr = tuple(r for r in replicas if usable(r))
            rec = m.PartitionRecord(
                partition_id=first + i,
                topic_id=topic_id,
                replicas=replicas,
                isr=isr,
                removing_replicas=(),
                adding_replicas=(),
                leader=isr[0] if isr else NO_LEADER,
                leader_recovery_state=RECOVERED,
                leader_epoch=0,
                partition_epoch=0,
                directories=tuple(dirs(r) for r in replicas) if version >= 1 else (),
                eligible_leader_replicas=() if version >= 2 else None,
                last_known_elr=() if version >= 2 else None,
            )
            yield rec, version

    def handle_delete_topics(self, names: Sequence[str]) -> ControllerResult[TopicsResponse]:
        """DeleteTopics: one RemoveTopicRecord per topic (replay drops its partitions and configs)."""
        img = self._state.image
        records: list[RecordAndVersion] = []
        results = []
        done: set[str] = set()
        for name in names:
            t = img.topics_by_name.get(name)
            if t is None or name in done:
                results.append(_unknown_topic(name))
                continue
            done.add(name)
            records.append((m.RemoveTopicRecord(topic_id=t.id), 0))
            results.append(TopicResult(name, OK, t.id))
        return ControllerResult(tuple(records), TopicsResponse(tuple(results)))

    def handle_create_partitions(
        self, counts: dict[str, int], assignments: dict[str, list[tuple[int, ...]]] | None = None
    ) -> ControllerResult[TopicsResponse]:
        """CreatePartitions: PartitionRecords for the new partitions of each topic."""
        img = self._state.image
        records: list[RecordAndVersion] = []
        results = []
        for name, count in counts.items():
            t = img.topics_by_name.get(name)
            if t is None:
                results.append(_unknown_topic(name))
                continue
            current = len(t.partitions)
            if count < current:
                message = f"The topic {name} currently has {current} partition(s); {count} would not be an increase."
                results.append(TopicResult(name, ApiError(Errors.INVALID_PARTITIONS, message)))
                continue
            if count == current:
                message = f"Topic already has {current} partition(s)."
                results.append(TopicResult(name, ApiError(Errors.INVALID_PARTITIONS, message)))
                continue
            rf = len(t.partitions[0].replicas) if t.partitions else 1
            manual = (assignments or {}).get(name)
            new: list[tuple[int, ...]]
            if manual is not None:
                if len(manual) != count - current:
                    error = ApiError(Errors.INVALID_REPLICA_ASSIGNMENT, "wrong number of assignments")
                    results.append(TopicResult(name, error))
                    continue
                bad = next((e for e in (_validate_assignment(img, r) for r in manual) if e), None)
                if bad is not None:
                    results.append(TopicResult(name, bad))
                    continue
                new = [tuple(r) for r in manual]
            else:
                try:
                    new = place(usable_brokers(img), self._placement_start + current, count - current, rf)
                except PlacementError as exc:
                    results.append(TopicResult(name, ApiError(Errors.INVALID_REPLICATION_FACTOR, str(exc))))
                    continue
            records.extend(self._partition_records(img, t.id, current, new))
            results.append(TopicResult(name, OK, t.id, count, rf))
        return ControllerResult(tuple(records), TopicsResponse(tuple(results)))

    # -- partitions: AlterPartition, reassignments, elections -----------------------------------------------

    def handle_alter_partition(self, req: AlterPartitionRequest) -> ControllerResult[SimpleResponse]:
        """AlterPartition from a partition leader: ISR shrink/expand, checked against leader and partition epochs.

        The response's ``partitions`` maps ``(topic_id, partition)`` to ``(ApiError, PartitionRegistration or None)``:
        the partition as it will be once the records are replayed.
        """
        img = self._state.image
        err = check_broker_epoch(img, req.broker_id, req.broker_epoch)
        if err is not None:
            return ControllerResult((), SimpleResponse(err, {"partitions": {}}))
        records: list[RecordAndVersion] = []
        out: dict[tuple[str, int], tuple[ApiError, PartitionRegistration | None]] = {}
        ok = acceptable(img)
        for u in req.partitions:
            key = (u.topic_id, u.partition_id)
            t = img.topics_by_id.get(u.topic_id)
            if t is None:
                out[key] = (ApiError(Errors.UNKNOWN_TOPIC_ID), None)
                continue
            p = t.partitions.get(u.partition_id)
            if p is None:
                out[key] = (ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION), None)
                continue
            bad = _validate_alter(p, u, req.broker_id, ok)
            if bad is not None:
                out[key] = (bad, None)
                continue
            b = self._builder(img, t.name, t.id, u.partition_id, p, ok)
            b.set_election(Election.ONLINE)  # an ISR change never triggers an unclean election
            b.set_target_isr(u.new_isr).set_target_leader_recovery_state(u.leader_recovery_state)
            rv = b.build()
            if rv is None:
                out[key] = (OK, p)
                continue
            records.append(rv)
            after = merge_partition(p, rv[0])
            if after.leader != req.broker_id:
                out[key] = (ApiError(Errors.NEW_LEADER_ELECTED, "A new leader was elected"), after)
            else:
                out[key] = (OK, after)
        return ControllerResult(tuple(records), SimpleResponse(OK, {"partitions": out}))

    def handle_alter_reassignments(
        self, reassignments: dict[tuple[str, int], Sequence[int] | None]
    ) -> ControllerResult[SimpleResponse]:
        """AlterPartitionReassignments: start (target replicas) or cancel (None) a reassignment per partition."""
        img = self._state.image
        ok = acceptable(img)
        records: list[RecordAndVersion] = []
        out: dict[tuple[str, int], ApiError] = {}
        for (name, pid), target in reassignments.items():
            t = img.topics_by_name.get(name)
            p = t.partitions.get(pid) if t is not None else None
            if t is None or p is None:
                out[(name, pid)] = ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            b = self._builder(img, name, t.id, pid, p, ok)
            error = (
                self._revert(img, name, pid, p, b) if target is None else _reassign(img, p, tuple(target), b)
            )
            if error is not None:
                out[(name, pid)] = error
                continue
            rv = b.build()
            if rv is not None:
                records.append(rv)
            out[(name, pid)] = OK
        return ControllerResult(tuple(records), SimpleResponse(OK, {"partitions": out}))

    def _revert(
        self, img: MetadataImage, name: str, pid: int, p: PartitionRegistration, b: PartitionChangeBuilder
    ) -> ApiError | None:
        """Set ``b`` to cancel ``p``'s reassignment (Kafka's ``PartitionReassignmentRevert``), or the error."""
        if not p.adding_replicas and not p.removing_replicas:
            return ApiError(Errors.NO_REASSIGNMENT_IN_PROGRESS)
        original = tuple(r for r in p.replicas if r not in p.adding_replicas)
        # the ISR keeps only original replicas; if none is left the revert needs an unclean election,
        # refused unless the topic allows it
        isr = tuple(r for r in p.isr if r not in p.adding_replicas and r in original)
        if not isr:
            if not self._configuration.unclean_enabled(img, name):
                return ApiError(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"Unable to revert partition assignment for {name}:{pid} because it would require an "
                    "unclean leader election.",
                )
            b.set_election(Election.UNCLEAN)
        b.set_target_replicas(original).set_target_isr(isr).set_target_adding(()).set_target_removing(())
        return None

    def handle_elect_preferred_leaders(self) -> ControllerResult[SimpleResponse]:
        """ElectLeaders (PREFERRED) for every partition whose leader is not its first replica."""
        img = self._state.image
        ok = acceptable(img)
        records: list[RecordAndVersion] = []
        for t in img.topics_by_id.values():
            for pid, p in t.partitions.items():
                if p.replicas and p.leader != p.replicas[0] and p.replicas[0] in p.isr and ok(p.replicas[0]):
                    rv = self._builder(img, t.name, t.id, pid, p, ok).set_election(Election.PREFERRED).build()
                    if rv is not None:
                        records.append(rv)
        return ControllerResult(tuple(records), SimpleResponse(OK, {"elected": len(records)}))


def _validate_new_topic(img: MetadataImage, t: CreatableTopic, seen: set[str]) -> ApiError | None:
    name = t.name
    if not name or name in (".", "..") or len(name) > 249 or not _TOPIC_NAME.match(name):
        return ApiError(Errors.INVALID_TOPIC_EXCEPTION, f"Topic name {name!r} is illegal")
    if name in img.topics_by_name or name in seen:
        return ApiError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    if t.assignments and (t.num_partitions != -1 or t.replication_factor != -1):
        return ApiError(
            Errors.INVALID_REQUEST,
            "Both numPartitions or replicationFactor and replicasAssignments were set.",
        )
    return topic_configs_error(t.configs)


def _validate_assignment(img: MetadataImage, replicas: Sequence[int]) -> ApiError | None:
    if not replicas:
        return ApiError(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    if len(set(replicas)) != len(replicas):
        return ApiError(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes duplicate replicas {list(replicas)}.",
        )
    for r in replicas:
        if r not in img.brokers:
            return ApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {r}, but no such broker is registered.",
            )
    return None


def _reassign(
    img: MetadataImage, p: PartitionRegistration, target: tuple[int, ...], b: PartitionChangeBuilder
) -> ApiError | None:
    """Set ``b`` to move ``p`` to ``target`` (adding first, removing once caught up), or the error."""
    bad = _validate_assignment(img, target)
    if bad is not None:
        return bad
    original = tuple(r for r in p.replicas if r not in p.adding_replicas)
    replicas = (*target, *(r for r in original if r not in target))
    b.set_target_replicas(replicas)
    b.set_target_adding(tuple(r for r in target if r not in original))
    b.set_target_removing(tuple(r for r in original if r not in target))
    return None


def _validate_alter(
    p: PartitionRegistration, u: PartitionIsrUpdate, broker_id: int, ok: Callable[[int], bool]
) -> ApiError | None:
    if u.leader_epoch != p.leader_epoch:
        return ApiError(
            Errors.FENCED_LEADER_EPOCH,
            f"leader epoch {u.leader_epoch} does not match the current {p.leader_epoch}",
        )
    if p.leader != broker_id:
        return ApiError(Errors.INVALID_REQUEST, f"broker {broker_id} is not the leader ({p.leader})")
    if u.partition_epoch != p.partition_epoch:
        return ApiError(
            Errors.INVALID_UPDATE_VERSION,
            f"partition epoch {u.partition_epoch} does not match the current {p.partition_epoch}",
        )
    isr = tuple(u.new_isr)
    if len(set(isr)) != len(isr) or not set(isr) <= set(p.replicas):
        return ApiError(
            Errors.INVALID_REQUEST, f"ISR {list(isr)} is not a set of replicas {list(p.replicas)}"
        )
    if p.leader not in isr:
        return ApiError(Errors.INVALID_REQUEST, "the new ISR must contain the leader")
    if u.leader_recovery_state == RECOVERING and len(isr) > 1:
        return ApiError(Errors.INVALID_REQUEST, "a recovering leader must be alone in the ISR")
    if p.leader_recovery_state == RECOVERED and u.leader_recovery_state == RECOVERING:
        return ApiError(
            Errors.INVALID_REQUEST, "leader recovery state cannot go from RECOVERED to RECOVERING"
        )
    for r in isr:
        if r not in p.isr and not ok(r):
            return ApiError(Errors.INELIGIBLE_REPLICA, f"replica {r} is fenced or shutting down")
    return None
