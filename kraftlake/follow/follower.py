"""`Follower`: the loop that runs a `MetadataObserver` over Kafka connections and writes a `MetadataMirror`.

One thread, blocking sockets: each turn asks the observer what to send, sends it on the connection to that
controller (opened, secured and authenticated on first use), hands the answer back and writes what came out
committed. A connection that fails is dropped and the observer backs off and asks another controller; errors a
retry cannot fix (authorization, another cluster, TLS or SASL refused, not a controller listener, a peer that
sends what no Kafka sends) stop the loop with a one-line error, with everything committed so far on disk.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kraftlake.follow import first_contact
from kraftlake.follow.activity import holds_activity
from kraftlake.follow.bootstrap import Bootstrap
from kraftlake.follow.errors import (
    AuthorizationError,
    FollowError,
    MirrorDivergedError,
    NoProgressError,
    NotAControllerError,
    UnsupportedReleaseError,
)
from kraftlake.follow.mirror import MetadataMirror
from kraftlake.follow.observer import (
    AppendBatches,
    Endpoint,
    FetchedBatch,
    InstallSnapshot,
    MetadataObserver,
    Send,
    Wait,
    for_version,
)
from kraftlake.follow.releases import FOLLOWED, describe_ranges, guess_release, supported_ranges
from kraftlake.protocol.errors import ProtocolError
from kraftlake.protocol.rpc import ApiKey
from kraftlake.wire.client_config import ClientSecurity
from kraftlake.wire.connection import KafkaConnection
from kraftlake.wire.errors import AuthenticationError, ConnectError, SecurityConfigError, TlsError, WireError

log = logging.getLogger(__name__)


@dataclass
class FollowProgress:
    """What a follower has done, as it reports it."""

    log_end: int = 0
    high_watermark: int = -1
    leader_id: int = -1
    epoch: int = 0
    fetches: int = 0
    records: int = 0
    bytes: int = 0
    batches: int = 0
    snapshots: int = 0
    started: float = field(default_factory=time.monotonic)
    last_error: str = ""

    @property
    def lag(self) -> int:
        """Committed records the leader has and the mirror lacks."""
        return max(0, self.high_watermark - self.log_end)

    def line(self) -> str:
        """One progress line."""
        elapsed = max(time.monotonic() - self.started, 1e-9)
        return (
            f"offset {self.log_end}  high watermark {self.high_watermark}  lag {self.lag}  "
            f"leader {self.leader_id} epoch {self.epoch}  {self.records} records "
            f"({self.records / elapsed:,.0f}/s, {self.bytes / elapsed / 1e6:,.1f} MB/s)  "
            f"snapshots {self.snapshots}"
        )


class Follower:
    """Follows the quorum reachable through `bootstrap` into `mirror`.

    Parameters
    ----------
    bootstrap
        Controller listeners (``--bootstrap-controller``), or a `Bootstrap` that also knows voter ids' endpoints
        (Kafka's ``controller.quorum.voters`` string).
    mirror
        The directory to write.
    security
        Client security (``--command-config``); None is PLAINTEXT.
    timeout_s
        Connect and request timeout (a long poll adds its wait).
    give_up_s
        Stop with an error if no controller answered for this long, or if answers came but the mirror made no
        progress (no record, no snapshot chunk, not caught up with the leader) for this long: the error says why
        (the observer's `stall_reason`, the leader, the versions negotiated with each controller). None: retry
        forever.
    on_commit
        Called with each list of committed batches after it is durable (on the follower's thread).
    """

    def __init__(
        self,
        bootstrap: Sequence[Endpoint] | Bootstrap,
        mirror: MetadataMirror,
        *,
        security: ClientSecurity | None = None,
        timeout_s: float = 10.0,
        max_wait_ms: int = 500,
        give_up_s: float | None = 60.0,
        on_commit: Callable[[Sequence[FetchedBatch]], None] | None = None,
    ) -> None:
        self.mirror = mirror
        self.security = security
        self.timeout_s = timeout_s
        self.give_up_s = give_up_s
        self.on_commit = on_commit
        position = mirror.position
        if not isinstance(bootstrap, Bootstrap):
            bootstrap = Bootstrap(list(bootstrap))
        self.observer = MetadataObserver(
            list(bootstrap.endpoints),
            mirror.observer_id,
            directory_id=mirror.directory_id,
            cluster_id=mirror.cluster_id,
            log_end=position.log_end,
            last_epoch=max(position.last_epoch, 0),
            max_wait_ms=max_wait_ms,
            voters=bootstrap.voters,
        )
        self.progress = FollowProgress(log_end=position.log_end)
        self._connections: dict[Endpoint, KafkaConnection] = {}
        self._errors: dict[Endpoint, str] = {}
        self._last_answer = time.monotonic()
        self.last_progress = time.monotonic()
        """When an answer last moved following on (a fetch served, a snapshot chunk, committed batches)."""
        self._divergences_at_progress = 0
        self.last_activity = time.monotonic()
        """When a metadata record other than a NoOp was last committed (or a snapshot installed)."""
        self.until_offset: int | None = None
        self._last_moved = self._last_answer  # when the mirror's position last moved, or it was caught up
        self._marker: tuple[int, int, int] = (-1, -1, -1)
        self._negotiated: dict[Endpoint, str] = {}
        self._lock = threading.Lock()
        self._facts = first_contact.QuorumFacts()
        self._fresh = position.log_end == 0 and not mirror.snapshots()
        self._contacted = False
        if security is not None:
            security.ssl_context()  # missing or bad stores are refused here, before any connection

    def _connection(self, endpoint: Endpoint) -> KafkaConnection:
        conn = self._connections.get(endpoint)
        if conn is None or not conn.is_open:
            conn = KafkaConnection(
                endpoint.host,
                endpoint.port,
                self.security,
                client_id="kraftlake-follow",
                timeout_s=self.timeout_s,
            )
            conn.open()
            if ApiKey.FETCH_SNAPSHOT not in conn.ranges and ApiKey.VOTE not in conn.ranges:
                conn.close()
                raise NotAControllerError(
                    f"{endpoint} is not a controller listener: it offers none of KRaft's RPCs (Vote, "
                    f"FetchSnapshot), as a broker listener does (use a controller.quorum.bootstrap.servers address)"
                )
            if ApiKey.FETCH not in conn.versions or ApiKey.FETCH_SNAPSHOT not in conn.versions:
                conn.close()
                raise UnsupportedReleaseError(
                    f"{endpoint} is {guess_release(conn.ranges)} ({describe_ranges(conn.ranges)}): kraftlake "
                    f"follows {FOLLOWED} ({supported_ranges()})"
                )
            self._negotiated[endpoint] = (
                f"{endpoint} Fetch v{conn.versions[ApiKey.FETCH]} FetchSnapshot "
                f"v{conn.versions[ApiKey.FETCH_SNAPSHOT]} ({guess_release(conn.ranges)})"
            )
            if not self._facts.complete:
                self._first_contact(conn, endpoint)
            self._connections[endpoint] = conn
        return conn

    def _first_contact(self, conn: KafkaConnection, endpoint: Endpoint) -> None:
        """Learn the cluster id and the quorum's node ids from a controller (`first_contact`), and check them."""
        try:
            first_contact.ask(conn, self._facts)
        except BaseException:
            conn.close()
            raise
        first_contact.check(
            self._facts, self.mirror, self.observer.observer_id, fresh=self._fresh, where=str(endpoint)
        )
        if self.observer.cluster_id is None and self.mirror.cluster_id is not None:
            self.observer.cluster_id = self.mirror.cluster_id  # every request carries it from now on

    def step(self) -> bool:
        """One turn: send one request (or wait out a backoff) and apply its answer; True if anything committed."""
        now_ms = int(time.monotonic() * 1000)
        action = self.observer.poll(now_ms)
        if isinstance(action, Wait):
            time.sleep(max(0.0, min(action.until_ms - now_ms, 500)) / 1000)
            self._check_give_up()
            self._check_stall()
            return False
        done = self._send(action)
        self._check_stall()
        return done

    def _send(self, send: Send) -> bool:
        try:
            conn = self._connection(send.endpoint)
            message = for_version(send, conn.version(send.api_key))
            response = conn.request(send.api_key, message, extra_wait_s=send.wait_ms / 1000)
        except (TlsError, AuthenticationError, SecurityConfigError):
            raise
        except (WireError, ProtocolError, OSError) as exc:
            self._drop(send.endpoint, exc)
            self.observer.on_failure(send, int(time.monotonic() * 1000))
            self._update_progress()
            self._check_give_up()
            return False
        self._last_answer = time.monotonic()
        self._errors.pop(send.endpoint, None)
        o = self.observer
        before = (o.fetches, o.divergences, o.download.position if o.download is not None else -1, o.log_end)
        try:
            effects = self.observer.on_response(send, response, int(time.monotonic() * 1000))
        except AuthorizationError as exc:
            user = self.security.sasl_username if self.security is not None else None
            if user is None or "User:<name>" not in str(exc):
                raise
            raise AuthorizationError(str(exc).replace("User:<name>", f"User:{user}")) from exc
        if o.fetches and not self._contacted:
            # served (so authorized), but no controller told the cluster id: nothing is written without one
            self._contacted = True
            first_contact.require_cluster_id(self._facts, self.mirror, str(send.endpoint))
        if (
            effects
            or o.log_end != before[3]
            or (o.fetches > before[0] and o.divergences == before[1])
            or (o.download is not None and o.download.position != before[2])
        ):
            self.last_progress = time.monotonic()  # a fetch served, a chunk or a batch: following goes on
            self.progress.last_error = ""
            self._divergences_at_progress = o.divergences
        else:
            self._check_give_up()
        for effect in effects:
            if isinstance(effect, AppendBatches):
                batches = effect.batches
                if self.until_offset is not None:
                    # nothing past the batch holding `until_offset` is written (`run` stops there)
                    batches = tuple(b for b in batches if b.base_offset <= self.until_offset)
                    if not batches:
                        continue
                written = self.mirror.append(batches)
                p = self.progress
                p.batches += len(batches)
                p.records += batches[-1].last_offset - batches[0].base_offset + 1  # contiguous
                p.bytes += written
                if self.on_commit is not None:
                    self.on_commit(batches)
                if self.observer.lag > 0 or holds_activity(batches):
                    self.last_activity = time.monotonic()
            elif isinstance(effect, InstallSnapshot):
                path = self.mirror.install_snapshot(effect.end_offset, effect.epoch, effect.data)
                self.progress.snapshots += 1
                self.last_activity = time.monotonic()
                log.info("installed snapshot %s (%d bytes)", path.name, len(effect.data))
        self._update_progress()
        self._note_progress()
        return bool(effects)

    def _note_progress(self) -> None:
        o = self.observer
        marker = (o.log_end, o.download.position if o.download is not None else -1, o.high_watermark)
        # caught up with nothing uncommitted: an idle quorum (records held back above a high watermark that
        # does not move are a leader that cannot commit, not idleness)
        caught_up = (
            o.leader is not None
            and o.high_watermark >= 0
            and o.lag == 0
            and not o.pending
            and o.download is None
        )
        if marker != self._marker or caught_up:
            self._marker = marker
            self._last_moved = time.monotonic()

    def _check_stall(self) -> None:
        """Raise `NoProgressError` when controllers answer but the mirror has not moved for `give_up_s`."""
        now = time.monotonic()
        if self.give_up_s is None or now - self._last_moved < self.give_up_s:
            return
        if now - self._last_answer >= self.give_up_s:
            return  # nobody answers: _check_give_up names each controller's cause
        raise self._no_progress()

    def _no_progress(self) -> NoProgressError:
        """Why following makes no progress: the observer's last reason, the leader, the last failures and the
        versions negotiated with each controller."""
        o = self.observer
        if o.leader is None:
            leader = "no leader known"
        else:
            where = o.leader.endpoint if o.leader.endpoint is not None else "an unknown endpoint"
            leader = f"leader {o.leader.leader_id} at {where}"
        errors = "; ".join(f"{e}: {c}" for e, c in self._errors.items())
        reason = o.stall_reason or "the answers carried no records"
        if o.pending:
            reason = (
                f"the leader sent records up to offset {o.pending[-1].last_offset} but its high watermark "
                f"stays at {o.high_watermark}: they are not committed (has the leader lost its quorum?)"
            )
        return NoProgressError(
            f"no progress for {self.give_up_s:.0f}s at offset {o.log_end} (high watermark {o.high_watermark}, "
            f"epoch {o.epoch}, {leader}): {reason}"
            + (f"; failures: {errors}" if errors else "")
            + f"; negotiated: {', '.join(self._negotiated.values()) or 'nothing'}"
        )

    def _update_progress(self) -> None:
        o = self.observer
        p = self.progress
        p.log_end = self.mirror.position.log_end if self.until_offset is not None else o.log_end
        p.high_watermark = o.high_watermark
        p.fetches = o.fetches
        p.leader_id = (
            o.leader.leader_id if o.leader is not None else -1
        )  # not a leader that stopped answering
        p.epoch = o.epoch

    def _drop(self, endpoint: Endpoint, exc: BaseException) -> None:
        conn = self._connections.pop(endpoint, None)
        if conn is not None:
            conn.close()
        self._errors[endpoint] = str(exc)
        self.progress.last_error = f"{endpoint}: {exc}"
        log.info("controller %s: %s", endpoint, exc)

    def _check_give_up(self) -> None:
        if self.give_up_s is None:
            return
        now = time.monotonic()
        if now - self._last_answer < self.give_up_s and now - self.last_progress >= self.give_up_s:
            # controllers answer, but nothing they answer lets the mirror go on
            o = self.observer
            if o.divergences > self._divergences_at_progress and o.last_divergence is not None:
                epoch, end = o.last_divergence
                raise MirrorDivergedError(
                    f"no progress for {self.give_up_s:.0f}s: the leader answers every fetch at offset "
                    f"{o.fetch_offset} (last epoch {o.fetch_epoch}) with DivergingEpoch (epoch {epoch}, end offset "
                    f"{end})"
                )
            raise self._no_progress()
        if now - self._last_answer < self.give_up_s:
            return
        causes = "; ".join(self._errors.values()) or "no answer"
        kind = (
            ConnectError
            if all("connect" in e for e in self._errors.values()) and self._errors
            else FollowError
        )
        raise kind(f"no controller answered for {self.give_up_s:.0f}s: {causes}")

    def run(
        self,
        stop: threading.Event | None = None,
        *,
        until_offset: int | None = None,
        idle_stop_s: float | None = None,
        on_progress: Callable[[FollowProgress], None] | None = None,
        progress_every_s: float = 5.0,
    ) -> FollowProgress:
        """Follow until `stop` is set, the mirror holds `until_offset` (the batch holding it is the last one
        written), or, once caught up with the leader's high watermark, nothing but NoOps was committed for
        `idle_stop_s` (`kraftlake.follow.activity`: a controller appends a NoOp every 500 ms).

        Raises
        ------
        FollowError, WireError
            When following cannot go on (what was committed stays in the mirror).
        """
        caught_up = False
        last_report = 0.0
        self.until_offset = until_offset
        try:
            while stop is None or not stop.is_set():
                self.step()
                now = time.monotonic()
                if not caught_up and not (
                    self.observer.high_watermark < 0 or self.observer.lag > 0 or self.observer.download
                ):
                    caught_up = True  # idle is counted once caught up (from the last activity before)
                if on_progress is not None and now - last_report >= progress_every_s:
                    last_report = now
                    on_progress(self.progress)
                if until_offset is not None and self.progress.log_end > until_offset:
                    break
                if idle_stop_s is not None and caught_up and now - self.last_activity >= idle_stop_s:
                    break
        finally:
            self.close()
        if on_progress is not None:
            on_progress(self.progress)
        return self.progress

    def close(self) -> None:
        """Close every connection."""
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
