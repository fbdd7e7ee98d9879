"""``stream --source service``: a 3-voter quorum streamed into a warehouse equals a batch ingest of its log.

One module-scoped quorum holds a synthetic log (transactions included) appended in many small writes. The
in-process stream (AvailableNow, ``maxRecordsPerBatch``) is checked against the batch ingest of the leader's
log directory and against the image; the ``kill -9`` test runs the CLI in a subprocess, kills its process group
after some batches committed, restarts it, and compares with the uninterrupted warehouse.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark.test_warehouse import assert_state_matches, query_at

from kraftlake.raft.config import QuorumConfig
from kraftlake.service import LocalQuorum
from kraftlake.sim.workloads.entities import encode_latest as _encode
from kraftlake.sim.workloads.entities import synthetic_records

CLUSTER = "stream-test-cluster-01"
REPO = Path(__file__).resolve().parents[2]
K = 48


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalQuorum, int]]:
    cfg = QuorumConfig(
        voters=frozenset({1, 2, 3}),
        election_timeout_ms=300,
        fetch_timeout_ms=600,
        election_backoff_max_ms=300,
        request_timeout_ms=1000,
        max_fetch_wait_ms=200,
        append_linger_ms=5,
    )
    q = LocalQuorum(3, tmp_path_factory.mktemp("quorum"), CLUSTER, fsync=False, quorum=cfg)
    q.start()
    try:
        q.wait_for_leader()
        values = [_encode(r) for r in synthetic_records(5, 60)]
        last = -1
        for i in range(0, len(values), 7):
            _, last = q.append(values[i : i + 7]).result(timeout=30)
        yield q, last
    finally:
        q.stop()


def bootstrap(q: LocalQuorum) -> str:
    return ",".join(f"{h}:{p}" for h, p in q.endpoints.values())


def leader_dir(q: LocalQuorum) -> Path:
    leader = q.leader()
    assert leader is not None
    return q.data_dir / f"node-{leader.node_id}"


def table_counts(spark: Any, warehouse: Path, upto: int) -> dict[str, int]:
    """Rows per table for offsets up to ``upto``, in one Spark action.

    Bounded because the quorum's log may grow after the fixture's appends: a loaded machine makes the voters
    elect again, and every new leader appends a LeaderChange control record. Also checks that no offset is
    stored twice anywhere in the warehouse (what a replayed batch would leave).
    """
    from kraftlake.history import ENTITIES
    from kraftlake.spark.tables.layout import table_ref

    parts = [
        f"SELECT '{n}' AS t, count(*) AS c FROM {table_ref(warehouse, n)} WHERE offset <= {upto}"
        for n in ("metadata_log", "offsets")
    ]
    parts += [
        f"SELECT '{n}' AS t, count(*) AS c FROM {table_ref(warehouse, n)} WHERE from_offset <= {upto}"
        for n in ENTITIES
    ]
    parts += [
        f"SELECT '{n} duplicates' AS t, count(*) - count(DISTINCT offset) AS c FROM {table_ref(warehouse, n)}"
        for n in ("metadata_log", "offsets")
    ]
    counts = {r["t"]: r["c"] for r in spark.sql(" UNION ALL ".join(parts)).collect()}
    assert counts.pop("metadata_log duplicates") == 0 and counts.pop("offsets duplicates") == 0, warehouse
    return counts


@pytest.fixture(scope="module")
def streamed(
    spark: Any, quorum: tuple[LocalQuorum, int], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Any]:
    from pipelines.stream import stream

    q, _ = quorum
    warehouse = tmp_path_factory.mktemp("stream-wh")
    result = stream(
        spark,
        "service",
        {"bootstrap": bootstrap(q), "clusterId": CLUSTER},
        warehouse,
        available_now=True,
        max_records_per_batch=K,
        timeout_s=600,
    )
    return warehouse, result


@pytest.mark.slow
def test_stream_equals_batch_ingest_and_image(
    spark: Any, quorum: tuple[LocalQuorum, int], streamed: tuple[Path, Any], tmp_path: Path
) -> None:
    """The stream of the quorum equals a batch ingest of the leader's log, and the image.
    Slow: the module's fixtures come first (a 3-voter quorum to which a synthetic log's 115 records are
    appended 7 at a time, streamed in micro-batches of at most 48 records); then a batch ingest of the
    leader's log, the two warehouses compared table by table, and every entity asked at five offsets."""
    from pipelines.ingest import ingest
    from udfs.sql import register

    q, last = quorum
    warehouse, result = streamed
    assert result.last_offset >= last
    # admission control: every micro-batch within maxRecordsPerBatch, so several batches
    assert result.batches >= result.records // K
    assert all(0 < p.records <= K for p in result.progress)
    log_dir = leader_dir(q)
    batch = tmp_path / "batch-wh"
    ingest(spark, log_dir, batch, batch_records=100)
    end = result.last_offset
    assert table_counts(spark, warehouse, end) == table_counts(spark, batch, end)
    cols = "offset, epoch, timestamp, batch_offset, is_control, type, api_key, version, raw"
    from kraftlake.spark.tables.layout import table_ref

    a = spark.sql(f"SELECT {cols} FROM {table_ref(warehouse, 'metadata_log')} WHERE offset <= {end}")
    b = spark.sql(f"SELECT {cols} FROM {table_ref(batch, 'metadata_log')} WHERE offset <= {end}")
    assert a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0
    register(spark, warehouse)
    assert_state_matches(spark, log_dir, [0, end // 4, end // 2, (3 * end) // 4, end])


#: Micro-batch size of the CLI runs: the log's ~116 records in two batches, so the kill lands in the second
#: (started as soon as the first committed) and the restart replays it; each batch costs a JVM's worth of
#: Delta commits, so fewer batches keep the test inside its timeout on a loaded machine.
CLI_BATCH = 60


def _cli(q: LocalQuorum, warehouse: Path, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYSPARK_PYTHON=sys.executable)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kraftlake.cli",
            "stream",
            "--source",
            "service",
            "--bootstrap",
            bootstrap(q),
            "--cluster-id",
            CLUSTER,
            "--warehouse",
            str(warehouse),
            "--trigger-interval",
            "0.2",
            "--max-records-per-batch",
            str(CLI_BATCH),
            *extra,
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.mark.slow
@pytest.mark.heavy
def test_kill_9_and_restart_gives_the_uninterrupted_tables(
    spark: Any, quorum: tuple[LocalQuorum, int], streamed: tuple[Path, Any], tmp_path: Path
) -> None:
    """A stream killed with SIGKILL mid-batch and restarted gives the uninterrupted stream's tables.
    Slow: two ``kraftlake stream`` subprocesses, each starting its own Spark JVM (the first killed once a
    micro-batch committed, the second run to the end), then both warehouses' tables counted and
    ``partitions_at`` asked of each."""
    from udfs.sql import register

    q, last = quorum
    uninterrupted, _ = streamed
    warehouse = tmp_path / "wh"
    proc = _cli(q, warehouse, "--idle-stop", "30")
    committed = 0
    assert proc.stderr is not None
    deadline = time.monotonic() + 300
    seen: list[str] = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("{"):  # the first committed micro-batch's progress line
                committed += 1
                break
            assert time.monotonic() < deadline, "no progress from the stream"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole group: the driver and its JVM, mid-batch
        proc.wait()
    assert committed >= 1, "the stream ended before it could be killed: " + "".join(seen[-40:])
    again = _cli(q, warehouse, "--available-now")
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err[-3000:]
    from kraftlake.spark.tables.bounds import last_offset

    # the commit point, not the restart's progress lines: a kill after the second batch's commit point leaves
    # the restart nothing to write (the log may have grown since the uninterrupted run: see table_counts)
    end = last_offset(spark, uninterrupted, CLUSTER)
    assert last_offset(spark, warehouse, CLUSTER) >= end >= last, out
    assert table_counts(spark, warehouse, end) == table_counts(spark, uninterrupted, end)
    offsets = [0, last // 3, last // 2, last]
    register(spark, warehouse)
    got = {
        n: sorted(json.dumps(r, sort_keys=True) for r in rows)
        for n, rows in query_at(spark, "partitions", offsets).items()
    }
    register(spark, uninterrupted)
    exp = {
        n: sorted(json.dumps(r, sort_keys=True) for r in rows)
        for n, rows in query_at(spark, "partitions", offsets).items()
    }
    assert got == exp
