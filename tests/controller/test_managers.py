"""The controller's managers: each reads the controller only through ``ControllerState``, none imports the
controller's module or reaches into another object's private members, and they leave no reference cycle
that would keep a replaced controller (and its image) alive."""

from __future__ import annotations

import ast
import gc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kraftlake.controller
from kraftlake.controller import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreatableTopic,
    Listener,
    MemoryMetadataLog,
    QuorumController,
)
from kraftlake.controller.config import ControllerConfig
from kraftlake.controller.feature_control import FeatureControlManager
from kraftlake.controller.ids import TopicIdMinter
from kraftlake.image import EMPTY, MetadataImage
from kraftlake.image.model import PartitionRegistration, TopicImage

PACKAGE = Path(kraftlake.controller.__file__).parent
MANAGERS = [
    "cluster_control",
    "replication_control",
    "configuration_control",
    "feature_control",
    "producer_id_control",
]


def _imported_modules(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


@pytest.mark.parametrize("name", MANAGERS)
def test_a_manager_never_imports_the_controller_module(name: str) -> None:
    tree = ast.parse((PACKAGE / f"{name}.py").read_text())
    imported = _imported_modules(tree)
    assert not any(i.startswith("kraftlake.controller.quorum_controller") for i in imported)
    assert not any(i.endswith("QuorumController") for i in imported)


@pytest.mark.parametrize("name", [*MANAGERS, "quorum_controller", "state", "brokers"])
def test_no_private_member_of_another_object_is_read(name: str) -> None:
    """``x._name`` only on ``self`` (a module's own private functions are called by bare name)."""
    tree = ast.parse((PACKAGE / f"{name}.py").read_text())
    reaches = [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    ]
    assert reaches == []


def _registered_controller() -> QuorumController:
    c = QuorumController(node_id=1, seed=3)
    c.activate(1, MemoryMetadataLog(), 0)
    for b in range(3):
        r = c.handle_register_broker(
            BrokerRegistrationRequest(b, f"incarnation{b:012d}", (Listener("PLAINTEXT", "h", 9092),)), 0
        )
        c.execute(r)
        c.execute(
            c.handle_heartbeat(BrokerHeartbeatRequest(b, r.response.data["broker_epoch"], c.next_offset), 0)
        )
    c.execute(c.handle_create_topics([CreatableTopic("t", 3, 3)]))
    return c


def test_a_dropped_controller_is_freed_without_the_cycle_collector() -> None:
    c = _registered_controller()
    assert len(c.image.topics_by_name["t"].partitions) == 3
    ref = weakref.ref(c)
    enabled = gc.isenabled()
    gc.disable()
    try:
        del c
        assert ref() is None, "a reference cycle keeps the controller alive until a full collection"
    finally:
        if enabled:
            gc.enable()


class _FixedState:
    """A ``ControllerState`` that is not a controller: the managers need nothing more."""

    def __init__(self, image: MetadataImage, config: ControllerConfig) -> None:
        self.image = image
        self.config = config
        self.next_offset = image.offset + 1
        self.topic_ids = TopicIdMinter(1, 1, image)

    def records_len(self, n: int) -> int:
        return n

    def partitions_of(
        self, broker_id: int, img: MetadataImage
    ) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
        return iter(())


def test_a_manager_runs_on_any_controller_state() -> None:
    config = ControllerConfig(metadata_version=20, features={"eligible.leader.replicas.version": 1})
    features = FeatureControlManager(_FixedState(EMPTY, config))
    assert features.metadata_version() == 20  # nothing finalized yet: the configured version
    boot = features.bootstrap_result()
    levels: list[Any] = [r for r, _ in boot.records]
    assert [(r.name, r.feature_level) for r in levels] == [
        ("metadata.version", 20),
        ("eligible.leader.replicas.version", 1),
    ]
    assert not features.elr_enabled()  # the image has not finalized it
