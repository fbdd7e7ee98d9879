"""The incident report on the 1M-record warehouse, each a user's command run cold (a process each), against the
report's data-at-risk SQL through Spark (``kraftlake sql --local``): the report has no Spark path, so the
like-for-like is what a user would otherwise run, its first and heaviest section's query.

The warehouse is :mod:`kraftlake.bench.bench_answers`' (the same sizes and environment variables, the same
work dir: ingested once for both). Its synthetic log's records are one millisecond apart: a day ending at its
last record is the whole log, whose risk windows number in the millions (the churn fences brokers leading a
thousand partitions each), too many for a page and more memory than a shared machine has; the windows timed
are the last ``SPANS`` offsets, the whole history only with ``KRAFTLAKE_BENCH_REPORT_WHOLE=1``.

Figures (medians of ``RUNS`` runs, wall time of the whole process; env ``KRAFTLAKE_BENCH_REPORT_RUNS``):

- ``report_<n>_s``: ``kraftlake report --warehouse W --from T1 --to T2 --format json`` over the last ``n``
  offsets, ``T1``/``T2`` ISO-8601 times as a user writes them; ``report_<n>_risk_rows`` the data-at-risk rows
  it found; ``report_whole_s`` without bounds when asked;
- ``risk_sql_<n>_s``: ``kraftlake sql --local`` running the report's data-at-risk query
  (``kraftlake.report.sql.RISK``) for the same offsets; it must return as many rows as the report's section,
  else the benchmark fails.
"""

from __future__ import annotations

import json
import os
import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kraftlake.bench.bench_answers import BenchAnswerError, _timed, warehouse_of

RUNS = int(os.environ.get("KRAFTLAKE_BENCH_REPORT_RUNS", "3"))
#: The windows timed: the last this many offsets.
SPANS = (1_000, 10_000)


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
    held = Warehouse(warehouse).read(OFFSETS, columns=["offset", "timestamp"]).sort_by("offset")
    stamps = dict(zip(held.column("offset").to_pylist(), held.column("timestamp").to_pylist(), strict=True))
    windows: dict[str, tuple[list[str], int]] = {
        str(n): (["--from", _iso(stamps[last - n + 1]), "--to", _iso(stamps[last])], last - n + 1)
        for n in SPANS
    }
    if os.environ.get("KRAFTLAKE_BENCH_REPORT_WHOLE") == "1":
        windows["whole"] = ([], -1)
    figures: dict[str, Any] = {"records": last + 1, "runs": RUNS}
    report = ["report", "--warehouse", str(warehouse), "--format", "json"]
    for name, (bounds, lo) in windows.items():
        took, printed = _median([*report, *bounds])
        figures[f"report_{name}_s"] = round(took, 2)
        figures[f"report_{name}_risk_rows"] = _risk_rows(printed)
        if lo < 0:
            continue
        # a time names the first record of its batch: the SQL takes the offsets the report chose
        shown = json.loads(printed)["window"]
        sql = ["sql", "--warehouse", str(warehouse), "--local", "--format", "jsonl"]
        sql.append(query(RISK, shown["from_offset"], shown["to_offset"]))
        took, printed = _median(sql)
        figures[f"risk_sql_{name}_s"] = round(took, 2)
        if printed.count("\n") != figures[f"report_{name}_risk_rows"]:
            raise BenchAnswerError(
                f"the last {name} offsets: the report found {figures[f'report_{name}_risk_rows']} data-at-risk "
                f"rows, its SQL through Spark {printed.count(chr(10))}"
            )
    figures["load_average_1m"] = round(os.getloadavg()[0], 1)
    return figures
