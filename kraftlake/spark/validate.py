"""Great Expectations suites over the warehouse, and the record-level checks that quarantine bad rows.

Two levels share one vocabulary of named checks:

- **Warehouse suites** (:func:`warehouse_suites`, run by :func:`validate_warehouse`): one GX suite per table,
  built-in expectations where a column rule is enough (not null, unique, between, regex) and
  ``UnexpectedRowsExpectation`` (Spark SQL over ``{batch}`` and the other tables) for the relational ones:
  offsets contiguous, epochs non-decreasing, every partition's topic exists, ISR a subset of the replicas, the
  leader in the ISR or -1, partition epochs increasing, broker epochs in the log matching the registered ones,
  no two live topics sharing a name, an entity's versions never overlapping. Every expectation carries its check
  name in ``meta["check"]``, which is what a failure report and the tests name.

  A table costs one Spark query (:func:`materialize`), run as one job (Delta lists the files of each table it
  reads in jobs of its own while the query is planned): it reads the table's rows once (cached for the query)
  and returns the columns the column expectations name together with every SQL check's answer
  (its row count and first rows). GX evaluates the suite over that with its pandas engine: the column
  expectations over the columns, the ``UnexpectedRowsExpectation`` ones from their answers (this module gives
  GX's pandas engine the two metrics of that expectation, which GX computes with its SQL and Spark engines
  only). The results go to GX's stores and Data Docs as GX makes them.
- **Record-level rules** (:data:`kraftlake.spark.record_rules.RECORD_RULES`, with the quarantine the stream
  sets bad rows aside in): the same predicates are part of the ``metadata_log`` suite, so a row the stream
  would quarantine also fails the warehouse suite.

Aggregates are preferred over global windows where both work (contiguity is ``count = max - min + 1``; epoch
order compares per-epoch offset ranges), so a large ``metadata_log`` is never sorted into one partition.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kraftlake.errors import KraftlakeError
from kraftlake.history import ENTITIES
from kraftlake.spark.data_docs import localize_sites
from kraftlake.spark.record_rules import RECORD_RULES
from kraftlake.spark.tables.layout import (
    BOUNDS,
    CLUSTER,
    LOG,
    OFFSETS,
    cluster_rows,
    sql_string,
    table_path,
)
from kraftlake.spark.tables.queries import history_query

GX_PROJECT = "_gx"
DATASOURCE = "kraftlake"


class ValidationError(KraftlakeError):
    """Raised when validation cannot run: the warehouse lacks a table or GX cannot be set up."""


# --------------------------------------------------------------------------------------------- warehouse level


def _sql_rows(check: str, description: str, query: str) -> Any:
    import great_expectations as gx

    return gx.expectations.UnexpectedRowsExpectation(
        unexpected_rows_query=query, description=description, meta={"check": check}
    )


def _named(check: str, expectation: Any) -> Any:
    expectation.meta = {"check": check}
    return expectation


def _epochs_non_decreasing(check: str, what: str) -> Any:
    # epochs are non-decreasing in offset order iff the offset ranges of consecutive epochs do not overlap
    return _sql_rows(
        check,
        f"{what}: the epoch never decreases as the offset grows",
        """
        SELECT epoch, first_offset, last_offset, prev_epoch, prev_last_offset FROM (
          SELECT epoch, first_offset, last_offset,
                 lag(epoch) OVER (ORDER BY epoch) AS prev_epoch,
                 lag(last_offset) OVER (ORDER BY epoch) AS prev_last_offset
          FROM (SELECT epoch, min(offset) AS first_offset, max(offset) AS last_offset FROM {batch}
                GROUP BY epoch))
        WHERE prev_last_offset >= first_offset""",
    )


def _versions_disjoint(table: str) -> Any:
    key = ENTITIES[table].key
    part = f"PARTITION BY {', '.join(f'`{k}`' for k in key)} " if key else ""
    cols = ", ".join(f"`{k}`" for k in key)
    return _sql_rows(
        f"{table}_versions_disjoint",
        f"{table}: an entity's versions never overlap",
        f"""
        SELECT {cols + ", " if cols else ""}from_offset, prev_from, prev_to FROM (
          SELECT *, lag(from_offset) OVER ({part}ORDER BY from_offset) AS prev_from,
                    lag(to_offset) OVER ({part}ORDER BY from_offset) AS prev_to,
                    row_number() OVER ({part}ORDER BY from_offset) AS rn
          FROM {{batch}})
        WHERE rn > 1 AND (prev_to IS NULL OR prev_to > from_offset)""",
    )


def warehouse_suites(warehouse: str | Path, cluster: str) -> dict[str, list[Any]]:
    """Table name -> its expectations (each with ``meta["check"]``)."""
    import great_expectations as gx

    E = gx.expectations
    suites: dict[str, list[Any]] = {
        OFFSETS: _offsets_suite(E, warehouse, cluster),
        BOUNDS: _bounds_suite(warehouse, cluster),
        LOG: _log_suite(E),
        "partitions": _partitions_suite(E, warehouse, cluster),
        "brokers": _brokers_suite(E, warehouse, cluster),
        "topics": _topics_suite(E),
    }
    for table in ENTITIES:
        if table not in suites:
            suites[table] = [_versions_disjoint(table)]
    return suites


def _offsets_suite(E: ModuleType, warehouse: str | Path, cluster: str) -> list[Any]:
    """Offsets: the log's offsets and epochs."""
    return [
        _named("offsets_offset_not_null", E.ExpectColumnValuesToNotBeNull(column="offset")),
        _named("offsets_offset_unique", E.ExpectColumnValuesToBeUnique(column="offset")),
        _named("offsets_epoch_not_negative", E.ExpectColumnValuesToBeBetween(column="epoch", min_value=0)),
        _sql_rows(
            "offsets_contiguous",
            "offsets: no gap between the first and the last offset but the holes of the log recorded in "
            "bounds (each gap_from..gap_to plus the offset of the snapshot that ends it)",
            f"""
                SELECT o.first_offset, o.last_offset, o.n, g.missing FROM
                  (SELECT min(offset) AS first_offset, max(offset) AS last_offset, count(DISTINCT offset) AS n,
                          count(*) AS c FROM {{batch}}) o
                CROSS JOIN
                  (SELECT coalesce(sum(gap_to - gap_from + 2), 0) AS missing FROM
                    (SELECT DISTINCT gap_from, gap_to FROM {cluster_rows(warehouse, BOUNDS, cluster)}
                     WHERE gap_from IS NOT NULL)) g
                WHERE o.c > 0 AND o.n + g.missing <> o.last_offset - o.first_offset + 1""",
        ),
        _epochs_non_decreasing("offsets_epochs_non_decreasing", "offsets"),
    ]


