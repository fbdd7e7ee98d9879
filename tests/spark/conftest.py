"""The one local[2] SparkSession every Spark test shares."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from kraftlake.spark.session import build_session

    warehouse: Path = tmp_path_factory.mktemp("spark-warehouse")
    session = build_session("kraftlake-tests", warehouse=warehouse)
    yield session
    session.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in str(item.fspath):
            item.add_marker(pytest.mark.spark)
