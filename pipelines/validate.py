"""``validate``: run the warehouse's Great Expectations suites, build Data Docs, report what failed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from pyspark.sql import SparkSession

from kraftlake.spark.tables.creation import open_cluster
from kraftlake.spark.validate import ValidationReport, validate_warehouse


def validate(
    spark: SparkSession,
    warehouse: str | Path,
    tables: list[str] | None = None,
    build_docs: bool = True,
    cluster: str | None = None,
) -> ValidationReport:
    """The suites over the rows of the cluster ``cluster`` (else the one the warehouse holds) in ``warehouse``
    (every table by default); see :mod:`kraftlake.spark.validate`."""
    name = open_cluster(
        spark, warehouse, cluster
    )  # an old warehouse migrated: its suites check it as it is now
    return validate_warehouse(spark, warehouse, name, tables, build_docs=build_docs)


def print_report(report: ValidationReport, out: TextIO) -> None:
    """One line per failed expectation (table, check, GX expectation type, what was observed), then a summary."""
    for f in report.failures:
        observed = json.dumps(f.observed, default=str)
        if len(observed) > 400:
            observed = observed[:400] + "..."
        out.write(f"FAILED {f.table}: {f.check} ({f.expectation}) {f.description}; observed {observed}\n")
    for site, url in report.docs.items():
        out.write(f"data docs ({site}): {url}\n")
    status = "passed" if report.success else f"{len(report.failures)} failed"
    out.write(
        f"{report.evaluated} expectations on {len(report.table_seconds)} tables, {status}, "
        f"{report.seconds:.1f}s\n"
    )
