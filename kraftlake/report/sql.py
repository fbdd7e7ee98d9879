"""The SQL behind each section of the report, over the warehouse's functions (``kraftlake sql``).

``<entity>_versions(lo, hi)`` are the versions valid at some offset of ``[lo - 1, hi]`` (pending closes
applied); ``leader_changes(lo, hi)`` the controller elections. Each query gives its section's rows, offsets and
keys (the times are those offsets' record timestamps, in the ``offsets`` table). ``{lo}``, ``{hi}`` and
``{c}`` (the cluster argument, with its comma, or nothing) are filled by :func:`query`.
"""

from __future__ import annotations

from kraftlake.image.render import (
    ACL_OPERATIONS,
    ACL_PATTERN_TYPES,
    ACL_PERMISSION_TYPES,
    ACL_RESOURCE_TYPES,
    METADATA_VERSIONS,
)


def query(template: str, lo: int, hi: int, cluster: str | None = None) -> str:
    """A section's SQL for the window ``[lo, hi]`` (of ``cluster``)."""
    c = "" if cluster is None else ", '" + cluster.replace("\\", "\\\\").replace("'", "\\'") + "'"
    text = template.replace("{lo}", str(int(lo))).replace("{hi}", str(int(hi))).replace("{c}", c)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


# runs: consecutive versions of one state merged (gaps and islands over the version order); a run still
# holding at {hi} has no end
BROKERS = """
WITH v AS (SELECT *, CASE WHEN fenced THEN 'fenced' WHEN in_controlled_shutdown THEN 'controlled shutdown'
                     ELSE 'registered' END AS state
           FROM brokers_versions({lo}, {hi}{c})),
l AS (SELECT *, lag(state) OVER w AS prev_state, lag(to_offset) OVER w AS prev_to,
                lag(epoch) OVER w AS prev_epoch, lead(from_offset) OVER w AS next_from
      FROM v WINDOW w AS (PARTITION BY id ORDER BY from_offset)),
i AS (SELECT *, sum(CASE WHEN prev_state = state AND prev_to = from_offset THEN 0 ELSE 1 END)
                OVER (PARTITION BY id ORDER BY from_offset) AS island FROM l),
r AS (SELECT id, state, min(from_offset) AS first_offset, max_by(to_offset, from_offset) AS to_offset
      FROM i WHERE state <> 'registered' GROUP BY id, state, island)
SELECT id AS broker, state AS event, greatest(first_offset, {lo}) AS from_offset,
       CASE WHEN to_offset <= {hi} THEN to_offset END AS to_offset, first_offset < {lo} AS before_window
FROM r WHERE to_offset IS NULL OR to_offset > {lo}
UNION ALL
SELECT id, CASE WHEN prev_to = from_offset THEN 're-registered' ELSE 'registered' END, from_offset, NULL, false
FROM l WHERE from_offset BETWEEN {lo} AND {hi}
  AND (prev_to IS NULL OR prev_to <> from_offset OR prev_epoch <> epoch)
UNION ALL
SELECT id, 'unregistered', to_offset, NULL, false FROM l
WHERE to_offset BETWEEN {lo} AND {hi} AND (next_from IS NULL OR next_from <> to_offset)
ORDER BY from_offset, broker, event
"""

RISK = """
SELECT kind, topic, `partition`, leader, isr, min_isr, min_isr_source, previous_leader,
       greatest(from_offset, {lo}) AS from_offset,
       CASE WHEN kind NOT IN ('unclean_election', 'elr_election') AND to_offset <= {hi} THEN to_offset END AS to_offset,
       from_offset < {lo} AS before_window
FROM risk_windows({lo}, {hi}{c})
WHERE kind NOT IN ('unclean_election', 'elr_election') OR from_offset BETWEEN {lo} AND {hi}
ORDER BY from_offset, topic, `partition`, kind
"""

CONTROLLER = """
SELECT offset, epoch, leader FROM leader_changes({lo}, {hi}{c}) ORDER BY offset
"""

