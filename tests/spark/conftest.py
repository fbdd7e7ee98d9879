"""The one local[2] SparkSession every Spark test shares, and the warehouses several modules read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from kraftlake.spark.session import build_session

    warehouse: Path = tmp_path_factory.mktemp("spark-warehouse")
    session = build_session("kraftlake-tests", warehouse=warehouse)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def risk_warehouse(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> tuple[Path, Path]:
    """Every risk scenario run on one cluster: its log directory and the warehouse ingested from it (in
    slices, so that versions are closed by later slices). Read by the risk and the report tests."""
    from kraftlake.sim.cluster_log import LocalMetadataLog
    from kraftlake.sim.risk_scenarios import SCRIPTS, run_scenario
    from pipelines.ingest import ingest

    root = tmp_path_factory.mktemp("risk")
    log = LocalMetadataLog(root / "log", cluster_id="risk-scenarios-0001")
    run_scenario(list(SCRIPTS), 11, log)
    log.close()
    ingest(spark, log.partition_dir, root / "warehouse", batch_records=40)
    return log.partition_dir, root / "warehouse"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in str(item.fspath):
            item.add_marker(pytest.mark.spark)
