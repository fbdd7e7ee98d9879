"""What the SQL functions' guards read (the clusters registry, each cluster's ``bounds``, which entities have
pending ``closes``) read from the Delta tables without Spark, so that a server can hand them to a query as
literals (:mod:`udfs.sql`'s ``known``): a literal costs no Delta scan planning and no Spark job, and lets the
optimizer fold a guard that passes and skip the other clusters' files.

:class:`GuardCache` rereads them only when one of the three tables has a new version (a listing of their Delta
logs), else answers from memory.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftlake.delta.append import Unsupported
from kraftlake.delta.rewrite import Snapshot
from kraftlake.delta.scan import arrow_schema, read_rows, table_snapshot
from kraftlake.warehouse.answers import Limits, limits_of_rows
from kraftlake.warehouse.tables import BOUNDS, CLOSES, CLUSTER

#: The clusters registry's table (``kraftlake.spark.tables.layout.CLUSTERS``).
CLUSTERS = "clusters"
TABLES = (BOUNDS, CLOSES, CLUSTERS)
_COMMIT = re.compile(r"(\d{20})\.json")


@dataclass(frozen=True)
class GuardValues:
    """The registry's cluster names (sorted), each cluster's :class:`~kraftlake.warehouse.answers.Limits`
    (a cluster without a ``bounds`` row has none: the whole log, nothing committed), and per entity the
    clusters having a pending close of it at or before their commit point (``closes`` past it cannot change an
    answer the guard lets through; every close when nothing is committed)."""

    clusters: tuple[str, ...]
    limits: Mapping[str, Limits]
    closes: Mapping[str, tuple[str, ...]]

    def limits_of(self, cluster: str) -> Limits:
        return self.limits.get(cluster, Limits(-1, None, None, None))


def _read(snap: Snapshot, columns: list[str]) -> dict[str, list[Any]]:
    schema = arrow_schema(snap)
    missing = [c for c in columns if c not in schema.names]
    if missing:
        # a warehouse of an earlier layout: Spark's readers migrate it when they open it
        raise Unsupported(f"{snap.path} has no column {', '.join(missing)}")
    rows: dict[str, list[Any]] = read_rows(snap, schema, columns=columns).to_pydict()
    return rows


def read_guard_values(warehouse: str | Path) -> GuardValues:
    """:class:`GuardValues` of ``warehouse`` as its tables are now. ``bounds`` is read before ``closes``: a
    close appended meanwhile lies past the commit point read, where the guard refuses.

    Raises :class:`~kraftlake.delta.append.Unsupported` for a table this reader cannot read, and
    :class:`~kraftlake.delta.append.DeltaAppendError` (or ``OSError``) for one it cannot open: the caller
    leaves the functions as they are then.
    """
    root = Path(warehouse)
    cols = ["committed_to", "retained_from", "gap_from", "gap_to"]
    bounds = _read(table_snapshot(root / BOUNDS), [CLUSTER, *cols])
    by_cluster: dict[str, dict[str, list[int | None]]] = {}
    for i, name in enumerate(bounds[CLUSTER]):
        into = by_cluster.setdefault(name, {c: [] for c in cols})
        for c in cols:
            into[c].append(bounds[c][i])
    limits = {name: limits_of_rows(rows) for name, rows in by_cluster.items()}
    closes = _read(table_snapshot(root / CLOSES), [CLUSTER, "entity", "to_offset"])
    pending: dict[str, set[str]] = {}
    for name, entity, to in zip(closes[CLUSTER], closes["entity"], closes["to_offset"], strict=True):
        committed = limits[name].committed if name in limits else None
        if committed is None or to is None or to <= committed:
            pending.setdefault(entity, set()).add(name)
    names = _read(table_snapshot(root / CLUSTERS), ["name"])["name"]
    return GuardValues(
        tuple(sorted({n for n in names if n is not None})),
        limits,
        {entity: tuple(sorted(of)) for entity, of in pending.items()},
    )


def table_versions(warehouse: str | Path) -> tuple[int, ...]:
    """The newest commit of each of :data:`TABLES` (-1: none), from a listing of their Delta logs."""
    out = []
    for table in TABLES:
        log = Path(warehouse, table, "_delta_log")
        found = (
            [int(m.group(1)) for p in log.iterdir() if (m := _COMMIT.fullmatch(p.name))]
            if log.is_dir()
            else []
        )
        out.append(max(found, default=-1))
    return tuple(out)


class GuardCache:
    """:func:`read_guard_values` of one warehouse, reread when :func:`table_versions` changes (thread-safe: a
    server answers requests on threads of their own)."""

    def __init__(self, warehouse: str | Path) -> None:
        self.warehouse = Path(warehouse)
        self._lock = threading.Lock()
        self._key: tuple[int, ...] | None = None
        self._values: GuardValues | None = None

    def values(self) -> GuardValues:
        with self._lock:
            key = table_versions(self.warehouse)
            if self._values is None or key != self._key:
                self._values = read_guard_values(self.warehouse)
                self._key = key
            return self._values