def _bounds_suite(warehouse: str | Path, cluster: str) -> list[Any]:
    """Bounds: the published commit point."""
    return [
        # the SQL functions answer up to the published commit point: past the last committed offset they
        # would answer for states the history tables do not hold
        _sql_rows(
            "bounds_commit_point_committed",
            "bounds: the published commit point is never past the last offset of offsets",
            f"""
                SELECT b.m AS published, o.last AS last_offset
                FROM (SELECT max(committed_to) AS m FROM {{batch}}) b
                CROSS JOIN (SELECT max(offset) AS last FROM {cluster_rows(warehouse, OFFSETS, cluster)}) o
                WHERE b.m > coalesce(o.last, -1)""",
        ),
    ]


def _log_suite(E: ModuleType) -> list[Any]:
    """Metadata_log: one row per record."""
    return [
        _named("log_offset_unique", E.ExpectColumnValuesToBeUnique(column="offset")),
        _named("log_type_not_null", E.ExpectColumnValuesToNotBeNull(column="type")),
        _epochs_non_decreasing("log_epochs_non_decreasing", "metadata_log"),
        *(
            _sql_rows(
                name,
                f"metadata_log: every row satisfies {expr}",
                f"SELECT offset, type FROM {{batch}} WHERE NOT coalesce({expr}, false)",
            )
            for name, expr in RECORD_RULES
        ),
    ]


