"""The ``fleet_status`` table read without Spark: each cluster's newest state, as a fleet's streams record it.

A stream appends a row for its cluster when the cluster's state changes, and at most every few seconds while
it follows (lag, last committed offset); the newest row of a cluster (by ``updated_ms``) is its state, one of
:data:`STATES`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kraftlake.delta.append import DeltaAppendError
from kraftlake.delta.scan import arrow_schema, read_rows, table_snapshot
from kraftlake.warehouse.tables import WarehouseError, check_warehouse

# the name of kraftlake.spark.tables.layout.FLEET_STATUS, which imports Spark
FLEET_STATUS = "fleet_status"

STARTING = "starting"
"""Contacting the cluster, or catching up with it before the first micro-batch."""
FOLLOWING = "following"
"""Micro-batches are committed; ``lag`` is what the quorum has committed past the last of them."""
UNREACHABLE = "unreachable"
"""No controller answers (``last_error`` says what each connection attempt got); retried until the run ends."""
AUTH_FAILED = "auth_failed"
"""A controller refused the principal (authentication or CLUSTER_ACTION); not retried."""
BEHIND_LOG_START = "behind_log_start"
"""The warehouse's commit point is older than anything the cluster and the mirror still hold."""
REFUSED = "refused"
"""The cluster cannot be followed as given (another cluster id behind the name, its cluster id in the warehouse
under another name, client properties that cannot be used): the refusal in ``last_error``; not retried."""
FAILED = "failed"
"""Following or committing stopped with another error (``last_error``); retried until the run ends."""
STOPPED = "stopped"
"""The stream of the cluster ended cleanly (its process stopped)."""
STATES = (STARTING, FOLLOWING, UNREACHABLE, AUTH_FAILED, BEHIND_LOG_START, REFUSED, FAILED, STOPPED)

COLUMNS = ("cluster", "state", "lag", "last_offset", "last_commit", "last_error", "updated")


def _time(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def newest_rows(warehouse: str | Path) -> list[dict[str, Any]]:
    """Each cluster's newest row of ``fleet_status`` (by ``updated_ms``) as stored, sorted by cluster. None
    recorded yet in a warehouse: an empty list; a path that is neither: :class:`WarehouseError`."""
    path = Path(warehouse) / FLEET_STATUS
    if not (path / "_delta_log").is_dir():
        check_warehouse(warehouse)  # a fleet whose clusters all failed so far has this table alone
        return []
    try:
        snap = table_snapshot(path)
        rows = read_rows(snap, arrow_schema(snap)).to_pylist()
    except DeltaAppendError as exc:
        raise WarehouseError(f"{path}: {exc}") from exc
    latest: dict[str, dict[str, Any]] = {}
    for row in rows:
        seen = latest.get(row["cluster"])
        if seen is None or row["updated_ms"] >= seen["updated_ms"]:
            latest[row["cluster"]] = row
    return [r for _, r in sorted(latest.items())]


def newest(warehouse: str | Path) -> list[dict[str, Any]]:
    """:func:`newest_rows` as ``fleet status`` prints them: times as UTC ISO-8601 text (``last_commit``,
    ``updated``), no error as an empty text."""
    return [
        {
            "cluster": r["cluster"],
            "state": r["state"],
            "lag": r["lag"],
            "last_offset": r["last_offset"],
            "last_commit": _time(r["last_commit_ms"]),
            "last_error": r["last_error"] or "",
            "updated": _time(r["updated_ms"]),
        }
        for r in newest_rows(warehouse)
    ]
