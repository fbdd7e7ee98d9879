"""The readers' SQL: a history table with its pending closes applied, the versions valid at an offset, and the
guards that refuse an offset the warehouse does not hold (what ``udfs``, ``plots`` and ``validate`` read).

A guard is a branch of a ``UNION ALL`` that yields no row and raises (``raise_error``) for an offset the
warehouse does not hold: Spark runs every branch of a union, whatever Delta skipped of the history table. Its
values come from one scan of ``bounds`` (:func:`bounds_relation`), or, in a session that answers one query, as
literals (``known``, :mod:`kraftlake.warehouse.guard_values`): each table a query reads costs a Delta scan
planning and a Spark job, and a guard of literals that passes folds away."""

from __future__ import annotations

from pathlib import Path

from kraftlake.history import ENTITIES
from kraftlake.spark.tables.layout import (
    BOUNDS,
    CLOSES,
    CLUSTER,
    CLUSTERS,
    OFFSETS,
    history_columns,
    key_sql,
    sql_string,
    table_ref,
)
from kraftlake.warehouse.guard_values import GuardValues


def cluster_sql(name: str) -> str:
    """The SQL of a cluster the caller named (a literal: Delta skips the other clusters' files by it)."""
    return sql_string(name)


#: In the message of the error the SQL functions raise for a cluster the warehouse does not hold.
NO_SUCH_CLUSTER = "is not a cluster of the warehouse"
#: In the message of the error the SQL functions raise when the warehouse holds several clusters and the call
#: names none.
NAME_ONE = "name one as the last argument"


def _held_sql(warehouse: str | Path, known: GuardValues | None) -> str:
    """The registry's names, sorted: a literal array from ``known``, else a scalar subquery over ``clusters``."""
    if known is None:
        return f"(SELECT array_sort(collect_set(name)) FROM {table_ref(warehouse, CLUSTERS)})"
    if not known.clusters:
        return "CAST(array() AS ARRAY<STRING>)"
    return f"array({', '.join(sql_string(c) for c in known.clusters)})"


def _refusals(arg: str, held: str) -> tuple[str, str]:
    """The raise_error of a named cluster the warehouse does not hold, and of none named among several."""
    listed = f"array_join({held}, ', ')"
    return (
        f"raise_error(concat('cluster ', {arg}, ' {NO_SUCH_CLUSTER} (', {listed}, ')'))",
        f"raise_error(concat('the warehouse holds ', size({held}), ' clusters (', {listed}, '): {NAME_ONE}'))",
    )


def cluster_choice(warehouse: str | Path, arg: str, known: GuardValues | None = None) -> str:
    """The cluster an SQL function answers for: ``arg`` (an SQL expression, NULL: none named) or the one cluster
    of the ``clusters`` registry; raises (``raise_error``) for a name the warehouse does not hold, or for none
    where it holds several. NULL when it holds none (nothing ingested yet).

    ``known``: the registry's names as they were read then (:mod:`kraftlake.warehouse.guard_values`), as a
    literal: called with a literal (or with none, of a warehouse of one cluster), the choice folds to a literal.
    """
    # the names in a scalar subquery of their own: a function's parameter cannot be read inside one
    held = _held_sql(warehouse, known)
    unknown, name_one = _refusals(arg, held)
    return (
        f"CASE WHEN {arg} IS NOT NULL THEN CASE WHEN array_contains({held}, {arg}) THEN {arg} "
        f"ELSE {unknown} END WHEN size({held}) <= 1 THEN try_element_at({held}, 1) ELSE {name_one} END"
    )


def cluster_refusal(warehouse: str | Path, arg: str, known: GuardValues | None = None) -> str:
    """:func:`cluster_choice`'s refusals as the first branches of a guard's ``CASE`` (``WHEN ... THEN
    raise_error(...)``), empty without ``known``.

    With the registry's names as a literal, a guard whose every other branch folds to ``false`` (an offset it
    lets through) is folded to ``false`` by the optimizer, a cluster choice that raises inside it included; as
    branches of their own, a refusal's condition folds to ``true`` and the raise stays.
    """
    if known is None:
        return ""
    held = _held_sql(warehouse, known)
    unknown, name_one = _refusals(arg, held)
    return (
        f"WHEN {arg} IS NOT NULL AND NOT array_contains({held}, {arg}) THEN {unknown} "
        f"WHEN {arg} IS NULL AND size({held}) > 1 THEN {name_one} "
    )