def _partitions_suite(E: ModuleType, warehouse: str | Path, cluster: str) -> list[Any]:
    """Partitions: the versions of each partition."""
    topics = f"({history_query(warehouse, 'topics', sql_string(cluster))})"
    return [
        _named("partitions_topic_id_not_null", E.ExpectColumnValuesToNotBeNull(column="topic_id")),
        _named(
            "partitions_leader_at_least_minus_one",
            E.ExpectColumnValuesToBeBetween(column="leader", min_value=-1),
        ),
        _named(
            "partitions_leader_recovery_state_known",
            E.ExpectColumnValuesToBeInSet(column="leader_recovery_state", value_set=[0, 1]),
        ),
        _named(
            "partitions_range_not_empty",
            E.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="to_offset", column_B="from_offset", ignore_row_if="either_value_is_missing"
            ),
        ),
        _sql_rows(
            "partition_topic_exists",
            "partitions: every version's topic (id and name) exists when the version begins",
            f"""
                SELECT p.topic, p.topic_id, p.`partition`, p.from_offset FROM {{batch}} p
                LEFT ANTI JOIN {topics} t ON t.topic_id = p.topic_id AND t.name = p.topic
                  AND t.from_offset <= p.from_offset AND (t.to_offset IS NULL OR t.to_offset > p.from_offset)""",
        ),
        _sql_rows(
            "isr_subset_of_replicas",
            "partitions: the ISR is a subset of the replicas",
            """
                SELECT topic, `partition`, replicas, isr, from_offset FROM {batch}
                WHERE size(array_except(isr, replicas)) > 0""",
        ),
        _sql_rows(
            "leader_in_isr_or_none",
            "partitions: the leader is in the ISR, or -1",
            """
                SELECT topic, `partition`, leader, isr, from_offset FROM {batch}
                WHERE leader <> -1 AND NOT array_contains(isr, leader)""",
        ),
        _sql_rows(
            "partition_epochs_increase",
            "partitions: each new version has a higher partition epoch",
            """
                SELECT topic, `partition`, from_offset, partition_epoch, prev_epoch FROM (
                  SELECT topic, topic_id, `partition`, from_offset, partition_epoch,
                         lag(partition_epoch) OVER (PARTITION BY topic_id, `partition` ORDER BY from_offset)
                           AS prev_epoch
                  FROM {batch})
                WHERE prev_epoch >= partition_epoch""",
        ),
        _versions_disjoint("partitions"),
    ]


def _brokers_suite(E: ModuleType, warehouse: str | Path, cluster: str) -> list[Any]:
    """Brokers: the versions of each broker registration."""
    log = cluster_rows(warehouse, LOG, cluster)
    return [
        _named("brokers_epoch_not_null", E.ExpectColumnValuesToNotBeNull(column="epoch")),
        _sql_rows(
            "broker_epochs_match",
            "brokers: every fence, unfence, registration change and unregistration in the log names "
            "the epoch of the broker registration in force before it",
            f"""
                SELECT l.offset, l.type, l.broker_id, l.broker_epoch, b.epoch AS registered_epoch FROM (
                  SELECT offset, type,
                    coalesce(fence_broker_record.id, unfence_broker_record.id,
                             broker_registration_change_record.broker_id, unregister_broker_record.broker_id)
                      AS broker_id,
                    coalesce(fence_broker_record.epoch, unfence_broker_record.epoch,
                             broker_registration_change_record.broker_epoch, unregister_broker_record.broker_epoch)
                      AS broker_epoch
                  FROM {log} WHERE type IN ('FenceBrokerRecord', 'UnfenceBrokerRecord',
                                             'BrokerRegistrationChangeRecord', 'UnregisterBrokerRecord')) l
                LEFT JOIN {{batch}} b ON b.id = l.broker_id AND b.from_offset < l.offset
                  AND (b.to_offset IS NULL OR b.to_offset >= l.offset)
                WHERE b.epoch IS NULL OR b.epoch <> l.broker_epoch""",
        ),
        _versions_disjoint("brokers"),
    ]


