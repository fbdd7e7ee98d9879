"""The jobs on a Spark standalone cluster (master + one worker on 127.0.0.1), shipped as the built package.

``ingest`` and a ``partitions_at`` query run through ``spark-submit --master spark://...`` with the package
built from the sources (what ``make dist`` builds: a wheel with ``schemas/`` packed as ``kraftlake/_schemas``).
The cluster's ``sql`` job must print the partitions the oracle (the image) holds at that offset. The test needs
no local session (it runs beside the Spark tests' worker). Executors run a Python that cannot see the editable
install: a virtualenv whose ``sys.path`` holds the main venv's site-packages through a ``.pth`` line, which
does not process that directory's own ``.pth`` files (the editable-install hook lives there). So every
``kraftlake`` import on an executor is the shipped package's, and a probe job asserts it.

Spark puts ``--py-files`` entries on the executors' ``sys.path`` only for ``.zip``, ``.egg`` and ``.jar``
(``pyspark.core.context.SparkContext.PACKAGE_EXTENSIONS``); a ``.whl`` is copied to executors but never
imported from, so the wheel ships under a ``.zip`` name (a wheel is a zip archive).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(3600),  # three spark-submits and a cluster: ~3 min on a quiet 2-core machine
]

REPO = Path(__file__).resolve().parents[2]
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


def _pyspark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(check: Callable[[], bool], timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; log:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def standalone_cluster(root: Path, env: dict[str, str]) -> Iterator[tuple[str, Path]]:
    """A master and a 1-core worker; yields the master URL and the worker's work dir. Both stop at exit."""
    spark_class = str(_pyspark_home() / "bin" / "spark-class")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    work = root / "worker-work"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        master_log = root / "master.log"
        with master_log.open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.master.Master",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
                        "--webui-port",
                        "0",
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
        _wait_for(
            lambda: "I have been elected leader" in master_log.read_text(), 120, "the master", master_log
        )
        worker_log = root / "worker.log"
        with worker_log.open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        url,
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--host",
                        "127.0.0.1",
                        "--webui-port",
                        "0",
                        "--work-dir",
                        str(work),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
        _wait_for(
            lambda: "Successfully registered with master" in worker_log.read_text(),
            120,
            "the worker",
            worker_log,
        )
        yield url, work
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _build_package(root: Path) -> Path:
    """Build the wheel from a copy of the sources (the tree is shared), return it under a ``.zip`` name."""
    src = root / "src"
    ignore = shutil.ignore_patterns("__pycache__", "_schemas", "*.pyc")
    for pkg in ("kraftlake", "pipelines", "jobs", "udfs"):
        if (REPO / pkg).is_dir():
            shutil.copytree(REPO / pkg, src / pkg, ignore=ignore)
    shutil.copytree(REPO / "schemas", src / "kraftlake" / "_schemas")
    for f in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / f).exists():
            shutil.copy(REPO / f, src / f)
    dist = root / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(src),
        ],
        check=True,
        cwd=src,
    )
    (wheel,) = dist.glob("kraftlake-*.whl")
    shipped = dist / (wheel.name.removesuffix(".whl") + ".zip")
    shutil.copy(wheel, shipped)
    return shipped


