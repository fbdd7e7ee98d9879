"""The answers without a JVM (``kraftlake.warehouse.answers``) against Spark's SQL functions on the same
warehouse: every entity at offsets and times on both sides of a gap, pending closes left unfolded, the history
views, the refusals word for word; then after a compaction that leaves deletion vectors and a cut. And the
``state`` command: its output equal to the Spark path's, no pyspark imported, a damaged table one line."""

from __future__ import annotations

import contextlib
import io
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from test_cli_startup import _imports
from warehouse_states import canon, plain

from kraftlake.history import ENTITIES
from kraftlake.image.source import log_records
from kraftlake.warehouse import answers
from kraftlake.warehouse.tables import Warehouse, WarehouseError
from tests.history.test_gaps import gapped_log


def _spark_rows(spark: Any, sql: str) -> list[dict[str, Any]]:
    return [{k: plain(v) for k, v in r.asDict().items()} for r in spark.sql(sql).collect()]


def _spark_refusal(spark: Any, sql: str) -> str:
    from kraftlake.spark.tables.layout import WarehouseError as SparkWarehouseError
    from udfs.sql import warehouse_errors

    with pytest.raises(SparkWarehouseError) as refused, warehouse_errors():
        spark.sql(sql).collect()
    return str(refused.value)


def _mine(call: Any, warehouse: Path, *args: Any) -> list[str] | str:
    """``call``'s answer over a fresh ``Warehouse`` (as a command reads it), canonical, or its refusal."""
    try:
        return canon(call(Warehouse(warehouse), *args).rows)
    except WarehouseError as exc:
        return str(exc)


def _theirs(spark: Any, sql: str) -> list[str] | str:
    from kraftlake.spark.tables.layout import WarehouseError as SparkWarehouseError
    from udfs.sql import warehouse_errors

    try:
        with warehouse_errors():
            return canon(_spark_rows(spark, sql))
    except SparkWarehouseError as exc:
        return str(exc)


def _ts(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None).isoformat(sep=" ")


#: The table whose refusals are asked of Spark (the guard is the same for every table, from bounds alone: the
#: other tables' refusals must equal its).
REFUSALS_ASKED = ("partitions",)


def _lateral(spark: Any, call: str, args: list[int]) -> dict[int, list[str]]:
    """``call`` (SQL of ``o.a``) for every ``a`` of ``args`` in one Spark action: canonical rows by ``a``."""
    if not args:
        return {}
    values = ", ".join(f"({a})" for a in args)
    rows = _spark_rows(spark, f"SELECT o.a AS _a, f.* FROM VALUES {values} AS o(a), LATERAL {call} f")
    out: dict[int, list[dict[str, Any]]] = {a: [] for a in args}
    for row in rows:
        out[row.pop("_a")].append(row)
    return {a: canon(r) for a, r in out.items()}


def _union(
    spark: Any, query: str, args: list[int], sql_args: Callable[[int], str] | None = None
) -> dict[int, list[str]]:
    """``query`` (SQL with ``{a}``) for every ``a`` of ``args`` in one Spark action, as :func:`_lateral`;
    ``sql_args`` (when given) turns each ``a`` into the SQL put for ``{args}`` instead."""
    if not args:
        return {}
    sql = " UNION ALL ".join(
        f"SELECT {a} AS _a, q.* FROM ({query.format(a=a, args=sql_args(a) if sql_args else a)}) q"
        for a in args
    )
    out: dict[int, list[dict[str, Any]]] = {a: [] for a in args}
    for row in _spark_rows(spark, sql):
        out[row.pop("_a")].append(row)
    return {a: canon(r) for a, r in out.items()}


