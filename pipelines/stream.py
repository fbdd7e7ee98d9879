"""``stream --source service|log-dir|kafka``: Structured Streaming of the metadata log into the warehouse.

``kafka`` follows a live Kafka controller quorum: a `kraftlake.follow.BackgroundFollower` in the driver
mirrors its committed batches into a directory (default ``<warehouse>/_kafka_mirror``) and the stream tails
that directory exactly as ``log-dir`` does, so everything below holds for it too.

``readStream.format("kraftlake-service" | "kraftlake-logdir")`` -> ``foreachBatch``: each micro-batch is
committed exactly as :func:`pipelines.ingest.ingest` commits a slice (``metadata_log`` append, history versions and
``closes`` appends, ``offsets`` append last, every write carrying Delta ``txnVersion`` = the batch's last offset).

How a micro-batch reaches the driver depends on its size (:data:`DRIVER_APPEND_ROWS` records past the commit
point). A small ``log-dir`` batch (so a ``kafka`` one too) runs no Spark job: the driver reads its range from the
log directory itself (the range from the query's offsets log, :class:`DriverRead`) and computes the rows'
verdicts (:mod:`pipelines.verdicts`); Spark's progress then counts 0 input rows. Any other batch known small (the
lag probe says so: a live ``service`` stream's) is collected whole in one Spark job, in ``metadata_log``'s layout
with its verdicts. A larger one is cached, and its ``metadata_log`` append goes through Spark's writer. Why:
with a fleet's streams in one driver, a live micro-batch costs mostly its Spark jobs, not its few rows. In every
case the log leg runs beside the driver's replay (:func:`pipelines.commit.commit_replayed`).

Why this is exactly once under ``kill -9`` at any point:

- Spark's checkpoint (``<warehouse>/_checkpoints/stream-<source>``) records a micro-batch's offset range before
  running it, and ``read`` is deterministic for a range (committed entries / whole file batches), so a
  restarted query replays the unfinished batch with the same records.
- The warehouse is the authority, not the checkpoint: the driver keeps the history builder at the commit point
  (``max(offset)`` of ``offsets``, rebuilt from the tables at start), drops records at or below it (a batch
  already committed whose checkpoint commit was lost), appends to ``metadata_log`` only rows past what an
  interrupted attempt already appended, and the appends are skipped per table when their ``txnVersion``
  already went through. A fold of the pending closes runs between batches and is idempotent. A gap between the commit point and a batch is an error, never skipped, except a hole of a log directory (a follower's mirror that installed a snapshot past its end): the history goes on from the snapshot that ends it, and its offsets are recorded as without a state (``kraftlake.spark.tables.bounds.record_gap``).

Why a stop waits for the running commit (:meth:`BatchCommitter.refuse_more`) instead of calling
``query.stop()`` at once: ``stop()`` cancels the Spark jobs our ``foreachBatch`` runs, the Python callback
then fails with a ``Py4JJavaError`` whose text holds the whole Java stack trace, and Spark 4.2's
``StreamExecution.isInterruptionException`` matches that text with ``PROXY_ERROR``
(``...calling((.|\\r\\n|\\r|\\n)*)(InterruptedException|...)``, SPARK-48717), a regex that recurses once per
character: on a message of some ten thousand characters the stream thread dies of a ``StackOverflowError``
(an ``Error``, so ``query.exception()`` stays empty and the batch is lost for this run). A stop between
batches never reaches that path; a batch that starts after the stop request fails fast with a short message.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from kraftlake.follow.lock import stream_lock
from kraftlake.history import HistoryBatch
from kraftlake.image import EMPTY
from kraftlake.image.gaps import gap_resolver
from kraftlake.spark import logtail_source, service_source
from kraftlake.spark.record_rules import REASONS, quarantine, reasons_sql, validate_records
from kraftlake.spark.service_source import StreamSourceError, entry_record
from kraftlake.spark.tables.clusters import log_dir_cluster_id
from kraftlake.spark.tables.creation import open_for_writer
from kraftlake.spark.tables.fold import fold_closes, pending_closes
from kraftlake.spark.tables.layout import (
    LOG,
    arrow_schema_of,
    stored_log_exprs,
    stored_log_rows,
    to_stored_log,
)
from kraftlake.spark.tables.writes import (
    append,
    append_arrow,
    append_frame,
    collect_rows,
    conflict_errors,
    retry_conflicts,
    wait_checkpoints,
)
from pipelines.commit import Resume, commit_replayed, crossed_gaps, gap_line, resume, starting_point
from pipelines.verdicts import verdicts

FORMATS = {"service": "kraftlake-service", "log-dir": "kraftlake-logdir"}
SOURCES = (*FORMATS, "kafka")
#: How long a ``kafka`` stream waits for its mirror to first catch up with the quorum before reading it.
CATCH_UP_TIMEOUT_S = 600.0
#: Pending closes past which the stream folds them into the history tables after a commit (see
#: :func:`kraftlake.spark.tables.writes.write_history`): a fold is one MERGE per table, as costly for one close as for
#: a million, and queries pay a join with the pending ones until then.
FOLD_AT = 1_000_000
#: Spark's status message while a query creates its sources (``StreamExecution.runStream``).
INITIALIZING = "Initializing sources"
#: How long a stop waits for a query to finish creating its sources (see :func:`_wait_sources_initialized`).
INIT_WAIT_S = 120.0
#: Spark's error when a Python data source's worker did not connect back within its fixed 10 s
#: (``PythonWorkerFactory.createSimpleWorker``): on a loaded machine, importing pyspark in the new worker alone
#: can take that long. The query then failed before reading anything, so it is started again.
WORKER_NOT_CONNECTED = "Python worker failed to connect back"
#: Starts of the query tried when its source's worker does not connect back.
START_ATTEMPTS = 3
_ENVELOPE = ("offset", "epoch", "timestamp", "batch_offset", "is_control", "api_key", "raw")
#: Micro-batches of fewer records append to ``metadata_log`` from the driver (:func:`append_frame`: the rows
#: collected, no Spark write job); larger ones through Spark's writer, in the executors.
DRIVER_APPEND_ROWS = 50_000
#: The message of the error a micro-batch raises when it starts after the driver asked the query to stop.
STOPPING = "kraftlake: the stream is stopping, this micro-batch is left for the next run"


@dataclass
class StreamProgress:
    """One committed micro-batch."""

    batch: int
    records: int
    first_offset: int
    last_offset: int
    seconds: float
    records_per_s: float
    lag: int
    """Records available at the source past this batch when it committed (-1 unknown)."""
    commit_latency_s: float
    """Wall time from the batch's last record's timestamp (its append time) to its commit point (-1 unknown)."""
    folded: int = 0
    """Pending closes folded into the history tables after this batch's commit point (its time not counted)."""
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds by phase: ``read`` (the batch to the driver, decoded), ``feed`` (the history replay), ``log``
    (record-level suite and ``metadata_log`` append) beside ``history`` (versions and closes), ``offsets``."""


@dataclass(frozen=True)
class DriverRead:
    """Where the driver reads a ``log-dir`` stream's micro-batches itself (:meth:`BatchCommitter._driver_records`):
    ``path`` the log directory the source tails, ``checkpoint`` the query's checkpoint (its offsets log holds a
    micro-batch's end before the batch runs), ``starting_offset`` the query's start (micro-batch 0 begins
    there, as the source's ``initialOffset`` says)."""

    path: str
    checkpoint: str
    starting_offset: int


def planned_end(checkpoint: str | Path, batch_id: int) -> int | None:
    """The source offset micro-batch ``batch_id`` of a one-source query ends before, from the query's offsets
    log (``offsets/<batch_id>``: ``v1``, the batch's metadata, the source's offset ``{"offset": N}``), which
    Spark writes before it runs the batch. None when the entry is missing or of another layout."""
    try:
        lines = (Path(checkpoint) / "offsets" / str(batch_id)).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if len(lines) != 3 or lines[0] != "v1":
        return None
    try:
        end = json.loads(lines[2])["offset"]
    except (ValueError, KeyError, TypeError):
        return None
    return end if isinstance(end, int) else None


@dataclass
class StreamResult:
    records: int = 0
    batches: int = 0
    last_offset: int = -1
    seconds: float = 0.0
    progress: list[StreamProgress] = field(default_factory=list)
    quarantined: int = 0
    """Rows the record-level suite set aside in ``quarantine`` (they are committed to ``metadata_log`` too)."""
    folded: int = 0
    """Pending closes folded into the history tables, during the run and at its end."""
    fold_seconds: float = 0.0
    """Wall time of those folds (not in any batch's ``seconds``)."""
    gaps: list[tuple[int, int]] = field(default_factory=list)
    """The offsets (first, last) at which no state is known: holes of the log crossed from a snapshot."""


def checkpoint_dir(warehouse: str | Path, source: str, cluster: str) -> str:
    """Spark's checkpoint of the stream of one cluster from one kind of source (a cluster's offsets are its
    own: another cluster's stream must not start where this one stopped)."""
    return str(Path(warehouse).resolve() / "_checkpoints" / f"stream-{source}-{cluster}")


def rows_to_records(table: Any) -> list[Any]:
    """Collected envelope columns (a ``pyarrow.Table``) -> ``MetadataRecord`` s by offset, decoded from ``raw``."""
    cols = {name: table.column(name).to_pylist() for name in _ENVELOPE}
    out = []
    for i in range(table.num_rows):
        ctype = cols["api_key"][i] if cols["is_control"][i] else -1
        entry = (
            cols["offset"][i],
            cols["epoch"][i],
            bool(cols["is_control"][i]),
            cols["raw"][i],
            cols["timestamp"][i],
            cols["batch_offset"][i],
            ctype,
        )
        out.append(entry_record(entry))
    out.sort(key=lambda r: r.offset)
    return out


class BatchCommitter:
    """The ``foreachBatch`` function: commits micro-batches at the warehouse's commit point, idempotently."""

    def __init__(
        self,
        spark: SparkSession,
        warehouse: str | Path,
        cluster: str,
        resumed: Resume,
        lag_probe: Callable[[int], int] | None = None,
        progress: Callable[[StreamProgress], None] | None = None,
        fold_at: int | None = FOLD_AT,
        driver_read: DriverRead | None = None,
    ) -> None:
        self.spark = spark
        self.driver_read = driver_read
        self.warehouse = warehouse
        self.cluster = cluster
        self.builder = resumed.builder
        self.done = resumed.committed
        self.log = resumed.log
        self._log_seconds = 0.0
        self.lag_probe = lag_probe
        self.progress = progress
        self.result = StreamResult()
        self.max_batch_records = 0
        self._lock = threading.Lock()
        self.busy = False
        self.stopping = False
        self.refused = 0
        self.fold_at = fold_at
        self.pending = pending_closes(spark, warehouse) if fold_at is not None else 0
        self._collected_exprs: list[str] | None = None
        #: Committed micro-batches that held a metadata record other than a NoOp (what ``idle_stop_s`` watches)
        self.active_batches = 0

    def fold(self) -> int:
        """Fold the pending closes into the history tables (between batches: never inside a commit).

        A fold that keeps losing commit conflicts (to a compaction) is left for later: the closes stay pending,
        and answers are the same either way.
        """
        t = time.monotonic()
        try:
            # few tries: the stream waits meanwhile, and the closes answer as well pending
            n = fold_closes(self.spark, self.warehouse, partial(retry_conflicts, attempts=2))
        except conflict_errors():
            n = 0  # tried again once as many closes more are pending
        self.pending = 0
        self.result.folded += n
        self.result.fold_seconds += time.monotonic() - t
        return n

    def refuse_more(self) -> None:
        """Wait for the running micro-batch's commit (if any), then make every later one fail fast.

        A refused batch raises (a short message, :data:`STOPPING`), so Spark does not mark it done in the
        query's checkpoint and the next run replays it; returning normally would skip it.
        """
        with self._lock:
            self.stopping = True

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        with self._lock:
            if self.stopping:
                self.refused += 1
                raise StreamSourceError(STOPPING)
            self.busy = True
            try:
                self._commit(df, batch_id)
            finally:
                self.busy = False

    def _commit(self, df: DataFrame, batch_id: int) -> None:
        t0 = time.monotonic()
        done = self.done
        fresh = df.where(f"offset > {done}")
        decoded = self._driver_records(batch_id)
        if decoded is not None:
            # no Spark job at all: the driver has the batch's rows from the log the source reads
            if decoded:
                rows = stored_log_rows(decoded, self.cluster, arrow_schema_of(LOG))
                self._commit_fresh(
                    fresh, batch_id, t0, (rows, {REASONS: verdicts(self.spark, rows)}), decoded
                )
            return
        if self._known_small():
            # one Spark job for the whole micro-batch: with a fleet's streams in one driver, a live micro-batch
            # costs mostly its Spark jobs, not its few rows
            self._commit_fresh(fresh, batch_id, t0, self._collect(fresh))
            return
        # cached: the source is read once for both the driver's replay and the metadata_log append
        fresh = fresh.persist()
        try:
            self._commit_fresh(fresh, batch_id, t0)
        finally:
            fresh.unpersist()

    def _collect(self, fresh: DataFrame) -> tuple[Any, dict[str, Any]]:
        """``fresh`` in ``metadata_log``'s layout with the record-level suite's verdicts (:data:`REASONS`),
        collected: one projection of SQL expressions, built at the first batch (a source's schema does not
        change between micro-batches; reading it is a round trip and a parse of the wide schema)."""
        from pyspark.sql import types as T

        if self._collected_exprs is None:
            schema = fresh.schema
            self._collected_exprs = [
                *stored_log_exprs(schema, self.cluster),
                f"{reasons_sql(schema.names)} AS {REASONS}",
            ]
        reasons = T.StructField(REASONS, T.ArrayType(T.StringType()), True)
        return collect_rows(fresh.selectExpr(*self._collected_exprs), LOG, reasons)

    def _driver_records(self, batch_id: int) -> list[Any] | None:
        """The records past the commit point of a small micro-batch of a ``log-dir`` stream, read by the driver
        from the log directory (:func:`kraftlake.spark.logtail_source.read_records`: the bytes and decoding of
        the source's ``read``, so the same rows as ``df``); None when the stream is of another source, the
        batch's range is not in the checkpoint's offsets log, or it holds :data:`DRIVER_APPEND_ROWS` or more
        (then Spark reads it, in the executors)."""
        d = self.driver_read
        if d is None:
            return None
        end = planned_end(d.checkpoint, batch_id)
        start = d.starting_offset if batch_id == 0 else planned_end(d.checkpoint, batch_id - 1)
        if end is None or start is None:
            return None
        first = max(start, self.done + 1)  # df.where(offset > done)
        if end - first >= DRIVER_APPEND_ROWS:
            return None
        return logtail_source.read_records(d.path, first, end - 1) if end > first else []

    def _known_small(self) -> bool:
        """Whether fewer records than :data:`DRIVER_APPEND_ROWS` are available past the commit point (so the
        micro-batch, planned before, holds fewer): its rows are then collected once, whole, for the replay and
        the log leg alike."""
        # a batch holds at least one record, so 0 available means the probe does not know (then the batch is
        # cached and collected in parts, whatever its size)
        return self.lag_probe is not None and 0 < self.lag_probe(self.done + 1) < DRIVER_APPEND_ROWS

    def _commit_fresh(
        self,
        fresh: DataFrame,
        batch_id: int,
        t0: float,
        collected: tuple[Any, dict[str, Any]] | None = None,
        decoded: list[Any] | None = None,
    ) -> None:
        """Commit the batch's rows past the commit point through :func:`commit_replayed`: the log leg beside
        the driver's decoding and replay, then the report. ``collected``: the batch's ``metadata_log`` rows and
        the suite's verdicts (:meth:`_collected_log`), already in the driver; else ``fresh`` is cached and its
        envelope collected here. ``decoded``: the same rows' records, when the driver read them itself."""
        if collected is not None:
            table = collected[0].select(list(_ENVELOPE))
        else:
            table = fresh.select(*_ENVELOPE).toArrow()  # the first action: fills the cache
        offsets = sorted(table.column("offset").to_pylist())
        if not offsets:
            return
        self._check_follows(offsets, batch_id)
        records: list[Any] = []
        phases: dict[str, float] = {}

        def replay() -> HistoryBatch:
            records.extend(decoded if decoded is not None else rows_to_records(table))
            phases["read"] = time.monotonic() - t0
            self.max_batch_records = max(self.max_batch_records, len(records))
            t1 = time.monotonic()
            batch = self.builder.feed(records)
            phases["feed"] = time.monotonic() - t1
            return batch

        self._log_seconds = 0.0
        log_leg = partial(self._log_leg, fresh, offsets[0], offsets[-1], collected)
        batch = commit_replayed(self.spark, self.warehouse, self.cluster, log_leg, replay, phases)
        phases["log"] = self._log_seconds
        self._report(batch, records, phases, t0)

    def _check_follows(self, offsets: list[int], batch_id: int) -> None:
        """Refuse a batch that does not start right after the commit point or skips offsets, unless the
        builder crosses a log directory's gaps from the snapshot that ends them (``on_gap``)."""
        if self.builder.on_gap is not None:
            return
        done = self.done
        if offsets[0] != done + 1 and done >= 0:
            raise StreamSourceError(
                f"micro-batch {batch_id} starts at offset {offsets[0]}, the warehouse is committed up to {done}"
            )
        for a, b in pairwise(offsets):
            if b != a + 1:
                raise StreamSourceError(f"micro-batch {batch_id}: offsets jump from {a} to {b}")

    def _log_leg(
        self, fresh: DataFrame, first: int, last: int, collected: tuple[Any, dict[str, Any]] | None
    ) -> None:
        """The record-level suite, then the ``metadata_log`` append of the rows past what it holds.

        Rows failing the suite are also set aside with their reasons and the batch commits whole (``metadata_log``
        is the log as Kafka applied it, so the history keeps agreeing with the image); before the commit point,
        so a replayed batch redoes it (``quarantine`` is idempotent by offset).
        """
        t = time.monotonic()
        write: Callable[[int, int], None]
        if collected is not None or last - first < DRIVER_APPEND_ROWS:
            write = self._collected_log(fresh, collected)
        else:
            self.result.quarantined += quarantine(
                self.spark, self.warehouse, validate_records(fresh)[1], self.cluster
            )

            def write(start: int, end: int) -> None:
                rows = to_stored_log(fresh.where(f"offset >= {start} AND offset <= {end}"), self.cluster)
                if end - start < DRIVER_APPEND_ROWS:
                    append_frame(self.spark, rows, self.warehouse, LOG, end, self.cluster)
                else:
                    append(rows, self.warehouse, LOG, end, self.cluster)

        if self.log.append(first, last, write):
            self._log_seconds = time.monotonic() - t

    def _collected_log(
        self, fresh: DataFrame, collected: tuple[Any, dict[str, Any]] | None
    ) -> Callable[[int, int], None]:
        """A small batch's log leg: its ``metadata_log`` rows and the record-level suite's verdicts in one collect
        (``collected``, or collected here: one Spark job where the suite and the append took two or three); the
        failing rows, if any, go to ``quarantine`` through :func:`quarantine`. Returns the append of the rows of
        an offset range, from the collect."""
        import pyarrow.compute as pc

        rows, apart = collected or self._collect(fresh)
        if pc.any(pc.greater(pc.list_value_length(apart[REASONS]), 0)).as_py():
            self.result.quarantined += quarantine(
                self.spark, self.warehouse, validate_records(fresh)[1], self.cluster
            )

        def write(start: int, end: int) -> None:
            offsets = rows.column("offset")
            wanted = pc.and_(pc.greater_equal(offsets, start), pc.less_equal(offsets, end))
            append_arrow(self.spark, self.warehouse, LOG, rows.filter(wanted), end, self.cluster)

        return write

    def _report(self, batch: HistoryBatch, records: list[Any], phases: dict[str, float], t0: float) -> None:
        """Move the commit point, count the batch, fold when enough closes wait, and report its progress."""
        for first_missing, last_missing in crossed_gaps(batch):
            self.result.gaps.append((first_missing, last_missing))
            line = gap_line(first_missing, last_missing, last_missing + 1)
            print(f"kraftlake stream: {line}", file=sys.stderr, flush=True)
        self.done = batch.last_offset
        self.pending += sum(len(c) for c in batch.closes.values())
        dt = time.monotonic() - t0
        r = self.result
        r.records += len(records)
        r.batches += 1
        if any(not x.is_control and x.type != "NoOpRecord" for x in records):
            self.active_batches += 1
        r.last_offset = batch.last_offset
        ts = records[-1].timestamp
        p = StreamProgress(
            r.batches,
            len(records),
            batch.first_offset,
            batch.last_offset,
            round(dt, 3),
            round(len(records) / dt if dt else 0.0, 1),
            self.lag_probe(batch.last_offset + 1) if self.lag_probe is not None else -1,
            round(time.time() - ts / 1000, 3) if ts > 0 else -1.0,
        )
        p.phases = {k: round(v, 3) for k, v in phases.items()}
        if self.fold_at is not None and self.pending >= self.fold_at:
            p.folded = self.fold()
        r.progress.append(p)
        if self.progress is not None:
            self.progress(p)


def _resume(
    spark: SparkSession, warehouse: str | Path, cluster: str, source: str, options: dict[str, str]
) -> Resume:
    """The stream's state at the cluster's commit point (:func:`pipelines.commit.resume`), seeding the
    cluster from a snapshot if needed."""
    # a log directory may skip records and go on from a snapshot (a follower's mirror): the builder crosses
    if source == "log-dir":
        path = options["path"]
        return resume(spark, warehouse, cluster, partial(starting_point, path), gap_resolver(path))
    return resume(spark, warehouse, cluster, partial(_service_start, options))


def _source_cluster_id(read_source: str, options: dict[str, str], follower: Any) -> str | None:
    """The cluster id the stream's source reports: the followed quorum's, the service's, or the one in the
    ``meta.properties`` of a log dir."""
    if follower is not None:
        return follower.mirror.cluster_id
    if read_source == "service":
        return options.get("clusterId") or None
    return log_dir_cluster_id(options["path"])


def _service_start(options: dict[str, str]) -> tuple[Any, int]:
    """A fresh warehouse over a service: from 0, or from the service's latest snapshot if its log was trimmed."""
    import tempfile

    from kraftlake.image import load_snapshot
    from kraftlake.raft.messages import OffsetAndEpoch
    from kraftlake.service.client import ObserverClient
    from kraftlake.service.errors import SnapshotRequiredError

    client = ObserverClient(service_source.parse_bootstrap(options["bootstrap"]), options["clusterId"])
    try:
        try:
            client.fetch_entries(0, 1, max_wait_ms=0)
            return EMPTY, 0
        except SnapshotRequiredError as exc:
            sid: OffsetAndEpoch = exc.snapshot_id
        data = client.fetch_snapshot(sid)
    finally:
        client.close()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{sid.offset:020d}-{sid.epoch:010d}.checkpoint"
        path.write_bytes(data)
        return load_snapshot(path), sid.offset


def _lag_probe(source: str, options: dict[str, str]) -> Callable[[int], int]:
    if source == "service":
        from kraftlake.service.client import ObserverClient

        client = ObserverClient(service_source.parse_bootstrap(options["bootstrap"]), options["clusterId"])
        return lambda nxt: max(0, client.log_range()[1] - nxt)
    index = logtail_source.SegmentIndex(options["path"])
    return lambda nxt: max(0, index.refresh() - nxt)


def stream(
    spark: SparkSession,
    source: str,
    options: dict[str, str],
    warehouse: str | Path,
    *,
    trigger_interval_s: float = 1.0,
    available_now: bool = False,
    max_records_per_batch: int | None = None,
    max_batches: int | None = None,
    idle_stop_s: float | None = None,
    until_offset: int | None = None,
    timeout_s: float | None = None,
    progress: Callable[[StreamProgress], None] | None = None,
    fold_at: int | None = FOLD_AT,
    fold_at_end: bool = True,
    cluster: str | None = None,
    stop: threading.Event | None = None,
    follow: Callable[[], Any] | None = None,
) -> StreamResult:
    """Stream ``source`` (``service``: options ``bootstrap``, ``clusterId``; ``log-dir``: option ``path``;
    ``kafka``: options of :func:`follow_kafka`) as the cluster ``cluster`` (else named by the cluster id the
    source reports: :func:`kraftlake.spark.tables.creation.open_for_writer`).

    Runs until the AvailableNow target is committed, ``max_batches`` batches committed, the commit point
    reached ``until_offset``, nothing but NoOp records was committed for ``idle_stop_s`` (the meaning of
    ``follow --idle-stop`` too: a Kafka controller appends a NoOp every 500 ms), or ``timeout_s`` passed
    (whichever is set and comes first; none: forever).

    One stream writes a cluster of a warehouse at a time: it holds ``<warehouse>/.stream-<cluster>.lock``
    (:func:`kraftlake.follow.lock.stream_lock`, taken before anything is followed when ``cluster`` is given,
    else once the source told the cluster id; a second is refused naming the holder's pid). Streams of other
    clusters may write the warehouse meanwhile.

    ``stop``: ends the run as ``timeout_s`` does once set. ``follow``: for ``kafka``, starts following once the
    lock is held and returns the caught-up `kraftlake.follow.background.BackgroundFollower` (stopped with the
    stream); default :func:`follow_kafka` of ``options``.

    ``fold_at``: fold the pending closes once this many wait (None: never during the run); ``fold_at_end``:
    fold them when the run ends cleanly, so the history tables read directly hold every ``to_offset``.
    """
    if source not in SOURCES:
        raise StreamSourceError(f"unknown source {source!r}: one of {', '.join(SOURCES)}")
    t0 = time.monotonic()
    Path(warehouse).mkdir(parents=True, exist_ok=True)
    with ExitStack() as held:
        if cluster is not None:
            held.enter_context(stream_lock(warehouse, cluster))
        return _locked_stream(
            spark,
            source,
            options,
            warehouse,
            t0,
            held,
            follow or partial(follow_kafka, options, warehouse),
            trigger_interval_s=trigger_interval_s,
            available_now=available_now,
            max_records_per_batch=max_records_per_batch,
            max_batches=max_batches,
            idle_stop_s=idle_stop_s,
            until_offset=until_offset,
            timeout_s=timeout_s,
            progress=progress,
            fold_at=fold_at,
            fold_at_end=fold_at_end,
            cluster=cluster,
            stop=stop,
        )


def _locked_stream(
    spark: SparkSession,
    source: str,
    options: dict[str, str],
    warehouse: str | Path,
    t0: float,
    held: ExitStack,
    follow: Callable[[], Any],
    **kwargs: Any,
) -> StreamResult:
    follower = None
    read_source = source
    if source == "kafka":
        follower = follow()
        options = {
            **{k: v for k, v in options.items() if k == "recordsPerPartition"},
            "path": str(follower.path),
        }
        read_source = "log-dir"
    try:
        return _stream(
            spark,
            source,
            read_source,
            options,
            warehouse,
            follower,
            t0,
            held,
            **kwargs,
        )
    finally:
        if follower is not None:
            follower.stop()


def follow_kafka(options: dict[str, str], warehouse: str | Path) -> Any:
    """:func:`start_following` the quorum of ``options`` and wait until the mirror first caught up (at most
    ``catchUpTimeout`` seconds, default :data:`CATCH_UP_TIMEOUT_S`)."""
    follower = start_following(options, warehouse)
    try:
        follower.wait_caught_up(float(options.get("catchUpTimeout", CATCH_UP_TIMEOUT_S)))
    except BaseException:
        follower.stop()
        raise
    return follower


def start_following(options: dict[str, str], warehouse: str | Path) -> Any:
    """A `kraftlake.follow.background.BackgroundFollower` of the Kafka quorum of ``options``
    (``bootstrapController``; optional ``commandConfig``, ``dataDir``, ``clusterId``, ``observerId``,
    ``giveUp``: seconds or ``never``), started."""
    from kraftlake.follow.background import BackgroundFollower
    from kraftlake.follow.bootstrap import parse_bootstrap
    from kraftlake.wire.client_config import load_client_properties

    security = load_client_properties(options["commandConfig"]) if options.get("commandConfig") else None
    data_dir = options.get("dataDir") or str(Path(warehouse).resolve() / "_kafka_mirror")
    observer_id = int(options["observerId"]) if options.get("observerId") else None
    give_up = options.get("giveUp", "60").strip().lower() or "60"
    return BackgroundFollower(
        parse_bootstrap(options["bootstrapController"]),
        data_dir,
        security=security,
        cluster_id=options.get("clusterId") or None,
        observer_id=observer_id,
        give_up_s=None if give_up == "never" else float(give_up),
    )


def _stream(
    spark: SparkSession,
    source: str,
    read_source: str,
    options: dict[str, str],
    warehouse: str | Path,
    follower: Any,
    t0: float,
    held: ExitStack,
    *,
    trigger_interval_s: float,
    available_now: bool,
    max_records_per_batch: int | None,
    max_batches: int | None,
    idle_stop_s: float | None,
    until_offset: int | None,
    timeout_s: float | None,
    progress: Callable[[StreamProgress], None] | None,
    fold_at: int | None,
    fold_at_end: bool,
    cluster: str | None,
    stop: threading.Event | None,
) -> StreamResult:
    service_source.register(spark)
    logtail_source.register(spark)
    cluster_id = _source_cluster_id(read_source, options, follower)
    name = open_for_writer(spark, warehouse, cluster, cluster_id, f"{source} stream")
    if cluster is None:
        held.enter_context(stream_lock(warehouse, name))
    resumed = _resume(spark, warehouse, name, read_source, options)
    lag = (
        _lag_probe(read_source, options)
        if follower is None
        else (lambda nxt: max(0, follower.follower.observer.high_watermark - nxt))
    )
    checkpoint = checkpoint_dir(warehouse, source, name)
    driver_read = DriverRead(options["path"], checkpoint, resumed.start) if read_source == "log-dir" else None
    committer = BatchCommitter(spark, warehouse, name, resumed, lag, progress, fold_at, driver_read)
    reader = (
        spark.readStream.format(FORMATS[read_source])
        .options(**options)
        .option("startingOffset", str(resumed.start))
    )
    if max_records_per_batch:
        reader = reader.option("maxRecordsPerBatch", str(max_records_per_batch))
    writer = reader.load().writeStream.foreachBatch(committer).option("checkpointLocation", checkpoint)
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime=f"{max(trigger_interval_s, 0.0)} seconds")
    )
    for attempt in range(1, START_ATTEMPTS + 1):
        query = writer.start()
        stopped_by_us = False
        try:
            if available_now:
                _await(query, timeout_s)
            else:
                last_change, seen = time.monotonic(), -1
                while query.isActive:
                    _await(query, 0.2)
                    if follower is not None:
                        follower.check()
                    now = time.monotonic()
                    # idle means nothing but NoOps was committed (a Kafka controller appends one every 500 ms,
                    # `kraftlake.follow.activity`); until the first batch is committed, the first trigger not yet
                    # done or a batch being read or committed is activity, however long it takes (tens of seconds
                    # on a loaded machine)
                    first = committer.result.batches == 0 and (
                        committer.busy or _has_data(query) or query.lastProgress is None
                    )
                    if committer.active_batches != seen or first:
                        seen, last_change = committer.active_batches, now
                    if max_batches is not None and committer.result.batches >= max_batches:
                        break
                    if until_offset is not None and committer.done >= until_offset:
                        break
                    if idle_stop_s is not None and now - last_change >= idle_stop_s:
                        break
                    if timeout_s is not None and now - t0 >= timeout_s:
                        break
                    if stop is not None and stop.is_set():
                        break
                else:
                    if query.exception() is None:
                        # the stream thread died of a JVM Error (Spark reports only Exceptions)
                        raise StreamSourceError(
                            "the streaming query ended by itself without an error "
                            "(see the driver's log for the stream thread's death)"
                        )
        finally:
            if query.isActive:
                _wait_sources_initialized(query)
                committer.refuse_more()
                stopped_by_us = True
                query.stop()
        exc = query.exception()
        if exc is not None and WORKER_NOT_CONNECTED in str(exc) and attempt < START_ATTEMPTS:
            continue  # nothing ran: the source's Python worker never started (see START_ATTEMPTS)
        if exc is not None and not (stopped_by_us and committer.refused and STOPPING in str(exc)):
            raise StreamSourceError(f"the streaming query failed: {exc}")
        break
    if fold_at_end:
        committer.fold()
    wait_checkpoints()
    committer.result.seconds = time.monotonic() - t0
    return committer.result


def _await(query: Any, timeout_s: float | None) -> None:
    """``query.awaitTermination``, which raises the query's failure: read here through ``query.exception()``."""
    from pyspark.errors import StreamingQueryException

    with suppress(StreamingQueryException):
        query.awaitTermination(timeout_s)


def _wait_sources_initialized(query: Any, timeout_s: float = INIT_WAIT_S) -> None:
    """Wait while the query is still creating its source (status "Initializing sources", at most ``timeout_s``).

    Creating a Python data source's stream reader starts its Python worker and waits for it to connect back;
    ``stop()`` then interrupts that wait, and the worker, still importing pyspark, later finds no one listening
    and prints a ``CANNOT_OPEN_SOCKET`` traceback. Once the source exists, a stop is clean.
    """
    deadline = time.monotonic() + timeout_s
    while query.isActive and time.monotonic() < deadline:
        try:
            if query.status.get("message") != INITIALIZING:
                return
        except Exception:  # the query may terminate meanwhile
            return
        _await(query, 0.1)


def _has_data(query: Any) -> bool:
    """Whether the query's current trigger is processing new data (reading or committing a micro-batch)."""
    try:
        return bool(query.status.get("isDataAvailable"))
    except Exception:  # the query may terminate between the loop's check and this call
        return False
