"""Shared fixtures. Each section belongs to the layer that needs it; keep it small."""

from __future__ import annotations

from pathlib import Path

import pytest
from peers.kafka import KafkaMetadataLog, produce_metadata_log

# --- the real Kafka peer ---------------------------------------------------------------------------------

KAFKA_FIXTURES = ("kafka_metadata_log",)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # a test that asks for the peer needs the Kafka jars and a JVM: mark it, so `-m "not kafka"` skips it
    for item in items:
        if any(name in getattr(item, "fixturenames", ()) for name in KAFKA_FIXTURES):
            item.add_marker(pytest.mark.kafka)
        # `make test` runs two xdist workers (--dist loadgroup): every test of the Spark session in one of them, so they keep
        # sharing one local[2] session; the other modules whole, so a module's fixture (a Kafka cluster, a
        # quorum) starts once
        spark = "spark" in getattr(item, "fixturenames", ())  # the closure: also through a module fixture
        item.add_marker(pytest.mark.xdist_group("spark" if spark else str(item.fspath)))


@pytest.fixture(scope="session")
def kafka_metadata_log(tmp_path_factory: pytest.TempPathFactory) -> KafkaMetadataLog:
    """A real KRaft Kafka's stopped log dir after `peers.kafka.WORKLOAD`; run once per session.

    Read-only: copy files before changing them. ``tests/`` is on ``sys.path`` (it has no ``__init__``), so
    the peer is the module ``peers.kafka``.
    """
    return produce_metadata_log(Path(tmp_path_factory.mktemp("kafka-peer")))
