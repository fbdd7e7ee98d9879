"""``kraftlake report --log-dir``: the three formats, windows by offset and by time, a log that starts at a
snapshot, and the refusals (one line, exit 2)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kraftlake.cli import main
from kraftlake.image import image_at
from kraftlake.image.snapshot import write_snapshot
from kraftlake.image.source import log_records, segments
from kraftlake.report.from_log import input_from_records
from kraftlake.report.sections import build_report
from kraftlake.sim.workloads.entities import write_synthetic_log


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_log(tmp_path_factory.mktemp("report"), seed=9, steps=300)


def test_formats(log_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["report", "--log-dir", str(log_dir), "--cluster", "c1", "--out", str(tmp_path / "r.html")]) == 0
    )
    page = (tmp_path / "r.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "What happened to cluster c1" in page
    assert main(["report", "--log-dir", str(log_dir), "--out", str(tmp_path / "r.json")]) == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    records = list(log_records(log_dir))
    assert (
        doc["window"]["from_offset"] == records[0].offset and doc["window"]["to_offset"] == records[-1].offset
    )
    capsys.readouterr()
    assert main(["report", "--log-dir", str(log_dir), "--from", "10", "--to", "120"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# What happened to the cluster") and "offsets 10..120" in out


def test_window_by_time_is_the_records_between(log_dir: Path, tmp_path: Path) -> None:
    records = list(log_records(log_dir))
    a, b = records[len(records) // 4], records[len(records) // 2]
    out = tmp_path / "t.json"
    assert (
        main(
            [
                "report",
                "--log-dir",
                str(log_dir),
                "--from",
                _iso(a.timestamp),
                "--to",
                _iso(b.timestamp),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    window = json.loads(out.read_text())["window"]
    assert window["from_offset"] == min(r.offset for r in records if r.timestamp >= a.timestamp)
    assert window["to_offset"] == max(r.offset for r in records if r.timestamp <= b.timestamp)


def test_a_log_that_starts_at_a_snapshot(log_dir: Path, tmp_path: Path) -> None:
    """A controller deleted the segments its snapshot covers: the report goes on from the snapshot, and its
    rows equal those of the report replayed from offset 0."""
    copy = tmp_path / "__cluster_metadata-0"
    copy.mkdir()
    for f in log_dir.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    segs = segments(copy)
    assert len(segs) >= 2
    base = segs[1][0]
    write_snapshot(image_at(log_dir, base - 1), copy)
    segs[0][1].unlink()
    records = list(log_records(log_dir))
    lo, hi = base + 5, records[-1].offset
    out = tmp_path / "s.json"
    assert main(["report", "--log-dir", str(copy), "--from", str(lo), "--out", str(out)]) == 0
    got = {s["key"]: s["rows"] for s in json.loads(out.read_text())["sections"]}
    whole = build_report(input_from_records(records, lo, hi))
    for s in whole.sections:
        assert len(got[s.key]) == len(s.rows), s.key
        keys = [c for c in s.columns if c.endswith("offset")]
        assert [[r[k] for k in keys] for r in got[s.key]] == [[r[k] for k in keys] for r in s.rows], s.key
    assert main(["report", "--log-dir", str(copy), "--from", "3"]) == 2  # before what the directory holds


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--from", "2099-01-01T00:00:00Z"], "the window holds no record"),
        (["--from", "100", "--to", "50"], "the window holds no record"),
        (["--to", "99999999"], "holds offsets"),
        (["--from", "yesterday"], "neither an offset nor an ISO-8601 time"),
        (["--out", "r.txt"], "write .html, .md or .json"),
    ],
)
def test_refusals(
    log_dir: Path,
    args: list[str],
    says: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["report", "--log-dir", str(log_dir), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kraftlake report: error:") and says in err and "\n" not in err, err
