"""The incident report on the 1M-record warehouse, each a user's command run cold (a process each), against the
report's data-at-risk SQL through Spark (``kraftlake sql --local``): the report has no Spark path, so the
like-for-like is what a user would otherwise run, its first and heaviest section's query.

The log is :mod:`bench.bench_answers`' (the same sizes and environment variables) on a real
cluster's clock (``cached_log(..., days=DAYS)``: the same records spread over about 30 days,
:mod:`kraftlake.sim.workloads.cluster_clock`), ingested once into a warehouse of its own under the answers
bench's work dir. The day timed is the log's last whole UTC day (``T1 = 00:00:00.000Z``, ``T2 =
23:59:59.999Z``); beside it, the last ``SPANS`` offsets.

Figures (medians of ``RUNS`` runs, wall time of the whole process; env ``KRAFTLAKE_BENCH_REPORT_RUNS``):

- ``report_day_<fmt>_s``: ``kraftlake report --warehouse W --from T1 --to T2 --format json|md|html --out F``
  (a file, as a user keeps a report; the bench reads it afterwards); ``report_day_json_mb`` its JSON's size;
  ``report_day_offsets``/``report_day_records``: the day's first and last offset and how many records it holds;
  ``report_day_risk_rows``: the data-at-risk rows it found;
- ``report_<n>_s``: the same in JSON over the last ``n`` offsets (``--from``/``--to`` their ISO-8601 times);
  ``report_<n>_risk_rows`` the rows found;
- ``risk_sql_<window>_s``: ``kraftlake sql --local`` running the report's data-at-risk query
  (``kraftlake.report.sql.RISK``) for the same offsets; its rows must be the report's section's (the columns the
  query selects, row for row), else the benchmark fails. ``KRAFTLAKE_BENCH_REPORT_SQL_RUNS`` (default
  ``RUNS``) runs of it, for the windows ``KRAFTLAKE_BENCH_REPORT_SQL_WINDOWS`` names (default
  ``1000,10000,day``; Spark's ``risk_windows`` over a window whose start state holds a hundred thousand open
  windows takes minutes).
"""

from __future__ import annotations

import json
import os
import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.bench_answers import BenchAnswerError, _timed, warehouse_of

RUNS = int(os.environ.get("KRAFTLAKE_BENCH_REPORT_RUNS", "3"))
SQL_RUNS = int(os.environ.get("KRAFTLAKE_BENCH_REPORT_SQL_RUNS", str(RUNS)))
#: The windows whose risk SQL runs through Spark (and must give the report's rows).
SQL_WINDOWS = os.environ.get("KRAFTLAKE_BENCH_REPORT_SQL_WINDOWS", "1000,10000,day").split(",")
#: The days the bench log's records are spread over.
DAYS = 30
#: The windows timed beside the day: the last this many offsets.
SPANS = (1_000, 10_000)
#: The columns of the risk query (``kraftlake.report.sql.RISK``), compared with the report's rows.
RISK_COLUMNS = (
    "kind",
    "topic",
    "partition",
    "leader",
    "isr",
    "min_isr",
    "min_isr_source",
    "previous_leader",
    "from_offset",
    "to_offset",
    "before_window",
)
_DAY_MS = 86_400_000


def _median(argv: list[str], runs: int = RUNS) -> tuple[float, str]:
    timed = [_timed(argv) for _ in range(runs)]
    return statistics.median(t for t, _, _ in timed), timed[0][1]


def _risk(printed: str) -> list[tuple[Any, ...]]:
    report = json.loads(printed)
    rows = next(s["rows"] for s in report["sections"] if s["key"] == "risk")
    return sorted(_plain(r) for r in rows)


