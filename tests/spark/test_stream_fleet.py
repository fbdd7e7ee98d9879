"""A fleet streamed into one warehouse.

In ``make test`` (cheap, no Kafka): a fleet of an address where nothing listens and a cluster another stream
holds: the first recorded ``unreachable`` with its error, the second refused naming the holder,
``fleet_status()`` and ``kraftlake fleet status`` telling so.

With ``KRAFTLAKE_FLEET=1`` (``make test-fleet``: two Kafka JVMs and three streaming queries, minutes on a
loaded machine): two live Kafka 4.3.1 clusters (one combined node each) and an address where nothing listens.
One run follows ``east`` and the dead one (given in a fleet file), a second run adds
``west`` to the warehouse while the first goes on (a lock per cluster, nothing rebuilt); each live cluster's
``<entity>_at(N, name)`` then equals the image of its controller's own log, ``fleet_status`` tells the states
(through SQL and ``kraftlake fleet status`` without a JVM), and a run naming ``east``'s cluster under another
name, or ``west``'s name at ``east``'s address, is refused in one line with that cluster's status saying why.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from peers.kafka import WORKLOAD, KafkaPeer, free_port
from waiting import wait_until
from warehouse_states import assert_entities_match

from kraftlake.commands.fleet import COLUMNS

#: How long a state may take to show (two Kafka JVMs and three streaming queries share a loaded machine).
WAIT_S = 300.0
#: The lag a caught-up cluster shows: a controller appends a NoOp every 500 ms, and on a loaded machine a
#: micro-batch takes a second or two to commit, so "0" is seen only when a commit is quicker than that.
CAUGHT_UP_LAG = 3
live_kafka = pytest.mark.skipif(
    os.environ.get("KRAFTLAKE_FLEET") != "1",
    reason="two Kafka JVMs: KRAFTLAKE_FLEET=1 (make test-fleet)",
)


def test_a_dead_address_and_a_held_cluster_leave_their_state(spark: Any, tmp_path: Path) -> None:
    from kraftlake.follow.lock import stream_lock
    from kraftlake.warehouse.fleet_status import newest
    from pipelines.fleet import stream_fleet
    from udfs.sql import fleet_status_statement
    from udfs.table_functions import register_table_functions

    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    dead = free_port()
    members = _members(["--cluster", f"dead=127.0.0.1:{dead}", "--cluster", "held=127.0.0.1:1"])
    stop = threading.Event()
    with stream_lock(warehouse, "held"):  # another stream of it
        fleet = threading.Thread(
            target=lambda: results.append(
                stream_fleet(spark, members, warehouse, {"giveUp": "30"}, status_interval_s=0.2, stop=stop)
            )
        )
        results: list[Any] = []
        fleet.start()
        try:
            _wait(
                warehouse, lambda rows: rows.get("dead", {}).get("state") == "unreachable", "dead unreachable"
            )
        finally:
            stop.set()
            fleet.join()
    (result,) = results
    assert result.refusals == [
        f"cluster held: cluster held of the warehouse {warehouse} is being written by process {os.getpid()} "
        f"(it holds {warehouse / '.stream-held.lock'}): one writer at a time"
    ]
    assert result.clusters["dead"].state == "unreachable" and result.clusters["dead"].tries == 1
    (row,) = newest(warehouse)  # the held cluster's state is its stream's to write
    assert (row["cluster"], row["state"], row["last_offset"]) == ("dead", "unreachable", None)
    assert row["last_error"] == f"127.0.0.1:{dead}: cannot connect to 127.0.0.1:{dead}: Connection refused"
    as_sql = spark.newSession()
    as_sql.sql(fleet_status_statement(warehouse, "TEMPORARY FUNCTION "))  # as a catalog stores it
    as_udtf = spark.newSession()
    register_table_functions(as_udtf, warehouse)  # as `register` gives it a session
    for session in (as_sql, as_udtf):
        got = [r.asDict() for r in session.sql("SELECT * FROM fleet_status()").collect()]
        assert [(r["cluster"], r["state"], r["last_error"]) for r in got] == [
            ("dead", "unreachable", row["last_error"])
        ]
        assert got[0]["updated"] is not None and got[0]["last_commit"] is None
    out = subprocess.run(
        [sys.executable, "-m", "kraftlake.cli", "fleet", "status", "--warehouse", str(warehouse)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0].split() == [*COLUMNS]
    assert out[1].split()[:2] == ["dead", "unreachable"] and out[1].endswith("Connection refused")


@pytest.fixture(scope="module")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaPeer, KafkaPeer]]:
    root = Path(tmp_path_factory.mktemp("fleet-kafka"))
    with KafkaPeer(root / "east") as east, KafkaPeer(root / "west") as west:
        errors: list[BaseException] = []

        def up(peer: KafkaPeer) -> None:
            try:
                peer.format()
                peer.start()
            except BaseException as exc:
                errors.append(exc)

        starting = [threading.Thread(target=up, args=(p,)) for p in (east, west)]
        for t in starting:
            t.start()
        for t in starting:
            t.join()
        assert not errors, errors
        east.admin(WORKLOAD[0])  # a topic in one of them
        yield east, west


def _members(argv: list[str]) -> Any:
    from jobs.stream import add_arguments, fleet_members

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return fleet_members(parser.parse_args(["--source", "kafka", *argv]))


def _wait(warehouse: Path, ok: Callable[[dict[str, dict[str, Any]]], bool], what: str) -> None:
    from kraftlake.warehouse.fleet_status import newest

    rows: dict[str, dict[str, Any]] = {}

    def seen_ok() -> bool:
        nonlocal rows
        if not (warehouse / "fleet_status" / "_delta_log").is_dir():
            return False
        rows = {r["cluster"]: r for r in newest(warehouse)}
        return ok(rows)

    wait_until(seen_ok, WAIT_S, what, 0.5, seen=lambda: rows)


def _caught_up(rows: dict[str, dict[str, Any]], name: str) -> bool:
    r = rows.get(name)
    return r is not None and r["state"] == "following" and r["lag"] <= CAUGHT_UP_LAG


def _start(offsets_of: Path) -> int:
    """The first offset a mirror holds a state for (its earliest snapshot, else 0)."""
    return min((int(p.name.split("-")[0]) for p in offsets_of.glob("*.checkpoint")), default=0)


@pytest.mark.kafka
@live_kafka
def test_a_fleet_streams_each_cluster_and_records_its_state(
    spark: Any, peers: tuple[KafkaPeer, KafkaPeer], tmp_path: Path
) -> None:
    from kraftlake.spark.tables.bounds import last_offset
    from kraftlake.warehouse.fleet_status import newest
    from pipelines.fleet import FleetResult, stream_fleet
    from udfs.sql import register

    east, west = peers
    warehouse = tmp_path / "wh"
    dead = free_port()
    fleet_file = tmp_path / "fleet.txt"
    fleet_file.write_text(f"# nothing listens there\ndead 127.0.0.1:{dead}\n")
    results: dict[str, Any] = {}
    stops = {"first": threading.Event(), "second": threading.Event()}

    def run(key: str, members: Any) -> None:
        try:
            results[key] = stream_fleet(
                spark,
                members,
                warehouse,
                {"giveUp": "30"},
                trigger_interval_s=0.5,
                fold_at=None,
                status_interval_s=0.5,
                retry_s=2.0,
                stop=stops[key],
                timeout_s=2 * WAIT_S,
            )
        except BaseException as exc:
            results[key] = exc

    first_members = _members(
        ["--cluster", f"east=127.0.0.1:{east.controller_port}", "--clusters", str(fleet_file)]
    )
    first = threading.Thread(target=run, args=("first", first_members))
    first.start()
    second: threading.Thread | None = None
    try:
        _wait(
            warehouse,
            lambda rows: _caught_up(rows, "east") and rows.get("dead", {}).get("state") == "unreachable",
            "east caught up and dead unreachable",
        )
        # another stream adds a cluster to the warehouse while the first goes on
        second = threading.Thread(
            target=run, args=("second", _members(["--cluster", f"west=127.0.0.1:{west.controller_port}"]))
        )
        second.start()
        _wait(warehouse, lambda rows: _caught_up(rows, "west"), "west caught up")
        assert {r["cluster"]: r["state"] for r in newest(warehouse)}["east"] == "following"
    finally:
        for stop in stops.values():
            stop.set()
        first.join()
        if second is not None:
            second.join()
    assert all(isinstance(r, FleetResult) for r in results.values()), results
    assert results["first"].refusals == [] and results["second"].refusals == []
    status = {r["cluster"]: r for r in newest(warehouse)}
    assert set(status) == {"east", "west", "dead"}
    assert status["dead"]["state"] == "unreachable"
    assert f"127.0.0.1:{dead}" in status["dead"]["last_error"]
    assert status["dead"]["last_offset"] is None and status["dead"]["last_commit"] is None
    register(spark, warehouse)
    for name, peer in (("east", east), ("west", west)):
        done = last_offset(spark, warehouse, name)
        assert status[name]["state"] == "stopped" and status[name]["last_offset"] == done
        assert status[name]["last_commit"] is not None
        start = _start(warehouse / "_kafka_mirrors" / name / "__cluster_metadata-0")
        assert_entities_match(spark, peer.log_dir, sorted({start, (start + done) // 2, done}), name)
    assert results["first"].clusters["east"].records > 0
    # the same states through SQL
    sql = {r["cluster"]: r for r in spark.sql("SELECT * FROM fleet_status()").collect()}
    assert {n: (r["state"], r["last_offset"]) for n, r in sql.items()} == {
        n: (r["state"], r["last_offset"]) for n, r in status.items()
    }
    # and from the command, which reads the table without Spark
    out = subprocess.run(
        [sys.executable, "-m", "kraftlake.cli", "fleet", "status", "--warehouse", str(warehouse)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0].split()[:4] == ["cluster", "state", "lag", "last_offset"]
    assert [line.split()[:2] for line in out[1:]] == [
        ["dead", "unreachable"],
        ["east", "stopped"],
        ["west", "stopped"],
    ]
    _refused_in_one_line(spark, warehouse, east, west)


def _refused_in_one_line(spark: Any, warehouse: Path, east: KafkaPeer, west: KafkaPeer) -> None:
    """``east``'s cluster under a second name (two names, one cluster id) and ``west``'s name at ``east``'s
    address (another cluster id under the name): each refused, the command's one line naming both, nothing
    committed lost or added, their status saying why."""
    from kraftlake.cli import main
    from kraftlake.spark.tables.bounds import last_offset
    from kraftlake.spark.tables.clusters import names, registered
    from kraftlake.warehouse.fleet_status import newest

    before = {n: last_offset(spark, warehouse, n) for n in ("east", "west")}
    err = io.StringIO()
    address = f"127.0.0.1:{east.controller_port}"
    argv = ["stream", "--source", "kafka", "--warehouse", str(warehouse), "--timeout", str(WAIT_S)]
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        code = main(
            [*argv, "--cluster", f"east2={address}", "--cluster", f"west={address}", "--give-up", "30"]
        )
    line = err.getvalue()
    assert code == 2, line
    assert line.count("\n") == 1 and line.startswith("kraftlake stream: error: "), line
    assert f"cluster east2: {warehouse}: cluster id {east.cluster_id} is already in the warehouse" in line
    assert f"cluster west: {address} belongs to cluster {east.cluster_id}" in line
    status = {r["cluster"]: r for r in newest(warehouse)}
    assert (
        status["east2"]["state"] == "refused" and "already in the warehouse" in status["east2"]["last_error"]
    )
    assert status["west"]["state"] == "refused" and west.cluster_id in status["west"]["last_error"]
    assert {n: last_offset(spark, warehouse, n) for n in ("east", "west")} == before
    assert names(registered(spark, warehouse)) == ["east", "west"]


def test_each_failure_has_its_state() -> None:
    from kraftlake.follow.errors import AuthorizationError, ClusterIdMismatchError, FollowError
    from kraftlake.spark.service_source import StreamSourceError
    from kraftlake.spark.tables.clusters import ClusterError
    from kraftlake.warehouse.tables import WarehouseError
    from kraftlake.wire.errors import ConnectError, SecurityConfigError
    from pipelines.fleet import state_of

    assert state_of(ConnectError("cannot connect to 127.0.0.1:1: Connection refused")) == "unreachable"
    assert state_of(FollowError("no controller answered for 60s: 127.0.0.1:1: timed out")) == "unreachable"
    assert (
        state_of(FollowError("no controller answered for 60s: SASL Authentication failed")) == "auth_failed"
    )
    assert state_of(AuthorizationError("CLUSTER_AUTHORIZATION_FAILED")) == "auth_failed"
    assert state_of(ClusterIdMismatchError("belongs to cluster X")) == "refused"
    assert state_of(ClusterError("cluster id X is already in the warehouse")) == "refused"
    assert state_of(SecurityConfigError("cannot be read", source="client.properties")) == "refused"
    late = "m: the log starts at offset 500 and no usable snapshot covers offset 0"
    assert state_of(WarehouseError(late)) == "behind_log_start"
    gap = "micro-batch 3 starts at offset 900, the warehouse is committed up to 400"
    assert state_of(StreamSourceError(gap)) == "behind_log_start"
    assert state_of(RuntimeError("disk full")) == "failed"


def test_the_table_name_shared_with_the_spark_layer_agrees() -> None:
    from kraftlake.spark.tables import layout
    from kraftlake.warehouse import fleet_status

    assert fleet_status.FLEET_STATUS == layout.FLEET_STATUS
