"""A fleet as given to ``stream --source kafka``: ``--cluster NAME=HOST:PORT`` items and the fleet file, their
refusals (one line naming the item or ``file:line``, exit 2 before any JVM starts), and the per-cluster stream
lock."""

from __future__ import annotations

import io
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from kraftlake.follow.lock import LockedError, stream_lock
from kraftlake.warehouse.fleet import (
    FleetError,
    FleetMember,
    check_unique,
    parse_member,
    read_fleet_file,
)


def test_cluster_items_and_the_fleet_file(tmp_path: Path) -> None:
    assert parse_member("east=10.0.0.1:9093,1@10.0.0.2:9093") == FleetMember(
        "east", "10.0.0.1:9093,1@10.0.0.2:9093", None, "--cluster east"
    )
    fleet = tmp_path / "fleet.txt"
    fleet.write_text(
        "# the fleet\n"
        "\n"
        "east 10.0.0.1:9093   # the first\n"
        "west 10.1.0.1:9093,10.1.0.2:9093 --command-config west.properties\n"
        "north 10.2.0.1:9093 --command-config /etc/north.properties\n"
    )
    got = read_fleet_file(fleet)
    assert [(m.name, m.bootstrap, m.command_config) for m in got] == [
        ("east", "10.0.0.1:9093", None),
        ("west", "10.1.0.1:9093,10.1.0.2:9093", str(tmp_path / "west.properties")),
        ("north", "10.2.0.1:9093", "/etc/north.properties"),
    ]
    assert got[1].where == f"{fleet}:4"


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("east", "expected NAME HOST:PORT"),
        ("east 10.0.0.1:9093 --command-config", "expected NAME HOST:PORT"),
        ("east 10.0.0.1:9093 --other x", "expected NAME HOST:PORT"),
        ("-east 10.0.0.1:9093", "cluster name '-east'"),
        ("east 10.0.0.1", "cluster 'east'"),
        ("east 'unclosed", "No closing quotation"),
    ],
)
def test_a_malformed_line_is_refused_naming_file_and_line(tmp_path: Path, line: str, says: str) -> None:
    fleet = tmp_path / "fleet.txt"
    fleet.write_text(f"ok 127.0.0.1:9093\n{line}\n")
    with pytest.raises(FleetError, match=f"^{fleet}:2: ") as info:
        read_fleet_file(fleet)
    assert says in str(info.value)


def test_refusals_of_items_files_and_names(tmp_path: Path) -> None:
    with pytest.raises(FleetError, match="NAME=HOST:PORT"):
        parse_member("east")
    with pytest.raises(FleetError, match=r"fleet file .* cannot be read"):
        read_fleet_file(tmp_path / "missing")
    (tmp_path / "empty").write_text("# nobody\n")
    with pytest.raises(FleetError, match="no cluster in it"):
        read_fleet_file(tmp_path / "empty")
    (tmp_path / "f").write_text("east 127.0.0.1:1\n")
    twice = [parse_member("east=127.0.0.1:2"), *read_fleet_file(tmp_path / "f")]
    with pytest.raises(
        FleetError, match=f"'east' is given twice \\(--cluster east and {tmp_path / 'f'}:1\\)"
    ):
        check_unique(twice)


def _stream(argv: list[str]) -> tuple[int, str]:
    from kraftlake.cli import main

    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        code = main(["stream", *argv])
    return code, err.getvalue()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--cluster", "a=127.0.0.1:1", "--cluster", "a=127.0.0.1:2"], "'a' is given twice"),
        (["--cluster", "a=127.0.0.1:1", "--cluster", "b"], "--cluster b: a cluster of a fleet is NAME="),
        (["--cluster", "a", "--cluster", "b"], "--cluster given 2 times without =HOST:PORT"),
        (["--cluster", "a=127.0.0.1:1", "--bootstrap-controller", "x:1"], "--bootstrap-controller names one"),
        (["--cluster", "a=127.0.0.1:1", "--available-now"], "--available-now is for one cluster"),
        (["--source", "log-dir", "--cluster", "a=127.0.0.1:1"], "followed with --source kafka"),
        (["--clusters", "/nonexistent/fleet"], "fleet file /nonexistent/fleet: cannot be read"),
    ],
)
def test_the_command_refuses_a_fleet_in_one_line_before_spark(
    tmp_path: Path, argv: list[str], says: str
) -> None:
    source = [] if "--source" in argv else ["--source", "kafka"]
    code, err = _stream([*source, *argv, "--warehouse", str(tmp_path / "wh")])
    assert code == 2
    assert err.startswith("kraftlake stream: error: ") and says in err, err
    assert err.count("\n") == 1
    assert not (tmp_path / "wh").exists()  # nothing made


def test_one_stream_per_cluster_many_per_warehouse(tmp_path: Path) -> None:
    with (
        stream_lock(tmp_path, "east"),
        stream_lock(tmp_path, "west"),
        pytest.raises(
            LockedError,
            match=f"cluster east of the warehouse {tmp_path} is being written by process {os.getpid()}",
        ),
    ):
        stream_lock(tmp_path, "east")
    stream_lock(tmp_path, "east").release()  # given back


def test_fleet_status_of_a_path_that_is_no_warehouse_is_one_line(tmp_path: Path) -> None:
    from kraftlake.cli import main

    err, out = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        assert main(["fleet", "status", "--warehouse", str(tmp_path / "nothing")]) == 2
    assert err.getvalue().startswith("kraftlake fleet: error: warehouse ") and err.getvalue().count("\n") == 1
    (tmp_path / "wh" / "metadata_log" / "_delta_log").mkdir(parents=True)
    with redirect_stdout(out), redirect_stderr(err):
        assert main(["fleet", "status", "--warehouse", str(tmp_path / "wh")]) == 0
    assert "no fleet status in" in out.getvalue()
