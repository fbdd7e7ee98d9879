"""``PartitionChangeBuilder``: the one place that decides a partition's next leader, ISR and ELR.

After Kafka's ``org.apache.kafka.controller.PartitionChangeBuilder`` (4.x). Callers set targets (ISR, replicas,
adding/removing replicas, ELR, leader recovery state) and ``build()`` returns the PartitionChangeRecord that
moves the partition there, or None if nothing changes. The rules:

- A leader is elected only from the target ISR, or, when the ISR is empty and ELR is enabled, from the
  eligible leader replicas (KIP-966); the current leader stays while it is still a valid choice. Only an
  UNCLEAN election (configured) may pick a replica outside both, and it resets the ISR to that replica and
  marks the leader RECOVERING.
- ELR (when enabled): if the target ISR is at least ``min.insync.replicas`` the ELR and last known ELR are
  cleared; otherwise replicas leaving the ISR join the ELR (minus replicas known to have shut down
  uncleanly), so the ISR may become empty without losing track of who holds every committed record.
- Without ELR the ISR never becomes empty: removing its last member leaves it there with no leader (the
  pre-KIP-966 behaviour that allows the "last replica standing" loss).
- A completed reassignment (every target replica in the ISR) drops the removing replicas.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

from kraftlake.controller.config import MV_3_7_IV2, partition_record_version
from kraftlake.image.model import MIGRATING_DIR, NO_LEADER, PartitionRegistration
from kraftlake.protocol import messages as m

MV_3_6_IV0 = 12
RECOVERED = 0
RECOVERING = 1


class Election(enum.Enum):
    """How a new leader may be chosen (Kafka's ``PartitionChangeBuilder.Election``)."""

    PREFERRED = "preferred"
    ONLINE = "online"
    UNCLEAN = "unclean"


def _without(items: Sequence[int], drop: int) -> tuple[int, ...]:
    return tuple(x for x in items if x != drop)


class PartitionChangeBuilder:
    """Builds the PartitionChangeRecord moving one partition to its targets."""

    def __init__(
        self,
        partition: PartitionRegistration,
        topic_id: str,
        partition_id: int,
        is_acceptable_leader: Callable[[int], bool],
        metadata_version: int,
        min_isr: int,
        *,
        elr_enabled: bool = True,
        default_dir: Callable[[int], str] | None = None,
    ) -> None:
        self.partition = partition
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.is_acceptable_leader = is_acceptable_leader
        self.metadata_version = metadata_version
        self.min_isr = min_isr
        self.elr_enabled = elr_enabled
        self.default_dir = default_dir
        self.election = Election.ONLINE
        self.target_isr: tuple[int, ...] = partition.isr
        self.target_replicas: tuple[int, ...] = partition.replicas
        self.target_removing: tuple[int, ...] = partition.removing_replicas
        self.target_adding: tuple[int, ...] = partition.adding_replicas
        self.target_elr: tuple[int, ...] = partition.elr
        self.target_last_known_elr: tuple[int, ...] = partition.last_known_elr
        self.target_lrs = partition.leader_recovery_state
        self.unclean_shutdown_replicas: frozenset[int] = frozenset()

    # -- setters (fluent) ----------------------------------------------------------------------------------

    def set_election(self, election: Election) -> PartitionChangeBuilder:
        self.election = election
        return self

    def set_target_isr(self, isr: Sequence[int]) -> PartitionChangeBuilder:
        self.target_isr = tuple(isr)
        return self

    def set_target_replicas(self, replicas: Sequence[int]) -> PartitionChangeBuilder:
        self.target_replicas = tuple(replicas)
        return self

    def set_target_adding(self, adding: Sequence[int]) -> PartitionChangeBuilder:
        self.target_adding = tuple(adding)
        return self

    def set_target_removing(self, removing: Sequence[int]) -> PartitionChangeBuilder:
        self.target_removing = tuple(removing)
        return self

    def set_target_elr(self, elr: Sequence[int]) -> PartitionChangeBuilder:
        self.target_elr = tuple(elr)
        return self

    def set_target_leader_recovery_state(self, lrs: int) -> PartitionChangeBuilder:
        self.target_lrs = lrs
        return self

    def set_unclean_shutdown_replicas(self, replicas: Sequence[int]) -> PartitionChangeBuilder:
        self.unclean_shutdown_replicas = frozenset(replicas)
        return self

    # -- election -----------------------------------------------------------------------------------------

    def _valid_new_leader(self, replica: int) -> bool:
        in_isr = replica in self.target_isr
        in_elr = not self.target_isr and replica in self.target_elr
        return (in_isr or in_elr) and self.is_acceptable_leader(replica)

    def elect_leader(self) -> tuple[int, bool]:
        """``(leader, unclean)`` for the targets (NO_LEADER if none is eligible)."""
        if self.election == Election.PREFERRED:
            preferred = self.target_replicas[0] if self.target_replicas else NO_LEADER
            if preferred != NO_LEADER and self._valid_new_leader(preferred):
                return preferred, False
            if self._valid_new_leader(self.partition.leader):
                return self.partition.leader, False
            return NO_LEADER, False
        if self.partition.leader != NO_LEADER and self._valid_new_leader(self.partition.leader):
            return self.partition.leader, False
        for r in self.target_replicas:
            if self._valid_new_leader(r):
                return r, False
        if self.election == Election.UNCLEAN:
            for r in self.target_replicas:
                if self.is_acceptable_leader(r):
                    return r, True
        return NO_LEADER, False

    # -- build --------------------------------------------------------------------------------------------

    def _complete_reassignment(self) -> None:
        if not self.target_adding and not self.target_removing:
            return
        isr = set(self.target_isr)
        target = [r for r in self.target_replicas if r not in self.target_removing]
        if not all(r in isr for r in target):
            return
        self.target_replicas = tuple(target)
        self.target_isr = tuple(r for r in self.target_isr if r in set(target))
        self.target_removing = ()
        self.target_adding = ()

    def _populate_target_elr(self) -> None:
        if not self.elr_enabled:
            return
        if len(self.target_isr) >= self.min_isr:
            self.target_elr = ()
            self.target_last_known_elr = ()
            return
        isr = set(self.target_isr)
        # replicas a completed reassignment removed are no longer eligible for anything
        replicas = set(self.target_replicas)
        candidates = list(dict.fromkeys((*self.target_elr, *self.partition.isr)))
        self.target_elr = tuple(
            r
            for r in candidates
            if r not in isr and r not in self.unclean_shutdown_replicas and r in replicas
        )
        elr = set(self.target_elr)
        candidates = list(dict.fromkeys((*candidates, *self.target_last_known_elr)))
        self.target_last_known_elr = tuple(
            r for r in candidates if r not in isr and r not in elr and r in replicas
        )

    def build(self) -> tuple[m.PartitionChangeRecord, int] | None:
        """The ``(PartitionChangeRecord, version)`` to write, or None when the partition would not change."""
        p = self.partition
        self._complete_reassignment()
        self._populate_target_elr()

        fields: dict[str, Any] = {}  # the changed fields of the PartitionChangeRecord, each of its own type
        leader, unclean = self.elect_leader()
        if leader != p.leader:
            if leader in self.target_elr and not self.target_isr:
                self.target_isr = (leader,)
                self.target_elr = _without(self.target_elr, leader)
            fields["leader"] = leader
            if unclean:
                fields["isr"] = (leader,)
                if p.leader_recovery_state != RECOVERING:
                    fields["leader_recovery_state"] = RECOVERING
        # an epoch bump for a reassignment that removes replicas (the leader must fence the old ones)
        if (
            "leader" not in fields
            and self.target_replicas != p.replicas
            and not set(p.replicas) <= set(self.target_replicas)
        ):
            fields["leader"] = p.leader

        clean = "isr" not in fields
        if not clean or not self.elr_enabled:
            self.target_elr = ()
            self.target_last_known_elr = ()
        if self.target_elr != p.elr:
            fields["eligible_leader_replicas"] = self.target_elr
        if self.target_last_known_elr != p.last_known_elr:
            fields["last_known_elr"] = self.target_last_known_elr

        if "isr" not in fields and (self.target_isr or self.elr_enabled) and self.target_isr != p.isr:
            fields["isr"] = self.target_isr
        # before 3.6 an ISR shrink bumped the leader epoch (KAFKA-15021)
        if (
            self.metadata_version < MV_3_6_IV0
            and "leader" not in fields
            and "isr" in fields
            and not set(p.isr) <= set(self.target_isr)
        ):
            fields["leader"] = p.leader

        if self.target_replicas != p.replicas:
            fields["replicas"] = self.target_replicas
            if self.metadata_version >= MV_3_7_IV2:
                old = dict(zip(p.replicas, p.directories, strict=False))
                fields["directories"] = tuple(
                    old.get(r) or (self.default_dir(r) if self.default_dir else MIGRATING_DIR)
                    for r in self.target_replicas
                )
        if self.target_removing != p.removing_replicas:
            fields["removing_replicas"] = self.target_removing
        if self.target_adding != p.adding_replicas:
            fields["adding_replicas"] = self.target_adding
        if "leader_recovery_state" not in fields and self.target_lrs != p.leader_recovery_state:
            fields["leader_recovery_state"] = self.target_lrs
        if not fields:
            return None
        version = partition_record_version(self.metadata_version)
        if version < 2:
            fields.pop("eligible_leader_replicas", None)
            fields.pop("last_known_elr", None)
            if not fields:
                return None
        if version < 1:
            fields.pop("directories", None)
        return m.PartitionChangeRecord(
            topic_id=self.topic_id, partition_id=self.partition_id, **fields
        ), version


# PartitionChangeRecord's defaults in field order, for the positional construction below (records are tuples)
_PCR_DEFAULTS = tuple(m.PartitionChangeRecord(topic_id="AAAAAAAAAAAAAAAAAAAAAA", partition_id=0))
_PCR_NEW = tuple.__new__
UNDECIDED = object()


def isr_removal(
    p: PartitionRegistration,
    topic_id: str,
    partition_id: int,
    broker_id: int,
    is_acceptable_leader: Callable[[int], bool],
    metadata_version: int,
    min_isr: int,
    elr_enabled: bool,
) -> tuple[m.PartitionChangeRecord, int] | None | object:
    """What ``PartitionChangeBuilder(...).set_target_isr(isr without broker_id).build()`` returns (ONLINE
    election), computed without a builder for the common shape of a fencing or a controlled shutdown: no
    reassignment in progress, an ISR that stays non-empty and, with ELR, at least ``min_isr``. Returns
    ``UNDECIDED`` for any other shape (the caller then runs the builder). A controlled shutdown computes one
    per partition in the broker's ISRs, where the builder would cost more per partition.
    """
    if p.adding_replicas or p.removing_replicas:
        return UNDECIDED
    isr = p.isr
    target_isr = tuple([r for r in isr if r != broker_id]) if broker_id in isr else isr
    if not target_isr or (elr_enabled and len(target_isr) < min_isr):
        return UNDECIDED
    # elect_leader (ONLINE): the current leader if still valid, else the first valid replica (valid: in the
    # non-empty target ISR and acceptable)
    leader = p.leader
    if not (leader != NO_LEADER and leader in target_isr and is_acceptable_leader(leader)):
        leader = NO_LEADER
        for r in p.replicas:
            if r in target_isr and is_acceptable_leader(r):
                leader = r
                break
    new_leader = -2  # no change
    if leader != p.leader:
        new_leader = leader
    # ELR and last known ELR become empty: either ELR is off, or the target ISR reaches min ISR
    version = partition_record_version(metadata_version)
    elr = () if p.elr and version >= 2 else None
    lke = () if p.last_known_elr and version >= 2 else None
    new_isr = target_isr if target_isr != isr else None
    if metadata_version < MV_3_6_IV0 and new_leader == -2 and new_isr is not None:
        new_leader = p.leader  # before 3.6 an ISR shrink bumped the leader epoch (KAFKA-15021)
    if new_leader == -2 and new_isr is None and elr is None and lke is None:
        return None
    d = _PCR_DEFAULTS
    rec = _PCR_NEW(
        m.PartitionChangeRecord,
        (partition_id, topic_id, new_isr, new_leader, d[4], d[5], d[6], d[7], d[8], elr, lke),
    )
    return rec, version