def assert_answers_equal(
    spark: Any,
    warehouse: Path,
    offsets: list[int],
    times: list[int],
    partitions: int = 2,
    functions: Callable[[Any, Path], list[str]] | None = None,
) -> int:
    """Every entity at each offset and time (epoch ms), the history views of ``partitions`` partitions and two
    brokers (and of one of each that does not exist), equal on both sides (rows or refusal, word for word);
    returns how many answers were refusals. The answers Spark gives as rows come from one action per entity, each
    refusal from a query of its own (a refusal fails the whole query). Spark's are the SQL functions' (what a
    catalog stores and ``serve`` gives its clients; a session's own are the answers without a JVM), or those
    ``functions`` registers."""
    from udfs.sql import register_sql_functions

    (functions or register_sql_functions)(spark, warehouse)
    refused = 0
    seen: dict[tuple[str, int], list[str] | str] = {}
    for table in sorted(ENTITIES, key=lambda t: t not in REFUSALS_ASKED):
        for function, points, arg, sql in (
            (answers.state_at, offsets, lambda n: n, "{t}_at({a})"),
            (answers.state_at_time, times, _ts, "{t}_at_time(timestamp_millis({a}))"),
        ):
            mine = {p: _mine(function, warehouse, table, arg(p)) for p in points}
            rows = [p for p in points if not isinstance(mine[p], str)]
            if function is answers.state_at:
                answered = _lateral(spark, sql.format(t=table, a="o.a"), rows)
            else:
                # a UNION ALL: Spark cannot decorrelate _at_time's cluster choice in a LATERAL call; its
                # cluster column (the warehouse holds one cluster) is not an answer of state_at_time
                answered = _union(
                    spark, "SELECT * EXCEPT (cluster) FROM " + sql.format(t=table, a="{a}"), rows
                )
            for p in points:
                if p in answered:
                    assert mine[p] == answered[p], (table, function.__name__, p)
                    continue
                refused += 1
                # one guard for every table (bounds alone): Spark is asked for three, the others must agree
                if table in REFUSALS_ASKED:
                    theirs = _theirs(spark, "SELECT * FROM " + sql.format(t=table, a=p))
                    seen.setdefault((function.__name__, p), theirs)
                assert mine[p] == seen[(function.__name__, p)], (table, function.__name__, p)
    parts = spark.sql(
        f"SELECT topic, `partition`, count(*) AS n FROM delta.`{warehouse / 'partitions'}` "
        f"GROUP BY topic, `partition` ORDER BY n DESC, topic, `partition` LIMIT {partitions}"
    ).collect()
    views = {
        "partition_history": answers.partition_history,
        "isr_history": answers.isr_history,
        "leader_history": answers.leader_history,
    }
    keys = [(p["topic"], p["partition"]) for p in [*parts, {"topic": "no-such-topic", "partition": 0}]]
    for view, call in views.items():
        refused += _assert_views_equal(
            spark, view, {f"'{t}', {n}": _mine(call, warehouse, t, n) for t, n in keys}
        )
    brokers = spark.sql(
        f"SELECT DISTINCT id FROM delta.`{warehouse / 'brokers'}` ORDER BY id LIMIT 2"
    ).collect()
    ids = [*(r["id"] for r in brokers), 999]
    mine_brokers = {str(b): _mine(answers.broker_history, warehouse, b) for b in ids}
    refused += _assert_views_equal(spark, "broker_history", mine_brokers)
    return refused


def assert_ranges_equal(spark: Any, warehouse: Path, ranges: list[tuple[int, int]]) -> int:
    """Every entity's ``<entity>_versions``, ``leader_changes`` and ``risk_windows`` over each of ``ranges``
    equal on both sides (:mod:`kraftlake.warehouse.range_answers` and the SQL functions :func:`assert_answers_equal`
    registered): rows, or the refusal word for word. Returns how many were refusals."""
    from kraftlake.warehouse import range_answers

    calls: dict[str, Callable[..., Any]] = {
        **{f"{t}_versions": partial(range_answers.versions_between, table=t) for t in ENTITIES},
        "leader_changes": range_answers.leader_changes,
        "risk_windows": range_answers.risk_windows,
    }
    refused = 0
    # every range function's guard is offset_guard's, from bounds alone
    refusals: dict[str, list[str] | str] = {}
    for name, call in calls.items():

        def ask(wh: Warehouse, lo: int, hi: int, call: Callable[..., Any] = call) -> Any:
            return call(wh, range_from=lo, range_to=hi)

        refused += _assert_views_equal(
            spark, name, {f"{lo}, {hi}": _mine(ask, warehouse, lo, hi) for lo, hi in ranges}, refusals
        )
    return refused


