"""The Delta reader without Spark (``kraftlake.delta.scan``) on tables committed by kraftlake's own writer: files
skipped by their statistics, row groups by theirs, removes and deletion vectors applied, checkpoints read, and
one typed error naming the file for a log cut short, a data file gone, a feature it does not read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kraftlake.delta.append import DeltaAppendError, Unsupported, append, put_commit
from kraftlake.delta.rewrite import snapshot
from kraftlake.delta.scan import Bound, arrow_schema, read_rows, table_snapshot
from tests.fuzz.test_fuzz_deletion_vectors import vector, z85_encode

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "k", "type": "long", "nullable": False, "metadata": {}},
        {"name": "to", "type": "long", "nullable": True, "metadata": {}},
        {
            "name": "tags",
            "type": {"type": "array", "elementType": "string", "containsNull": True},
            "nullable": True,
            "metadata": {},
        },
    ],
}
PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["deletionVectors"],
    "writerFeatures": ["deletionVectors", "appendOnly", "invariants"],
}


def _create(path: Path, protocol: dict[str, Any] = PROTOCOL, config: dict[str, str] | None = None) -> None:
    meta = {
        "id": "t",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(SCHEMA),
        "partitionColumns": [],
        "configuration": config or {},
        "createdTime": 0,
    }
    (path / "_delta_log").mkdir(parents=True)
    assert put_commit(path / "_delta_log", 0, [{"metaData": meta}, {"protocol": protocol}])


def _rows(ks: range) -> pa.Table:
    return pa.table(
        {
            "k": pa.array(list(ks), pa.int64()),
            "to": pa.array([None if k % 3 == 0 else k + 10 for k in ks], pa.int64()),
            "tags": pa.array([[f"t{k}"] for k in ks], pa.list_(pa.string())),
        }
    )


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "t"
    _create(path)
    for i in range(4):
        append(
            path,
            _rows(range(i * 100, (i + 1) * 100)),
            schema_string=json.dumps(SCHEMA),
            app_id="a",
            txn_version=i,
        )
    return path


def _keys(path: Path, bounds: tuple[Bound, ...] = ()) -> list[int]:
    snap = table_snapshot(path)
    return sorted(read_rows(snap, arrow_schema(snap), bounds).column("k").to_pylist())


def test_a_range_filter_reads_what_it_matches_and_skips_files_by_their_statistics(table: Path) -> None:
    within = (Bound("k", "<=", 150), Bound("to", ">", 150, or_null=True))
    want = [k for k in range(400) if k <= 150 and (k % 3 == 0 or k + 10 > 150)]
    assert _keys(table, within) == want
    assert _keys(table) == list(range(400))
    snap = table_snapshot(table)
    stats = [json.loads(a["stats"]) for a in snap.files.values()]
    assert [Bound("k", "<=", 150).may_match(s) for s in sorted(stats, key=lambda s: s["minValues"]["k"])] == [
        True,
        True,
        False,
        False,
    ]
    # a file gone that the filter skips is never opened
    skipped = [a["path"] for a in snap.files.values() if json.loads(a["stats"])["minValues"]["k"] == 300]
    (table / skipped[0]).unlink()
    assert _keys(table, (Bound("k", "<", 300),)) == list(range(300))
    with pytest.raises(DeltaAppendError, match=f"{skipped[0]}: a live data file of the table is missing"):
        _keys(table)


def test_removes_and_deletion_vectors_are_applied(table: Path) -> None:
    snap = snapshot(table)
    files = sorted(snap.files.values(), key=lambda a: json.loads(a["stats"])["minValues"]["k"])
    gone, marked = files[0], files[1]
    data = vector([0, 7, 99])
    dv = {"storageType": "i", "pathOrInlineDv": z85_encode(data), "sizeInBytes": len(data), "cardinality": 3}
    actions = [
        {"remove": {"path": gone["path"], "deletionTimestamp": 1, "dataChange": True}},
        {"remove": {"path": marked["path"], "deletionTimestamp": 1, "dataChange": True}},
        {"add": {**marked, "deletionVector": dv}},
    ]
    assert put_commit(table / "_delta_log", snap.version + 1, actions)
    assert _keys(table) == [k for k in range(100, 400) if k not in (100, 107, 199)]
    assert _keys(table, (Bound("k", "<", 110),)) == [k for k in range(100, 110) if k not in (100, 107)]


def test_a_checkpoint_is_read_with_the_commits_after_it(table: Path) -> None:
    snap = snapshot(table)
    # as Delta writes one: a row per action, a column per kind, maps as lists of pairs
    adds = [{**a, "partitionValues": []} for a in snap.files.values()]
    meta = {**snap.metadata, "configuration": [], "format": {"provider": "parquet"}}
    n = len(adds) + 2
    rows = pa.table(
        {
            "protocol": [PROTOCOL, *[None] * (n - 1)],
            "metaData": [None, meta, *[None] * (n - 2)],
            "add": [None, None, *adds],
        }
    )
    pq.write_table(rows, table / "_delta_log" / f"{snap.version:020d}.checkpoint.parquet")
    for v in range(snap.version):
        (table / "_delta_log" / f"{v:020d}.json").unlink()
    append(table, _rows(range(400, 410)), schema_string=json.dumps(SCHEMA), app_id="a", txn_version=9)
    assert _keys(table) == list(range(410))


def test_a_commit_cut_short_is_one_error_naming_it(table: Path) -> None:
    last = table / "_delta_log" / f"{4:020d}.json"
    last.write_text(last.read_text()[:-40])
    with pytest.raises(DeltaAppendError, match=f"{last}: line .* is not a JSON action"):
        table_snapshot(table)


@pytest.mark.parametrize(
    ("protocol", "config", "refused"),
    [
        ({**PROTOCOL, "readerFeatures": ["deletionVectors", "columnMapping"]}, {}, "reader features"),
        (
            {"minReaderVersion": 2, "minWriterVersion": 5},
            {"delta.columnMapping.mode": "name"},
            "column mapping",
        ),
    ],
)
def test_what_the_reader_cannot_honour_is_refused(
    tmp_path: Path, protocol: dict[str, Any], config: dict[str, str], refused: str
) -> None:
    _create(tmp_path / "t", protocol, config)
    with pytest.raises(Unsupported, match=refused):
        table_snapshot(tmp_path / "t")