def cluster_named(arg: str, chosen: str) -> str:
    """The cluster a function's rows are read by: the argument ``arg`` itself when the call names one, else
    ``chosen`` (:func:`cluster_choice` of ``arg``).

    Called with a literal, the optimizer folds this to the literal, and Delta skips the other clusters' files
    by their statistics on ``cluster``; ``chosen`` is not known before the query runs (its check is a scalar
    subquery over the registry), so filtering by it reads every cluster's files. The check is then the
    guard's: use this only beside a guard evaluated on ``chosen`` (:func:`offset_guard`), which raises for a
    cluster the warehouse does not hold.
    """
    return f"CASE WHEN {arg} IS NOT NULL THEN {arg} ELSE {chosen} END"


def pending_closes_sql(
    warehouse: str | Path,
    table: str,
    cluster: str | None,
    at_most: str | None = None,
    known: GuardValues | None = None,
) -> str:
    """The pending closes of ``table`` as ``(cluster, key, tos)``: every close's ``to_offset`` per cluster and
    entity key; of the cluster ``cluster`` (an SQL expression) only, unless None; of ``to_offset <= at_most``
    only, unless None. ``known``: only the clusters it lists for ``table`` have closes that matter (none:
    ``false``, the optimizer drops the scan of ``closes``)."""
    bound = f" AND to_offset <= {at_most}" if at_most is not None else ""
    of = f" AND {CLUSTER} = {cluster}" if cluster is not None else ""
    if known is not None:
        having = known.closes.get(table, ())
        of += f" AND {CLUSTER} IN ({', '.join(sql_string(c) for c in having)})" if having else " AND false"
    return (
        f"SELECT {CLUSTER}, key, collect_list(to_offset) AS tos FROM {table_ref(warehouse, CLOSES)} "
        f"WHERE entity = '{table}'{of}{bound} GROUP BY {CLUSTER}, key"
    )


def _join_pending(
    warehouse: str | Path, table: str, cluster: str | None, known: GuardValues | None = None
) -> str:
    """The pending closes of each still-open version of ``table`` (alias ``t``) as ``c.tos`` (NULL: none)."""
    return (
        f"LEFT JOIN ({pending_closes_sql(warehouse, table, cluster, known=known)}) c ON t.to_offset IS NULL "
        f"AND t.{CLUSTER} = c.{CLUSTER} AND {key_sql(table, 't')} = c.key"
    )


def history_query(warehouse: str | Path, table: str, cluster: str) -> str:
    """A history table of the cluster ``cluster`` (an SQL expression: :func:`cluster_sql`) as readers see it:
    every version with its ``to_offset``, the pending ``closes`` applied.

    A version still open in the table ends at the first pending close of its key after its ``from_offset``.
    """
    cols = ", ".join(f"t.`{n}`" for n in ENTITIES[table].names)
    return (
        f"SELECT {cols}, t.from_offset, coalesce(t.to_offset, "
        f"array_min(filter(c.tos, x -> x > t.from_offset))) AS to_offset "
        f"FROM {table_ref(warehouse, table)} t {_join_pending(warehouse, table, cluster)} "
        f"WHERE t.{CLUSTER} = {cluster}"
    )