AVAILABILITY = """
WITH v AS (SELECT *, CASE WHEN leader = -1 THEN 'offline'
                          WHEN size(isr) < size(replicas) THEN 'under-replicated' ELSE 'ok' END AS state
           FROM partitions_versions({lo}, {hi}{c})),
l AS (SELECT *, lag(state) OVER w AS prev_state, lag(to_offset) OVER w AS prev_to
      FROM v WINDOW w AS (PARTITION BY topic_id, `partition` ORDER BY from_offset)),
i AS (SELECT *, sum(CASE WHEN prev_state = state AND prev_to = from_offset THEN 0 ELSE 1 END)
                OVER (PARTITION BY topic_id, `partition` ORDER BY from_offset) AS island FROM l),
r AS (SELECT topic, `partition`, state, min_by(isr, from_offset) AS isr, min_by(replicas, from_offset) AS replicas,
             min(from_offset) AS first_offset, max_by(to_offset, from_offset) AS to_offset
      FROM i WHERE state <> 'ok' GROUP BY topic, topic_id, `partition`, state, island)
SELECT topic, `partition`, state, isr, replicas, greatest(first_offset, {lo}) AS from_offset,
       CASE WHEN to_offset <= {hi} THEN to_offset END AS to_offset, first_offset < {lo} AS before_window
FROM r WHERE to_offset IS NULL OR to_offset > {lo}
ORDER BY from_offset, topic, `partition`, state
"""

ELECTIONS = """
WITH l AS (SELECT *, lag(leader) OVER w AS previous_leader, lag(isr) OVER w AS previous_isr,
                  lag(eligible_leader_replicas) OVER w AS previous_elr, lag(last_known_elr) OVER w AS previous_lke,
                  lag(to_offset) OVER w AS prev_to
           FROM partitions_versions({lo}, {hi}{c}) WINDOW w AS (PARTITION BY topic_id, `partition` ORDER BY from_offset))
SELECT from_offset AS offset, topic, `partition`, previous_leader, leader,
       CASE WHEN leader = -1 THEN 'offline'
            WHEN leader_recovery_state = 1 THEN 'unclean'
            WHEN array_contains(previous_isr, leader) THEN 'clean'
            WHEN array_contains(coalesce(previous_elr, array()), leader)
              OR array_contains(coalesce(previous_lke, array()), leader) THEN 'elr'
            ELSE 'unclean' END AS kind,
       leader_epoch, previous_isr
FROM l WHERE prev_to = from_offset AND previous_leader <> leader AND from_offset BETWEEN {lo} AND {hi}
ORDER BY offset, topic, `partition`
"""

ISR = """
WITH l AS (SELECT topic, `partition`, isr, from_offset, lag(isr) OVER w AS prev_isr, lag(to_offset) OVER w AS prev_to
           FROM partitions_versions({lo}, {hi}{c}) WINDOW w AS (PARTITION BY topic_id, `partition` ORDER BY from_offset)),
c AS (SELECT topic, `partition`, size(array_except(prev_isr, isr)) > 0 AS shrink,
             size(array_except(isr, prev_isr)) > 0 AS expand
      FROM l WHERE prev_to = from_offset AND from_offset BETWEEN {lo} AND {hi})
SELECT topic, count_if(shrink) AS shrinks, count_if(expand) AS expands, count(DISTINCT `partition`) AS partitions
FROM c WHERE shrink OR expand GROUP BY topic ORDER BY shrinks + expands DESC, topic
"""

REASSIGNMENTS = """
WITH v AS (SELECT *, size(adding_replicas) > 0 OR size(removing_replicas) > 0 AS moving
           FROM partitions_versions({lo}, {hi}{c})),
l AS (SELECT *, lag(moving) OVER w AS prev_moving, lag(to_offset) OVER w AS prev_to
      FROM v WINDOW w AS (PARTITION BY topic_id, `partition` ORDER BY from_offset)),
i AS (SELECT *, sum(CASE WHEN prev_moving AND prev_to = from_offset THEN 0 ELSE 1 END)
                OVER (PARTITION BY topic_id, `partition` ORDER BY from_offset) AS island FROM l),
r AS (SELECT topic, `partition`,
             array_except(min_by(replicas, from_offset), min_by(adding_replicas, from_offset)) AS replicas_before,
             array_except(max_by(replicas, from_offset), max_by(removing_replicas, from_offset)) AS target,
             min(from_offset) AS first_offset, max_by(to_offset, from_offset) AS to_offset
      FROM i WHERE moving GROUP BY topic, topic_id, `partition`, island)
SELECT topic, `partition`, replicas_before, target, greatest(first_offset, {lo}) AS from_offset,
       CASE WHEN to_offset <= {hi} THEN to_offset END AS to_offset, first_offset < {lo} AS before_window
FROM r WHERE to_offset IS NULL OR to_offset > {lo}
ORDER BY from_offset, topic, `partition`
"""


