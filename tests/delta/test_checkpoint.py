"""kraftlake's Delta checkpoints without Spark (``kraftlake.delta.checkpoint``): the state a checkpoint holds
read back by kraftlake's reader and built on by the next one, the expired log files cleaned up only behind a
checkpoint as old, Delta's interval properties, and the tables it leaves to Delta."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kraftlake.delta.append import Unsupported, append, log_segment, put_commit
from kraftlake.delta.checkpoint import clean_up_expired_logs, interval_ms, table_state, write_checkpoint
from kraftlake.delta.rewrite import snapshot
from kraftlake.delta.scan import arrow_schema, read_rows, table_snapshot
from tests.delta.test_scan import SCHEMA, _create, _rows

DAY_MS = 86_400_000


def _append(path: Path, i: int, app: str = "a") -> None:
    append(
        path, _rows(range(i * 10, (i + 1) * 10)), schema_string=json.dumps(SCHEMA), app_id=app, txn_version=i
    )


def _keys(path: Path) -> list[int]:
    snap = table_snapshot(path)
    return sorted(read_rows(snap, arrow_schema(snap), ()).column("k").to_pylist())


def _age(log: Path, versions: range, days: int) -> None:
    """Make the log files of these versions ``days`` old."""
    for p in log.iterdir():
        if p.name[:20].isdigit() and int(p.name[:20]) in versions:
            t = p.stat().st_mtime - days * 86_400
            os.utime(p, (t, t))


def test_the_checkpoint_holds_the_state_and_the_next_one_builds_on_it(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _create(path)
    for i in range(5):
        _append(path, i, app="a" if i % 2 else "b")
    before = table_state(path)
    done = write_checkpoint(path)
    assert done is not None and (done.version, done.actions, done.cleaned) == (5, 2 + 2 + 5, 0)
    assert write_checkpoint(path) is None  # the latest version has one
    log = path / "_delta_log"
    for v in range(5):
        (log / f"{v:020d}.json").unlink()
    after = table_state(path)
    assert (after.version, after.protocol, after.metadata) == (
        before.version,
        before.protocol,
        before.metadata,
    )
    # the files as the commits added them, but for dataChange (a checkpoint's actions change no data)
    assert after.files == {k: {**a, "dataChange": False} for k, a in before.files.items()}
    assert {a: t["version"] for a, t in after.txns.items()} == {"a": 3, "b": 4}
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 5
    for i in range(5, 8):
        _append(path, i)
    assert write_checkpoint(path) is not None and log_segment(log)[1:] == (8, 0)
    assert _keys(path) == list(range(80))
    assert set(table_state(path).files) == set(snapshot(path).files)


def test_expired_log_files_are_deleted_only_behind_a_checkpoint_as_old(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _create(path)
    log = path / "_delta_log"
    for i in range(4):
        _append(path, i)
    write_checkpoint(path)  # at 4
    for i in range(4, 9):
        _append(path, i)
    # everything 40 days old but the checkpoint at 4 and what follows it: nothing is behind an old checkpoint
    _age(log, range(0, 4), 40)
    assert clean_up_expired_logs(log, int(os.path.getmtime(log / f"{8:020d}.json") * 1000) - 30 * DAY_MS) == 0
    # the checkpoint at 4 is old too: versions 0-3 go, 4 on stay
    _age(log, range(4, 5), 40)
    cutoff = int(os.path.getmtime(log / f"{8:020d}.json") * 1000) - 30 * DAY_MS
    assert clean_up_expired_logs(log, cutoff) == 4
    assert sorted(p.name for p in log.glob("0*"))[0] == f"{4:020d}.checkpoint.parquet"
    assert _keys(path) == list(range(90))
    # after a checkpoint the property's retention applies (here a day)
    meta = dict(snapshot(path).metadata)
    meta["configuration"] = {"delta.logRetentionDuration": "interval 1 day"}
    assert put_commit(log, 10, [{"metaData": meta}])
    _age(log, range(4, 10), 2)
    done = write_checkpoint(path)
    assert done is not None and done.version == 10 and done.cleaned == 0  # the newest old checkpoint is 4
    _age(log, range(10, 11), 2)
    assert clean_up_expired_logs(log, int(os.path.getmtime(log / "_last_checkpoint") * 1000)) == 7
    assert log_segment(log)[1] == 10 and not (log / f"{9:020d}.json").exists()
    assert _keys(path) == list(range(90))


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("interval 1 week", 7 * DAY_MS),
        ("interval 30 days", 30 * DAY_MS),
        ("7 days", 7 * DAY_MS),
        ("INTERVAL 2 hours 30 minutes", 9_000_000),
        ("interval 1 day 1 second", DAY_MS + 1000),
    ],
)
def test_delta_intervals(text: str, ms: int) -> None:
    assert interval_ms(text, Path("t"), "p") == ms


@pytest.mark.parametrize("text", ["interval 3 fortnights", "soon", "interval", "1 day and more"])
def test_an_interval_not_read_here_leaves_the_checkpoint_to_delta(text: str) -> None:
    with pytest.raises(Unsupported, match="t: p = "):
        interval_ms(text, Path("t"), "p")


def test_a_table_needing_more_of_a_writer_is_left_to_delta(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _create(path, config={"delta.columnMapping.mode": "name"})
    assert put_commit(path / "_delta_log", 1, [{"commitInfo": {}}])
    with pytest.raises(Unsupported, match="columnMapping"):
        write_checkpoint(path)
    assert sorted(p.name for p in (path / "_delta_log").iterdir()) == [f"{0:020d}.json", f"{1:020d}.json"]