def state_query(
    warehouse: str | Path,
    table: str,
    at: str,
    cluster: str | None,
    joined: str = "",
    guard: str | None = None,
    known: GuardValues | None = None,
) -> str:
    """The versions of ``table`` valid at offset ``at`` (an SQL expression): ``from_offset <= at < to_offset``,
    of the cluster ``cluster`` (an SQL expression: :func:`cluster_sql`, :func:`cluster_choice`).

    The range filter is on the stored columns (Delta skips files by it); a version still open there is left out
    when a pending close of its key lies in ``(from_offset, at]``. ``joined``: a relation joined to the table
    (alias ``t``) that ``at`` may refer to; with ``cluster`` None it is a relation ``a`` of a ``cluster``
    column and ``at`` per cluster, joined by cluster, and the answer has the ``cluster`` column first.
    ``guard``: a query of the same columns added with UNION ALL, which yields no row but may raise
    (:func:`offset_guard`, :func:`retention_guard_at_time`). ``known``: see :func:`pending_closes_sql`;
    where it lists no cluster with a pending close of ``table``, the query has no join with ``closes`` at all
    (the plan then filters the scan by the stored columns alone, and Delta's file listing made when the query
    is planned serves its execution too).
    """
    first = [f"t.{CLUSTER}"] if cluster is None else []
    cols = ", ".join([*first, *(f"t.`{n}`" for n in ENTITIES[table].names), "t.from_offset"])
    if cluster is None:
        cross = f" JOIN {joined} ON t.{CLUSTER} = a.{CLUSTER}"
    else:
        cross = f" CROSS JOIN {joined}" if joined else ""
    of = "" if cluster is None else f"t.{CLUSTER} = {cluster} AND "
    where = f"WHERE {of}t.from_offset <= {at} AND (t.to_offset IS NULL OR t.to_offset > {at})"
    pending = ""
    if known is None or known.closes.get(table):
        pending = f" {_join_pending(warehouse, table, cluster, known)}"
        where += f" AND (c.tos IS NULL OR NOT exists(c.tos, x -> x > t.from_offset AND x <= {at}))"
    query = f"SELECT {cols} FROM {table_ref(warehouse, table)} t{cross}{pending} {where}"
    return f"{query} UNION ALL {guard}" if guard else query


#: In the message of the error the SQL functions raise for an offset outside the retained history.
BEFORE_RETAINED = "before the retained history"


def _no_row(table: str, with_cluster: bool = False) -> str:
    """The SELECT list of a row of ``table``'s function columns, all NULL (typed, for UNION ALL)."""
    first = ["CAST(NULL AS STRING)"] if with_cluster else []
    return "SELECT " + ", ".join(
        [*first, *(f"CAST(NULL AS {t})" for _, t in history_columns(table)), "CAST(NULL AS BIGINT)"]
    )


_BOUNDS_AGGREGATES = (
    "coalesce(max(retained_from), -1) AS r, max(committed_to) AS m, "
    "min(gap_from) AS f1, min(gap_to) AS t1, max(gap_from) AS f2, max(gap_to) AS t2"
)


def _bigint(value: int | None) -> str:
    return "CAST(NULL AS BIGINT)" if value is None else f"{int(value)}L"


def _known_bounds(known: GuardValues, cluster: str) -> str:
    """:func:`bounds_relation`'s columns as literals, one CASE over the cluster's name per column."""
    columns: dict[str, list[tuple[str, int | None]]] = {n: [] for n in ("r", "m", "f1", "t1", "f2", "t2")}
    for name, lim in sorted(known.limits.items()):
        first, last = lim.first_gap or (None, None), lim.last_gap or (None, None)
        values = (lim.retained, lim.committed, first[0], first[1], last[0], last[1])
        for column, value in zip(columns, values, strict=True):
            columns[column].append((name, value))
    parts = []
    for column, cases in columns.items():
        otherwise = "-1L" if column == "r" else _bigint(None)
        whens = " ".join(f"WHEN {sql_string(n)} THEN {_bigint(v)}" for n, v in cases if v is not None)
        parts.append(
            f"CASE {cluster} {whens} ELSE {otherwise} END AS {column}"
            if whens
            else f"{otherwise} AS {column}"
        )
    return f"(SELECT {', '.join(parts)}) g"


def bounds_relation(warehouse: str | Path, cluster: str, known: GuardValues | None = None) -> str:
    """A one-row relation ``g`` of the cluster ``cluster`` (an SQL expression): ``r``, the retained-from offset
    (-1: the whole log), ``m``, the published commit point (NULL before the first commit), and the first and the
    last recorded gap (:func:`kraftlake.spark.tables.bounds.record_gap`) as ``f1..t1`` and ``f2..t2`` (NULL
    without one; the same one when there is one). ``known``: the same as literals, as they were read then
    (:mod:`kraftlake.warehouse.guard_values`): no scan of ``bounds``, and a guard over them that passes folds
    away before the query runs."""
    if known is not None:
        return _known_bounds(known, cluster)
    # both from one small table: each table a query reads costs a Delta scan planning of its own (file
    # statistics and a Spark job or two), whatever the table's size
    # the gaps as the first (min) and the last (max) recorded one: holes of one log are ordered by both ends, and
    # minima and maxima are answered from the same statistics (a collect_list would read every file of bounds)
    return f"(SELECT {_BOUNDS_AGGREGATES} FROM {table_ref(warehouse, BOUNDS)} WHERE {CLUSTER} = {cluster}) g"


