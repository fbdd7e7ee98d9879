"""Arguments no run can mean are refused before anything runs: one error line, exit status 2, no traceback.

Offsets below 0, counts below their minimum, a replication factor above the broker count (it was silently
lowered), a port above 65535 (``OverflowError`` from the socket), a data dir that is a file, ``decode`` with
``--from-offset`` above ``--to-offset``, an unknown compression codec in ``decode`` (a ``ValueError``).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import crc32c
import pytest
from shared_paths import KAFKA_LOGS

from kraftlake.cli import main
from kraftlake.logformat.batch import build_data_batch
from kraftlake.protocol import messages as m
from kraftlake.records import encode_metadata_record
from kraftlake.sim.cluster import ClusterSimConfig
from kraftlake.sim.errors import SimError

MULTI_EPOCH = KAFKA_LOGS / "kafkademo-multi-epoch"


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], text: str, printed: str = "") -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's refusal
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert code == 2, (argv, out, err)
    assert out == printed
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and text in errors[0], err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["simulate", "--brokers", "0"], "--brokers: 0 is not positive"),
        (["simulate", "--topics", "-1"], "--topics: -1 is negative"),
        (["simulate", "--partitions-per-topic", "0"], "--partitions-per-topic"),
        (["simulate", "--events", "-5"], "--events: -5 is negative"),
        (
            ["simulate", "--brokers", "2", "--replication-factor", "3", "--through", "local"],
            "replication factor 3 is above the broker count 2",
        ),
        (["sim", "--seeds", "-1"], "--seeds: -1 is not positive"),
        (["sim", "--seed-start", "-1"], "--seed-start: -1 is negative"),
        (
            ["decode", str(MULTI_EPOCH), "--from-offset", "5", "--to-offset", "3"],
            "--from-offset 5 is above --to-offset 3",
        ),
        (["decode", str(MULTI_EPOCH), "--from-offset", "-1"], "--from-offset: -1 is negative"),
        (["image", str(MULTI_EPOCH), "--offset", "-1"], "--offset: -1 is negative"),
        (
            ["image", str(MULTI_EPOCH), "--offset", "3072"],
            "offset 3072 is past the end of the log (its last offset is 3071)",
        ),
        (
            ["quorum", "start", "--voters", "3", "--base-port", "70000"],
            "--base-port: 70000 is not a TCP port",
        ),
        (["quorum", "start", "--voters", "3", "--base-port", "65534"], "voter 3 would listen on port 65536"),
        (["quorum", "start", "--voters", "0"], "at least one voter"),
        (["reconstruct", "--offset", "-1"], "--offset: -1 is negative"),
        (["state", "--offset", "-1"], "--offset: -1 is negative"),
        (["compact", "--retain-offsets", "-5"], "--retain-offsets: -5 is negative"),
    ],
)
def test_refused(argv: list[str], text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if argv[0] in ("simulate", "quorum"):
        argv = [*argv, "--data-dir", str(tmp_path / "data")]
    _refused(argv, capsys, text)
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "command", [["simulate", "--through", "local"], ["quorum", "start", "--voters", "1"]]
)
def test_a_data_dir_on_a_file_is_refused(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "f").write_text("")
    _refused([*command, "--data-dir", str(tmp_path / "f")], capsys, "is not a directory")
    _refused([*command, "--data-dir", str(tmp_path / "f" / "sub")], capsys, "is not a directory")


def test_a_replication_factor_above_the_brokers_is_never_lowered() -> None:
    with pytest.raises(SimError, match="above the broker count"):
        ClusterSimConfig(brokers=3, replication_factor=4)
    with pytest.raises(SimError, match="brokers is 0"):
        ClusterSimConfig(brokers=0, replication_factor=1)


@pytest.mark.parametrize("codec", [5, 6, 7])
@pytest.mark.parametrize("summary", [False, True])
def test_decode_an_unknown_codec_with_a_valid_crc(
    codec: int, summary: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    noop = encode_metadata_record(m.NoOpRecord(), 0)
    raw = bytearray(build_data_batch(0, 1, 5, [noop]) + build_data_batch(1, 1, 5, [noop]))
    second = len(raw) // 2
    struct.pack_into(">h", raw, second + 21, codec)
    struct.pack_into(">I", raw, second + 17, crc32c.crc32c(bytes(raw[second + 21 :])))
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(bytes(raw))
    # the records before the bad batch are printed (decode streams), then the error
    first = (
        ""
        if summary
        else (
            '{"offset":0,"epoch":1,"timestamp":5,"batch_offset":0,"control":false,'
            '"type":"NO_OP_RECORD","version":0,"data":{}}\n'
        )
    )
    _refused(
        ["decode", str(seg), *(["--summary"] if summary else [])],
        capsys,
        f"{seg} at byte position {second} (base offset 1): unknown compression codec id {codec}",
        first,
    )
    _refused(["image", str(seg)], capsys, f"unknown compression codec id {codec}")


def test_quorum_start_on_a_bad_quorum_state_says_one_line(tmp_path: Path) -> None:
    state = tmp_path / "node-1" / "__cluster_metadata-0" / "quorum-state"
    state.parent.mkdir(parents=True)
    state.write_bytes(b'{"leaderId":1,"leaderEpoch":\xff}')
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kraftlake.cli",
            "quorum",
            "start",
            "--voters",
            "1",
            "--data-dir",
            str(tmp_path),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr.strip() == f"kraftlake quorum: error: {state} line 1: not UTF-8 (byte 28 of the file: "
        "invalid start byte)"
    )


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["state", "--time", "yesterday-ish"], "--time: 'yesterday-ish' is not a timestamp"),
        (["state", "--time", "2026-13-01"], "--time: '2026-13-01' is not a timestamp"),
        (["ingest", "--log-dir", "x", "--batch-records", "0"], "--batch-records: 0 is not positive"),
    ],
)
def test_spark_command_arguments_refused(
    argv: list[str], text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _refused(argv, capsys, text)


_NOT_A_WAREHOUSE = """
import contextlib, io, json, sys
from pyspark import SparkContext
from kraftlake.cli import main
seen = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        seen.append([main(argv), err.getvalue()])
print(json.dumps({"seen": seen, "jvm": SparkContext._gateway is not None}))
"""


def test_a_path_that_is_not_a_warehouse_is_refused_before_spark(tmp_path: Path) -> None:
    """One line and exit 2 for every command that reads a warehouse, and no JVM started for it."""
    extra = {"sql": ["SELECT 1"], "state": ["--offset", "1"], "reconstruct": ["--offset", "1"]}
    cases: list[tuple[list[str], str]] = []
    for command in ("sql", "state", "compact", "reconstruct", "validate"):
        for path, text in (
            (tmp_path / "nope", f"warehouse {tmp_path / 'nope'} does not exist"),
            (tmp_path, f"{tmp_path} is not a kraftlake warehouse (no Delta table metadata_log/ in it)"),
            (MULTI_EPOCH, f"{MULTI_EPOCH} is not a kraftlake warehouse"),
        ):
            cases.append(
                ([command, "--warehouse", str(path), *extra.get(command, [])], f"{command}: error: {text}")
            )
    done = subprocess.run(
        [sys.executable, "-c", _NOT_A_WAREHOUSE, json.dumps([argv for argv, _ in cases])],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    answer = json.loads(done.stdout.splitlines()[-1])
    assert answer["jvm"] is False
    for (argv, text), (code, err) in zip(cases, answer["seen"], strict=True):
        assert code == 2, (argv, err)
        assert len(err.splitlines()) == 1 and text in err, (argv, err)


def test_an_empty_query_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "metadata_log" / "_delta_log").mkdir(parents=True)
    _refused(["sql", "--warehouse", str(tmp_path), "  "], capsys, "the query is empty")


@pytest.mark.parametrize(
    ("text", "spark_literal"),
    [
        ("2026-11-22", "2026-11-22 00:00:00"),
        ("2026-11-22T07:00:00", "2026-11-22 07:00:00"),
        ("2026-11-22 07:00", "2026-11-22 07:00:00"),
        ("2026-11-22T07:00:00.250Z", "2026-11-22 07:00:00.250000"),
        ("2026-11-22T08:00:00+01:00", "2026-11-22 07:00:00"),
    ],
)
def test_time_arguments_become_utc_literals(text: str, spark_literal: str) -> None:
    from jobs._cli import timestamp

    assert timestamp(text) == spark_literal


def test_the_functions_named_for_an_unknown_one_are_kraftlake_s() -> None:
    from jobs._cli import _functions_line
    from kraftlake.history import ENTITIES

    line = _functions_line()
    entities = line.split(" for ", 1)[1].split(";", 1)[0].split(", ")
    assert entities == list(ENTITIES)
    views = line.split("; ", 1)[1]
    assert views == (
        "partition_history(for_topic STRING, for_partition INT[, in_cluster STRING]), "
        "isr_history(for_topic STRING, for_partition INT[, in_cluster STRING]), "
        "leader_history(for_topic STRING, for_partition INT[, in_cluster STRING]), "
        "broker_history(for_id INT[, in_cluster STRING]), "
        "risk_windows(range_from BIGINT, range_to BIGINT[, in_cluster STRING]), "
        "leader_changes(range_from BIGINT, range_to BIGINT[, in_cluster STRING])"
    )


@pytest.mark.spark  # the jar check comes first: without Delta's jars the JVM is never tried
def test_a_jvm_that_does_not_start_is_one_error_naming_its_log(tmp_path: Path) -> None:
    # quiet by default, the JVM's stderr goes to the command's log: its reason must still reach the user
    (tmp_path / "metadata_log" / "_delta_log").mkdir(parents=True)
    env = dict(os.environ, JAVA_HOME=str(tmp_path / "no-jdk"))
    done = subprocess.run(
        [sys.executable, "-m", "kraftlake.cli", "sql", "--warehouse", str(tmp_path), "SELECT 1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    first, *rest = done.stderr.splitlines()
    assert first.startswith("kraftlake sql: error: the Spark driver JVM did not start (its output: ")
    assert any(f"{tmp_path / 'no-jdk'}/bin/java" in line for line in rest), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["ingest", "--log-dir", "L"],
        ["stream", "--log-dir", "L"],
        ["state", "--offset", "1", "--entity", "brokers"],
        ["sql", "SELECT 1"],
        ["serve"],
        ["functions"],
        ["compact"],
        ["validate"],
        ["reconstruct", "--offset", "1"],
        ["plot", "--out", "p.png"],
        ["demo"],
        ["report"],
        ["fleet", "status"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
@pytest.mark.parametrize("uri", ["s3://bucket/wh", "s3a://bucket/wh", "gs://bucket/wh", "file:///tmp/wh"])
def test_a_warehouse_uri_is_refused_before_anything_is_written(
    argv: list[str],
    uri: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Taken as a path, ``s3://bucket/wh`` became a local folder ``s3:/bucket/wh`` and the command exited 0."""
    monkeypatch.chdir(tmp_path)
    _refused(
        [*argv, "--warehouse", uri], capsys, f"{uri}: {uri.split(':')[0]}:// warehouses are not supported"
    )
    assert list(tmp_path.iterdir()) == []
