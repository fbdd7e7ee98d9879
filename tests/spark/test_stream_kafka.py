"""``stream --source kafka``: a live Kafka 4.3.1 followed over its controller listener into the warehouse.

While Kafka's own tools change the cluster, the stream's tables answer ``<entity>_at(N)`` as the oracle's
image of the controller's own log at N, for offsets from the snapshot the mirror started from to the end.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from peers.kafka import WORKLOAD, KafkaPeer
from spark.test_warehouse import assert_state_matches

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaPeer]:
    with KafkaPeer(Path(tmp_path_factory.mktemp("stream-kafka"))) as peer:
        peer.format()
        peer.start()
        for step in WORKLOAD[:3]:
            peer.admin(step)
        # the mirror starts from the controller's snapshot: on a loaded machine it may not have written one yet
        peer.wait_for_snapshot_after([0], timeout=60)
        yield peer


@pytest.mark.slow
def test_stream_a_live_cluster(spark: Any, kafka: KafkaPeer, tmp_path: Path) -> None:
    """The stream of a live Kafka cluster answers as the image of the controller's own log.
    Slow: the module's broker is started first (a Kafka JVM, three admin tools run, its first snapshot waited
    for); the stream then runs while eight more admin tools run, each a JVM, and until the controller's log
    (its NoOps included) is 30 offsets past where it ended at the start; a second run waits for 20 more; then
    every entity asked at up to 8 offsets."""
    from kraftlake.spark.tables.bounds import last_offset
    from pipelines.stream import stream
    from udfs.sql import register

    warehouse = tmp_path / "wh"
    options = {"bootstrapController": f"127.0.0.1:{kafka.controller_port}", "clusterId": kafka.cluster_id}
    changes = threading.Thread(target=lambda: [kafka.admin(step) for step in WORKLOAD[3:]])
    results: list[Any] = []
    errors: list[BaseException] = []

    def run(until: int | None, timeout: float) -> None:
        try:
            results.append(
                stream(
                    spark,
                    "kafka",
                    options,
                    warehouse,
                    trigger_interval_s=0.5,
                    until_offset=until,
                    timeout_s=timeout,
                    fold_at=None,
                )
            )
        except BaseException as exc:
            errors.append(exc)

    # a first run while the workload goes on, up to an offset ahead of the controller's log end when it starts
    # (a NoOp every 500 ms gets there); a second run resumes from the commit point
    from kraftlake.spark.logtail_source import SegmentIndex

    target = SegmentIndex(str(kafka.log_dir / "__cluster_metadata-0")).refresh() + 30
    streaming = threading.Thread(target=run, args=(target, 600.0))
    streaming.start()
    changes.start()
    changes.join()
    streaming.join()
    assert not errors, errors
    first = last_offset(spark, warehouse, kafka.cluster_id)
    mirror = warehouse / "_kafka_mirror" / "__cluster_metadata-0"
    start = min(int(p.name.split("-")[0]) for p in mirror.glob("*.checkpoint"))
    assert first >= target > start
    run(first + 20, 600.0)
    assert not errors, errors
    done = last_offset(spark, warehouse, kafka.cluster_id)
    assert done >= first + 20
    register(spark, warehouse)
    rng = random.Random(7)
    offsets = sorted({start, first, done, *(rng.randint(start, done) for _ in range(5))})
    assert_state_matches(spark, kafka.log_dir, offsets)


def test_idle_stop_ignores_the_controllers_noops_and_one_stream_per_warehouse(
    spark: Any, kafka: KafkaPeer, tmp_path: Path
) -> None:
    """Issue 29: ``--idle-stop`` means "nothing but NoOps committed for that long" (a controller appends one every
    500 ms, so "no new batch" never came); a second stream of the cluster is refused naming the holder."""
    import os
    import time

    from kraftlake.follow.lock import LockedError, stream_lock
    from pipelines.stream import stream

    warehouse = tmp_path / "wh"
    options = {"bootstrapController": f"127.0.0.1:{kafka.controller_port}", "clusterId": kafka.cluster_id}
    warehouse.mkdir()
    with (
        stream_lock(warehouse, kafka.cluster_id),
        pytest.raises(LockedError, match=f"process {os.getpid()}"),
    ):
        stream(spark, "kafka", options, warehouse, trigger_interval_s=0.5, timeout_s=60, fold_at=None)
    t0 = time.monotonic()
    result = stream(
        spark, "kafka", options, warehouse, trigger_interval_s=0.5, idle_stop_s=3, timeout_s=240, fold_at=None
    )
    assert time.monotonic() - t0 < 200  # stopped as idle, not at the timeout
    # NoOps kept arriving and were committed meanwhile
    assert result.batches >= 1 and result.last_offset > 0
