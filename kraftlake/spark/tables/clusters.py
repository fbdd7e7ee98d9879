"""The clusters a warehouse holds: the ``clusters`` registry (name, Kafka cluster id, when first seen, the source
it came from), the refusals of a name or a cluster id that would mix two clusters, and the name a reader or a
writer works on.

A writer names its cluster with ``--cluster NAME``, else by the cluster id its source reports (the
``meta.properties`` of a log dir, the cluster id of a service or a followed quorum). A reader needs no name on a
warehouse that holds one cluster; on one holding several it must name one.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from kraftlake.delta import append as delta_append
from kraftlake.delta.scan import arrow_schema, read_rows, table_snapshot
from kraftlake.spark.tables.layout import (
    APP_ID,
    CLUSTERS,
    WarehouseError,
    arrow_frame,
    arrow_rows,
    engine_info,
    never_written,
    schema_json,
    table_path,
)
from kraftlake.spark.tables.writes import checkpoint_later, retry_conflicts
from kraftlake.warehouse.clusters import NAME_PATTERN as NAME_PATTERN
from kraftlake.warehouse.clusters import choose, name_refusal

#: The name an old warehouse's one cluster gets when it is migrated with no source to tell its cluster id
#: (the SQL functions' registration): a writer continues it with ``--cluster default``.
DEFAULT_NAME = "default"


class ClusterError(WarehouseError):
    """Raised when a cluster's name or cluster id would mix two clusters in the warehouse (a name used for two
    cluster ids, a cluster id under two names), when a reader names a cluster the warehouse does not hold, or
    names none where the warehouse holds several."""


@dataclass(frozen=True)
class Registered:
    """A row of ``clusters``."""

    name: str
    cluster_id: str | None
    first_seen_ms: int
    source: str | None


def check_name(name: str) -> str:
    """``name`` if it may name a cluster (:data:`NAME_PATTERN`), else :class:`ClusterError`."""
    why = name_refusal(name)
    if why is not None:
        raise ClusterError(why)
    return name


def registered(spark: SparkSession, warehouse: str | Path) -> list[Registered]:
    """The rows of ``clusters``, oldest first (none when the table is missing or empty); read from its Delta log
    and files by kraftlake's reader (no Spark job), through Spark when that reader cannot read the table."""
    if not Path(table_path(warehouse, CLUSTERS), "_delta_log").is_dir() or never_written(warehouse, CLUSTERS):
        return []
    path = table_path(warehouse, CLUSTERS)
    try:
        snap = table_snapshot(path)
        rows = read_rows(snap, arrow_schema(snap)).to_pylist()
    except delta_append.Unsupported:
        rows = [r.asDict() for r in spark.read.format("delta").load(path).collect()]
    out = [Registered(r["name"], r["cluster_id"], int(r["first_seen_ms"]), r["source"]) for r in rows]
    return sorted(out, key=lambda r: (r.first_seen_ms, r.name))


def names(entries: list[Registered]) -> list[str]:
    """The clusters' names, sorted, each once."""
    return sorted({e.name for e in entries})


def _ids(entries: list[Registered], name: str) -> set[str]:
    return {e.cluster_id for e in entries if e.name == name and e.cluster_id is not None}


def refusal(entries: list[Registered], name: str, cluster_id: str | None) -> str | None:
    """Why ``name`` with ``cluster_id`` cannot be written beside ``entries``, None when it can."""
    ids = _ids(entries, name)
    if cluster_id is not None and ids and cluster_id not in ids:
        return (
            f"cluster {name!r} is cluster id {sorted(ids)[0]} in the warehouse, the source is cluster id "
            f"{cluster_id}: another cluster behind the same name; give it a name of its own with --cluster"
        )
    if cluster_id is not None:
        others = sorted({e.name for e in entries if e.cluster_id == cluster_id and e.name != name})
        if others:
            return (
                f"cluster id {cluster_id} is already in the warehouse as cluster {others[0]!r}: "
                f"name it --cluster {others[0]} (one cluster, one name)"
            )
    return None


def chosen(
    entries: list[Registered],
    warehouse: str | Path,
    wanted: Sequence[tuple[str | None, str | None, str | None]],
) -> tuple[list[Registered], list[Registered], ClusterError | None]:
    """The clusters of writers opened together, each ``(name, cluster_id, source)`` named
    (:func:`writer_name`) and checked (:func:`refusal`) in order, as if each had registered before the next
    opened: ``(their entries, the new ones among them, the refusal of the first writer refused)``. The writers
    after a refused one are not looked at; a cluster two of them would write is refused at the second."""
    held = list(entries)
    out: list[Registered] = []
    new: list[Registered] = []
    now = int(time.time() * 1000)
    for name, cluster_id, source in wanted:
        try:
            mine = writer_name(held, warehouse, name, cluster_id)
        except ClusterError as exc:
            return out, new, exc
        where = f" ({source})" if source else ""
        if any(e.name == mine for e in out):
            return out, new, ClusterError(f"cluster {mine!r} is given twice{where}: one source a cluster")
        why = refusal(held, mine, cluster_id)
        if why is not None:
            return out, new, ClusterError(f"{warehouse}: {why}")
        known = [e for e in held if e.name == mine]
        if known and (cluster_id is None or cluster_id in _ids(held, mine)):
            out.append(known[0])
            continue
        entry = Registered(mine, cluster_id, now, source)
        held.append(entry)
        new.append(entry)
        out.append(entry)
    return out, new, None


