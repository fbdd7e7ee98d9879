"""The compatibility matrix's one Spark session (`warehouse_spark`), shared by every release's warehouse check.

It is not named ``spark``: the root conftest groups a test asking for ``spark`` with the Spark modules, which
would split a release module from the module-scoped cluster it shares with its Kafka checks.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def warehouse_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from pyspark.sql import SparkSession

    from kraftlake.spark.session import build_session

    running = SparkSession.getActiveSession()  # an xdist worker's Spark tests' session: reuse, leave running
    warehouse: Path = tmp_path_factory.mktemp("compat-spark-warehouse")
    session = build_session("kraftlake-compat", warehouse=warehouse)
    yield session
    if running is None:
        session.stop()
