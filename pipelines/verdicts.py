"""The record-level suite's verdicts of ``metadata_log`` rows the driver holds, without a Spark job.

:func:`verdicts` evaluates :func:`kraftlake.spark.validate.reasons_sql` (the SQL of
:data:`kraftlake.spark.validate.RECORD_RULES`) in one ``spark.sql`` over an inline ``VALUES`` table of the
rows: Spark resolves it to a local relation and folds the projection in the driver's JVM, so no job runs, and
the query costs a few py4j round trips (``createDataFrame`` of a ``pyarrow.Table`` costs some thirty: the
session's confs one by one, the schema, the Arrow stream through a file), which a fleet's micro-batches wait
for under one GIL. The table holds only what the rules read: the columns they name and, of a struct column, the
fields they name (``partition_record.isr``); a predicate over a struct with fewer fields gives the same answer.
"""

from __future__ import annotations

import math
import re
from functools import cache
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from kraftlake.spark.structs import metadata_log_struct_type
from kraftlake.spark.tables.layout import sql_string
from kraftlake.spark.validate import RECORD_RULES, reasons_sql

#: Rows past which :func:`verdicts` hands the rows to Spark as Arrow: the SQL text grows with the rows, and
#: parsing it costs more than the Arrow hand-over's round trips (a burst of thousands of records).
VALUES_ROWS = 256
_INTEGRAL_SUFFIX: dict[type, str] = {T.ByteType: "Y", T.ShortType: "S", T.IntegerType: "", T.LongType: "L"}


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


def sql_literal(value: Any, dtype: T.DataType) -> str:
    """``value`` (as ``pyarrow``'s ``to_pylist`` gives it) as an SQL expression of type ``dtype``.

    Raises
    ------
    TypeError
        On a type the rules' columns do not have (a map, a date, a decimal...).
    """
    if value is None:
        return f"CAST(NULL AS {dtype.simpleString()})"
    if isinstance(dtype, T.StructType):
        fields = ", ".join(
            f"{sql_string(f.name)}, {sql_literal(value.get(f.name), f.dataType)}" for f in dtype.fields
        )
        return f"named_struct({fields})"
    if isinstance(dtype, T.ArrayType):
        items = ", ".join(sql_literal(v, dtype.elementType) for v in value)
        return f"CAST(array({items}) AS {dtype.simpleString()})"
    if isinstance(dtype, T.StringType):
        return sql_string(value)
    if isinstance(dtype, T.BooleanType):
        return "true" if value else "false"
    if type(dtype) in _INTEGRAL_SUFFIX:
        return f"{int(value)}{_INTEGRAL_SUFFIX[type(dtype)]}"
    if isinstance(dtype, (T.FloatType, T.DoubleType)):
        text = "NaN" if math.isnan(value) else repr(float(value))
        return f"CAST('{text}' AS {dtype.simpleString()})"
    if isinstance(dtype, T.BinaryType):
        return f"X'{bytes(value).hex()}'"
    raise TypeError(f"no SQL literal for a {dtype.simpleString()} column")


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


def verdicts_sql(rows: Any) -> str:
    """The query of :func:`verdicts` for ``rows`` (a ``pyarrow.Table`` of :func:`rule_rows`, at least one row):
    one row per row, in order, of its failed rules."""
    schema = rule_schema()
    values = ", ".join(
        "(" + ", ".join(sql_literal(row[f.name], f.dataType) for f in schema.fields) + ")"
        for row in rows.to_pylist()
    )
    columns = ", ".join(f"`{name}`" for name in schema.names)
    return f"SELECT {reasons_sql(schema.names)} FROM VALUES {values} AS rows({columns})"


def verdicts(spark: SparkSession, rows: Any) -> Any:
    """The rules each of ``rows`` fails (``metadata_log`` rows as a ``pyarrow.Table``), row for row, as an
    Arrow ``list<string>`` array (empty lists for valid rows): what ``reasons_sql`` gives over the same rows in
    a DataFrame. More than :data:`VALUES_ROWS` rows go to Spark as Arrow instead (one small job in the JVM)."""
    import pyarrow as pa

    kind = pa.list_(pa.string())
    if rows.num_rows == 0:
        return pa.array([], type=kind)
    reduced = rule_rows(rows)
    if rows.num_rows > VALUES_ROWS:
        schema = rule_schema()
        frame = spark.createDataFrame(reduced, schema)
        return frame.selectExpr(f"{reasons_sql(schema.names)} AS r").toArrow().column("r").combine_chunks()
    answer = spark.sql(verdicts_sql(reduced)).collect()
    return pa.array([list(r[0]) for r in answer], type=kind)
