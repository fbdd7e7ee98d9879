"""The live benches' bookkeeping: each record's commit-to-queryable latency, the records behind at a time, and
the split of a cluster's log into its creation and its churn."""

from __future__ import annotations

from pathlib import Path

from bench.cluster_rate import cluster_records
from bench.commit_latency import Commit, behind_at, latencies, quantile, summary

# offsets 0-3 appended at 100.0-100.3, 4-7 at 101.0-101.3; three micro-batches
APPENDED = {o: 100.0 + o // 4 + (o % 4) / 10 for o in range(8)}
COMMITS = [Commit(0, 2, 102.0), Commit(3, 5, 103.5), Commit(6, 7, 104.0)]


def test_a_record_is_queryable_from_the_first_commit_that_holds_it() -> None:
    # a replayed micro-batch committed again later holds offsets already queryable: they keep the first time
    lat = latencies([*COMMITS, Commit(0, 7, 110.0)], APPENDED)
    assert sorted(lat) == list(range(8))
    assert all(abs(lat[o] - v) < 1e-9 for o, v in _expected().items())


def _expected() -> dict[int, float]:
    at = {0: 102.0, 1: 102.0, 2: 102.0, 3: 103.5, 4: 103.5, 5: 103.5, 6: 104.0, 7: 104.0}
    return {o: at[o] - APPENDED[o] for o in range(8)}


def test_records_no_commit_holds_have_no_latency() -> None:
    lat = latencies(COMMITS[:2], APPENDED)
    assert sorted(lat) == [0, 1, 2, 3, 4, 5]
    # an offset committed but never appended (read back from another table) is not counted either
    assert sorted(latencies([Commit(0, 9, 105.0)], APPENDED)) == list(range(8))


def test_behind_counts_what_was_appended_and_not_yet_committed() -> None:
    assert behind_at(COMMITS, APPENDED, 99.0) == 0  # nothing appended yet
    assert behind_at(COMMITS, APPENDED, 101.15) == 6  # 0-5 appended, no commit yet
    assert behind_at(COMMITS, APPENDED, 102.0) == 5  # 0-2 committed at 102.0; 3-7 appended by 101.3
    assert behind_at(COMMITS, APPENDED, 103.6) == 2  # up to 5 committed; 6 and 7 appended
    assert behind_at(COMMITS, APPENDED, 104.0) == 0


def test_the_summary_takes_nearest_rank_quantiles() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # unsorted on purpose
    assert quantile(values, 0.99) == 99.0
    assert quantile(values, 0.0) == 1.0 and quantile(values, 1.0) == 100.0
    assert summary(values, "steady_") == {"steady_p50_s": 51.0, "steady_p99_s": 99.0, "steady_max_s": 100.0}
    assert summary([], "x_") == {"x_p50_s": None, "x_p99_s": None, "x_max_s": None}


def test_a_log_splits_into_its_creation_and_its_churn_in_log_order(tmp_path: Path) -> None:
    from kraftlake.image.source import log_records
    from kraftlake.sim.workloads.churn import generate_log

    log_dir = tmp_path / "__cluster_metadata-0"
    generate_log(log_dir, 1500, 3, seed=5)
    creation, churn = cluster_records(log_dir, steady=50, burst=30)
    written = [mr for mr in log_records(log_dir) if not mr.is_control and mr.type != "NoOpRecord"]
    types = [mr.type for mr in written]
    first_change = min(types.index(t) for t in ("PartitionChangeRecord", "ConfigRecord") if t in types)
    assert creation == [mr.raw for mr in written[:first_change]]
    assert "PartitionRecord" in types[:first_change]
    assert churn == [mr.raw for mr in written[first_change : first_change + 80]]
