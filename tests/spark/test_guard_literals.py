"""The table functions with their guards' values as literals (``udfs.sql.register_for_query``, what a server's SQL
route creates for each request): the answers and refusals of the functions that read the tables, in fewer Spark
jobs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

#: The Spark jobs of one ``partitions_at(N)`` with the guards as literals, on a warehouse without pending closes:
#: Delta's file listing of ``partitions`` (made when the query is planned, made again for its deletion-vector
#: check) and the query. The functions that read the tables run more (``clusters``,
#: ``bounds`` and ``closes`` listed and read as well).
MAX_JOBS = 3


@pytest.fixture(scope="module")
def warehouse(risk_warehouse: tuple[Path, Path]) -> tuple[Path, str, int]:
    """The risk scenarios' warehouse, its one cluster and its commit point."""
    from kraftlake.warehouse.guard_values import read_guard_values

    w = risk_warehouse[1]
    (cluster,) = read_guard_values(w).clusters
    last = read_guard_values(w).limits_of(cluster).committed
    assert last is not None
    return w, cluster, last


def _session(spark: Any, warehouse: Path, query: str, literal: bool = True) -> Any:
    """A new session with the functions ``query`` names: their guards' values as literals, else read from the
    tables (as the catalog's)."""
    from kraftlake.warehouse.guard_values import read_guard_values
    from udfs.sql import register_for_query

    session = spark.newSession()
    names = register_for_query(session, warehouse, query, read_guard_values(warehouse) if literal else None)
    assert names, f"no table function named in {query}"
    return session


def _jobs(session: Any, query: str, group: str) -> tuple[list[Any], int]:
    sc = session.sparkContext
    sc.setJobGroup(group, group)
    try:
        rows = session.sql(query).collect()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return rows, len(sc.statusTracker().getJobIdsForGroup(group))


def _canon(rows: list[Any]) -> list[str]:
    return sorted(repr(sorted(r.asDict().items())) for r in rows)


def test_partitions_at_runs_few_jobs_and_answers_as_the_tables_say(
    spark: Any, warehouse: tuple[Path, str, int]
) -> None:
    w, cluster, last = warehouse
    query = f"SELECT * FROM partitions_at({last * 2 // 3})"
    expected, read_jobs = _jobs(_session(spark, w, query, literal=False), query, "guards-read")
    rows, jobs = _jobs(_session(spark, w, query), query, "guards-literal")
    assert rows and _canon(rows) == _canon(expected)
    assert jobs <= MAX_JOBS < read_jobs, (jobs, read_jobs)
    for query in (
        "SELECT * FROM leader_history('jepsen', 0)",
        # the offsets of another relation (a correlated call: the guard is evaluated per row)
        f"SELECT v.o, p.topic, p.leader FROM VALUES (1), ({last}) AS v(o), LATERAL partitions_at(v.o, '{cluster}') p",
    ):
        expected = _session(spark, w, query, literal=False).sql(query).collect()
        assert expected and _canon(_session(spark, w, query).sql(query).collect()) == _canon(expected), query


def test_the_literal_guards_still_refuse(
    spark: Any, warehouse: tuple[Path, str, int], tmp_path: Path
) -> None:
    from kraftlake.spark.tables.bounds import record_retained_from
    from kraftlake.spark.tables.layout import WarehouseError
    from kraftlake.spark.tables.queries import AFTER_COMMITTED, BEFORE_RETAINED, NEGATIVE, NO_SUCH_CLUSTER
    from kraftlake.warehouse.guard_values import GuardCache
    from udfs.sql import warehouse_errors

    w, cluster, last = warehouse
    refused = {
        f"SELECT count(*) FROM partitions_at({last + 1})": AFTER_COMMITTED,
        "SELECT count(*) FROM partitions_at(-1)": NEGATIVE,
        "SELECT count(*) FROM partitions_at(3, 'nope')": NO_SUCH_CLUSTER,
        "SELECT count(*) FROM partition_history('jepsen', 0, 'nope')": NO_SUCH_CLUSTER,
    }
    for query, why in refused.items():
        with pytest.raises(WarehouseError, match=why), warehouse_errors():
            _session(spark, w, query).sql(query).collect()
    # a cut recorded after the values were read: the cache reads them again, the offsets below it are refused
    cut = tmp_path / "cut"
    shutil.copytree(w, cut)
    cache = GuardCache(cut)
    before = cache.values()
    assert cache.values() is before and before.limits_of(cluster).retained == -1
    record_retained_from(spark, cut, cluster, last // 2)
    assert cache.values().limits_of(cluster).retained == last // 2
    query = f"SELECT count(*) FROM partitions_at({last // 2 - 1})"
    with pytest.raises(WarehouseError, match=BEFORE_RETAINED), warehouse_errors():
        _session(spark, cut, query).sql(query).collect()


def test_the_sessions_functions_answer_as_the_sql_ones_and_follow_the_tables(
    spark: Any, warehouse: tuple[Path, str, int], tmp_path: Path
) -> None:
    from kraftlake.spark.tables.bounds import record_retained_from
    from kraftlake.spark.tables.layout import WarehouseError
    from kraftlake.spark.tables.queries import BEFORE_RETAINED, NO_SUCH_CLUSTER
    from udfs.sql import register, register_sql_functions, warehouse_errors

    w, cluster, last = warehouse
    cut = tmp_path / "cut"
    shutil.copytree(w, cut)
    fns = spark.newSession()
    register(fns, cut)
    reading = spark.newSession()
    register_sql_functions(reading, cut)
    offsets = f"delta.`{(cut / 'offsets').resolve()}`"
    (early,) = reading.sql(
        f"SELECT timestamp_millis(max(timestamp)) FROM {offsets} WHERE offset <= 3"
    ).first()
    (late,) = reading.sql(f"SELECT timestamp_millis(max(timestamp)) FROM {offsets}").first()
    queries = [
        f"SELECT * FROM partitions_at({last * 2 // 3})",
        f"SELECT * FROM brokers_at({last}, '{cluster}')",
        f"SELECT * FROM partitions_at_time(TIMESTAMP '{late}')",
        f"SELECT * FROM partitions_at_time(TIMESTAMP '{early}', '{cluster}')",
    ]
    answered = 0
    for query in queries:
        expected = reading.sql(query).collect()
        assert _canon(fns.sql(query).collect()) == _canon(expected), query
        answered += bool(expected)
    assert answered >= 3
    refused = {
        f"SELECT * FROM partitions_at_time(TIMESTAMP '{late}', 'nope')": NO_SUCH_CLUSTER,
        f"SELECT * FROM partitions_at({last // 2 - 1})": BEFORE_RETAINED,
        f"SELECT * FROM partitions_at_time(TIMESTAMP '{early}')": BEFORE_RETAINED,
    }
    # the cut is recorded after the functions were created: both kinds read it
    record_retained_from(spark, cut, cluster, last // 2)
    for query, why in refused.items():
        for run in (reading.sql, fns.sql):
            with pytest.raises(WarehouseError, match=why), warehouse_errors():
                run(query).collect()
