"""The data-at-risk audit as SQL: ``risk_windows(range_from, range_to)``, a table function over the history
tables.

It answers which partitions could have lost acknowledged writes, and when: one row per risk window (kinds,
attributes and definitions are those of the oracle, :mod:`kraftlake.history.risk`) that overlaps the offsets
``[range_from, range_to]``, with its whole range (``to_offset`` NULL: still open at the commit point) and the
timestamps of the records at its ends (an election, one offset: its own record's, twice). It is computed by
interval intersection (:mod:`kraftlake.history.risk_intervals` gives the same windows, cutting each kind only
where its attributes can change): each partition version is cut
where a version of a config that decides its ``min.insync.replicas`` (the topic's, its leader's BROKER
resource, the cluster default) or of its leader's registration starts or ends inside it, each piece is judged
at its first offset, consecutive pieces with the same attributes are merged (gaps and islands); elections
compare consecutive versions of a partition. Columns: ``kind``, ``topic``, ``topic_id``, ``partition``,
``from_offset``, ``to_offset``, ``from_timestamp``, ``to_timestamp`` (epoch milliseconds), ``leader``,
``isr``, ``min_isr``, ``min_isr_source`` (``under_min_isr``), ``previous_leader``, ``previous_isr``
(elections).

Both ends of the range are guarded as ``<entity>_at`` guards its offset (negative, before the retained
history, past the commit point, in a gap: the same messages, :func:`kraftlake.spark.tables.queries.offset_guard`).
A window that began before the retained history shows the start of its first retained version.
"""

from __future__ import annotations

from pathlib import Path

from kraftlake.spark.tables.layout import OFFSETS, table_ref
from kraftlake.spark.tables.queries import history_query, offset_guard

RETURNS = (
    "kind STRING, topic STRING, topic_id STRING, `partition` INT, from_offset BIGINT, to_offset BIGINT, "
    "from_timestamp BIGINT, to_timestamp BIGINT, leader INT, isr ARRAY<INT>, min_isr INT, "
    "min_isr_source STRING, previous_leader INT, previous_isr ARRAY<INT>"
)
_TYPES = [part.rsplit(" ", 1)[1] for part in RETURNS.split(", ")]


def _rows(warehouse: str | Path, table: str, cluster: str) -> str:
    """The rows this module reads of ``table`` (a history table with its pending closes applied, or
    ``offsets``), the cluster ``cluster``'s (an SQL expression): the one place where that filter goes."""
    if table == OFFSETS:
        return f"(SELECT offset, timestamp FROM {table_ref(warehouse, OFFSETS)} WHERE cluster = {cluster})"
    return f"({history_query(warehouse, table, cluster)})"


#: A partition version's columns the windows need.
_P = "topic, topic_id, `partition`, replicas, isr, leader, leader_recovery_state, from_offset, to_offset"
#: The versions that decide a partition's windows, as ``(rt, rn)`` keys of ``v``: its topic's configs, its
#: leader's BROKER configs (none without a leader), the cluster default's, its leader's registration.
_KEYS = (
    "inline(array(named_struct('rt', 'TOPIC', 'rn', topic), named_struct('rt', 'BROKER', 'rn', "
    "CASE WHEN leader <> -1 THEN CAST(leader AS STRING) END), named_struct('rt', 'BROKER', 'rn', ''), "
    "named_struct('rt', 'LEADER', 'rn', CAST(leader AS STRING))))"
)
_NO_MIN_ISR = "'min_isr', CAST(NULL AS INT), 'min_isr_source', CAST(NULL AS STRING)"


