"""What Spark refuses in a user's query comes out of `kraftlake sql` / `state` as one line and exit 2: a parse
error, an unknown function (with kraftlake's functions named), an unknown column in --where, an offset past
the warehouse's last (the table functions refuse it)."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from kraftlake.sim.workloads.entities import write_synthetic_log


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Path:
    from pipelines.ingest import ingest

    root = tmp_path_factory.mktemp("cli-errors")
    log_dir = write_synthetic_log(root / "logs", seed=5, steps=40)
    ingest(spark, log_dir, root / "warehouse", batch_records=1000)
    return root / "warehouse"


def _run(argv: list[str]) -> tuple[int, str, str]:
    from kraftlake.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "starts", "contains"),
    [
        (
            ["sql", "SELEC * FROM partitions_at(3)"],
            "kraftlake sql: error: [PARSE_SYNTAX_ERROR] Syntax error",
            "",
        ),
        (
            ["sql", "SELECT * FROM partition_at(3)"],
            "kraftlake sql: error: [UNRESOLVABLE_TABLE_VALUED_FUNCTION] Could not resolve `partition_at`",
            "kraftlake's functions: <entity>_at(at_offset BIGINT[, in_cluster STRING]), "
            "<entity>_at_time(at_time TIMESTAMP[, in_cluster STRING]) and "
            "<entity>_versions(range_from BIGINT, range_to BIGINT[, in_cluster STRING]) for brokers, controllers,",
        ),
        (
            ["sql", "SELECT partition_count(3)"],
            "kraftlake sql: error: [UNRESOLVED_ROUTINE] Cannot resolve routine `partition_count`",
            "partition_history(for_topic STRING, for_partition INT[, in_cluster STRING])",
        ),
        (["sql", "SELECT nope FROM partitions_at(3)"], "kraftlake sql: error: [UNRESOLVED_COLUMN", "`nope`"),
        (
            ["state", "--offset", "3", "--where", "nope = 1"],
            "kraftlake state: error: [UNRESOLVED_COLUMN",
            "`nope`",
        ),
        (
            ["state", "--offset", "999999"],
            "kraftlake state: error: offset 999999 is after the last committed offset (",
            "",
        ),
        (
            ["sql", "SELECT count(*) FROM topics_at(999999)"],
            "kraftlake sql: error: offset 999999 is after the last committed offset (",
            "",
        ),
    ],
)
def test_spark_errors_are_one_line(warehouse: Path, argv: list[str], starts: str, contains: str) -> None:
    """What Spark refuses in a user's query comes out of the command as one line and exit 2.
    Slow: the first case ingests the module's warehouse (the 81-record log, every table created); each case
    runs the command in this process on the shared Spark session, which creates the functions its query names
    and has Spark parse and plan the query."""
    code, out, err = _run([argv[0], "--warehouse", str(warehouse), *argv[1:]])
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith(starts) and contains in err, err
    assert "SQLSTATE" not in err and "Traceback" not in err
