"""Each cluster's lowest and highest offset from a table's Delta log (``kraftlake.warehouse.cluster_ranges``): the
files' statistics where they are exact, the files read where they are not (two clusters in one file, a name
longer than the prefix Delta keeps, rows deleted by a deletion vector since the statistics were taken)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from kraftlake.delta.append import append, put_commit
from kraftlake.delta.rewrite import snapshot
from kraftlake.delta.scan import table_snapshot
from kraftlake.warehouse.cluster_ranges import STRING_PREFIX, column_ranges
from tests.delta.test_scan import PROTOCOL
from tests.fuzz.test_fuzz_deletion_vectors import vector, z85_encode

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "cluster", "type": "string", "nullable": True, "metadata": {}},
        {"name": "offset", "type": "long", "nullable": False, "metadata": {}},
    ],
}
LONG = "c" * STRING_PREFIX


def _append(path: Path, version: int, rows: list[tuple[str, int]]) -> None:
    table = pa.table(
        {
            "cluster": pa.array([c for c, _ in rows], pa.string()),
            "offset": pa.array([o for _, o in rows], pa.int64()),
        }
    )
    append(path, table, schema_string=json.dumps(SCHEMA), app_id="t", txn_version=version)


def test_statistics_answer_where_exact_and_the_other_files_are_read(tmp_path: Path) -> None:
    path = tmp_path / "offsets"
    (path / "_delta_log").mkdir(parents=True)
    meta = {
        "id": "t",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(SCHEMA),
        "partitionColumns": [],
        "configuration": {},
        "createdTime": 0,
    }
    assert put_commit(path / "_delta_log", 0, [{"metaData": meta}, {"protocol": PROTOCOL}])
    _append(path, 1, [("a", o) for o in range(10)])
    _append(path, 2, [("b", o) for o in range(3, 8)])
    _append(path, 3, [("a", 25), ("b", 1), ("a", 20)])  # two clusters: its bounds tell neither
    _append(path, 4, [(LONG, 4), (LONG, 3)])  # a bound this long may be a prefix
    assert column_ranges(table_snapshot(path), "offset") == {"a": (0, 25), "b": (1, 7), LONG: (3, 4)}
    # b's highest offset deleted by a deletion vector: its file's statistics still say 7
    snap = snapshot(path)
    (b_file,) = [a for a in snap.files.values() if json.loads(a["stats"])["minValues"]["cluster"] == "b"]
    data = vector([4])
    dv = {"storageType": "i", "pathOrInlineDv": z85_encode(data), "sizeInBytes": len(data), "cardinality": 1}
    actions = [
        {"remove": {"path": b_file["path"], "deletionTimestamp": 1, "dataChange": True}},
        {"add": {**b_file, "deletionVector": dv}},
    ]
    assert put_commit(path / "_delta_log", snap.version + 1, actions)
    assert column_ranges(table_snapshot(path), "offset") == {"a": (0, 25), "b": (1, 6), LONG: (3, 4)}