def _topics_suite(E: ModuleType) -> list[Any]:
    """Topics: the versions of each topic."""
    return [
        _named("topics_name_not_null", E.ExpectColumnValuesToNotBeNull(column="name")),
        _named(
            "topics_name_legal",
            E.ExpectColumnValuesToMatchRegex(column="name", regex=r"^[a-zA-Z0-9._-]+$"),
        ),
        _named(
            "topics_name_length",
            E.ExpectColumnValueLengthsToBeBetween(column="name", min_value=1, max_value=249),
        ),
        _sql_rows(
            "live_topic_names_unique",
            "topics: no two topics live at the same offset share a name",
            """
                SELECT a.name, a.topic_id, b.topic_id AS other_topic_id, a.from_offset, b.from_offset AS other_from
                FROM {batch} a JOIN {batch} b ON a.name = b.name AND a.topic_id < b.topic_id
                  AND a.from_offset < coalesce(b.to_offset, 9223372036854775807)
                  AND b.from_offset < coalesce(a.to_offset, 9223372036854775807)""",
        ),
        _versions_disjoint("topics"),
    ]


@dataclass
class Failure:
    """One failed expectation."""

    table: str
    check: str
    expectation: str
    description: str
    observed: Any


@dataclass
class ValidationReport:
    success: bool
    evaluated: int
    failures: list[Failure] = field(default_factory=list)
    docs: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    table_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def failed_checks(self) -> set[str]:
        return {f.check for f in self.failures}


def _observed(result: Any) -> Any:
    res = dict(result.result or {})
    if "observed_value" in res:
        return res["observed_value"]
    out = {
        k: res[k] for k in ("unexpected_count", "unexpected_percent", "partial_unexpected_list") if k in res
    }
    if "details" in res and isinstance(res["details"], dict):
        rows = res["details"].get("unexpected_rows")
        if rows is not None:
            out["unexpected_rows"] = rows[:5]
    return out


def _project(warehouse: str | Path) -> Any:
    import great_expectations as gx

    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    root = Path(warehouse).resolve() / GX_PROJECT
    root.mkdir(parents=True, exist_ok=True)
    context = gx.get_context(mode="file", project_root_dir=str(root))
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    return context


# ------------------------------------------------------------------------------- one Spark query per table

#: The columns of a table's rows for the SQL checks' answers (none of a history table's columns starts so).
_CHECK, _ROW, _COUNT, _RANK = "_kraftlake_check", "_kraftlake_row", "_kraftlake_count", "_kraftlake_rank"


@dataclass
class SqlAnswer:
    """What an ``UnexpectedRowsExpectation``'s query returned: how many rows, the first of them (as JSON
    objects, ordered by their JSON text), or the error that stopped it."""

    count: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    error: Exception | None = None


@dataclass
class TableBatch:
    """A table's rows of one cluster as its suite reads them: ``frame`` holds the columns the column
    expectations name (GX's pandas engine evaluates them), ``answers`` each SQL check's query (its
    ``unexpected_rows_query``) -> what it returned over the same rows."""

    frame: Any
    answers: dict[str, SqlAnswer]


#: The batch GX is validating now: its pandas metric providers of ``unexpected_rows_query.*`` answer from it.
_ANSWERING: ContextVar[TableBatch | None] = ContextVar("kraftlake_gx_answering", default=None)


def _unexpected_rows_query(expectation: Any) -> str | None:
    return getattr(expectation, "unexpected_rows_query", None)


