"""The record-level suite's verdicts of ``metadata_log`` rows the driver holds, without a Spark job.

:func:`verdicts` evaluates :func:`kraftlake.spark.record_rules.reasons_sql` (the SQL of
:data:`kraftlake.spark.record_rules.RECORD_RULES`) over the rows handed to Spark as Arrow: a local relation, whose
projection Spark folds in the driver's JVM, so ``collect`` runs no job. The rows handed over hold only what the
rules read: the columns they name and, of a struct column, the fields they name (``partition_record.isr``); a
predicate over a struct with fewer fields gives the same answer, and the hand-over and the analysis cost less.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from kraftlake.spark.record_rules import RECORD_RULES, reasons_sql
from kraftlake.spark.structs import metadata_log_struct_type


@cache
def rule_schema() -> T.StructType:
    """The columns of ``metadata_log`` the record-level rules read, each struct pruned to the fields they read."""
    text = " ".join(expr for _, expr in RECORD_RULES)
    out = T.StructType()
    for f in metadata_log_struct_type().fields:
        if not re.search(rf"\b{re.escape(f.name)}\b", text):
            continue
        dtype = f.dataType
        if isinstance(dtype, T.StructType):
            used = set(re.findall(rf"\b{re.escape(f.name)}\.(\w+)", text))
            # a struct no rule looks into keeps a field, for its nullness (a record without fields is stored
            # as a struct of one, `present`: kraftlake.spark.tables.layout.stored_log_exprs)
            kept = [s for s in dtype.fields if s.name in used] or dtype.fields[:1]
            dtype = T.StructType(kept or [T.StructField("present", T.BooleanType(), True)])
        out.add(f.name, dtype, f.nullable)
    return out


def rule_rows(rows: Any) -> Any:
    """``rows`` (a ``pyarrow.Table`` of ``metadata_log`` rows) reduced to :func:`rule_schema`'s columns and
    fields."""
    import pyarrow as pa

    columns = []
    for f in rule_schema().fields:
        col = rows.column(f.name).combine_chunks()
        if isinstance(f.dataType, T.StructType):
            names = [s.name for s in f.dataType.fields]
            col = pa.StructArray.from_arrays([col.field(n) for n in names], names=names, mask=col.is_null())
        columns.append(col)
    return pa.Table.from_arrays(columns, names=rule_schema().names)


def verdicts(spark: SparkSession, rows: Any) -> Any:
    """The rules each of ``rows`` fails (``metadata_log`` rows as a ``pyarrow.Table``), row for row, as an
    Arrow ``list<string>`` array (empty lists for valid rows): what ``reasons_sql`` gives over the same rows in
    a DataFrame."""
    import pyarrow as pa

    kind = pa.list_(pa.string())
    if rows.num_rows == 0:
        return pa.array([], type=kind)
    reduced = rule_rows(rows)
    # the schema from Arrow's (every field nullable): the fields of a NULL struct are NULL in Arrow, which the
    # source schema's NOT NULL fields would refuse
    local = spark.createDataFrame(reduced)
    answer = local.selectExpr(f"{reasons_sql(reduced.column_names)} AS r").collect()
    return pa.array([list(r[0]) for r in answer], type=kind)
