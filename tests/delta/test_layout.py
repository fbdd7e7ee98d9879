"""The layout kraftlake's writer gives a history table's data files (``kraftlake.delta.layout``): versions
ordered by their end, the open ones last by their start, cut into row groups; a reader of an offset window
(``kraftlake.delta.scan``) skips the row groups that cannot hold it and finds the rows a full read finds,
deletion vectors applied by their positions in the whole file."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kraftlake.delta.append import append, put_commit
from kraftlake.delta.layout import ROW_GROUP_ROWS
from kraftlake.delta.rewrite import snapshot
from kraftlake.delta.scan import Bound, arrow_schema, matching_row_groups, read_rows, table_snapshot
from tests.delta.test_scan import PROTOCOL
from tests.fuzz.test_fuzz_deletion_vectors import vector, z85_encode

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "k", "type": "long", "nullable": False, "metadata": {}},
        {"name": "from_offset", "type": "long", "nullable": False, "metadata": {}},
        {"name": "to_offset", "type": "long", "nullable": True, "metadata": {}},
    ],
}
#: Versions a slice makes: each file holds this many, starting within one slice of the log.
PER_FILE = 3 * ROW_GROUP_ROWS + 100
FILES = 2


def _versions(first_key: int, start: int, rng: random.Random) -> pa.Table:
    """A slice's versions: starts in ``[start, start + PER_FILE)``, one in twenty still open, the others ending
    after a span of any length up to ten slices (most short, as a partition's ISR changes)."""
    ks, froms, tos = [], [], []
    for i in range(PER_FILE):
        at = start + i
        ks.append(first_key + i)
        froms.append(at)
        tos.append(None if rng.random() < 0.05 else at + 1 + int(rng.expovariate(1 / 2000)) % (10 * PER_FILE))
    # handed over in key order: the writer orders them
    return pa.table(
        {
            "k": pa.array(ks, pa.int64()),
            "from_offset": pa.array(froms, pa.int64()),
            "to_offset": pa.array(tos, pa.int64()),
        }
    )


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("layout") / "partitions"
    meta = {
        "id": "t",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(SCHEMA),
        "partitionColumns": [],
        "configuration": {},
        "createdTime": 0,
    }
    (path / "_delta_log").mkdir(parents=True)
    assert put_commit(path / "_delta_log", 0, [{"metaData": meta}, {"protocol": PROTOCOL}])
    rng = random.Random(28)
    for i in range(FILES):
        rows = _versions(i * PER_FILE, i * PER_FILE, rng)
        append(path, rows, schema_string=json.dumps(SCHEMA), app_id="a", txn_version=i)
    # a deletion vector on the first file: rows in every row group, the first and last of the file among them
    snap = snapshot(path)
    first = min(snap.files.values(), key=lambda a: json.loads(a["stats"])["minValues"]["from_offset"])
    marked = sorted({0, PER_FILE - 1, *rng.sample(range(PER_FILE), 500)})
    data = vector(marked)
    dv = {
        "storageType": "i",
        "pathOrInlineDv": z85_encode(data),
        "sizeInBytes": len(data),
        "cardinality": len(marked),
    }
    actions = [
        {"remove": {"path": first["path"], "deletionTimestamp": 1, "dataChange": True}},
        {"add": {**first, "deletionVector": dv}},
    ]
    assert put_commit(path / "_delta_log", snap.version + 1, actions)
    return path


def _window(lo: int, hi: int) -> tuple[Bound, ...]:
    """The versions valid at some offset of ``[lo, hi]`` (the report's read)."""
    return (Bound("from_offset", "<=", hi), Bound("to_offset", ">=", lo, or_null=True))


def _rows(path: Path, bounds: tuple[Bound, ...] = ()) -> list[tuple[int, int, int | None]]:
    snap = table_snapshot(path)
    got = read_rows(snap, arrow_schema(snap), bounds)
    return sorted(zip(*(got.column(c).to_pylist() for c in ("k", "from_offset", "to_offset")), strict=True))


def test_a_history_file_is_ordered_by_its_versions_ends_and_cut_into_row_groups(table: Path) -> None:
    for add in table_snapshot(table).files.values():
        file = pq.ParquetFile(table / add["path"])
        assert file.metadata.num_row_groups == -(-PER_FILE // ROW_GROUP_ROWS)
        rows = file.read()
        ends = rows.column("to_offset").to_pylist()
        closed = [e for e in ends if e is not None]
        assert closed == sorted(closed) and ends[len(closed) :] == [None] * (len(ends) - len(closed))
        opened = rows.column("from_offset").to_pylist()[len(closed) :]
        assert opened == sorted(opened)


@pytest.mark.parametrize("window", [(PER_FILE + 500, PER_FILE + 900), (2 * PER_FILE - 10, 2 * PER_FILE + 5)])
def test_a_window_read_skips_row_groups_and_finds_what_a_full_read_finds(
    table: Path, window: tuple[int, int]
) -> None:
    lo, hi = window
    everything = _rows(table)
    want = [r for r in everything if r[1] <= hi and (r[2] is None or r[2] >= lo)]
    assert want
    assert _rows(table, _window(lo, hi)) == want
    snap = table_snapshot(table)
    read = skipped = 0
    for add in snap.files.values():
        meta = pq.ParquetFile(table / add["path"]).metadata
        kept = matching_row_groups(meta, _window(lo, hi))
        read += len(kept)
        skipped += meta.num_row_groups - len(kept)
    assert skipped >= read, f"{read} row groups read, {skipped} skipped"


def test_the_deletion_vector_drops_the_rows_it_marks_whichever_row_groups_are_read(table: Path) -> None:
    everything = _rows(table)
    assert len(everything) < FILES * PER_FILE
    keys = {r[0] for r in everything}
    # the first file's first and last rows as written (its positions 0 and PER_FILE - 1) are gone
    snap = table_snapshot(table)
    first = min(snap.files.values(), key=lambda a: json.loads(a["stats"])["minValues"]["from_offset"])
    written = pq.read_table(table / first["path"], columns=["k"]).column("k").to_pylist()
    assert written[0] not in keys and written[-1] not in keys
    for lo in range(0, 2 * PER_FILE, PER_FILE // 3):
        hi = lo + 1000
        assert _rows(table, _window(lo, hi)) == [
            r for r in everything if r[1] <= hi and (r[2] is None or r[2] >= lo)
        ]