def _columns_named(expectations: Iterable[Any]) -> list[str]:
    """The columns the column expectations among ``expectations`` read, in order of first use."""
    out: list[str] = []
    for exp in expectations:
        kwargs = exp.configuration.kwargs
        for key in ("column", "column_A", "column_B"):
            if key in kwargs and kwargs[key] not in out:
                out.append(kwargs[key])
        for col in kwargs.get("column_list") or ():
            if col not in out:
                out.append(col)
    return out


def _table_rows(spark: SparkSession, warehouse: str | Path, cluster: str, name: str) -> DataFrame:
    # a history table as its readers see it: the closes not yet folded into it applied
    if name in ENTITIES:
        return spark.sql(history_query(warehouse, name, sql_string(cluster)))
    return spark.read.format("delta").load(table_path(warehouse, name)).where(F.col(CLUSTER) == cluster)


def _answers_of(branches: list[DataFrame], limit: int) -> DataFrame:
    """The SQL checks' rows unioned, each check's counted and its first ``limit`` (by their JSON text) kept."""
    from pyspark.sql import Window

    union = branches[0]
    for b in branches[1:]:
        union = union.unionAll(b)
    by_check = Window.partitionBy(_CHECK)
    ranked = union.select(
        _CHECK,
        _ROW,
        F.count(F.lit(1)).over(by_check).alias(_COUNT),
        F.row_number().over(by_check.orderBy(_ROW)).alias(_RANK),
    )
    return ranked.where(F.col(_RANK) <= limit)


def _fill(answers: dict[str, SqlAnswer], index: dict[int, str], got: Iterable[dict[str, Any]]) -> None:
    """Set the answers of the checks in ``index`` (number -> query) from their rows of :func:`_answers_of`;
    a check without rows has none."""
    counts: dict[str, int] = {}
    ranked: dict[str, list[tuple[int, str]]] = {query: [] for query in index.values()}
    for rec in got:
        query = index[rec[_CHECK]]
        counts[query] = rec[_COUNT]
        ranked[query].append((rec[_RANK], rec[_ROW]))
    for query, rows in ranked.items():
        answers[query] = SqlAnswer(
            count=counts.get(query, 0), rows=[json.loads(row) for _, row in sorted(rows)]
        )


def materialize(
    spark: SparkSession, warehouse: str | Path, cluster: str, name: str, expectations: list[Any]
) -> TableBatch:
    """Read table ``name``'s rows of ``cluster`` and answer every SQL check of ``expectations`` over them, in
    one Spark query (its result collected as Arrow): the rows' columns the column expectations name, and per
    check the count of its query's rows and the first :data:`great_expectations.constants.MAX_RESULT_RECORDS`
    of them as JSON objects.

    ``{batch}`` in a check's query is substituted as GX's Spark engine substitutes it (by the name of a
    temporary view of the rows), so a query means what it means there. A query Spark cannot analyze gets its
    error as the answer; when the query of them all fails while it runs, each check is run alone, so that one
    failing check does not take the others' answers with it.
    """
    with _one_job(spark):
        return _materialize(spark, warehouse, cluster, name, expectations)


#: The settings :func:`_one_job` makes.
_ONE_JOB = {"spark.sql.adaptive.enabled": "false", "spark.sql.autoBroadcastJoinThreshold": "-1"}


@contextmanager
def _one_job(spark: SparkSession) -> Iterator[None]:
    """``spark`` set to run a query as one job, its settings restored after.

    Adaptive execution runs each shuffle stage as a job of its own, and a broadcast join collects its small
    side in a job before the query's; without them a query's stages, shuffles included, are one job.
    """
    saved: dict[str, str | None] = {key: spark.conf.get(key, None) for key in _ONE_JOB}
    for key, value in _ONE_JOB.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, before in saved.items():
            if before is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, before)


