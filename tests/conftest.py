"""Shared fixtures. Each section belongs to the layer that needs it; keep it small."""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from peers.kafka import SHELL_RELEASE_VERSION, KafkaMetadataLog, produce_metadata_log

# --- the real Kafka peer ---------------------------------------------------------------------------------

KAFKA_FIXTURES = ("kafka_metadata_log", "kafka_shell_metadata_log")


#: The Spark test modules of the first worker's session; the others' session is the second worker's. Chosen so
#: the two take about as long (by the modules' `--durations`).
FIRST_SPARK_SESSION = frozenset(
    {
        "test_warehouse.py",
        "test_stream_service.py",
        "test_plot.py",
        "test_stream_logdir.py",
        "test_cli_errors.py",
        "test_fleet.py",
        "test_migration.py",
        "test_bounds.py",
    }
)


#: A test that takes longer (setup, call and teardown together) is marked ``slow`` and says why in its docstring.
LONG_TEST_SECONDS = 60.0

_seconds: dict[str, float] = {}
_marked_slow: set[str] = set()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # on the xdist controller too: its reports carry each test's phases and its markers as keywords
    _seconds[report.nodeid] = _seconds.get(report.nodeid, 0.0) + report.duration
    if "slow" in report.keywords:
        _marked_slow.add(report.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    long = sorted(
        ((s, n) for n, s in _seconds.items() if s > LONG_TEST_SECONDS and n not in _marked_slow), reverse=True
    )
    if long:
        terminalreporter.section(f"over {LONG_TEST_SECONDS:.0f} s and not marked slow")
        for seconds, nodeid in long:
            terminalreporter.write_line(f"{seconds:7.1f}s {nodeid}")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # `make test` runs two xdist workers (--dist loadgroup --no-loadscope-reorder). The Spark tests are two groups,
    # one per worker, each sharing its worker's local[2] session; every other module is a group of its own, so
    # its fixture (a Kafka cluster, a quorum) starts once. xdist hands out groups in collection order, the first
    # to each worker, then the next to whichever runs dry: so the two Spark groups come first, then the slow
    # modules, the Kafka ones, the rest.
    group_of: dict[str, str] = {}
    rank: dict[str, int] = {}
    for item in items:
        # a test that asks for the peer needs the Kafka jars and a JVM: mark it, so `-m "not kafka"` skips it
        if any(name in getattr(item, "fixturenames", ()) for name in KAFKA_FIXTURES):
            item.add_marker(pytest.mark.kafka)
        if "spark" in getattr(item, "fixturenames", ()):  # the closure: also through a module fixture
            first = Path(str(item.fspath)).name in FIRST_SPARK_SESSION
            group, order = ("spark-1", 0) if first else ("spark-2", 1)
        else:
            slow, kafka = item.get_closest_marker("slow"), item.get_closest_marker("kafka")
            group, order = str(item.fspath), 2 if slow else 3 if kafka else 4
        item.add_marker(pytest.mark.xdist_group(group))
        group_of[item.nodeid] = group
        rank[group] = min(rank.get(group, order), order)
    # stable: a module's tests stay in their order, and together
    items.sort(key=lambda item: rank[group_of[item.nodeid]])


def _once_per_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, produce: Callable[[Path], KafkaMetadataLog]
) -> KafkaMetadataLog:
    """``produce(dir)`` run once for the whole test run: the first xdist worker to ask runs it into a folder
    every worker sees (the parent of their base temp folders) while the others wait on a lock, then read what
    it wrote; a worker never starts a second Kafka for the same log."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # one process: its own temp folder is the run's
        return produce(tmp_path_factory.mktemp(name))
    shared = base.parent / name
    result = shared / "result.pickle"
    with open(base.parent / f"{name}.lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if result.exists():
            loaded = pickle.loads(result.read_bytes())
            assert isinstance(loaded, KafkaMetadataLog)
            return loaded
        shutil.rmtree(shared, ignore_errors=True)  # a worker that failed half-way left it
        (shared / "peer").mkdir(parents=True)
        produced = produce(shared / "peer")
        result.write_bytes(pickle.dumps(produced))
        return produced


@pytest.fixture(scope="session")
def kafka_metadata_log(tmp_path_factory: pytest.TempPathFactory) -> KafkaMetadataLog:
    """A real KRaft Kafka's stopped log dir after `peers.kafka.WORKLOAD`; run once per test run (shared by the
    xdist workers).

    Read-only: copy files before changing them. ``tests/`` is on ``sys.path`` (it has no ``__init__``), so
    the peer is the module ``peers.kafka``.
    """
    return _once_per_run(tmp_path_factory, "kafka-peer", produce_metadata_log)


@pytest.fixture(scope="session")
def kafka_shell_metadata_log(tmp_path_factory: pytest.TempPathFactory) -> KafkaMetadataLog:
    """`kafka_metadata_log` formatted at `peers.kafka.SHELL_RELEASE_VERSION`: what the metadata shell witness
    (Kafka 4.3.1's) can load; run once per test run. Read-only, as `kafka_metadata_log`."""
    return _once_per_run(
        tmp_path_factory,
        "kafka-peer-shell",
        lambda folder: produce_metadata_log(folder, release_version=SHELL_RELEASE_VERSION),
    )