def _windows_query(warehouse: str | Path, cluster: str) -> str:
    """Every risk window of the warehouse, as the function's columns.

    Each history table is read twice (partitions: for the windows and for the elections; configs and brokers:
    for the cuts and for the values at each piece): Spark inlines a CTE at each of its references, and every
    reference is a Delta scan to prepare, which costs more than the query takes to run.
    """
    same = (
        "prev_e = s AND prev_leader = leader AND prev_isr = isr AND prev_mi <=> min_isr "
        "AND prev_src <=> min_isr_source"
    )
    over = "OVER (PARTITION BY topic_id, `partition`, kind ORDER BY s)"
    no_elr = "CAST(array() AS ARRAY<INT>)"
    covers = "v.from_offset <= k.s AND (v.to_offset IS NULL OR v.to_offset > k.s)"
    return (
        "WITH p AS (SELECT topic, topic_id, `partition`, replicas, isr, leader, leader_recovery_state, "
        "eligible_leader_replicas, last_known_elr, from_offset, to_offset "
        f"FROM {_rows(warehouse, 'partitions', cluster)}), "
        "v AS (SELECT resource_type AS rt, resource_name AS rn, try_cast(trim(value) AS INT) AS v, "
        f"CAST(NULL AS BOOLEAN) AS fenced, from_offset, to_offset FROM {_rows(warehouse, 'configs', cluster)} "
        "WHERE name = 'min.insync.replicas' AND resource_type IN ('TOPIC', 'BROKER') "
        "AND try_cast(trim(value) AS INT) IS NOT NULL UNION ALL SELECT 'LEADER', CAST(id AS STRING), "
        f"CAST(NULL AS INT), fenced, from_offset, to_offset FROM {_rows(warehouse, 'brokers', cluster)}), "
        # a partition version's first offset, and each end of a deciding version inside it
        f"cuts AS (SELECT DISTINCT {_P}, s FROM (SELECT k.*, explode(array(k.from_offset, v.from_offset, "
        f"v.to_offset)) AS s FROM (SELECT {_P}, {_KEYS} FROM p) k LEFT JOIN v ON v.rt = k.rt AND v.rn = k.rn) "
        "WHERE s >= from_offset AND (to_offset IS NULL OR s < to_offset)), "
        "seg AS (SELECT *, coalesce(lead(s) OVER (PARTITION BY topic_id, `partition`, from_offset ORDER BY s), "
        "to_offset) AS e FROM cuts), "
        # each piece judged at its first offset s
        "ev AS (SELECT topic, topic_id, `partition`, replicas, isr, leader, leader_recovery_state, s, e, "
        "max(CASE WHEN v.rt = 'TOPIC' THEN v.v END) AS tv, "
        "max(CASE WHEN v.rt = 'BROKER' AND v.rn <> '' THEN v.v END) AS bv, "
        "max(CASE WHEN v.rt = 'BROKER' AND v.rn = '' THEN v.v END) AS cv, "
        "max(CASE WHEN v.rt = 'LEADER' THEN CASE WHEN v.fenced THEN 1 ELSE 0 END END) AS lf "
        f"FROM (SELECT *, {_KEYS} FROM seg) k LEFT JOIN v ON v.rt = k.rt AND v.rn = k.rn AND {covers} "
        "GROUP BY topic, topic_id, `partition`, replicas, isr, leader, leader_recovery_state, s, e), "
        "mi AS (SELECT *, coalesce(tv, bv, cv, 1) AS mi, CASE WHEN tv IS NOT NULL THEN 'topic' "
        "WHEN bv IS NOT NULL THEN 'broker' WHEN cv IS NOT NULL THEN 'cluster' ELSE 'default' END AS src FROM ev), "
        "pieces AS (SELECT topic, topic_id, `partition`, s, e, leader, isr, k.kind, k.min_isr, k.min_isr_source "
        "FROM (SELECT *, explode(filter(array("
        "named_struct('kind', 'under_min_isr', 'held', leader = -1 OR size(isr) < mi, 'min_isr', mi, "
        "'min_isr_source', src), "
        "named_struct('kind', 'isr_leader_only', 'held', size(replicas) > 1 AND leader <> -1 "
        f"AND isr = array(leader), {_NO_MIN_ISR}), "
        f"named_struct('kind', 'offline', 'held', leader = -1 OR lf IS NULL OR lf = 1, {_NO_MIN_ISR}), "
        f"named_struct('kind', 'recovering', 'held', leader_recovery_state = 1, {_NO_MIN_ISR})), "
        "x -> x.held)) AS k FROM mi)), "
        f"islands AS (SELECT *, sum(CASE WHEN {same} THEN 0 ELSE 1 END) {over} AS island FROM ("
        f"SELECT *, lag(e) {over} AS prev_e, lag(leader) {over} AS prev_leader, lag(isr) {over} AS prev_isr, "
        f"lag(min_isr) {over} AS prev_mi, lag(min_isr_source) {over} AS prev_src FROM pieces)), "
        "windows AS (SELECT kind, topic, topic_id, `partition`, min(s) AS from_offset, max_by(e, s) AS to_offset, "
        "leader, isr, min_isr, min_isr_source, CAST(NULL AS INT) AS previous_leader, "
        "CAST(NULL AS ARRAY<INT>) AS previous_isr FROM islands "
        "GROUP BY kind, topic, topic_id, `partition`, island, leader, isr, min_isr, min_isr_source), "
        # elections: consecutive versions of a partition
        "pv AS (SELECT p.*, lag(leader) OVER w AS pl, lag(isr) OVER w AS pisr, "
        f"coalesce(lag(eligible_leader_replicas) OVER w, {no_elr}) AS pelr, "
        f"coalesce(lag(last_known_elr) OVER w, {no_elr}) AS plk, "
        "lag(leader_recovery_state) OVER w AS plrs, lag(to_offset) OVER w AS pto FROM p "
        "WINDOW w AS (PARTITION BY topic_id, `partition` ORDER BY from_offset)), "
        "el AS (SELECT *, leader <> -1 AND leader <> pl AS elected FROM pv WHERE pto = from_offset), "
        "events AS (SELECT CASE WHEN leader_recovery_state = 1 AND (plrs <> 1 OR elected) THEN 'unclean_election' "
        "WHEN NOT elected OR array_contains(pisr, leader) THEN NULL "
        "WHEN array_contains(pelr, leader) OR array_contains(plk, leader) THEN 'elr_election' "
        "ELSE 'unclean_election' END AS kind, topic, topic_id, `partition`, from_offset, "
        "from_offset + 1 AS to_offset, leader, isr, CAST(NULL AS INT) AS min_isr, "
        "CAST(NULL AS STRING) AS min_isr_source, pl AS previous_leader, pisr AS previous_isr FROM el) "
        "SELECT w.kind, w.topic, w.topic_id, w.`partition`, w.from_offset, w.to_offset, "
        "o1.timestamp AS from_timestamp, CASE WHEN w.kind LIKE '%_election' THEN o1.timestamp "
        "ELSE o2.timestamp END AS to_timestamp, w.leader, w.isr, w.min_isr, w.min_isr_source, "
        "w.previous_leader, w.previous_isr FROM (SELECT * FROM windows UNION ALL "
        "SELECT * FROM events WHERE kind IS NOT NULL) w "
        f"LEFT JOIN {_rows(warehouse, OFFSETS, cluster)} o1 ON o1.offset = w.from_offset "
        f"LEFT JOIN {_rows(warehouse, OFFSETS, cluster)} o2 ON o2.offset = w.to_offset"
    )


