"""A Spark standalone cluster on 127.0.0.1 from pyspark's own distribution (a master and 1-core workers), the
package as spark-submit ships it (``--py-files``) and ``spark-submit`` itself: shared by the fleet bench and the
standalone-cluster tests.

Executors run a Python that cannot see an editable install (:func:`isolated_python`): a virtualenv whose
``sys.path`` holds the current venv's site-packages through a ``.pth`` line, which does not process that
directory's own ``.pth`` files (the editable-install hook lives there), so every ``kraftlake`` import on an
executor is the shipped package's.

Spark puts ``--py-files`` entries on the executors' ``sys.path`` only for ``.zip``, ``.egg`` and ``.jar``
(``pyspark.core.context.SparkContext.PACKAGE_EXTENSIONS``); a ``.whl`` is copied to executors but never
imported from, so the wheel ships under a ``.zip`` name (a wheel is a zip archive), as ``make dist`` leaves it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kraftlake.dist_bytecode import add_bytecode

#: The sources' root (the package is built from a copy of it).
REPO = Path(__file__).resolve().parents[1]


def pyspark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], bool], timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise TimeoutError(f"timed out waiting for {what}; log:\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _daemon(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(pyspark_home() / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


@contextmanager
def standalone_cluster(
    root: Path, env: dict[str, str], workers: int = 1, memory: str = "1g"
) -> Iterator[tuple[str, list[Path]]]:
    """A master and ``workers`` 1-core workers; yields the master URL and the workers' work dirs. All stop at
    exit."""
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    works: list[Path] = []
    try:
        master_log = root / "master.log"
        master = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)]
        procs.append(_daemon([*master, "--webui-port", "0"], master_log, env))
        wait_for(
            lambda: "I have been elected leader" in master_log.read_text(), 120, "the master", master_log
        )
        logs = []
        for i in range(workers):
            work = root / f"worker-{i}-work"
            log = root / f"worker-{i}.log"
            worker = ["org.apache.spark.deploy.worker.Worker", url, "--cores", "1", "--memory", memory]
            where = ["--host", "127.0.0.1", "--webui-port", "0", "--work-dir", str(work)]
            procs.append(_daemon([*worker, *where], log, env))
            works.append(work)
            logs.append(log)
        for i, log in enumerate(logs):
            wait_for(
                lambda log=log: "Successfully registered with master" in log.read_text(),  # type: ignore[misc]
                120,
                f"worker {i}",
                log,
            )
        yield url, works
    finally:
        for proc in reversed(procs):
            stop(proc)


def build_package(root: Path) -> Path:
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
    wheel_cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*wheel_cmd, "-w", str(dist), str(src)], check=True, cwd=src)
    (wheel,) = dist.glob("kraftlake-*.whl")
    shipped = dist / (wheel.name.removesuffix(".whl") + ".zip")
    shutil.copy(wheel, shipped)
    add_bytecode(shipped)
    return shipped


def isolated_python(root: Path) -> Path:
    """A venv python that sees this venv's site-packages but not its editable ``kraftlake``."""
    venv = root / "executor-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(sysconfig.get_paths()["purelib"])
    (next(venv.glob("lib/python*/site-packages")) / "main-venv.pth").write_text(f"{site}\n")
    python = venv / "bin" / "python"
    check = subprocess.run(
        [str(python), "-c", "import pyspark, pyarrow\nimport kraftlake"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    if "No module named 'kraftlake'" not in check.stderr:
        raise RuntimeError(f"the executors' python sees an installed kraftlake: {check.stderr}")
    return python


def submit_env() -> dict[str, str]:
    """The environment of the cluster's daemons and of ``spark-submit``: this Python for driver and workers."""
    from kraftlake.spark.session import jar_cache

    env = {
        **os.environ,
        "SPARK_HOME": str(pyspark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "KRAFTLAKE_JARS": str(jar_cache()),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    env.pop("PYTHONPATH", None)
    return env


def submit_options(url: str, package: Path, python: Path, cores: int) -> list[str]:
    """``spark-submit`` options of a job on the cluster at ``url``: the package shipped, Delta's jars, the
    executors' isolated Python, ``cores`` executor cores in all."""
    from kraftlake.spark.session import delta_jars

    return [
        "--master",
        url,
        "--py-files",
        str(package),
        "--jars",
        ",".join(str(j) for j in delta_jars()),
        "--conf",
        f"spark.pyspark.python={python}",
        "--conf",
        f"spark.pyspark.driver.python={sys.executable}",
        "--conf",
        "spark.executor.memory=768m",
        "--conf",
        f"spark.cores.max={cores}",
        # a few small tables: Spark's 200 shuffle partitions and Delta's 50 snapshot partitions are 250 tasks of
        # nothing per query on two cores
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "--conf",
        "spark.databricks.delta.snapshotPartitions=2",
    ]


def submit(args: list[str], env: dict[str, str], log: Path, cwd: Path, timeout: float = 900) -> str:
    """``spark-submit args``; its stdout. Its output goes to ``log``; a failed run raises with its tail."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(pyspark_home() / "bin" / "spark-submit"), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    with log.open("a") as f:
        f.write(
            f"$ spark-submit {' '.join(args)}\n{proc.stdout}\n{proc.stderr}\n"
            f"({time.monotonic() - t0:.1f}s, exit {proc.returncode})\n"
        )
    if proc.returncode != 0:
        raise RuntimeError(f"spark-submit failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-5000:]}")
    return proc.stdout
