"""``kraftlake decode``: every fixture log decodes completely; filters, summary, typed errors, recovery.

Pure: no Kafka, no Spark. The comparison with Kafka's own tool is in ``tests/peers/test_decode_matches_kafka.py``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from shared_paths import KAFKA_LOGS

from kraftlake.cli import main
from kraftlake.logformat.batch import build_data_batch
from kraftlake.logformat.reader import read_file_batches

FIXTURES = KAFKA_LOGS
MINIMAL = FIXTURES / "minimal" / "00000000000000000000.log"
MULTI_EPOCH = FIXTURES / "kafkademo-multi-epoch"
KEYS = ["offset", "epoch", "timestamp", "batch_offset", "control", "type", "version", "data"]


def fixture_files() -> list[Path]:
    files = [p for p in FIXTURES.rglob("*") if p.is_file() and p.name.endswith((".log", ".checkpoint"))]
    return sorted(files)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, Any]], str]:
    code = main(["decode", *argv])
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()] if code == 0 else []
    return code, rows, captured.err


def batch_counts(path: Path) -> int:
    return sum(len(b.records) for b in read_file_batches(path))


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_file_decodes_completely(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, rows, err = run(capsys, str(path))
    assert (code, err) == (0, "")
    assert len(rows) == batch_counts(path) > 0
    for row in rows:
        assert list(row) == KEYS
        assert isinstance(row["type"], str) and row["type"]
        assert isinstance(row["data"], dict)
        assert row["control"] == (
            row["type"] in {"LeaderChange", "SnapshotHeader", "SnapshotFooter", "KRaftVersion", "KRaftVoters"}
        )
    offsets = [r["offset"] for r in rows]
    assert offsets == sorted(offsets)


def test_fixture_log_dir_is_its_segments(capsys: pytest.CaptureFixture[str]) -> None:
    code, rows, _ = run(capsys, str(MULTI_EPOCH))
    assert code == 0
    segment = MULTI_EPOCH / "__cluster_metadata-0" / "00000000000000000000.log"
    assert len(rows) == batch_counts(segment)
    assert {r["epoch"] for r in rows} == {1, 2, 3, 5, 6}
    code, again, _ = run(capsys, str(MULTI_EPOCH / "__cluster_metadata-0"))
    assert again == rows


def test_offset_and_type_filters(capsys: pytest.CaptureFixture[str]) -> None:
    _, everything, _ = run(capsys, str(MULTI_EPOCH))
    _, window, _ = run(capsys, str(MULTI_EPOCH), "--from-offset", "300", "--to-offset", "320")
    assert window == [r for r in everything if 300 <= r["offset"] <= 320]
    assert window
    # every spelling of a type: Kafka's record type, the class name, without the Record suffix, dump-log's label
    _, topics, _ = run(
        capsys,
        str(MULTI_EPOCH),
        "--types",
        "REGISTER_BROKER_RECORD,BrokerRegistrationChangeRecord,LeaderChange",
    )
    assert topics == [
        r
        for r in everything
        if r["type"] in {"REGISTER_BROKER_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD", "LeaderChange"}
    ]
    assert {r["type"] for r in topics} == {
        "REGISTER_BROKER_RECORD",
        "BROKER_REGISTRATION_CHANGE_RECORD",
        "LeaderChange",
    }
    _, same, _ = run(
        capsys, str(MULTI_EPOCH), "--types", "register_broker,BrokerRegistrationChange,LeaderChangeMessage"
    )
    assert same == topics


def test_from_offset_past_the_end_says_so_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 25: it printed nothing and exited 0."""
    _, everything, _ = run(capsys, str(MULTI_EPOCH))
    last = everything[-1]["offset"]
    assert run(capsys, str(MULTI_EPOCH), "--from-offset", str(last))[1] == everything[-1:]
    for extra in ([], ["--summary"], ["--types", "NoOpRecord"]):
        code, _, err = run(capsys, str(MULTI_EPOCH), "--from-offset", str(last + 1), *extra)
        assert code == 2
        assert err.splitlines() == [
            f"kraftlake decode: error: --from-offset {last + 1} is past the end of {MULTI_EPOCH}: "
            f"its last offset is {last}"
        ]


