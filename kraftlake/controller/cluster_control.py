"""``ClusterControlManager``: the brokers (Kafka's ``ClusterControlManager`` and ``BrokerHeartbeatManager``).

It holds broker registration, heartbeats (which unfence a caught-up broker and drive controlled shutdown),
the fencing of brokers whose session expired, and unregistration, and the soft state these need beyond the
image: each broker's last contact and the offset its controlled shutdown waits for. A new active controller
rebuilds that state (``activate``). Moving a broker's partitions off it or onto it is the replication
manager's work, which this manager asks for.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kraftlake.controller.brokers import check_broker_epoch
from kraftlake.controller.config import (
    METADATA_VERSION,
    MV_3_3_IV2,
    SUPPORTED_FEATURES,
    register_broker_record_version,
)
from kraftlake.controller.feature_control import FeatureControlManager
from kraftlake.controller.replication_control import ReplicationControlManager
from kraftlake.controller.requests import BrokerHeartbeatRequest, BrokerRegistrationRequest
from kraftlake.controller.result import (
    OK,
    ControllerResult,
    Errors,
    RecordAndVersion,
    SimpleResponse,
    failure,
)
from kraftlake.controller.state import ControllerState
from kraftlake.image import MetadataImage
from kraftlake.protocol import messages as m

_BROKER_CHANGE = m.BrokerRegistrationChangeRecord


@dataclass(slots=True)
class BrokerSession:
    """Soft state of one broker (Kafka's ``BrokerHeartbeatState``), rebuilt by a new active controller."""

    last_contact_ms: int
    controlled_shutdown_offset: int = -1


class ClusterControlManager:
    """Brokers: registration, heartbeats, sessions, fencing, controlled shutdown, unregistration.

    Parameters
    ----------
    state : ControllerState
    features : FeatureControlManager
        The finalized features a registering broker must support, and the metadata.version.
    replication : ReplicationControlManager
        Moves partitions off a fenced or shutting-down broker and onto an unfenced one.
    """

    def __init__(
        self,
        state: ControllerState,
        features: FeatureControlManager,
        replication: ReplicationControlManager,
    ) -> None:
        self._state = state
        self._features = features
        self._replication = replication
        self.sessions: dict[int, BrokerSession] = {}
        # the image's brokers and their sorted ids: the stale-broker check runs every tick and sorts only
        # when the brokers change
        self._sorted_brokers: tuple[object, list[int]] = (None, [])

    # -- soft state -----------------------------------------------------------------------------------------

    def activate(self, image: MetadataImage, now_ms: int) -> None:
        """A new term: every registered broker's session starts at ``now_ms``; one in controlled shutdown
        waits for the image's offset."""
        cs_offset = max(image.offset, 0)
        self.sessions = {
            bid: BrokerSession(now_ms, cs_offset if b.in_controlled_shutdown else -1)
            for bid, b in image.brokers.items()
        }

    def on_appended(self, records: Iterable[RecordAndVersion], last_offset: int) -> None:
        """This controller appended ``records`` through ``last_offset``: a broker they put in controlled
        shutdown finishes it once its metadata offset reaches ``last_offset``."""
        for rec, _ in records:
            change: Any = rec
            if type(rec) is _BROKER_CHANGE and change.in_controlled_shutdown == 1:
                session = self.sessions.get(change.broker_id)
                if session is not None:
                    session.controlled_shutdown_offset = last_offset

    # -- commands -------------------------------------------------------------------------------------------

    def handle_register_broker(
        self, req: BrokerRegistrationRequest, now_ms: int
    ) -> ControllerResult[SimpleResponse]:
        """BrokerRegistration: a RegisterBrokerRecord (fenced) whose epoch is its own offset."""
        img = self._state.image
        mv = self._features.metadata_version()
        features = req.features if req.features is not None else SUPPORTED_FEATURES
        lo, hi = features.get(METADATA_VERSION, (0, 0))
        if not lo <= mv <= hi:
            return failure(
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
                return failure(Errors.UNSUPPORTED_VERSION, f"broker does not support {name} level {level}")
        existing = img.brokers.get(req.broker_id)
        session = self.sessions.get(req.broker_id)
        if (
            existing is not None
            and existing.incarnation_id != req.incarnation_id
            and session is not None
            and not existing.fenced
            and now_ms - session.last_contact_ms < self._state.config.session_timeout_ms
        ):
            return failure(
                Errors.DUPLICATE_BROKER_REGISTRATION,
                f"Another broker is registered with that broker id {req.broker_id}.",
            )
        records: list[RecordAndVersion] = []
        if existing is not None and req.previous_broker_epoch != existing.epoch:
            # an unclean shutdown: the broker may have lost its unflushed tail
            self._replication.remove_from_isrs(
                img, req.broker_id, records, unclean_shutdown=self._features.elr_enabled()
            )
        epoch = self._state.next_offset + len(records)
        if self._state.records_len(len(records) + 1) != len(records) + 1:
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
        img = self._state.image
        err = check_broker_epoch(img, req.broker_id, req.broker_epoch)
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
                self._replication.elect_for_unfenced(img, reg.id, records)
                fenced = False
        elif reg.in_controlled_shutdown:
            if req.current_metadata_offset >= session.controlled_shutdown_offset >= 0:
                records.append(self._fence_record(reg.id, reg.epoch, fence=True))
                self._replication.remove_from_isrs(img, reg.id, records)
                fenced = shut_down = True
        elif req.want_fence:
            records.append(self._fence_record(reg.id, reg.epoch, fence=True))
            self._replication.remove_from_isrs(img, reg.id, records)
            fenced = True
        elif req.want_shutdown:
            # controlled shutdown: one result moving every leadership off and shrinking every ISR
            change = m.BrokerRegistrationChangeRecord(
                broker_id=reg.id, broker_epoch=reg.epoch, in_controlled_shutdown=1
            )
            records.append((change, 1))
            self._replication.remove_from_isrs(img, reg.id, records)
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
        img = self._state.image
        brokers = img.brokers
        if self._sorted_brokers[0] is not brokers:
            self._sorted_brokers = (brokers, sorted(brokers))
        sessions = self.sessions
        timeout = self._state.config.session_timeout_ms
        for bid in self._sorted_brokers[1]:
            reg = brokers[bid]
            session = sessions.get(bid)
            if session is None:
                session = sessions[bid] = BrokerSession(now_ms)
            if reg.fenced or now_ms - session.last_contact_ms < timeout:
                continue
            records = [self._fence_record(bid, reg.epoch, fence=True)]
            self._replication.remove_from_isrs(img, bid, records)
            return ControllerResult(tuple(records), SimpleResponse(OK, {"broker_id": bid}))
        return None

    def handle_unregister_broker(self, broker_id: int) -> ControllerResult[SimpleResponse]:
        """UnregisterBroker: the broker leaves its ISRs and leaderships, then an UnregisterBrokerRecord."""
        img = self._state.image
        reg = img.brokers.get(broker_id)
        if reg is None:
            return failure(
                Errors.BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered"
            )
        records: list[RecordAndVersion] = []
        self._replication.remove_from_isrs(img, broker_id, records)
        records.append((m.UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=reg.epoch), 0))
        self.sessions.pop(broker_id, None)
        return ControllerResult(tuple(records), SimpleResponse(OK))

    def _fence_record(self, broker_id: int, epoch: int, fence: bool) -> RecordAndVersion:
        """The record fencing or unfencing a broker at this metadata.version."""
        if self._features.metadata_version() >= MV_3_3_IV2:
            return m.BrokerRegistrationChangeRecord(
                broker_id=broker_id, broker_epoch=epoch, fenced=1 if fence else -1
            ), 0
        if fence:
            return m.FenceBrokerRecord(id=broker_id, epoch=epoch), 0
        return m.UnfenceBrokerRecord(id=broker_id, epoch=epoch), 0
