"""The jobs on a Spark standalone cluster (master + two 1-core workers on 127.0.0.1, one cluster for the module),
shipped as the built package (:mod:`bench.standalone`).

``ingest`` and a ``partitions_at`` query run through ``spark-submit --master spark://...`` with the package
built from the sources (what ``make dist`` builds: a wheel with ``schemas/`` packed as ``kraftlake/_schemas``).
The cluster's ``sql`` job must print the partitions the oracle (the image) holds at that offset; a fleet of four
clusters ingested by one ``spark-submit`` (their histories replayed on both workers) must answer each cluster's
image (``make test-fleet``: minutes; ``make test`` covers the executor replay in local mode). The tests need no local session (they run beside the Spark tests' worker). Every ``kraftlake`` import on
an executor is the shipped package's (:func:`bench.standalone.isolated_python`), and a probe job asserts
it.
"""

from __future__ import annotations

import ast
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.standalone import (
    REPO,
    build_package,
    isolated_python,
    standalone_cluster,
    submit,
    submit_env,
    submit_options,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(
        3600
    ),  # four spark-submits and a cluster of two workers: ~4 min on a quiet 2-core machine
]

PROBE = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
def where(_):
    import kraftlake, socket
    from pyspark import TaskContext
    yield (kraftlake.__file__, TaskContext.get().stageId() >= 0)
print("PROBE " + repr(spark.sparkContext.parallelize(range(2), 2).mapPartitions(where).collect()))
print("MASTER " + spark.sparkContext.master)
spark.stop()
"""


@dataclass
class Cluster:
    url: str
    works: list[Path]
    package: Path
    python: Path
    env: dict[str, str]
    root: Path
    log: Path
    timings: dict[str, float]

    def submit(self, args: list[str], cores: int) -> str:
        return submit(
            [*submit_options(self.url, self.package, self.python, cores), *args],
            self.env,
            self.log,
            self.root,
        )

    def apps(self) -> set[Path]:
        return {app for work in self.works for app in work.glob("app-*")}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The package, the executors' Python and a master with two 1-core workers, for the module."""
    root = tmp_path_factory.mktemp("standalone")
    t0 = time.monotonic()
    package = build_package(root)
    python = isolated_python(root)
    timings = {"build": time.monotonic() - t0}
    env = submit_env()
    t1 = time.monotonic()
    with standalone_cluster(root, env, workers=2) as (url, works):
        timings["cluster_start"] = time.monotonic() - t1
        yield Cluster(url, works, package, python, env, root, root / "submit.log", timings)
    print("standalone cluster timings (s):", {k: round(v, 1) for k, v in timings.items()})


