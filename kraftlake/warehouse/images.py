"""A cluster's image at an offset rebuilt from the warehouse without Spark: the nearest stored snapshot at or
below it, then the tail of ``metadata_log`` replayed, each read from the Delta tables by
:mod:`kraftlake.delta.scan`. The same image, and the same refusals, as the Spark rebuild
(:func:`pipelines.reconstruct.image_at_offset`); this one runs where no Spark session is, in the executor task
that resumes a fleet's cluster (:mod:`pipelines.replay_task`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kraftlake.delta.append import DeltaAppendError, Unsupported
from kraftlake.delta.rewrite import Snapshot
from kraftlake.delta.scan import Bound, arrow_schema, read_rows, table_snapshot
from kraftlake.image import EMPTY, ImageLoader, MetadataImage
from kraftlake.image.model import Provenance
from kraftlake.records import MetadataRecord, control_envelope, decode_data_envelope
from kraftlake.warehouse.cluster_ranges import column_ranges
from kraftlake.warehouse.tables import CLUSTER, LOG, OFFSETS, SNAPSHOTS, WarehouseError

#: The ``metadata_log`` columns a replay reads.
TAIL_COLUMNS = [
    "offset",
    "epoch",
    "timestamp",
    "batch_offset",
    "is_control",
    "type",
    "api_key",
    "version",
    "raw",
]
#: Offsets of ``metadata_log`` held in memory at a time when replaying a tail.
TAIL_CHUNK = 250_000


def decoded(rows: Iterable[dict[str, Any]], source: str) -> Iterator[MetadataRecord]:
    """``metadata_log`` rows (dicts of :data:`TAIL_COLUMNS`) as the records they store."""
    for r in rows:
        raw = bytes(r["raw"])
        if r["is_control"]:
            yield control_envelope(
                r["api_key"],
                raw,
                r["offset"],
                r["epoch"],
                r["timestamp"],
                r["batch_offset"],
                source=source,
                position=None,
            )
        else:
            yield decode_data_envelope(
                raw, r["offset"], r["epoch"], r["timestamp"], r["batch_offset"], source=source, position=None
            )


def _table(warehouse: Path, name: str) -> Snapshot:
    """A table's snapshot; a table that cannot be read as :class:`WarehouseError` (what this reader does not
    implement, :class:`~kraftlake.delta.append.Unsupported`, unchanged)."""
    try:
        return table_snapshot(warehouse / name)
    except Unsupported:
        raise
    except (DeltaAppendError, OSError) as exc:
        raise WarehouseError(f"{warehouse / name}: cannot be read: {exc}") from exc


def readable(warehouse: str | Path) -> bool:
    """Whether the tables an image is rebuilt from can be read without Spark (no Delta feature this reader
    lacks)."""
    try:
        for name in (SNAPSHOTS, LOG, OFFSETS):
            _table(Path(warehouse), name)
    except Unsupported:
        return False
    return True


def stored_snapshot(snap: Snapshot, warehouse: Path, cluster: str, snapshot_offset: int) -> MetadataImage:
    """The image of ``cluster`` stored in ``snapshots`` at ``snapshot_offset``."""
    bounds = (Bound(CLUSTER, "==", cluster), Bound("snapshot_offset", "==", int(snapshot_offset)))
    rows = read_rows(snap, arrow_schema(snap), bounds, ["epoch", "timestamp", "seq", "raw"]).sort_by("seq")
    if rows.num_rows == 0:
        raise WarehouseError(f"no snapshot of cluster {cluster} at offset {snapshot_offset}")
    epoch, ts = rows.column("epoch")[0].as_py(), rows.column("timestamp")[0].as_py()
    source = f"{SNAPSHOTS} of {warehouse} (cluster {cluster}) at {snapshot_offset}"
    loader = ImageLoader(EMPTY)
    for raw in rows.column("raw").to_pylist():
        loader.feed(
            decode_data_envelope(
                raw, snapshot_offset, epoch, ts, snapshot_offset, source=source, position=None
            )
        )
    return loader.image().with_provenance(Provenance(snapshot_offset, epoch, ts))


def image_at_offset(warehouse: str | Path, cluster: str, offset: int) -> MetadataImage:
    """The image of ``cluster`` at ``offset`` (including its record) rebuilt from the warehouse's tables.

    Raises :class:`WarehouseError` when ``offset`` lies before the retained history (no snapshot at or below
    it and the log's rows start later) or after the last ingested offset, or a table cannot be read.
    """
    root = Path(warehouse)
    of = Bound(CLUSTER, "==", cluster)
    snaps, log = _table(root, SNAPSHOTS), _table(root, LOG)
    held = read_rows(
        snaps, arrow_schema(snaps), (of, Bound("snapshot_offset", "<=", int(offset))), ["snapshot_offset"]
    )
    snap_offset = max(held.column("snapshot_offset").to_pylist(), default=None)
    start = -1 if snap_offset is None else int(snap_offset)
    if snap_offset != offset:
        lo, hi = column_ranges(log, "offset").get(cluster, (None, None))
        if hi is None or offset > hi:
            raise WarehouseError(f"offset {offset} is after the last ingested offset ({hi})")
        if snap_offset is not None:
            first = start + 1
        else:
            first = column_ranges(_table(root, OFFSETS), "offset").get(cluster, (0, 0))[0]
        if lo is None or lo > first:
            where = (
                "no snapshot is at or below it"
                if snap_offset is None
                else f"the snapshot is at {snap_offset}"
            )
            raise WarehouseError(
                f"offset {offset} lies before the retained history: the log starts at {lo} and {where}"
            )
    image = EMPTY if snap_offset is None else stored_snapshot(snaps, root, cluster, start)
    loader = ImageLoader(image)
    schema, source = arrow_schema(log), f"{LOG} of {warehouse}"
    pos = start
    while pos < offset:
        upto = min(int(offset), pos + TAIL_CHUNK)
        bounds = (of, Bound("offset", ">", pos), Bound("offset", "<=", upto))
        chunk = read_rows(log, schema, bounds, TAIL_COLUMNS).sort_by("offset")
        loader.feed_all(decoded(chunk.to_pylist(), source))
        pos = upto
    return loader.image()