def _materialize(
    spark: SparkSession, warehouse: str | Path, cluster: str, name: str, expectations: list[Any]
) -> TableBatch:
    import pandas as pd
    import pyarrow.compute as pc
    from great_expectations.constants import MAX_RESULT_RECORDS
    from great_expectations.expectations.metrics.query_metric_provider import QueryMetricProvider

    # cached: every check reads the same rows, and Delta lists the table's files once (per scan it would
    # list them again, in jobs of their own)
    rows = _table_rows(spark, warehouse, cluster, name).persist()
    view = f"_kraftlake_gx_{name}"
    rows.createOrReplaceTempView(view)
    try:
        # a column the rows lack is left out: GX reports it missing for the expectations naming it
        columns = [c for c in _columns_named(expectations) if c in rows.columns]
        answers: dict[str, SqlAnswer] = {}
        branches: list[DataFrame] = []
        index: dict[int, str] = {}
        for exp in expectations:
            query = _unexpected_rows_query(exp)
            if query is None or query in answers or query in index.values():
                continue
            sql = QueryMetricProvider._format_query(query, batch=view)
            try:
                branch = spark.sql(
                    f"SELECT {len(branches)} AS {_CHECK}, "
                    f"to_json(struct(*), map('ignoreNullFields', 'false')) AS {_ROW} FROM ({sql})"
                )
            except Exception as exc:  # Spark cannot analyze it: that is this check's answer
                answers[query] = SqlAnswer(error=exc)
                continue
            index[len(branches)] = query
            branches.append(branch)
        parts = [rows.select(*columns)] if columns else []
        if branches:
            parts.append(_answers_of(branches, MAX_RESULT_RECORDS))
        if not parts:
            return TableBatch(frame=pd.DataFrame(), answers=answers)
        both = parts[0]
        for part in parts[1:]:
            both = both.unionByName(part, allowMissingColumns=True)
        try:
            table = both.toArrow()
        except Exception:
            return _materialize_apart(rows, columns, branches, index, answers, MAX_RESULT_RECORDS)
        if branches:
            is_row = pc.is_null(table[_CHECK])
            _fill(answers, index, table.filter(pc.invert(is_row)).to_pylist())
            table = table.filter(is_row)
        return TableBatch(frame=table.select(columns).to_pandas(), answers=answers)
    finally:
        spark.catalog.dropTempView(view)
        rows.unpersist()


def _materialize_apart(
    rows: DataFrame,
    columns: list[str],
    branches: list[DataFrame],
    index: dict[int, str],
    answers: dict[str, SqlAnswer],
    limit: int,
) -> TableBatch:
    """:func:`materialize`'s result one query at a time (after the query of them all failed): an error
    reading the rows is raised, a check's error is its answer."""
    import pandas as pd

    frame = rows.select(*columns).toArrow().to_pandas() if columns else pd.DataFrame()
    for i, branch in enumerate(branches):
        try:
            got = _answers_of([branch], limit).collect()
        except Exception as exc:
            answers[index[i]] = SqlAnswer(error=exc)
            continue
        _fill(answers, {i: index[i]}, (r.asDict() for r in got))
    return TableBatch(frame=frame, answers=answers)


def _answer(execution_engine: Any, domain_kwargs: dict[str, Any], query: str) -> SqlAnswer:
    from great_expectations.core.metric_domain_types import MetricDomainTypes

    batch = _ANSWERING.get()
    frame, _, _ = execution_engine.get_compute_domain(domain_kwargs, domain_type=MetricDomainTypes.TABLE)
    if batch is None or frame is not batch.frame or query not in batch.answers:
        raise ValidationError(
            "an unexpected_rows_query over a pandas batch is answered only from the Spark query "
            "kraftlake.spark.validate.materialize ran for that batch"
        )
    answer = batch.answers[query]
    if answer.error is not None:
        raise answer.error
    return answer