def test_summary(capsys: pytest.CaptureFixture[str]) -> None:
    _, rows, _ = run(capsys, str(MULTI_EPOCH))
    assert main(["decode", str(MULTI_EPOCH), "--summary"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["records"] == len(rows)
    assert summary["control_records"] == sum(r["control"] for r in rows)
    assert summary["offsets"] == {"first": rows[0]["offset"], "last": rows[-1]["offset"]}
    counts: dict[tuple[str, int], int] = {}
    for r in rows:
        counts[(r["type"], r["version"])] = counts.get((r["type"], r["version"]), 0) + 1
    assert {(t["type"], t["version"]): t["count"] for t in summary["types"]} == counts
    assert [e["epoch"] for e in summary["epochs"]] == sorted({r["epoch"] for r in rows})
    assert sum(e["records"] for e in summary["epochs"]) == len(rows)
    assert summary["batches"]["total"] == len({r["batch_offset"] for r in rows})
    assert summary["crc"]["status"] == "ok" and summary["crc"]["verified"] is True


# --- bad input ----------------------------------------------------------------------------------------------


@pytest.fixture
def minimal_copy(tmp_path: Path) -> Path:
    copy = tmp_path / MINIMAL.name
    shutil.copyfile(MINIMAL, copy)
    copy.chmod(0o644)
    return copy


def test_bad_crc_is_a_typed_error_naming_file_position_offset(
    minimal_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    second = read_file_batches(minimal_copy)[1]
    data = bytearray(minimal_copy.read_bytes())
    data[second.position + second.size - 3] ^= (
        0xFF  # inside the second batch's records: its CRC no longer holds
    )
    minimal_copy.write_bytes(bytes(data))
    code, _, err = run(capsys, str(minimal_copy))
    assert code != 0
    assert str(minimal_copy) in err
    assert f"position {second.position}" in err
    assert str(second.base_offset) in err
    assert "crc" in err.lower()


def test_truncated_tail_fails_strictly_and_recovers_on_request(
    minimal_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = read_file_batches(minimal_copy)
    minimal_copy.write_bytes(minimal_copy.read_bytes()[:-10])
    code, _, err = run(capsys, str(minimal_copy))
    assert code != 0 and str(minimal_copy) in err and f"position {second.position}" in err

    code, rows, err = run(capsys, str(minimal_copy), "--recover")
    assert code == 0
    assert [r["offset"] for r in rows] == [r.offset for r in first.records]
    assert "recovered" in err and f"byte position {second.position}" in err
    assert f"dropped {second.size - 10} bytes" in err

    assert main(["decode", str(minimal_copy), "--recover", "--summary"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["crc"]["status"] == "recovered"
    (dropped,) = summary["crc"]["dropped"]
    assert (dropped["position"], dropped["bytes"]) == (second.position, second.size - 10)


def test_bad_frame_version_names_the_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = read_file_batches(MINIMAL)[0]
    # a valid batch (its CRC holds) whose one value has frame version 5
    bad = build_data_batch(good.next_offset, 1, 0, [b"\x05\x02\x00\x00"])
    segment = tmp_path / MINIMAL.name
    segment.write_bytes(good.raw + bad)
    code, _, err = run(capsys, str(segment))
    assert code != 0
    assert str(segment) in err and str(good.size) in err and f"offset {good.next_offset}" in err
    assert "frame" in err.lower()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["/nonexistent/x.log"], "no such file"),
        ([str(FIXTURES / "kafkademo-multi-epoch" / "meta.properties")], "not a segment"),
        ([str(MINIMAL), "--types", "NoSuchRecord"], "unknown record type"),
    ],
)
def test_bad_arguments(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, *argv)
    assert code != 0 and message in err


def test_a_directory_without_segments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(tmp_path))
    assert code != 0 and "no .log segments" in err
