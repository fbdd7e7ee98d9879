"""``stream --source kafka`` of a fleet: every cluster followed and streamed into one warehouse, each on its own.

One streaming query per cluster in the one Spark session, each run by :func:`pipelines.stream.stream` on a
thread of its own (its follower, its mirror ``<data dir>/<name>``, its lock, its checkpoint, its transaction
app id, its commit point): exactly once per cluster is the single-cluster stream's argument, unchanged, and a
cluster that cannot be followed costs the others nothing (one query whose micro-batch committed every
cluster's slice would make the slowest cluster's commit, or a failing one, every cluster's).

A cluster that fails is recorded in ``fleet_status`` (:class:`StatusBoard`) and tried again after
``retry_s`` (unreachable, or another failure), or left out for the rest of the run when retrying cannot help
(authentication, a registry refusal, client properties that cannot be used, its lock held by another
process). The refusals of input (a cluster id that changed under a name, one cluster id under two names, a
``--command-config`` that cannot be used, a cluster streamed by another process) are the run's :attr:`FleetResult.refusals`: the command reports them in one line and exits 2 once the others stopped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from kraftlake.errors import KraftlakeError
from kraftlake.follow.errors import AuthorizationError, ClusterIdMismatchError
from kraftlake.follow.lock import LockedError
from kraftlake.spark.tables.clusters import ClusterError
from kraftlake.spark.tables.fleet_status import StatusBoard
from kraftlake.warehouse import fleet_status as fs
from kraftlake.warehouse.fleet import FleetMember
from kraftlake.wire.errors import AuthenticationError, ConnectError, SecurityConfigError
from pipelines.stream import FOLD_AT, StreamProgress, StreamResult, start_following, stream

#: Seconds between two tries of a cluster that failed (unreachable, or another error).
RETRY_S = 10.0
#: Seconds a cluster's controllers may stay silent before its follower gives up and the cluster is tried again.
GIVE_UP_S = 60.0
#: States after which a cluster is not tried again in this run.
FINAL = (fs.AUTH_FAILED, fs.REFUSED)


class FleetStopped(KraftlakeError):
    """Raised inside a cluster's thread when the run ended before its mirror first caught up."""


@dataclass
class ClusterOutcome:
    """What the run did for one cluster."""

    name: str
    state: str = fs.STARTING
    records: int = 0
    batches: int = 0
    last_offset: int = -1
    error: str = ""
    tries: int = 0
    refusal: str = ""
    """Set when the cluster was refused as given (the command's exit 2): the one-line reason."""


@dataclass
class FleetResult:
    clusters: dict[str, ClusterOutcome] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def refusals(self) -> list[str]:
        return [c.refusal for c in self.clusters.values() if c.refusal]


def state_of(exc: BaseException) -> str:
    """The ``fleet_status`` state a cluster's failure puts it in."""
    if isinstance(exc, ClusterError | ClusterIdMismatchError | SecurityConfigError):
        return fs.REFUSED
    if isinstance(exc, AuthorizationError | AuthenticationError):
        return fs.AUTH_FAILED
    text = str(exc)
    if isinstance(exc, ConnectError) or "no controller answered" in text:
        return fs.AUTH_FAILED if "uthentication" in text else fs.UNREACHABLE
    if "no usable snapshot" in text or "committed up to" in text or "log starts" in text:
        return fs.BEHIND_LOG_START
    return fs.FAILED


