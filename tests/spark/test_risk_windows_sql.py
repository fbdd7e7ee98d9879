"""``risk_windows(from, to)`` over a warehouse ingested from the risk scenarios' real log equals the oracle
(the log replayed offset by offset), and refuses offsets the warehouse does not hold: the SQL function (what a
catalog stores) and the session's (a Python UDTF over the answers without a JVM) alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kraftlake.history.risk import KINDS, RiskWindow, risk_windows
from kraftlake.image.source import log_records


@pytest.fixture(scope="module", params=["sql", "udtf"])
def session(request: pytest.FixtureRequest, spark: Any, risk_warehouse: tuple[Path, Path]) -> Any:
    """A session with the SQL functions (``sql``) or :func:`udfs.sql.register`'s (``udtf``)."""
    from udfs.sql import register, register_sql_functions

    made = spark.newSession()
    (register_sql_functions if request.param == "sql" else register)(made, risk_warehouse[1])
    return made


def _query(spark: Any, lo: int, hi: int) -> list[RiskWindow]:
    rows = spark.sql(f"SELECT * FROM risk_windows({lo}, {hi})").collect()
    out = []
    for r in rows:
        d = r.asDict()
        d["isr"] = tuple(d["isr"])
        if d["previous_isr"] is not None:
            d["previous_isr"] = tuple(d["previous_isr"])
        out.append(RiskWindow(**d))
    return sorted(out, key=RiskWindow.sort_key)


def test_risk_windows_equal_the_oracle(session: Any, risk_warehouse: tuple[Path, Path]) -> None:
    log_dir, _ = risk_warehouse
    records = list(log_records(log_dir))
    last = records[-1].offset
    expected = risk_windows(records)
    assert {w.kind for w in expected} == set(KINDS)  # every kind, from the scenarios
    assert _query(session, 0, last) == expected
    # a range keeps the windows overlapping it, whole
    elected = next(w for w in expected if w.kind == "unclean_election")
    lo, hi = elected.from_offset - 3, elected.from_offset
    inside = [w for w in expected if w.from_offset <= hi and (w.to_offset is None or w.to_offset > lo)]
    assert elected in inside and len(inside) < len(expected)
    assert _query(session, lo, hi) == inside


def test_risk_windows_refuse_offsets_the_warehouse_does_not_hold(
    session: Any, risk_warehouse: tuple[Path, Path]
) -> None:
    from kraftlake.spark.tables.layout import WarehouseError
    from udfs.sql import warehouse_errors

    log_dir, _ = risk_warehouse
    last = max(r.offset for r in log_records(log_dir))
    with pytest.raises(WarehouseError, match="offset -1 is negative"), warehouse_errors():
        session.sql(f"SELECT * FROM risk_windows(-1, {last})").collect()
    with pytest.raises(WarehouseError, match="is after the last committed offset"), warehouse_errors():
        session.sql(f"SELECT * FROM risk_windows(0, {last + 1})").collect()
