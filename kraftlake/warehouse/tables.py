"""A warehouse's Delta tables read without Spark: their names, the cluster a reader answers for, and the
rows of a table that satisfy a filter (:mod:`kraftlake.delta.scan`), that cluster's alone."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from kraftlake.delta.append import DeltaAppendError, Unsupported
from kraftlake.delta.rewrite import Snapshot
from kraftlake.delta.scan import Bound, arrow_schema, read_rows, table_snapshot
from kraftlake.errors import KraftlakeError
from kraftlake.warehouse.clusters import choose

# the names of kraftlake.spark.tables.layout, which imports Spark (tests check that both agree)
LOG = "metadata_log"
OFFSETS = "offsets"
SNAPSHOTS = "snapshots"
CLOSES = "closes"
BOUNDS = "bounds"
#: Separates the values of an entity key in ``closes.key`` (:func:`close_key`).
KEY_SEP = "\x01"
#: The column naming the cluster a row belongs to, in a warehouse that holds more than one.
CLUSTER = "cluster"


class WarehouseError(KraftlakeError):
    """Raised when the warehouse cannot answer: a path that holds no warehouse, a table that cannot be read, an
    offset or a time outside the history it holds, a cluster it does not hold or that must be named."""


#: A table this reader cannot read correctly (a Delta feature it does not implement): Spark can.
NeedsSpark = Unsupported


def close_key(values: tuple[object, ...]) -> str:
    """An entity key as ``closes.key`` stores it: the values as Spark casts them to strings, joined."""
    return KEY_SEP.join(str(v) for v in values)


def check_warehouse(warehouse: str | Path) -> Path:
    """``warehouse`` when it holds the warehouse's log table, else :class:`WarehouseError`."""
    path = Path(warehouse)
    if not path.exists():
        raise WarehouseError(f"warehouse {warehouse} does not exist: `kraftlake ingest` or `demo` makes one")
    if not (path / LOG / "_delta_log").is_dir():
        raise WarehouseError(
            f"{warehouse} is not a kraftlake warehouse (no Delta table {LOG}/ in it): `kraftlake ingest` or "
            "`demo` makes one"
        )
    return path


@dataclass
class Warehouse:
    """The tables of the warehouse at ``path`` as read for one answer (each table's snapshot read once).

    ``cluster``: the cluster answered for, in a warehouse whose tables carry a ``cluster`` column; None there
    is refused when ``bounds`` names more than one cluster (:meth:`resolve_cluster`).
    """

    path: Path
    cluster: str | None = None
    _snapshots: dict[str, Snapshot] = field(default_factory=dict, repr=False)
    _resolved: bool = field(default=False, repr=False)

    def snapshot(self, table: str) -> Snapshot:
        if table not in self._snapshots:
            where = self.path / table
            if not (where / "_delta_log").is_dir():
                if table == BOUNDS:
                    # a warehouse made before bounds: the Spark path fills it from offsets and retention
                    raise Unsupported(f"{self.path} has no {BOUNDS} table yet")
                raise WarehouseError(f"{self.path} has no table {table} (no {where}/_delta_log)")
            with _unreadable():
                self._snapshots[table] = table_snapshot(where)
        return self._snapshots[table]

    def unreadable(self, tables: Iterable[str]) -> str | None:
        """Why this reader cannot read one of ``tables`` (a Delta feature it does not implement: Spark can),
        None when it can read every one the warehouse has."""
        for table in tables:
            if (self.path / table / "_delta_log").is_dir():
                try:
                    self.snapshot(table)
                except Unsupported as exc:
                    return str(exc)
        return None

    def has_clusters(self) -> bool:
        """Whether the tables carry a ``cluster`` column (``bounds`` tells for all of them)."""
        return CLUSTER in arrow_schema(self.snapshot(BOUNDS)).names

    def clusters(self) -> list[str]:
        """The clusters ``bounds`` names, sorted."""
        names = read_rows(self.snapshot(BOUNDS), arrow_schema(self.snapshot(BOUNDS)), columns=[CLUSTER])
        return sorted({c for c in names.column(CLUSTER).to_pylist() if c is not None})

    def resolve_cluster(self, known: list[str] | None = None) -> None:
        """Check the cluster asked for against those ``bounds`` names (each cluster publishes its commit point
        there; ``known``: :meth:`clusters` when already read): an unknown one, or none asked for among several,
        is refused naming them."""
        if self._resolved:
            return
        if not self.has_clusters():
            # made by an earlier kraftlake: Spark's readers migrate it once, in place, then this reader reads it
            raise NeedsSpark(
                f"{self.path} was made by an earlier kraftlake (its tables have no {CLUSTER} column)"
            )
        else:
            known = self.clusters() if known is None else known
            if known or self.cluster is not None:
                try:
                    # the one cluster held is named in the refusals, as the functions do
                    self.cluster = choose(known, self.path, self.cluster)
                except ValueError as e:
                    raise WarehouseError(str(e)) from None
        self._resolved = True

    def read(self, table: str, bounds: tuple[Bound, ...] = (), columns: list[str] | None = None) -> pa.Table:
        """The live rows of ``table`` (of the cluster answered for) that satisfy every one of ``bounds``."""
        self.resolve_cluster()
        snap = self.snapshot(table)
        schema = arrow_schema(snap)
        if self.cluster is not None and CLUSTER in schema.names:
            bounds = (Bound(CLUSTER, "==", self.cluster), *bounds)
        with _unreadable():
            return read_rows(snap, schema, bounds, columns)


@contextmanager
def _unreadable() -> Iterator[None]:
    """A table that cannot be read (a commit cut short, a data file gone) as :class:`WarehouseError`; what this
    reader does not implement (:class:`~kraftlake.delta.append.Unsupported`) unchanged, for a caller that can
    ask Spark instead."""
    try:
        yield
    except Unsupported:
        raise
    except DeltaAppendError as exc:
        raise WarehouseError(str(exc)) from exc