@cache
def _register_answer_metrics() -> None:
    """Give GX's pandas engine the two metrics of ``UnexpectedRowsExpectation``, answered from the batch's
    :class:`TableBatch` (GX computes them with its Spark and SQL engines only)."""
    from great_expectations.execution_engine import PandasExecutionEngine
    from great_expectations.expectations.metrics.metric_provider import metric_value
    from great_expectations.expectations.metrics.query_metric_provider import QueryMetricProvider

    class AnsweredRowsTable(QueryMetricProvider):
        metric_name = "unexpected_rows_query.table"
        value_keys = ("unexpected_rows_query",)
        query_param_name = "unexpected_rows_query"

        @metric_value(engine=PandasExecutionEngine)
        def _pandas(
            cls,
            execution_engine: PandasExecutionEngine,
            metric_domain_kwargs: dict[str, Any],
            metric_value_kwargs: dict[str, Any],
            metrics: dict[str, Any],
            runtime_configuration: dict[str, Any],
        ) -> list[dict[str, Any]]:
            query = cls._get_query_from_metric_value_kwargs(metric_value_kwargs)
            return _answer(execution_engine, metric_domain_kwargs, query).rows

    class AnsweredRowsCount(QueryMetricProvider):
        metric_name = "unexpected_rows_query.row_count"
        value_keys = ("unexpected_rows_query",)
        query_param_name = "unexpected_rows_query"

        @metric_value(engine=PandasExecutionEngine)
        def _pandas(
            cls,
            execution_engine: PandasExecutionEngine,
            metric_domain_kwargs: dict[str, Any],
            metric_value_kwargs: dict[str, Any],
            metrics: dict[str, Any],
            runtime_configuration: dict[str, Any],
        ) -> int:
            query = cls._get_query_from_metric_value_kwargs(metric_value_kwargs)
            return _answer(execution_engine, metric_domain_kwargs, query).count


# ------------------------------------------------------------------------------- GX's project


def _datasource(context: Any) -> Any:
    """The project's pandas datasource (one of another kind left by an older kraftlake is replaced)."""
    from great_expectations.datasource.fluent import PandasDatasource

    try:
        source = context.data_sources.get(DATASOURCE)
    except Exception:  # not there yet
        source = None
    if isinstance(source, PandasDatasource):
        return source
    if source is not None:
        context.data_sources.delete(DATASOURCE)
    return context.data_sources.add_pandas(name=DATASOURCE)


def _batch_definition(source: Any, name: str) -> Any:
    try:
        asset = source.get_asset(name)
    except LookupError:
        asset = source.add_dataframe_asset(name=name)
    try:
        return asset.get_batch_definition(name)
    except (KeyError, LookupError):
        return asset.add_batch_definition_whole_dataframe(name)


def _suite(context: Any, name: str, expectations: list[Any]) -> Any:
    """The stored suite ``name``, written only when its expectations differ from ``expectations`` (so a changed
    rule never meets a stale stored copy)."""
    import great_expectations as gx

    wanted = gx.ExpectationSuite(name=name, expectations=expectations)
    try:
        stored = context.suites.get(name)
    except Exception:  # absent on a first run
        return context.suites.add(wanted)
    if _as_stored(stored.expectations) == _as_stored(wanted.expectations):
        return stored
    return context.suites.add_or_update(wanted)