def _assert_views_equal(
    spark: Any,
    view: str,
    mine: dict[str, list[str] | str],
    refusals: dict[str, list[str] | str] | None = None,
) -> int:
    """``view`` called with each of ``mine``'s arguments equal on both sides; the answers Spark gives as rows in
    one action (a UNION ALL), each refusal from a query of its own, unless ``refusals`` holds Spark's refusal of
    those arguments already (functions whose guard is the same, from ``bounds`` alone: asked of the first).
    Returns how many were refusals."""
    args = list(mine)
    answered = [i for i, a in enumerate(args) if not isinstance(mine[a], str)]
    theirs = _union(spark, f"SELECT * FROM {view}({{args}})", answered, lambda i: args[i])
    for i, a in enumerate(args):
        if i not in theirs:
            if refusals is None or a not in refusals:
                theirs[i] = _theirs(spark, f"SELECT * FROM {view}({a})")
                if refusals is not None:
                    refusals[a] = theirs[i]
            else:
                theirs[i] = refusals[a]
        assert mine[a] == theirs[i], (view, a)
    return len(args) - len(answered)


@pytest.fixture(scope="module")
def gapped(
    tmp_path_factory: pytest.TempPathFactory, spark: Any
) -> tuple[Path, dict[int, int], int, int, int]:
    """(warehouse, record times by offset, first missing offset, next present offset, last offset): a log with
    a hole ingested in small slices, its closes left pending."""
    from pipelines.ingest import ingest

    root = tmp_path_factory.mktemp("nojvm")
    _, log_dir, first_missing, nxt = gapped_log(root)
    warehouse = root / "wh"
    result = ingest(spark, log_dir, warehouse, batch_records=200, fold=False)
    times = {r.offset: r.timestamp for r in log_records(log_dir)}
    return warehouse, times, first_missing, nxt, result.last_offset