def _isolated_python(root: Path) -> Path:
    """A venv python that sees the main venv's site-packages but not its editable ``kraftlake``."""
    venv = root / "executor-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    import sysconfig

    site = Path(sysconfig.get_paths()["purelib"])
    (next(venv.glob("lib/python*/site-packages")) / "main-venv.pth").write_text(f"{site}\n")
    python = venv / "bin" / "python"
    check = subprocess.run(
        [str(python), "-c", "import pyspark, pyarrow\nimport kraftlake"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert "No module named 'kraftlake'" in check.stderr, check.stderr
    return python


def _submit(args: list[str], env: dict[str, str], log: Path, cwd: Path) -> str:
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(_pyspark_home() / "bin" / "spark-submit"), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
    )
    with log.open("a") as f:
        f.write(
            f"$ spark-submit {' '.join(args)}\n{proc.stdout}\n{proc.stderr}\n"
            f"({time.monotonic() - t0:.1f}s, exit {proc.returncode})\n"
        )
    assert proc.returncode == 0, f"spark-submit failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-5000:]}"
    return proc.stdout


def _jsonl_rows(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def test_ingest_and_partitions_at_on_a_standalone_cluster(tmp_path: Path) -> None:
    from kraftlake.image import image_at
    from kraftlake.image.render import image_json
    from kraftlake.image.source import log_records
    from kraftlake.sim.workloads.entities import write_synthetic_log
    from kraftlake.spark.session import delta_jars, jar_cache

    timings: dict[str, float] = {}
    t0 = time.monotonic()
    log_dir = write_synthetic_log(tmp_path / "log", seed=3, steps=60)
    last = max(r.offset for r in log_records(log_dir))
    package = _build_package(tmp_path)
    python = _isolated_python(tmp_path)
    timings["build"] = time.monotonic() - t0
    env = {
        **os.environ,
        "SPARK_HOME": str(_pyspark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "KRAFTLAKE_JARS": str(jar_cache()),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    env.pop("PYTHONPATH", None)
    jars = ",".join(str(j) for j in delta_jars())
    query = f"SELECT * FROM partitions_at({last // 2}) ORDER BY topic, partition"
    submit_log = tmp_path / "submit.log"

    t1 = time.monotonic()
    with standalone_cluster(tmp_path, env) as (url, work):
        timings["cluster_start"] = time.monotonic() - t1
        common = [
            "--master",
            url,
            "--py-files",
            str(package),
            "--jars",
            jars,
            "--conf",
            f"spark.pyspark.python={python}",
            "--conf",
            f"spark.pyspark.driver.python={sys.executable}",
            "--conf",
            "spark.executor.memory=768m",
            "--conf",
            "spark.cores.max=1",
        ]
        t2 = time.monotonic()
        probe = tmp_path / "probe.py"
        probe.write_text(PROBE)
        out = _submit([*common, str(probe)], env, submit_log, tmp_path)
        assert f"MASTER {url}" in out
        files = ast.literal_eval(next(line for line in out.splitlines() if line.startswith("PROBE "))[6:])
        assert len(files) == 2
        for path, _ in files:
            # the executor imported kraftlake from the shipped archive, fetched into its work dir
            assert f"{package.name}/kraftlake/__init__.py" in path and str(REPO) not in path, path
        cluster_w = tmp_path / "cluster-warehouse"
        _submit(
            [
                *common,
                str(REPO / "jobs" / "ingest.py"),
                "--log-dir",
                str(log_dir),
                "--warehouse",
                str(cluster_w),
            ],
            env,
            submit_log,
            tmp_path,
        )
        remote = _submit(
            [
                *common,
                str(REPO / "jobs" / "sql.py"),
                "--warehouse",
                str(cluster_w),
                "--format",
                "jsonl",
                query,
            ],
            env,
            submit_log,
            tmp_path,
        )
        timings["cluster_jobs"] = time.monotonic() - t2
        # the applications ran on the worker's executors (one app dir per spark-submit)
        assert len(list(work.glob("app-*"))) == 3
    # the oracle: the image at that offset, its partitions as `kraftlake image` renders them
    doc = image_json(image_at(log_dir, last // 2))
    want = [
        {"topic": t["name"], "topic_id": t["topic_id"], **p} for t in doc["topics"] for p in t["partitions"]
    ]
    got = [json.loads(line) for line in remote.splitlines() if line.startswith("{")]
    for row in got:
        assert row.pop("from_offset") <= last // 2
    assert want and _jsonl_rows(got) == _jsonl_rows(want)
    print("standalone cluster timings (s):", {k: round(v, 1) for k, v in timings.items()})
