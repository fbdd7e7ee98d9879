"""Each cluster's lowest and highest value of an integer column of a warehouse table (its offsets, its
``from_offset`` s), read from the table's Delta log without Spark: a writer opening many clusters at once learns
every cluster's commit point from two logs instead of one Spark query per cluster and table.

A data file's ``add`` statistics answer for it when they are exact: the file holds one cluster (its ``cluster``
minimum equals its maximum and is shorter than the prefix Delta truncates strings to), has no deletion vector
(rows deleted since leave its bounds wide) and has the column's minimum and maximum. Any other file is read
(those two columns, its deletion vector applied).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kraftlake.delta.rewrite import Snapshot, stats_of
from kraftlake.delta.scan import arrow_schema, read_rows
from kraftlake.warehouse.tables import CLUSTER

#: Delta truncates a string's statistics to this many characters (delta-spark's ``stringPrefixLength``):
#: a bound this long may be a prefix, not the value.
STRING_PREFIX = 32


def _exact(stats: dict[str, Any] | None, column: str) -> tuple[str, int, int] | None:
    """(cluster, min, max) of ``column`` from a file's statistics, None when they do not tell them exactly."""
    if stats is None:
        return None
    lows, highs = stats.get("minValues") or {}, stats.get("maxValues") or {}
    one = lows.get(CLUSTER)
    if not isinstance(one, str) or one != highs.get(CLUSTER) or len(one) >= STRING_PREFIX:
        return None
    lo, hi = lows.get(column), highs.get(column)
    if not isinstance(lo, int) or not isinstance(hi, int):
        return None
    return one, lo, hi


def _merge(out: dict[str, tuple[int, int]], cluster: str, lo: int, hi: int) -> None:
    seen = out.get(cluster)
    out[cluster] = (lo, hi) if seen is None else (min(seen[0], lo), max(seen[1], hi))


def column_ranges(snap: Snapshot, column: str) -> dict[str, tuple[int, int]]:
    """Each cluster's (lowest, highest) non-null ``column`` among the live rows of ``snap``; a cluster without
    one is left out."""
    out: dict[str, tuple[int, int]] = {}
    unread: dict[tuple[str, str], dict[str, Any]] = {}
    for key, add in snap.files.items():
        exact = None if add.get("deletionVector") else _exact(stats_of(add), column)
        if exact is None:
            unread[key] = add
        else:
            _merge(out, *exact)
    if unread:
        rest = Snapshot(snap.path, snap.version, unread, snap.metadata, snap.protocol)
        rows = read_rows(rest, arrow_schema(rest), columns=[CLUSTER, column])
        rows = rows.filter(pc.and_(pc.is_valid(rows.column(CLUSTER)), pc.is_valid(rows.column(column))))
        if rows.num_rows:
            grouped = pa.TableGroupBy(rows, CLUSTER).aggregate([(column, "min"), (column, "max")])
            for row in grouped.to_pylist():
                _merge(out, row[CLUSTER], int(row[f"{column}_min"]), int(row[f"{column}_max"]))
    return out