def record(spark: SparkSession, warehouse: str | Path, new: list[Registered]) -> None:
    """Append ``new`` entries to ``clusters``, all in one Delta commit (nothing when there are none).

    Committed by kraftlake's writer (:mod:`kraftlake.delta.append`, no Spark job: through Spark the append and
    Delta's snapshot and post-commit jobs on a fresh cluster's executors took a minute at load 16), under a
    transaction id of its own (a registry append is never skipped for another's); through Spark when the
    table needs more of a writer."""
    if not new:
        return
    rows = [
        {"name": e.name, "cluster_id": e.cluster_id, "first_seen_ms": e.first_seen_ms, "source": e.source}
        for e in new
    ]
    path = table_path(warehouse, CLUSTERS)
    app = f"{APP_ID}-registry/{uuid.uuid4()}"

    def append() -> None:
        done = delta_append.append(
            path,
            arrow_rows(CLUSTERS, rows),
            schema_string=schema_json(CLUSTERS),
            app_id=app,
            txn_version=0,
            engine_info=engine_info(spark),
        )
        if done.checkpoint_due:
            checkpoint_later(spark, path)

    try:
        retry_conflicts(append)
    except delta_append.Unsupported:
        arrow_frame(spark, CLUSTERS, rows).write.format("delta").mode("append").save(path)


def register(
    spark: SparkSession, warehouse: str | Path, name: str, cluster_id: str | None, source: str | None
) -> Registered:
    """Record ``name`` (with ``cluster_id`` once known) in ``clusters``, or raise :class:`ClusterError` (before
    anything of the cluster is written) when it would mix two clusters (:func:`refusal`). A name already
    recorded with its id writes nothing."""
    check_name(name)
    entries, new, refused = chosen(registered(spark, warehouse), warehouse, [(name, cluster_id, source)])
    if refused is not None:
        raise refused
    record(spark, warehouse, new)
    return entries[0]


def writer_name(
    entries: list[Registered], warehouse: str | Path, name: str | None, cluster_id: str | None
) -> str:
    """The cluster a writer writes: ``name`` (``--cluster``), else the source's cluster id, else (a source that
    tells none) the one cluster the warehouse holds, or :data:`DEFAULT_NAME` in a warehouse that holds none.

    Refused: no name and no cluster id while the warehouse holds several clusters; no name while the
    warehouse holds a cluster of unknown cluster id (migrated without a source: the writer would start another
    cluster from offset 0 where it may mean to continue that one)."""
    if name is not None:
        return check_name(name)
    unknown = sorted({e.name for e in entries if not _ids(entries, e.name)})
    if cluster_id is not None:
        known = [e.name for e in entries if e.cluster_id == cluster_id]
        if known:
            return known[0]
        if unknown:
            raise ClusterError(
                f"{warehouse}: it holds cluster {unknown[0]!r} of unknown cluster id; the source is cluster id "
                f"{cluster_id}: continue that one with --cluster {unknown[0]}, or add it with --cluster NAME"
            )
        return check_name(cluster_id)
    held = names(entries)
    if len(held) <= 1:
        return held[0] if held else DEFAULT_NAME
    raise ClusterError(
        f"{warehouse}: the source reports no cluster id and the warehouse holds {len(held)} clusters "
        f"({', '.join(held)}): name its cluster with --cluster"
    )


def reader_name(entries: list[Registered], warehouse: str | Path, name: str | None) -> str:
    """The cluster a reader reads: ``name``, which the warehouse must hold, or the one cluster it holds."""
    try:
        return choose(names(entries), warehouse, name)
    except ValueError as e:
        raise ClusterError(str(e)) from None


def log_dir_cluster_id(log_dir: str | Path) -> str | None:
    """The cluster id in the ``meta.properties`` of a log dir (given as the dir or its
    ``__cluster_metadata-0``), None when it has none."""
    from kraftlake.image.source import partition_dir
    from kraftlake.logformat import read_meta_properties

    d = partition_dir(log_dir)
    for path in (d.parent / "meta.properties", d / "meta.properties"):
        if path.is_file():
            return read_meta_properties(path).cluster_id
    return None