def _plain(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(tuple(v) if isinstance(v, list) else v for v in (row[c] for c in RISK_COLUMNS))


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _check_sql(name: str, report_rows: list[tuple[Any, ...]], printed: str) -> None:
    sql_rows = sorted(_plain(json.loads(line)) for line in printed.splitlines() if line.strip())
    if sql_rows != report_rows:
        differ = next(
            (i for i, (a, b) in enumerate(zip(report_rows, sql_rows, strict=False)) if a != b),
            min(len(report_rows), len(sql_rows)),
        )
        raise BenchAnswerError(
            f"{name}: the report found {len(report_rows)} data-at-risk rows, its SQL through Spark "
            f"{len(sql_rows)}; first difference at row {differ}"
        )


def _ingested(work: Path) -> tuple[Path, int]:
    """The clocked warehouse and its last offset: read without Spark when it holds the whole log already (a
    session's JVM would stay up beside every timed command), else ingested (``warehouse_of``)."""
    from bench.bench_answers import RECORDS, TOPICS
    from bench.bench_image import cached_log
    from kraftlake.errors import KraftlakeError
    from kraftlake.warehouse.tables import OFFSETS, Warehouse

    log_dir = cached_log(work, RECORDS, TOPICS, DAYS)
    written = json.loads((log_dir.parent / "complete.json").read_text())["records"]
    warehouse = work / f"warehouse-{RECORDS}-{TOPICS}-{DAYS:g}d"
    try:
        held = Warehouse(warehouse).read(OFFSETS, columns=["offset"]).column("offset").to_numpy()
    except (OSError, KraftlakeError):  # not there yet, or not whole
        held = None
    if held is not None and len(held) == written and int(held.max()) == written - 1:
        return warehouse, written - 1
    return warehouse_of(work, DAYS)


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    from kraftlake.report.sql import RISK, query
    from kraftlake.warehouse.tables import OFFSETS, Warehouse

    work = Path(ctx["work_dir"]).parent / "answers"
    work.mkdir(parents=True, exist_ok=True)
    warehouse, last = _ingested(work)
    held = Warehouse(warehouse).read(OFFSETS, columns=["offset", "timestamp"]).sort_by("offset")
    offsets = held.column("offset").to_pylist()
    stamps = dict(zip(offsets, held.column("timestamp").to_pylist(), strict=True))
    day_end = stamps[last] // _DAY_MS * _DAY_MS
    day = ["--from", _iso(day_end - _DAY_MS), "--to", _iso(day_end - 1)]
    windows = {str(n): ["--from", _iso(stamps[last - n + 1]), "--to", _iso(stamps[last])] for n in SPANS}
    windows["day"] = day
    figures: dict[str, Any] = {
        "sql_windows": ",".join(SQL_WINDOWS),
        "records": last + 1,
        "days": DAYS,
        "runs": RUNS,
        "day": f"{day[1]} .. {day[3]}",
    }
    report = ["report", "--warehouse", str(warehouse)]
    for name, bounds in windows.items():
        out = work / f"report-{name}.json"
        took, _ = _median([*report, *bounds, "--format", "json", "--out", str(out)])
        figures[f"report_{name}_json_s" if name == "day" else f"report_{name}_s"] = round(took, 2)
        printed = out.read_text(encoding="utf-8")
        shown = json.loads(printed)["window"]
        lo, hi = shown["from_offset"], shown["to_offset"]
        rows = _risk(printed)
        figures[f"report_{name}_risk_rows"] = len(rows)
        if name == "day":
            figures["report_day_offsets"] = f"{lo}..{hi}"
            figures["report_day_records"] = hi - lo + 1
            figures["report_day_json_mb"] = round(len(printed) / 1e6, 1)
            for fmt in ("md", "html"):
                page = work / f"report-{name}.{fmt}"
                took, _ = _median([*report, *bounds, "--format", fmt, "--out", str(page)])
                figures[f"report_day_{fmt}_s"] = round(took, 2)
        if name not in SQL_WINDOWS:
            continue
        # a time names the first record of its batch: the SQL takes the offsets the report chose
        sql = ["sql", "--warehouse", str(warehouse), "--local", "--format", "jsonl", query(RISK, lo, hi)]
        took, printed = _median(sql, SQL_RUNS)
        figures[f"risk_sql_{name}_s"] = round(took, 2)
        _check_sql(f"the window {name} ({lo}..{hi})", rows, printed)
    figures["load_average_1m"] = round(os.getloadavg()[0], 1)
    return figures
