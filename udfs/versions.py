"""The functions the report's SQL reads (``kraftlake.report.sql``): the versions in force in a window, and the
controller's elections.

- ``<entity>_versions(range_from, range_to[, cluster])``: every version of the entity valid at some offset of
  ``[range_from - 1, range_to]`` (those in force during the window and those its first record ended), with
  ``from_offset`` and ``to_offset``, the pending closes applied.
- ``leader_changes(range_from, range_to[, cluster])``: the LeaderChange records of ``[range_from, range_to]``
  (``offset, epoch, leader``): each an election of the active controller.

Both refuse a range end the warehouse does not hold, as the ``_at`` functions refuse an offset.
"""

from __future__ import annotations

from pathlib import Path

from kraftlake.history import ENTITIES
from kraftlake.spark.tables.layout import LOG, history_columns, table_ref
from kraftlake.spark.tables.queries import history_query, offset_guard


def _guards(warehouse: str | Path, table: str, cluster: str, nulls: str) -> str:
    """Two UNION ALL branches yielding no row (``nulls``, the function's columns) that raise for either end."""
    return " ".join(
        f"UNION ALL SELECT {nulls} FROM ({offset_guard(warehouse, table, at, cluster)})"
        for at in ("range_from", "range_to")
    )


def versions_statements(warehouse: str | Path, kind: str, named: str, chosen: str) -> list[str]:
    """The ``CREATE ... FUNCTION`` statements; ``kind``, ``named`` and ``chosen`` as ``udfs.sql`` makes them
    (the function kind, the cluster parameter's declaration, the cluster answered for)."""
    out = []
    for table in ENTITIES:
        typed = [*history_columns(table), ("from_offset", "BIGINT"), ("to_offset", "BIGINT")]
        cols = ", ".join([*(f"h.`{n}`" for n in ENTITIES[table].names), "h.from_offset", "h.to_offset"])
        nulls = ", ".join(f"CAST(NULL AS {t})" for _, t in typed)
        returns = ", ".join(f"`{n}` {t}" for n, t in typed)
        out.append(
            f"CREATE OR REPLACE {kind}{table}_versions(range_from BIGINT, range_to BIGINT, {named}) "
            f"RETURNS TABLE ({returns}) RETURN "
            f"SELECT {cols} FROM ({history_query(warehouse, table, chosen)}) h "
            "WHERE h.from_offset <= range_to AND (h.to_offset IS NULL OR h.to_offset >= range_from) "
            + _guards(warehouse, table, chosen, nulls)
        )
    nulls = "CAST(NULL AS BIGINT), CAST(NULL AS INT), CAST(NULL AS INT)"
    out.append(
        f"CREATE OR REPLACE {kind}leader_changes(range_from BIGINT, range_to BIGINT, {named}) "
        "RETURNS TABLE (offset BIGINT, epoch INT, leader INT) RETURN "
        f"SELECT l.offset, l.epoch, l.leader_change_message.leader_id FROM {table_ref(warehouse, LOG)} l "
        f"WHERE l.cluster = {chosen} AND l.type = 'LeaderChangeMessage' "
        "AND l.offset BETWEEN range_from AND range_to " + _guards(warehouse, "producer_ids", chosen, nulls)
    )
    return out