def _as_stored(expectations: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """What of ``expectations`` a suite stores, in order, without the ids the store gives them (GX's own
    equality of expectations compares the ids)."""
    return [(e.expectation_type, e.dict(exclude={"id", "rendered_content"})) for e in expectations]


def _definition(context: Any, name: str, batch_def: Any, suite: Any) -> Any:
    """The stored validation definition ``name`` of ``suite`` over ``batch_def``, added or replaced when it is
    of another suite or batch definition."""
    import great_expectations as gx

    try:
        stored = context.validation_definitions.get(name)
    except Exception:  # absent on a first run
        stored = None
    if stored is not None:
        if stored.suite.id == suite.id and stored.data.id == batch_def.id:
            return stored
        context.validation_definitions.delete(name)
    return context.validation_definitions.add(gx.ValidationDefinition(name=name, data=batch_def, suite=suite))


def validate_warehouse(
    spark: SparkSession,
    warehouse: str | Path,
    cluster: str,
    tables: Iterable[str] | None = None,
    build_docs: bool = True,
    progress: bool | None = None,
) -> ValidationReport:
    """Run the suites of :func:`warehouse_suites` (or of ``tables``) over the rows of ``cluster``, store the
    results, build Data Docs (made to open offline: :mod:`kraftlake.spark.data_docs`).

    Each table is read by one Spark query (:func:`materialize`), :data:`VALIDATE_THREADS` tables at a time;
    GX's pandas engine evaluates the suite over what it returned. A progress line per table on stderr when it
    is a terminal (``progress`` forces it on or off)."""
    from kraftlake.progress import Progress

    t0 = time.monotonic()
    suites = warehouse_suites(warehouse, cluster)
    names = list(tables) if tables is not None else list(suites)
    for name in names:
        if name not in suites:
            raise ValidationError(f"no suite for table {name!r}")
        # a Delta table is a folder with a _delta_log (DeltaTable.isDeltaTable loads each log: 0.5 s a table)
        if not Path(table_path(warehouse, name), "_delta_log").is_dir():
            raise ValidationError(f"{table_path(warehouse, name)} is not a Delta table: ingest first")
    _register_answer_metrics()
    context = _project(warehouse)
    source = _datasource(context)
    report = ValidationReport(success=True, evaluated=0)
    bar = Progress("validate", len(names), unit="tables", enabled=progress)
    definitions = {}
    for name in names:
        batch_def = _batch_definition(source, name)
        suite = _suite(context, f"kraftlake.{name}", suites[name])
        definitions[name] = (suite, _definition(context, f"kraftlake.{name}", batch_def, suite))
    # the tables' queries side by side (each mostly waits on the driver's planning and small jobs), GX's
    # evaluations in this thread as their batches arrive, in the tables' order
    with _one_job(spark), ThreadPoolExecutor(VALIDATE_THREADS, thread_name_prefix="kraftlake-gx") as pool:
        batches = {
            name: pool.submit(
                _timed_batch, spark, warehouse, cluster, name, definitions[name][0].expectations
            )
            for name in names
        }
        for name in names:
            bar.update(bar.done, note=name)
            batch, t1 = batches[name].result()
            _evaluate(report, name, definitions[name][1], batch)
            report.table_seconds[name] = time.monotonic() - t1
            bar.advance(1)
    bar.close()
    report.success = not report.failures
    if build_docs:
        context.build_data_docs()
        report.docs = {site: url for site, url in _docs_urls(context).items()}
        localize_sites(report.docs.values())
    report.seconds = time.monotonic() - t0
    return report


#: Tables whose queries :func:`validate_warehouse` runs at once.
VALIDATE_THREADS = 3


def _timed_batch(
    spark: SparkSession, warehouse: str | Path, cluster: str, name: str, expectations: list[Any]
) -> tuple[TableBatch, float]:
    """:func:`_materialize` of table ``name`` and when it began."""
    t1 = time.monotonic()
    return _materialize(spark, warehouse, cluster, name, expectations), t1


def _evaluate(report: ValidationReport, name: str, vd: Any, batch: TableBatch) -> None:
    """GX's evaluation of ``vd`` over table ``name``'s ``batch``, its failures added to ``report``."""
    token = _ANSWERING.set(batch)
    try:
        result = vd.run(batch_parameters={"dataframe": batch.frame}, result_format="SUMMARY")
    finally:
        _ANSWERING.reset(token)
    for r in result.results:
        report.evaluated += 1
        if not r.success:
            cfg = r.expectation_config
            report.failures.append(
                Failure(
                    table=name,
                    check=(cfg.meta or {}).get("check", cfg.type),
                    expectation=cfg.type,
                    description=getattr(cfg, "description", None) or "",
                    observed=_observed(r),
                )
            )


def _docs_urls(context: Any) -> dict[str, str]:
    out = {}
    for site in context.get_docs_sites_urls():
        out[str(site.get("site_name"))] = str(site.get("site_url"))
    return out
