"""Write the README's compatibility table from the last matrix run (``make compat``'s JUnit XML).

    python tests/compat/table.py JUNIT_XML README.md

Rows are releases, columns the cases of ``tests/compat`` (single node static / dynamic, its log in a warehouse, a
late follower that installs a snapshot, three controllers with a leader kill, a delegation token, a ZooKeeper
migration's log); a cell is ``pass``, ``FAIL`` (with the first line of the failure), ``n/a`` (the case skipped
itself: the release cannot have it; its reason is listed under the table) or ``-`` (no such case for
the release: no dynamic quorum before 3.9, a ZooKeeper migration in 3.4-3.9 only). The table replaces what is between the ``compat-table`` markers of the README.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

START = "<!-- compat-table:start (written by make compat from its last run; do not edit) -->"
END = "<!-- compat-table:end -->"
COLUMNS = {
    ("test_follow_releases", "static"): "1 node, static voters, every entity kind",
    (
        "test_follow_releases.test_warehouse_states_equal_the_image",
        "static",
    ): "warehouse `<entity>_at(N)` = image",
    ("test_follow_dynamic", "dynamic"): "1 node, dynamic (--standalone)",
    ("test_leader_kill", "static"): "3 controllers static, leader kill -9",
    ("test_leader_kill", "dynamic"): "3 controllers dynamic, leader kill -9",
    ("test_late_follower", "static"): "late follower, segments deleted: installs the snapshot",
    (
        "test_follow_releases.test_the_delegation_token_is_the_one_kafka_created",
        "static",
    ): "delegation token (3.6+)",
    ("test_zk_migration", "static"): "ZooKeeper migration log (3.4-3.9)",
}
"""(module, quorum) or (module.test function, quorum) -> column: a test function named here has its own column,
the module's other tests share the module's."""
_CASE = re.compile(r"\[(?P<version>\d+\.\d+\.\d+)-(?P<quorum>static|dynamic)\]$")


def results(junit: Path, reasons: dict[str, str] | None = None) -> dict[str, dict[str, str]]:
    """release -> column -> cell; ``reasons`` gets each skipped case's reason, by release and column."""
    out: dict[str, dict[str, str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        m = _CASE.search(case.get("name", ""))
        module = case.get("classname", "").rsplit(".", 1)[-1]
        function = case.get("name", "").split("[", 1)[0]
        if m is None:
            continue
        column = COLUMNS.get((f"{module}.{function}", m["quorum"])) or COLUMNS.get((module, m["quorum"]))
        if column is None:
            continue
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if failure is not None:
            first = (failure.get("message") or "failed").splitlines()[0][:80].replace("|", "/")
            cell = f"FAIL: {first}"
        elif (skipped := case.find("skipped")) is not None:
            cell = "n/a"
            if reasons is not None:
                reason = (skipped.get("message") or "skipped").removeprefix("Skipped: ").splitlines()[0]
                reasons[f"{m['version']}, {column}"] = reason
        else:
            cell = "pass"
        cells = out.setdefault(m["version"], {})
        if cells.get(column, "pass") == "pass" or cell.startswith(
            "FAIL"
        ):  # a module's failure wins its column
            cells[column] = cell
    return out


def table(rows: dict[str, dict[str, str]], when: str, reasons: dict[str, str] | None = None) -> str:
    cols = list(COLUMNS.values())
    lines = [
        f"Last `make compat` run: {when}.",
        "",
        "| Kafka | " + " | ".join(cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for version in sorted(rows, key=lambda v: tuple(int(p) for p in v.split("."))):
        cells = [rows[version].get(c, "-") for c in cols]
        lines.append(f"| {version} | " + " | ".join(cells) + " |")
    if reasons:
        lines.append("")
        lines.extend(f"- n/a ({where}): {why}" for where, why in reasons.items())
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    junit, readme = Path(argv[0]), Path(argv[1])
    reasons: dict[str, str] = {}
    rows = results(junit, reasons)
    if not rows:
        print(f"{junit}: no compatibility cases in it; README left as it was", file=sys.stderr)
        return 1
    when = datetime.fromtimestamp(junit.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = readme.read_text()
    if START not in text or END not in text:
        print(f"{readme}: no compat-table markers", file=sys.stderr)
        return 1
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{START}\n{table(rows, when, reasons)}\n{END}{tail}")
    print(f"{readme}: compatibility table of {len(rows)} releases written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