def _jsonl_rows(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def test_ingest_and_partitions_at_on_a_standalone_cluster(tmp_path: Path, cluster: Cluster) -> None:
    """``ingest`` and ``partitions_at`` run on the standalone cluster through spark-submit answer the image.
    Slow: the module's cluster is made first (the package built, the executors' Python made, a master and two
    workers started, each a JVM); then three spark-submits (the probe, ``ingest``, ``sql``), each a driver JVM
    with executors on the workers."""
    from kraftlake.image import image_at
    from kraftlake.image.render import image_json
    from kraftlake.image.source import log_records
    from kraftlake.sim.workloads.entities import write_synthetic_log

    log_dir = write_synthetic_log(tmp_path / "log", seed=3, steps=60)
    last = max(r.offset for r in log_records(log_dir))
    query = f"SELECT * FROM partitions_at({last // 2}) ORDER BY topic, partition"
    before = cluster.apps()
    t2 = time.monotonic()
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    out = cluster.submit([str(probe)], cores=1)
    assert f"MASTER {cluster.url}" in out
    files = ast.literal_eval(next(line for line in out.splitlines() if line.startswith("PROBE "))[6:])
    assert len(files) == 2
    for path, _ in files:
        # the executor imported kraftlake from the shipped archive, fetched into its work dir
        assert f"{cluster.package.name}/kraftlake/__init__.py" in path and str(REPO) not in path, path
    cluster_w = tmp_path / "cluster-warehouse"
    ingest = [str(REPO / "jobs" / "ingest.py"), "--log-dir", str(log_dir), "--warehouse", str(cluster_w)]
    cluster.submit(ingest, cores=1)
    sql = [str(REPO / "jobs" / "sql.py"), "--warehouse", str(cluster_w), "--format", "jsonl", query]
    remote = cluster.submit(sql, cores=1)
    cluster.timings["cluster_jobs"] = time.monotonic() - t2
    # the applications ran on the workers' executors (one app dir per spark-submit)
    assert len(cluster.apps() - before) == 3
    # the oracle: the image at that offset, its partitions as `kraftlake image` renders them
    doc = image_json(image_at(log_dir, last // 2))
    want = [
        {"topic": t["name"], "topic_id": t["topic_id"], **p} for t in doc["topics"] for p in t["partitions"]
    ]
    got = [json.loads(line) for line in remote.splitlines() if line.startswith("{")]
    for row in got:
        assert row.pop("from_offset") <= last // 2
    assert want and _jsonl_rows(got) == _jsonl_rows(want)


#: The fleet test's job: ``jobs/ingest.py`` with the ``--log-dir`` flags given, then in the same application each
#: cluster's entity tables at an offset, as JSON lines (one ``spark-submit``: the JVM's start is the cost).
FLEET_JOB = """
import json, sys
from pyspark.sql import SparkSession
from jobs.ingest import main
from kraftlake.history import ENTITIES
from udfs.sql import register
warehouse, at = sys.argv[1], json.loads(sys.argv[2])
assert main(["--warehouse", warehouse, *sys.argv[3:]]) == 0
spark = SparkSession.builder.getOrCreate()
register(spark, warehouse)
for table in ENTITIES:
    # one query a table: every cluster's answer, tagged with its name
    sql = " UNION ALL ".join(f"SELECT '{name}' AS _c, * FROM {table}_at({n}, '{name}')" for name, n in at.items())
    for row in spark.sql(sql).drop("from_offset").collect():
        d = row.asDict(recursive=True)
        print("ROW " + json.dumps({"cluster": d.pop("_c"), "table": table, "row": d}, default=str))
spark.stop()
"""


@pytest.mark.skipif(
    os.environ.get("KRAFTLAKE_FLEET") != "1",
    reason="four clusters on the standalone cluster take minutes: KRAFTLAKE_FLEET=1 (make test-fleet)",
)
def test_a_fleet_replayed_on_two_workers(tmp_path: Path, cluster: Cluster) -> None:
    from warehouse_states import canon

    from kraftlake.history import ENTITIES, entity_rows
    from kraftlake.image import image_at
    from kraftlake.image.source import log_records
    from kraftlake.sim.workloads.entities import write_synthetic_log

    logs = {
        f"c{i}": write_synthetic_log(tmp_path / f"c{i}", seed=40 + i, steps=50 + 10 * i) for i in range(4)
    }
    at = {name: max(r.offset for r in log_records(d)) // 2 for name, d in logs.items()}
    flags = [arg for name, d in logs.items() for arg in ("--log-dir", f"{name}={d}")]
    script = tmp_path / "fleet_job.py"
    script.write_text(FLEET_JOB)
    before = cluster.apps()
    t0 = time.monotonic()
    out = cluster.submit(
        [str(script), str(tmp_path / "fleet-warehouse"), json.dumps(at), *flags, "--batch-records", "200"],
        cores=2,
    )
    cluster.timings["fleet_job"] = time.monotonic() - t0
    for name in logs:
        assert f"of cluster {name} " in out, out
    # the application had an executor on each worker
    assert {app.parent for app in cluster.apps() - before} == set(cluster.works)
    got: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for line in out.splitlines():
        if line.startswith("ROW "):
            doc = json.loads(line[4:])
            got.setdefault((doc["cluster"], doc["table"]), []).append(doc["row"])
    for name, d in logs.items():
        rows = entity_rows(image_at(d, at[name]))
        assert rows["partitions"], name
        for table in ENTITIES:
            assert canon(got.get((name, table), [])) == canon(rows[table]), (name, table)