#: In the message of the error the SQL functions raise for an offset past the warehouse's commit point.
AFTER_COMMITTED = "is after the last committed offset"
#: In the message of the error the SQL functions raise for a negative offset.
NEGATIVE = "is negative"
#: In the message of the error the SQL functions raise for an offset in a gap of the log (:func:`kraftlake.spark.tables.bounds.record_gap`).
IN_GAP = "lies in a gap of the log"
#: What the messages of the SQL functions' refusals hold (:func:`offset_guard`, :func:`retention_guard_at_time`).
REFUSALS = (NEGATIVE, BEFORE_RETAINED, AFTER_COMMITTED, IN_GAP, NO_SUCH_CLUSTER, NAME_ONE)


def offset_guard(
    warehouse: str | Path,
    table: str,
    at: str,
    cluster: str,
    bounds_of: str | None = None,
    known: GuardValues | None = None,
    refusal: str = "",
) -> str:
    """A query of ``table``'s function columns that yields no row, and raises (``raise_error``, Spark's
    USER_RAISED_EXCEPTION) when offset ``at`` is negative, below the retained-from offset
    (:func:`kraftlake.spark.tables.bounds.retained_from`: there the history tables hold only the versions that outlived the cut, and the
    functions would answer with a part of the state), or past the published commit point
    (:func:`kraftlake.spark.tables.bounds.publish_commit_point`: the last state would answer for an offset the warehouse does not hold, or not
    yet), or inside the first or the last gap of the log (:func:`kraftlake.spark.tables.bounds.record_gap`: the state there is known nowhere;
    a log of three holes or more has the ones between unguarded).

    It is a branch of a UNION ALL (:func:`state_query`'s ``guard``): Spark runs every branch of a union, so it
    raises whatever the history table holds or Delta skips. (A filter or a cross join with the history table
    is never evaluated when that side is empty: after data skipping, at an offset below every version.) The
    bounds are those of ``cluster``; a :func:`cluster_choice` there raises in it for a cluster not held.
    ``bounds_of``: the same cluster as the bounds are read by (:func:`cluster_named`: Delta skips the other
    clusters' files of ``bounds``), ``cluster`` when None. ``known``: :func:`bounds_relation`'s; with it,
    ``refusal`` is :func:`cluster_refusal`'s branches, checked first.
    """
    return (
        f"{_no_row(table)} FROM {bounds_relation(warehouse, bounds_of or cluster, known)} WHERE CASE {refusal}"
        f"WHEN {cluster} IS NULL THEN false "
        f"WHEN {at} < 0 THEN raise_error(concat('offset ', {at}, ' {NEGATIVE}')) "
        f"WHEN {at} < g.r THEN raise_error(concat('offset ', {at}, ' lies {BEFORE_RETAINED}: the warehouse "
        f"holds the states from offset ', g.r, ' on')) "
        f"WHEN {at} > g.m THEN raise_error(concat('offset ', {at}, ' {AFTER_COMMITTED} (', g.m, ')')) "
        f"WHEN {at} BETWEEN g.f1 AND g.t1 OR {at} BETWEEN g.f2 AND g.t2 THEN raise_error(concat('offset ', {at}, "
        f"' {IN_GAP}: no state is known at ', "
        f"CASE WHEN {at} BETWEEN g.f1 AND g.t1 THEN concat(g.f1, '..', g.t1) ELSE concat(g.f2, '..', g.t2) END)) "
        f"ELSE false END"
    )


