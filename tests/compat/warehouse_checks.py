"""A release's log ingested into a warehouse: ``<entity>_at(N)`` equals the image replayed to N.

The Spark side of item 5 of the matrix: the controller's ``.log`` segments (from offset 0; its snapshots are left
out so the warehouse's history starts at the log's start) go through `pipelines.ingest.ingest`, and every entity
table at a few sampled offsets, the log's end among them, equals ``kraftlake.image``'s rows at the same offsets.
One Spark action per entity covers every sampled offset (``LATERAL`` over a VALUES list).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from warehouse_states import assert_entities_match

from kraftlake.history import ENTITIES
from kraftlake.image.source import log_records

SAMPLES = 5
"""Offsets compared per release: spread over the log, its last offset included."""


def copy_log(metadata_dir: Path, dest: Path) -> Path:
    """The ``.log`` segments of a (live) controller's metadata directory, copied into `dest`."""
    dest.mkdir(parents=True)
    for seg in sorted(metadata_dir.glob("*.log")):
        shutil.copyfile(seg, dest / seg.name)
    return dest


def sampled_offsets(log_dir: Path) -> list[int]:
    """`SAMPLES` record offsets spread evenly over the log, its first and last included."""
    offsets = [r.offset for r in log_records(log_dir)]
    assert offsets, f"{log_dir}: no record"
    step = max((len(offsets) - 1) / (SAMPLES - 1), 1)
    return sorted({offsets[min(round(i * step), len(offsets) - 1)] for i in range(SAMPLES)})


def check_warehouse(spark: Any, metadata_dir: Path, tmp_path: Path) -> list[int]:
    """Ingest a copy of `metadata_dir`'s log and compare every entity table with the image at sampled offsets
    (partitions, brokers and topics among them). Returns the offsets compared."""
    from pipelines.ingest import ingest
    from udfs.sql import register

    log_dir = copy_log(metadata_dir, tmp_path / "log")
    warehouse = tmp_path / "warehouse"
    result = ingest(spark, log_dir, warehouse)
    offsets = sampled_offsets(log_dir)
    assert result.last_offset >= offsets[-1]
    register(spark, warehouse)
    assert "partitions" in ENTITIES and "brokers" in ENTITIES and "topics" in ENTITIES
    images = assert_entities_match(spark, log_dir, offsets)
    # the image at the end holds what the workload left: a topic and its partitions
    assert images[offsets[-1]].topics_by_id
    return offsets