def one_line(exc: BaseException) -> str:
    """An error as the one line ``fleet_status`` and the refusals carry."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 2000 else text[:1997] + "..."


def member_options(m: FleetMember, warehouse: str | Path, base: dict[str, str]) -> dict[str, str]:
    """The ``--source kafka`` options of one cluster: ``base`` (shared settings) with its listeners, client
    properties and mirror (``<dataDir or warehouse/_kafka_mirrors>/<name>``)."""
    root = Path(base["dataDir"]) if base.get("dataDir") else Path(warehouse).resolve() / "_kafka_mirrors"
    return {
        **base,
        "bootstrapController": m.bootstrap,
        "commandConfig": m.command_config or base.get("commandConfig", ""),
        "dataDir": str(root / m.name),
        "giveUp": base.get("giveUp") or str(GIVE_UP_S),
    }


class _Member:
    """One cluster's thread: follow, stream, record its state, try again."""

    def __init__(self, fleet: _Fleet, m: FleetMember) -> None:
        self.fleet = fleet
        self.m = m
        self.outcome = ClusterOutcome(m.name)
        self.thread = threading.Thread(target=self.run, name=f"kraftlake-fleet-{m.name}", daemon=True)

    def set(self, state: str, **values: Any) -> None:
        self.outcome.state = state
        if "error" in values:
            self.outcome.error = values["error"]
        self.fleet.board.set(self.m.name, state, **values)

    def follow(self, options: dict[str, str]) -> Any:
        """Start following and wait for the mirror's first catch-up, recording an unanswered or refused contact
        as the cluster's state meanwhile; :class:`FleetStopped` when the run ends first."""
        if self.outcome.tries == 1:
            # the cluster's lock is held from here: its state is this run's to write (a later try keeps the
            # last known state until it tells more)
            self.set(fs.STARTING)
        follower = start_following(options, self.fleet.warehouse)
        try:
            while True:
                if self.fleet.stop.is_set():
                    raise FleetStopped(f"cluster {self.m.name}: the run ended before its first catch-up")
                follower.check()
                o = follower.follower.observer
                if o.high_watermark >= 0 and o.log_end >= o.high_watermark and o.download is None:
                    return follower
                error = follower.progress.last_error
                if o.high_watermark < 0 and error:
                    state = fs.AUTH_FAILED if "uthentication" in error else fs.UNREACHABLE
                    if (state, error) != (self.outcome.state, self.outcome.error):
                        self.set(state, error=error)
                self.fleet.stop.wait(0.2)
        except BaseException:
            follower.stop()
            raise

    def progress(self, p: StreamProgress) -> None:
        o = self.outcome
        o.records += p.records
        o.batches += 1
        o.last_offset = p.last_offset
        self.set(
            fs.FOLLOWING,
            error="",
            lag=max(p.lag, 0),
            last_offset=p.last_offset,
            last_commit_ms=int(time.time() * 1000),
        )
        if self.fleet.progress is not None:
            self.fleet.progress(self.m.name, p)

    def run(self) -> None:
        f = self.fleet
        options = member_options(self.m, f.warehouse, f.options)
        while not f.stop.is_set():
            self.outcome.tries += 1
            try:
                result: StreamResult = stream(
                    f.spark,
                    "kafka",
                    options,
                    f.warehouse,
                    cluster=self.m.name,
                    stop=f.stop,
                    follow=lambda: self.follow(options),
                    progress=self.progress,
                    **f.stream_options,
                )
                self.set(fs.STOPPED, last_offset=result.last_offset)
                return
            except FleetStopped:
                return
            except LockedError as exc:
                # the cluster is another process's: its status is that process's to write
                self.outcome.state, self.outcome.error = fs.REFUSED, one_line(exc)
                self.outcome.refusal = f"cluster {self.m.name}: {one_line(exc)}"
                return
            except Exception as exc:
                state = state_of(exc)
                self.set(state, error=one_line(exc))
                if state == fs.REFUSED:
                    self.outcome.refusal = f"cluster {self.m.name}: {one_line(exc)}"
                if state in FINAL:
                    return
                f.stop.wait(f.retry_s)


@dataclass
class _Fleet:
    spark: SparkSession
    warehouse: str | Path
    options: dict[str, str]
    stream_options: dict[str, Any]
    board: StatusBoard
    stop: threading.Event
    retry_s: float
    progress: Callable[[str, StreamProgress], None] | None


def stream_fleet(
    spark: SparkSession,
    members: list[FleetMember],
    warehouse: str | Path,
    options: dict[str, str] | None = None,
    *,
    trigger_interval_s: float = 1.0,
    max_records_per_batch: int | None = None,
    timeout_s: float | None = None,
    fold_at: int | None = FOLD_AT,
    status_interval_s: float = 5.0,
    retry_s: float = RETRY_S,
    stop: threading.Event | None = None,
    progress: Callable[[str, StreamProgress], None] | None = None,
) -> FleetResult:
    """Follow every cluster of ``members`` and stream it into ``warehouse`` until ``timeout_s`` passed or
    ``stop`` is set (none: until interrupted).

    ``options``: ``--source kafka`` settings every cluster shares (``commandConfig`` as a default,
    ``observerId``, ``giveUp``, ``dataDir`` as the mirrors' parent, ``recordsPerPartition``). Each cluster's
    state goes to ``fleet_status`` when it changes, and its lag at most every ``status_interval_s`` while it
    follows (:class:`kraftlake.spark.tables.fleet_status.StatusBoard`).
    """
    t0 = time.monotonic()
    Path(warehouse).mkdir(parents=True, exist_ok=True)
    stop = stop or threading.Event()
    board = StatusBoard(spark, warehouse, status_interval_s)
    stream_options = {
        "trigger_interval_s": trigger_interval_s,
        "max_records_per_batch": max_records_per_batch,
        "fold_at": fold_at,
    }
    fleet = _Fleet(spark, warehouse, options or {}, stream_options, board, stop, retry_s, progress)
    threads = [_Member(fleet, m) for m in members]
    try:
        for t in threads:
            t.thread.start()
        deadline = None if timeout_s is None else t0 + timeout_s
        while any(t.thread.is_alive() for t in threads):
            if deadline is not None and time.monotonic() >= deadline:
                stop.set()
            for t in threads:
                t.thread.join(0.2)
    finally:
        stop.set()
        for t in threads:
            t.thread.join()
        board.close()
    return FleetResult({t.m.name: t.outcome for t in threads}, time.monotonic() - t0)
