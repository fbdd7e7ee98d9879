"""The incident report on the 1M-record warehouse, each a user's command run cold (a process each), against the
report's data-at-risk SQL through Spark (``kraftlake sql --local``): the report has no Spark path, so the
like-for-like is what a user would otherwise run, its first and heaviest section's query.

The warehouse is :mod:`kraftlake.bench.bench_answers`' (the same sizes and environment variables, the same
work dir: ingested once for both). The synthetic log's records are one millisecond apart, so a day
ending at its last record holds the whole log.

Figures (medians of ``RUNS`` runs, wall time of the whole process; env ``KRAFTLAKE_BENCH_REPORT_RUNS``):

- ``report_day_s``: ``kraftlake report --warehouse W --from T-1d --to T --format json`` (T: the last record's
  time, both ISO-8601 as a user writes them); ``report_whole_s``: no bounds (the whole history);
  ``report_recent_s``: the last ``RECENT`` offsets; ``*_risk_rows`` the data-at-risk rows each found;
- ``risk_sql_day_s`` / ``risk_sql_recent_s``: ``kraftlake sql --local`` running the report's data-at-risk
  query (``kraftlake.report.sql.RISK``) for the same windows; it must return as many rows as the report's
  section, else the benchmark fails.
"""

from __future__ import annotations

import json
import os
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kraftlake.bench.bench_answers import BenchAnswerError, _timed, warehouse_of

RUNS = int(os.environ.get("KRAFTLAKE_BENCH_REPORT_RUNS", "3"))
RECENT = 10_000


def _median(argv: list[str]) -> tuple[float, str]:
    runs = [_timed(argv) for _ in range(RUNS)]
    return statistics.median(t for t, _, _ in runs), runs[0][1]


def _risk_rows(printed: str) -> int:
    report = json.loads(printed)
    return next(len(s["rows"]) for s in report["sections"] if s["key"] == "risk")


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    from kraftlake.report.sql import RISK, query
    from kraftlake.warehouse.tables import OFFSETS, Warehouse

    work = Path(ctx["work_dir"]).parent / "answers"
    work.mkdir(parents=True, exist_ok=True)
    warehouse, last = warehouse_of(work)
    stamps = Warehouse(warehouse).read(OFFSETS, columns=["offset", "timestamp"]).sort_by("offset")
    first = int(stamps.column("offset")[0].as_py())
    end_ms = int(stamps.column("timestamp")[-1].as_py())
    day_from = datetime.fromtimestamp(end_ms / 1000, UTC) - timedelta(days=1)
    windows = {
        "day": (["--from", _iso(int(day_from.timestamp() * 1000)), "--to", _iso(end_ms)], (first, last)),
        "whole": ([], (first, last)),
        "recent": (["--from", str(last - RECENT + 1), "--to", str(last)], (last - RECENT + 1, last)),
    }
    figures: dict[str, Any] = {"records": last + 1, "runs": RUNS}
    report = ["report", "--warehouse", str(warehouse), "--format", "json"]
    for name, (bounds, (lo, hi)) in windows.items():
        took, printed = _median([*report, *bounds])
        figures[f"report_{name}_s"] = round(took, 2)
        figures[f"report_{name}_risk_rows"] = _risk_rows(printed)
        if name == "whole":
            continue
        sql = ["sql", "--warehouse", str(warehouse), "--local", "--format", "jsonl", query(RISK, lo, hi)]
        took, printed = _median(sql)
        figures[f"risk_sql_{name}_s"] = round(took, 2)
        if printed.count("\n") != figures[f"report_{name}_risk_rows"]:
            raise BenchAnswerError(
                f"the {name} window: the report found {figures[f'report_{name}_risk_rows']} data-at-risk rows, "
                f"its SQL through Spark {printed.count(chr(10))}"
            )
    figures["load_average_1m"] = round(os.getloadavg()[0], 1)
    return figures
