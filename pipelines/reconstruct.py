"""State at an offset from the warehouse: the nearest snapshot at or below it plus the tail of ``metadata_log``."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from kraftlake.image import EMPTY, ImageLoader, MetadataImage
from kraftlake.image.model import Provenance
from kraftlake.records import decode_data_envelope
from kraftlake.spark.tables.layout import (
    CLUSTER,
    LOG,
    OFFSETS,
    SNAPSHOTS,
    WarehouseError,
    sql_string,
    table_ref,
)
from kraftlake.warehouse import images
from kraftlake.warehouse.images import decoded

_TAIL_COLUMNS = "offset, epoch, timestamp, batch_offset, is_control, type, api_key, version, raw"
#: Offsets of ``metadata_log`` read into the driver at a time when replaying a tail.
TAIL_CHUNK = 250_000


def _of(cluster: str) -> str:
    return f"{CLUSTER} = {sql_string(cluster)}"


def snapshot_image(
    spark: SparkSession, warehouse: str | Path, cluster: str, snapshot_offset: int
) -> MetadataImage:
    """The image of ``cluster`` stored in ``snapshots`` at ``snapshot_offset``."""
    table = spark.sql(
        f"SELECT epoch, timestamp, seq, raw FROM {table_ref(warehouse, SNAPSHOTS)} "
        f"WHERE {_of(cluster)} AND snapshot_offset = {int(snapshot_offset)} ORDER BY seq"
    ).toArrow()
    if table.num_rows == 0:
        raise WarehouseError(f"no snapshot of cluster {cluster} at offset {snapshot_offset}")
    loader = ImageLoader(EMPTY)
    epoch, ts = table.column("epoch")[0].as_py(), table.column("timestamp")[0].as_py()
    source = f"{SNAPSHOTS} of {warehouse} (cluster {cluster}) at {snapshot_offset}"
    for raw in table.column("raw").to_pylist():
        loader.feed(
            decode_data_envelope(
                raw, snapshot_offset, epoch, ts, snapshot_offset, source=source, position=None
            )
        )
    return loader.image().with_provenance(Provenance(snapshot_offset, epoch, ts))


def log_bounds(spark: SparkSession, warehouse: str | Path, cluster: str) -> tuple[int | None, int | None]:
    row = spark.sql(
        f"SELECT min(offset) AS lo, max(offset) AS hi FROM {table_ref(warehouse, LOG)} WHERE {_of(cluster)}"
    ).first()
    return (None, None) if row is None else (row["lo"], row["hi"])


def _first_offset(spark: SparkSession, warehouse: str | Path, cluster: str) -> int:
    row = spark.sql(
        f"SELECT min(offset) AS m FROM {table_ref(warehouse, OFFSETS)} WHERE {_of(cluster)}"
    ).first()
    return 0 if row is None or row["m"] is None else int(row["m"])


def image_at_offset(spark: SparkSession, warehouse: str | Path, cluster: str, offset: int) -> MetadataImage:
    """The image of ``cluster`` at ``offset`` (including its record) rebuilt from the warehouse tables: by
    kraftlake's Delta reader (:func:`kraftlake.warehouse.images.image_at_offset`), through Spark
    (:func:`image_at_offset_in_spark`) where that reader cannot read the tables."""
    if images.readable(warehouse):
        return images.image_at_offset(warehouse, cluster, offset)
    return image_at_offset_in_spark(spark, warehouse, cluster, offset)


def image_at_offset_in_spark(
    spark: SparkSession, warehouse: str | Path, cluster: str, offset: int
) -> MetadataImage:
    """The image of ``cluster`` at ``offset`` (including its record) rebuilt from the warehouse tables by Spark
    queries.

    Raises
    ------
    WarehouseError
        When ``offset`` lies before the retained history (no snapshot at or below it and the log's rows
        start later) or after the last ingested offset.
    """
    snap = spark.sql(
        f"SELECT max(snapshot_offset) AS s FROM {table_ref(warehouse, SNAPSHOTS)} "
        f"WHERE {_of(cluster)} AND snapshot_offset <= {int(offset)}"
    ).first()
    snap_offset = None if snap is None else snap["s"]
    lo, hi = log_bounds(spark, warehouse, cluster)
    image = EMPTY if snap_offset is None else snapshot_image(spark, warehouse, cluster, snap_offset)
    start = -1 if snap_offset is None else snap_offset
    if snap_offset != offset:
        if hi is None or offset > hi:
            raise WarehouseError(f"offset {offset} is after the last ingested offset ({hi})")
        first = start + 1 if snap_offset is not None else _first_offset(spark, warehouse, cluster)
        if lo is None or lo > first:
            raise WarehouseError(
                f"offset {offset} lies before the retained history: the log starts at {lo} and "
                + (
                    "no snapshot is at or below it"
                    if snap_offset is None
                    else f"the snapshot is at {snap_offset}"
                )
            )
    loader = ImageLoader(image)
    # the tail in offset ranges, each collected as Arrow: memory stays one range whatever the tail's length (a
    # sorted toLocalIterator of 10M rows pickled a whole sorted partition in the driver JVM and ran out of heap)
    pos = start
    while pos < offset:
        upto = min(int(offset), pos + TAIL_CHUNK)
        chunk = (
            spark.sql(
                f"SELECT {_TAIL_COLUMNS} FROM {table_ref(warehouse, LOG)} "
                f"WHERE {_of(cluster)} AND offset > {pos} AND offset <= {upto}"
            )
            .toArrow()
            .sort_by("offset")
        )
        loader.feed_all(decoded(chunk.to_pylist(), f"{LOG} of {warehouse}"))
        pos = upto
    return loader.image()


def write_entities(
    spark: SparkSession, image: MetadataImage, out: str | Path, fmt: str = "delta"
) -> dict[str, int]:
    """The entities of ``image`` as tables under ``out`` (the history tables' columns, ``from_offset`` omitted)."""
    from kraftlake.history import ENTITIES, entity_rows
    from kraftlake.spark.tables.layout import arrow_frame

    counts = {}
    for table, rows in entity_rows(image).items():
        full = [{**r, "from_offset": image.offset, "to_offset": None} for r in rows]
        df = arrow_frame(spark, table, full, "").select(*(f"`{c}`" for c in ENTITIES[table].names))
        df.write.format(fmt).mode("overwrite").save(str(Path(out) / table))
        counts[table] = len(rows)
    return counts
