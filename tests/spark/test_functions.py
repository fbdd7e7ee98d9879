"""Persistent SQL functions: ``kraftlake functions`` stores them in a Derby metastore; a fresh process uses them.

The shared test session has Spark's in-memory catalog, and a Hive-enabled session is a static setting of its
JVM, so both sides run as subprocesses: the command (one JVM), then a reader (another JVM) that registers
nothing and selects ``FROM kraftlake.partitions_at(N)``, compared with ``kraftlake.image.image_at``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kraftlake.history import entity_rows
from kraftlake.image import image_at
from kraftlake.image.source import log_records
from kraftlake.sim.workloads.entities import write_synthetic_log
from pipelines.serve import command_env

# The reader: a session over the same metastore, no registration; prints what it got as one JSON document.
READER = r"""
import json, sys
from udfs.catalog import metastore_conf
from kraftlake.spark.session import build_session
from pipelines.serve import command_env

warehouse, offsets = sys.argv[1], [int(x) for x in sys.argv[2].split(",")]
spark = build_session("kraftlake-test-reader", conf=metastore_conf(warehouse))
values = ", ".join(f"({n})" for n in offsets)
rows = spark.sql(f"SELECT o.n AS _n, f.* FROM VALUES {values} AS o(n), "
                 f"LATERAL kraftlake.partitions_at(o.n) f").collect()
brokers = spark.sql(f"SELECT * FROM kraftlake.brokers_at({offsets[-1]})").collect()
log_rows = spark.sql("SELECT count(*) AS n FROM kraftlake.metadata_log").first()["n"]
functions = [r[0] for r in spark.sql("SHOW USER FUNCTIONS IN kraftlake").collect()]
try:
    spark.sql("SELECT * FROM partitions_at(0)").collect()
    unqualified = "resolved"
except Exception as exc:
    unqualified = type(exc).__name__
print("RESULT " + json.dumps({
    "partitions": [r.asDict(recursive=True) for r in rows],
    "brokers": [r.asDict(recursive=True) for r in brokers],
    "log_rows": log_rows, "functions": functions, "unqualified": unqualified,
    "catalog": spark.conf.get("spark.sql.catalogImplementation")}, default=str))
"""


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=command_env(), capture_output=True, text=True, timeout=600
    )


def _canon(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> tuple[Path, Path, list[int]]:
    from pipelines.ingest import ingest

    root = tmp_path_factory.mktemp("functions")
    log_dir = write_synthetic_log(root / "log", seed=5, steps=80)
    warehouse = root / "warehouse"
    ingest(spark, log_dir, warehouse, batch_records=1000)
    last = max(r.offset for r in log_records(log_dir))
    return log_dir, warehouse, [last // 3, (2 * last) // 3, last]


@pytest.mark.slow
@pytest.mark.heavy
def test_functions_persist_across_processes(small: tuple[Path, Path, list[int]], tmp_path: Path) -> None:
    """The functions ``kraftlake functions`` stores answer in a fresh process that registers nothing.
    Slow: two Spark processes with a Derby metastore (the command, then the reader), each starting its own
    JVM; the module's warehouse (the 142-record log) is ingested first."""
    log_dir, warehouse, offsets = small
    made = _run(["-m", "kraftlake.cli", "functions", "--warehouse", str(warehouse)], tmp_path)
    assert made.returncode == 0, made.stderr[-4000:]
    # the JVM's own stderr (its incubator-modules warning) went to the command's log file
    assert "WARNING" not in made.stderr, made.stderr
    doc = json.loads(made.stdout)
    assert doc["catalog"] == "hive" and doc["database"] == "kraftlake"
    assert {"kraftlake.partitions_at", "kraftlake.brokers_at_time", "kraftlake.isr_history"} <= set(
        doc["functions"]
    )
    assert "kraftlake.metadata_log" in doc["tables"]
    assert (warehouse / "_metastore" / "metastore_db").is_dir()
    assert not (tmp_path / "derby.log").exists() and (warehouse / "_metastore" / "derby.log").exists()

    read = _run(["-c", READER, str(warehouse), ",".join(map(str, offsets))], tmp_path)
    assert read.returncode == 0, read.stderr[-4000:]
    got = json.loads(next(line for line in read.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert got["catalog"] == "hive"
    # nothing was registered in the reader: the unqualified (temporary) name does not resolve there
    assert got["unqualified"] != "resolved"
    assert set(doc["functions"]) <= {f.removeprefix("spark_catalog.") for f in got["functions"]}
    by_offset: dict[int, list[dict[str, Any]]] = {n: [] for n in offsets}
    for row in got["partitions"]:
        n = row.pop("_n")
        row.pop("from_offset")
        by_offset[n].append(row)
    for n in offsets:
        expected = entity_rows(image_at(log_dir, n))["partitions"]
        assert expected and _canon(by_offset[n]) == _canon(expected), n
    brokers = [{k: v for k, v in r.items() if k != "from_offset"} for r in got["brokers"]]
    assert _canon(brokers) == _canon(entity_rows(image_at(log_dir, offsets[-1]))["brokers"])
    assert got["log_rows"] == sum(1 for _ in log_records(log_dir))


def test_functions_refuse_an_in_memory_catalog(spark: Any, small: tuple[Path, Path, list[int]]) -> None:
    from udfs.catalog import CatalogError, create_functions

    with pytest.raises(CatalogError, match="persistent catalog"):
        create_functions(spark, small[1])