def offset_at_time(warehouse: str | Path, at_time: str, cluster: str | None = None) -> str:
    """A relation ``(cluster, o)``: per cluster (of ``cluster`` alone, an SQL expression, unless None), the last
    offset whose record is at or before the TIMESTAMP ``at_time`` (no row for a cluster before its first)."""
    of = "" if cluster is None else f" AND {CLUSTER} = {cluster}"
    return (
        f"(SELECT {CLUSTER}, max(offset) AS o FROM {table_ref(warehouse, OFFSETS)} "
        f"WHERE timestamp_millis(timestamp) <= {at_time}{of} GROUP BY {CLUSTER})"
    )


def _bounds_per_cluster(warehouse: str | Path, cluster: str | None, known: GuardValues | None) -> str:
    """A relation ``g`` of one row per cluster that has ``bounds`` rows (of ``cluster`` alone, an SQL
    expression, unless None): the cluster and :func:`bounds_relation`'s columns; from ``known`` as literals."""
    if known is None:
        of = "" if cluster is None else f" WHERE {CLUSTER} = {cluster}"
        return f"(SELECT {CLUSTER}, {_BOUNDS_AGGREGATES} FROM {table_ref(warehouse, BOUNDS)}{of} GROUP BY {CLUSTER}) g"
    rows = []
    for name, lim in sorted(known.limits.items()):
        first, last = lim.first_gap or (None, None), lim.last_gap or (None, None)
        values = (lim.retained, lim.committed, first[0], first[1], last[0], last[1])
        rows.append(
            f"SELECT {sql_string(name)} AS {CLUSTER}, "
            + ", ".join(
                f"{_bigint(v)} AS {c}"
                for c, v in zip(("r", "m", "f1", "t1", "f2", "t2"), values, strict=True)
            )
        )
    if not rows:
        # no cluster has bounds: no row (typed, as the aggregate over an empty table is)
        none = ", ".join(f"{_bigint(None)} AS {c}" for c in ("r", "m", "f1", "t1", "f2", "t2"))
        rows.append(f"SELECT CAST(NULL AS STRING) AS {CLUSTER}, {none} WHERE false")
    of = "" if cluster is None else f" WHERE {CLUSTER} = {cluster}"
    return f"(SELECT * FROM ({' UNION ALL '.join(rows)}){of}) g"


def retention_guard_at_time(
    warehouse: str | Path,
    table: str,
    at_time: str,
    cluster: str | None,
    known: GuardValues | None = None,
) -> str:
    """:func:`offset_guard` for a TIMESTAMP ``at_time``, per cluster (of ``cluster`` alone unless None: an SQL
    expression, a :func:`cluster_choice` raises in it for a cluster not held): raises when its offset
    (:func:`offset_at_time`) is below the retained-from offset, or when no offset is at or before it once the
    history was cut or seeded from a snapshot (before the first record of a cluster that holds the whole log,
    the state is empty), or when that offset is the last before a gap
    (:func:`kraftlake.spark.tables.bounds.record_gap`: the times of the missing records are unknown). The
    query's rows have the ``cluster`` column first. ``known``: the bounds as literals (:func:`bounds_relation`'s),
    no scan of ``bounds``."""
    per_cluster = _bounds_per_cluster(warehouse, cluster, known)
    return (
        f"{_no_row(table, with_cluster=True)} FROM {per_cluster} "
        f"LEFT JOIN {offset_at_time(warehouse, at_time, cluster)} s ON s.{CLUSTER} = g.{CLUSTER} "
        f"WHERE CASE WHEN (s.o IS NULL AND g.r >= 0) OR s.o < g.r THEN raise_error(concat('the time lies "
        f"{BEFORE_RETAINED} for cluster ', g.{CLUSTER}, ' (its last offset is ', "
        f"coalesce(cast(s.o AS STRING), 'none'), '): the warehouse holds its states from offset ', g.r, ' on')) "
        # the last offset before a gap: the records after it have unknown times, the state then is unknown
        f"WHEN s.o + 1 IN (g.f1, g.f2) THEN raise_error(concat('the time {IN_GAP} (its last offset is ', s.o, "
        f"', after it no state is known up to ', CASE WHEN s.o + 1 = g.f1 THEN g.t1 ELSE g.t2 END, ')')) "
        f"ELSE false END"
    )
