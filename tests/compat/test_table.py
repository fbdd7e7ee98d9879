"""The README's compatibility table as ``tests/compat/table.py`` writes it from a matrix run's JUnit XML."""

from __future__ import annotations

from pathlib import Path

from compat.table import END, START, main

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.compat.test_follow_releases" name="test_follow_installs[3.3.2-static]" time="1" />
<testcase classname="tests.compat.test_follow_releases" name="test_the_delegation_token_is_the_one_kafka_created[3.3.2-static]">
<skipped type="pytest.skip" message="Kafka 3.3.2 keeps delegation tokens out of the metadata log">x</skipped></testcase>
<testcase classname="tests.compat.test_follow_releases" name="test_follow_installs[4.4.0-static]" time="1" />
<testcase classname="tests.compat.test_follow_releases" name="test_the_delegation_token_is_the_one_kafka_created[4.4.0-static]" />
<testcase classname="tests.compat.test_leader_kill" name="test_kill[4.4.0-dynamic]">
<failure message="AssertionError: mirror | differs&#10;second line">trace</failure></testcase>
<testcase classname="tests.compat.test_late_follower" name="test_late[10.0.0-static]" />
</testsuite></testsuites>"""


def test_the_table_names_passes_failures_and_why_a_case_does_not_apply(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    readme = tmp_path / "README.md"
    readme.write_text(f"before\n{START}\nold table\n{END}\nafter\n")
    assert main([str(junit), str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith(f"before\n{START}\nLast `make compat` run: ") and text.endswith(f"{END}\nafter\n")
    assert "old table" not in text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    cells = {r.split("|")[1].strip(): [c.strip() for c in r.strip("|").split("|")] for r in rows[1:]}
    # releases sorted by number, not by text
    assert list(cells) == ["3.3.2", "4.4.0", "10.0.0"]
    token = header.index("delegation token (3.6+)")
    kill = header.index("3 controllers dynamic, leader kill -9")
    static = header.index("1 node, static voters, every entity kind")
    assert cells["3.3.2"][static] == "pass" and cells["3.3.2"][token] == "n/a"
    assert cells["4.4.0"][token] == "pass"
    # a failure's first line, the table's separator replaced; a case not run is '-'
    assert cells["4.4.0"][kill] == "FAIL: AssertionError: mirror / differs"
    assert cells["3.3.2"][kill] == "-"
    assert (
        "- n/a (3.3.2, delegation token (3.6+)): Kafka 3.3.2 keeps delegation tokens out of the metadata log"
        in text
    )


def test_a_run_without_compatibility_cases_leaves_the_readme(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text('<testsuites><testsuite><testcase classname="x" name="y" /></testsuite></testsuites>')
    readme = tmp_path / "README.md"
    readme.write_text(f"{START}\nkept\n{END}\n")
    assert main([str(junit), str(readme)]) == 1
    assert readme.read_text() == f"{START}\nkept\n{END}\n"