def _guard(warehouse: str | Path, at: str, cluster: str) -> str:
    """No row, of the function's columns; raises as ``offset_guard`` does for offset ``at``."""
    nulls = ", ".join(f"CAST(NULL AS {t})" for t in _TYPES)
    return f"SELECT {nulls} FROM ({offset_guard(warehouse, 'partitions', at, cluster)})"


def risk_statements(warehouse: str | Path, kind: str, named: str, chosen: str) -> list[str]:
    """The ``CREATE ... FUNCTION`` statement of ``risk_windows``; ``kind`` is what ``udfs.sql`` puts between
    ``CREATE OR REPLACE`` and the name (``TEMPORARY FUNCTION``, ``FUNCTION``, ``FUNCTION `db`.``), ``named``
    the cluster parameter's declaration and ``chosen`` the cluster it answers for (``udfs.sql``'s)."""
    return [
        f"CREATE OR REPLACE {kind}risk_windows(range_from BIGINT, range_to BIGINT, {named}) "
        f"RETURNS TABLE ({RETURNS}) "
        f"RETURN SELECT * FROM ({_windows_query(warehouse, chosen)}) "
        "WHERE from_offset <= range_to AND (to_offset IS NULL OR to_offset > range_from) "
        f"UNION ALL {_guard(warehouse, 'range_from', chosen)} UNION ALL {_guard(warehouse, 'range_to', chosen)}"
    ]
