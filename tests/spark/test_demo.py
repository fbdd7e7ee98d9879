"""`make run`'s job on a tiny cluster: it streams, compacts, answers, and its SQL agrees with the oracle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipelines.demo import DemoConfig, run_demo


@pytest.mark.slow
def test_demo_answers_agree_with_the_image(spark: Any, tmp_path: Path) -> None:
    """``make run``'s job on a small cluster: its answers agree with the image and its validation passes.
    Slow: the whole job: a 3-voter quorum and a simulated cluster of 300 events streamed into the warehouse in
    runs restarted from their checkpoint until the cluster is done, then compaction, the questions in SQL, the
    figures and the validation suites over every table."""
    lines: list[str] = []
    config = DemoConfig(
        warehouse=tmp_path / "warehouse",
        brokers=4,
        topics=4,
        partitions_per_topic=2,
        events=300,
        stream_rounds_s=15.0,
        sample_points=4,
    )
    report = run_demo(spark, config, say=lines.append)

    assert report.sim is not None and report.sim.events == 300
    assert report.last_offset > 0
    assert report.streamed_records == report.last_offset + 1  # every offset exactly once, across restarts
    assert report.oracle_under_replicated == report.sql_under_replicated
    assert report.validation is not None and report.validation.failures == [] and report.ok
    assert any(line.startswith("validation: ") and " passed, " in line for line in lines)
    questions = [a.question for a in report.answers]
    assert questions[0] == "Under-replicated partitions over time"
    assert any(q.startswith("Brokers fenced") for q in questions)
    over_time = report.answers[0]
    assert [r[0] for r in over_time.rows] == sorted(r[0] for r in over_time.rows)
    assert any("LATERAL partitions_at" in line for line in lines)
    assert (tmp_path / "warehouse" / "_kraft" / "node-1" / "__cluster_metadata-0").is_dir()