@pytest.mark.slow
@pytest.mark.heavy
def test_answers_equal_sparks_around_a_gap_with_closes_pending(
    spark: Any, gapped: tuple[Path, dict[int, int], int, int, int]
) -> None:
    """Every entity's answer without a JVM equals Spark's around a gap, with the closes left pending.
    Slow: the module's warehouse is ingested first (the 612-record gapped log in 200-record slices, closes
    left unfolded); then every entity is asked at 10 offsets and 6 times on both sides, with the history views
    and each refusal asked of Spark alone, and the range functions over 5 ranges: about 60 Spark queries."""
    warehouse, times, first_missing, nxt, last = gapped
    assert Warehouse(warehouse).read("closes").num_rows > 0  # the closes are unfolded
    offsets = [
        0,
        5,
        first_missing - 1,
        first_missing,
        (first_missing + nxt) // 2,
        nxt - 1,
        nxt,
        (nxt + last) // 2,
    ]
    offsets += [last, last + 1]
    ordered = sorted(times)
    moments = [times[ordered[0]] - 1, times[first_missing - 1], times[first_missing - 1] + 1, times[nxt]]
    moments += [times[ordered[len(ordered) // 2]], times[last] + 10_000]
    refused = assert_answers_equal(spark, warehouse, offsets, moments)
    # the gap's offsets, the one past the commit point and the time after the last record before the gap
    assert refused >= 5 * len(ENTITIES)
    ranges = [(0, last), (5, first_missing - 1), (nxt, last), (first_missing, nxt), (nxt, last + 1)]
    assert assert_ranges_equal(spark, warehouse, ranges) == 2 * (len(ENTITIES) + 2)
    with pytest.raises(WarehouseError, match="offset -1 is negative"):
        answers.state_at(Warehouse(warehouse), "brokers", -1)
    assert _spark_refusal(spark, "SELECT * FROM brokers_at(-1)") == "offset -1 is negative"


@pytest.mark.slow
@pytest.mark.heavy
def test_answers_equal_sparks_after_a_compaction_with_deletion_vectors(
    spark: Any, gapped: tuple[Path, dict[int, int], int, int, int], tmp_path: Path
) -> None:
    """Every entity's answer without a JVM equals Spark's after a compaction that leaves deletion vectors.
    Slow: a compaction of a copy of the module's warehouse (the pending closes folded, the image rebuilt with
    Spark, a snapshot written, DELETEs on the log and every history table), then every entity asked at 4
    offsets and 2 times on both sides, with the history views, the refusals and the range functions over 2
    ranges: about 50 Spark queries."""
    from pipelines.compact import compact

    src, times, _, nxt, last = gapped
    warehouse = tmp_path / "wh"
    shutil.copytree(src, warehouse)
    cut = (nxt + last) // 2
    done = compact(spark, warehouse, offset=cut, retain_offsets=0, optimize=False, progress=False)
    assert done.retained_from is not None
    wh = Warehouse(warehouse)
    vectors = sum(1 for t in ENTITIES for a in wh.snapshot(t).files.values() if a.get("deletionVector"))
    assert vectors > 0  # the deletes marked rows instead of rewriting files
    r = done.retained_from
    refused = assert_answers_equal(
        spark, warehouse, [r - 1, r, (r + last) // 2, last], [times[nxt], times[last]]
    )
    assert refused >= 2 * len(ENTITIES)  # r - 1 and the time before the cut
    assert assert_ranges_equal(spark, warehouse, [(r, last), (r - 1, last)]) == len(ENTITIES) + 2


@pytest.mark.slow
@pytest.mark.heavy
def test_a_sessions_functions_give_the_answers_without_jvm(
    spark: Any, gapped: tuple[Path, dict[int, int], int, int, int]
) -> None:
    """The functions :func:`udfs.sql.register` gives a session (Python UDTFs) answer and refuse as the answers
    without a JVM, called as SQL functions are (a LATERAL join, named and left-out arguments), and word a
    cluster refusal as the SQL functions do. Slow: the module's warehouse is ingested first (in 200-record
    slices), then about 70 calls of the functions; make test holds the UDTFs to the SQL functions in
    test_guard_literals and test_risk_windows_sql."""
    from kraftlake.spark.tables.queries import NO_SUCH_CLUSTER
    from kraftlake.warehouse import range_answers
    from udfs.sql import register

    warehouse, times, first_missing, nxt, last = gapped
    session = spark.newSession()
    offsets = [0, first_missing - 1, first_missing, nxt, last, last + 1, -1]
    moments = [times[0] - 1, times[first_missing - 1], times[nxt], times[last] + 10_000]
    refused = assert_answers_equal(session, warehouse, offsets, moments, functions=register)
    assert refused >= 3 * len(ENTITIES)
    assert assert_ranges_equal(session, warehouse, [(0, last), (first_missing, nxt)]) == len(ENTITIES) + 2
    (cluster,) = Warehouse(warehouse).clusters()
    named = _spark_rows(session, f"SELECT * FROM brokers_at(in_cluster => '{cluster}', at_offset => {nxt})")
    assert canon(named) == canon(answers.state_at(Warehouse(warehouse), "brokers", nxt).rows)
    refusal = _spark_refusal(session, f"SELECT * FROM brokers_at({nxt}, 'nope')")
    assert refusal == f"cluster nope {NO_SUCH_CLUSTER} ({cluster})"
    rows = _spark_rows(session, f"SELECT * FROM risk_windows(0, {last})")
    assert canon(rows) == canon(range_answers.risk_windows(Warehouse(warehouse), 0, last).rows)


def _run_state(argv: list[str]) -> tuple[int, str, str]:
    from kraftlake.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["state", *argv])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.slow
def test_state_prints_what_the_spark_path_prints_without_importing_spark(
    spark: Any, gapped: tuple[Path, dict[int, int], int, int, int], tmp_path: Path
) -> None:
    """``kraftlake state`` without a JVM prints what the Spark path prints, and does not import pyspark.
    Slow: Spark's state query of each of the 11 entities beside the command run in both formats (22 runs),
    then the command run again in a Python subprocess that lists what it imported."""
    from jobs.state import state_query
    from pipelines.output import print_frame, rows_of, write_rows
    from udfs.sql import register

    warehouse, times, _, nxt, last = gapped
    register(spark, warehouse)
    for entity in ENTITIES:  # every column type the printer meets, in both formats
        frame = spark.sql(state_query(entity, nxt, None, None))
        rows = rows_of(frame)
        for fmt in ("table", "jsonl"):
            code, printed, _ = _run_state(
                ["--warehouse", str(warehouse), "--offset", str(nxt), "--entity", entity, "--format", fmt]
            )
            assert code == 0
            expected = io.StringIO()
            write_rows(rows, frame.columns, fmt, expected)
            assert printed == expected.getvalue(), (entity, fmt)
    when = _ts(times[nxt])
    code, printed, _ = _run_state(["--warehouse", str(warehouse), "--time", when])
    expected = io.StringIO()
    print_frame(spark.sql(state_query("partitions", None, when, None)), "table", expected)
    assert code == 0 and printed == expected.getvalue()
    seen = _imports(["state", "--warehouse", str(warehouse), "--offset", str(last), "--entity", "brokers"])
    assert seen["code"] == 0 and seen["printed"] and seen["heavy"] == []
    # a refusal: one line, exit 2, the functions' words
    code, _, err = _run_state(["--warehouse", str(warehouse), "--offset", str(last + 1)])
    assert (
        code == 2
        and err == f"kraftlake state: error: offset {last + 1} is after the last committed offset ({last})\n"
    )

    # a commit cut short, a data file gone: one line naming the file
    damaged = tmp_path / "damaged"
    shutil.copytree(warehouse, damaged)
    log = damaged / "brokers" / "_delta_log"
    newest = max(log.glob("*.json"))
    newest.write_text(newest.read_text()[:-25])
    code, _, err = _run_state(["--warehouse", str(damaged), "--offset", str(last), "--entity", "brokers"])
    assert code == 2 and err.count("\n") == 1 and str(newest) in err, err
    snap_files = Warehouse(damaged).snapshot("topics").files.values()
    gone = damaged / "topics" / next(iter(snap_files))["path"]
    gone.unlink()
    code, _, err = _run_state(["--warehouse", str(damaged), "--offset", str(last), "--entity", "topics"])
    assert code == 2 and err.count("\n") == 1 and str(gone) in err and "missing" in err, err


def test_the_names_and_texts_shared_with_the_spark_layer_agree() -> None:
    from kraftlake.spark.tables import layout, queries
    from kraftlake.warehouse import tables

    assert (tables.LOG, tables.OFFSETS, tables.SNAPSHOTS, tables.CLOSES, tables.BOUNDS, tables.KEY_SEP) == (
        layout.LOG,
        layout.OFFSETS,
        layout.SNAPSHOTS,
        layout.CLOSES,
        layout.BOUNDS,
        layout.KEY_SEP,
    )
    # the offsets' refusals; a cluster the reader does not hold is refused in the command line's words
    assert queries.REFUSALS[:4] == answers.REFUSALS
    assert (
        answers.NEGATIVE,
        answers.BEFORE_RETAINED,
        answers.AFTER_COMMITTED,
        answers.IN_GAP,
    ) == (queries.NEGATIVE, queries.BEFORE_RETAINED, queries.AFTER_COMMITTED, queries.IN_GAP)
    assert tables.close_key((3, "a")) == layout.close_key((3, "a"))


@pytest.mark.slow
@pytest.mark.heavy
def test_a_table_the_reader_cannot_read_is_answered_through_spark(
    spark: Any, gapped: tuple[Path, dict[int, int], int, int, int], tmp_path: Path
) -> None:
    """A table with a Delta feature the reader without a JVM does not implement (a v2Checkpoint): ``state``
    answers through Spark and says so, and a session gets the SQL functions, which Delta's reader serves.
    Slow: the ``state`` command's Spark session and the SQL functions registered (about 40, each analysed)."""
    from jobs.state import state_query
    from kraftlake.delta.append import put_commit
    from pipelines.output import print_frame
    from udfs.sql import register

    src, _, _, _, last = gapped
    warehouse = tmp_path / "wh"
    shutil.copytree(src, warehouse)
    snap = Warehouse(warehouse).snapshot("brokers")
    # a reader feature this reader does not implement (Delta's v2 checkpoints): Spark reads the table
    protocol = dict(snap.protocol)
    protocol["readerFeatures"] = [*protocol["readerFeatures"], "v2Checkpoint"]
    protocol["writerFeatures"] = [*protocol["writerFeatures"], "v2Checkpoint"]
    assert put_commit(warehouse / "brokers" / "_delta_log", snap.version + 1, [{"protocol": protocol}])
    code, printed, err = _run_state(
        ["--warehouse", str(warehouse), "--offset", str(last), "--entity", "brokers"]
    )
    assert code == 0 and "v2Checkpoint" in err and err.endswith(": answering through Spark\n"), err
    register(spark, warehouse)
    expected = io.StringIO()
    print_frame(spark.sql(state_query("brokers", last, None, None)), "table", expected)
    assert printed == expected.getvalue()