def _changes(entity: str, key: str, value: str, columns: str, outer: str = "*") -> str:
    """Changes of ``entity`` in the window: a version starting there (with the one it replaced, when its
    ``value`` differs) or one ending there with none after it, as ``c`` (``offset, change, <columns>, before,
    after``), of which the section shows ``outer``."""
    return f"""
WITH l AS (SELECT *, lag({value}) OVER w AS before_value, lag(to_offset) OVER w AS prev_to,
                  lead(from_offset) OVER w AS next_from
           FROM {entity}_versions({{lo}}, {{hi}}{{c}}) WINDOW w AS (PARTITION BY {key} ORDER BY from_offset)),
c AS (SELECT from_offset AS offset, CASE WHEN prev_to = from_offset THEN 'changed' ELSE 'created' END AS change,
             {columns}, CASE WHEN prev_to = from_offset THEN before_value END AS before, {value} AS after
      FROM l WHERE from_offset BETWEEN {{lo}} AND {{hi}}
        AND (prev_to IS NULL OR prev_to <> from_offset OR NOT (before_value <=> {value}))
      UNION ALL
      SELECT to_offset, 'removed', {columns}, {value}, NULL FROM l
      WHERE to_offset BETWEEN {{lo}} AND {{hi}} AND (next_from IS NULL OR next_from <> to_offset))
SELECT {outer} FROM c ORDER BY offset
"""


def _names(codes: tuple[str, ...], column: str) -> str:
    """Kafka's name of an enum ``column`` (its code), as ``kraftlake.image.render`` names them."""
    listed = ", ".join(f"'{n}'" for n in codes)
    return f"coalesce(element_at(array({listed}), {column} + 1), 'UNKNOWN')"


def _metadata_version(level: str) -> str:
    pairs = ", ".join(f"{k}, '{v}'" for k, v in sorted(METADATA_VERSIONS.items()))
    return (
        f"CASE WHEN {level} IS NULL THEN NULL WHEN feature = 'metadata.version' THEN concat({level}, ' (', "
        f"coalesce(element_at(map({pairs}), {level}), '?'), ')') ELSE CAST({level} AS STRING) END"
    )


TOPICS = _changes(
    "topics",
    "topic_id",
    "name",
    "name AS topic, topic_id",
    "offset, CASE change WHEN 'removed' THEN 'deleted' ELSE change END AS change, topic, topic_id",
)
CONFIGS = _changes(
    "configs", "resource_type, resource_name, name", "value", "resource_type, resource_name, name"
)
QUOTAS = _changes("client_quotas", "entity_key, key", "value", "entity_key AS entity, key")
ACLS = _changes(
    "acls",
    "id",
    "id",
    "principal, host, operation, permission_type, resource_type, resource_name, pattern_type",
    "offset, CASE change WHEN 'created' THEN 'added' ELSE change END AS change, principal, host, "
    f"{_names(ACL_OPERATIONS, 'operation')} AS operation, "
    f"{_names(ACL_PERMISSION_TYPES, 'permission_type')} AS permission, "
    f"concat({_names(ACL_RESOURCE_TYPES, 'resource_type')}, ':', resource_name) AS resource, "
    f"{_names(ACL_PATTERN_TYPES, 'pattern_type')} AS pattern",
)
SCRAM = _changes(
    "scram",
    "user, mechanism",
    "salt",
    "user, mechanism, iterations",
    "offset, change, user, mechanism, iterations",
)
FEATURES = _changes(
    "features",
    "name",
    "level",
    "name AS feature",
    f"offset, change, feature, {_metadata_version('before')} AS before, {_metadata_version('after')} AS after",
)
TOKENS = _changes(
    "delegation_tokens",
    "token_id",
    "expiration_timestamp",
    "token_id, owner",
    "offset, CASE change WHEN 'changed' THEN 'renewed' WHEN 'removed' THEN 'expired or cancelled' ELSE change END "
    "AS change, token_id, owner, after AS expires_ms",
)
