"""Rows held as columns read as the lists of dicts the other sections hold, and their JSON is what json.dumps
writes for each dict, on the report's own rows (a simulated cluster's risk and availability sections)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from kraftlake.report import column_rows
from kraftlake.report.column_rows import ROW_SEPARATOR, ColumnRows, json_line_pieces, json_lines
from kraftlake.report.from_log import input_from_records
from kraftlake.report.render import json_bytes, render
from kraftlake.report.sections import build_report
from kraftlake.sim.cluster import ClusterSimConfig, ClusterSimulator


def _dumps(rows: list[dict[str, object]], columns: list[str]) -> str:
    return ROW_SEPARATOR.join(json.dumps({c: r.get(c) for c in columns}) for r in rows)


def test_cells_of_every_kind_written_as_json_writes_them() -> None:
    rows: list[dict[str, object]] = [
        {"name": 'quote " and \u00e9', "n": 1, "flag": True, "ids": [3, 1, 2], "gone": None},
        {"name": "b", "n": None, "flag": None, "ids": [], "gone": None},
        {"name": None, "n": -(2**40), "flag": False, "ids": None, "gone": None},
    ]
    held = ColumnRows(pa.Table.from_pylist(rows))
    columns = ["name", "n", "flag", "ids", "gone", "absent"]
    assert bytes(json_lines(held, columns)).decode("ascii") == _dumps(rows, columns)
    assert held == rows and list(held) == rows and len(held) == 3
    assert held[1] == rows[1] and held[1:] == rows[1:] and held + rows[:1] == [*rows, rows[0]]
    assert bytes(json_lines(ColumnRows(pa.Table.from_pylist(rows[:0], held.table.schema)), columns)) == b""


def test_dictionary_columns_written_as_their_values() -> None:
    names = pa.DictionaryArray.from_arrays(pa.array([1, 0, None, 1], pa.int64()), pa.array(["a", 'q"']))
    lists = pa.DictionaryArray.from_arrays(
        pa.array([0, 2, 1, None]), pa.array([[1, 2], [], None], pa.list_(pa.int64()))
    )
    held = ColumnRows(pa.table({"name": names, "ids": lists}))
    rows = [{"name": n, "ids": i} for n, i in zip(names.to_pylist(), lists.to_pylist(), strict=True)]
    assert held == rows and rows[0] == {"name": 'q"', "ids": [1, 2]}
    assert json_lines(held, ["name", "ids"]).decode("ascii") == _dumps(rows, ["name", "ids"])


def test_a_float_column_is_refused() -> None:
    with pytest.raises(TypeError, match="double"):
        json_lines(ColumnRows(pa.table({"x": [1.5]})), ["x"])


def test_the_report_json_of_column_sections_equals_row_by_row_json() -> None:
    sim = ClusterSimulator(
        ClusterSimConfig(brokers=5, topics=6, partitions_per_topic=3, events=800, seed=3, check_every=0)
    )
    sim.run()
    records = list(sim.log.records)
    last = records[-1].offset
    report = build_report(input_from_records(records, last // 4, last), warehouse="/w")
    held = [s for s in report.sections if isinstance(s.rows, ColumnRows)]
    assert {s.key for s in held} == {"risk", "availability"} and all(len(s.rows) for s in held)
    for s in held:
        assert bytes(json_lines(s.rows, s.columns)).decode() == _dumps(list(s.rows), s.columns)
    assert render(report, "json") == json_bytes(report).decode()
    assert json.loads(render(report, "json"))["sections"][0]["rows"] == [
        {c: r[c] for c in report.sections[0].columns} for r in report.sections[0].rows
    ]


def test_pieces_of_a_few_rows_join_to_the_whole_with_and_without_a_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows: list[dict[str, object]] = [
        {"n": i, "name": f"t{i % 3}", "ids": list(range(i % 4))} for i in range(11)
    ]
    held = ColumnRows(pa.Table.from_pylist(rows))
    whole = _dumps(rows, ["name", "n", "ids"])
    monkeypatch.setattr(column_rows, "PIECE_ROWS", 4)
    with ThreadPoolExecutor(max_workers=2) as pool:
        for given in (None, pool):
            pieces = [bytes(p) for p in json_line_pieces(held, ["name", "n", "ids"], given)]
            assert len(pieces) == 5 and b"".join(pieces).decode("ascii") == whole
        # started ahead: the rest made as the pieces are taken, once; for other columns, made anew
        held.encode_ahead(["name", "n", "ids"], pool, pieces=1)
        assert b"".join(json_line_pieces(held, ["name", "n", "ids"])).decode("ascii") == whole
        held.encode_ahead(["n"], pool, pieces=2)
        assert b"".join(json_line_pieces(held, ["name", "n", "ids"], pool)).decode("ascii") == whole
        assert json_lines(held, ["n"]).decode("ascii") == _dumps(rows, ["n"])
    assert list(json_line_pieces(ColumnRows(pa.table({"n": pa.array([], pa.int64())})), ["n"])) == []
