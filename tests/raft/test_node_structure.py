"""How `RaftNode` is split: its concerns (`election`, `leader_replication`, `follower_fetch`) build on
`node_base` and not on each other or on `node`, and every call into `QuorumState`'s transitions is in `node.py`
(`quorum_state.py` defines them)."""

from __future__ import annotations

import ast
from pathlib import Path

import kraftlake.raft
from kraftlake.raft.election import Election
from kraftlake.raft.follower_fetch import FollowerFetch
from kraftlake.raft.leader_replication import LeaderReplication
from kraftlake.raft.node import RaftNode
from kraftlake.raft.node_base import NodeBase

PACKAGE = Path(kraftlake.raft.__file__).parent
CONCERNS = ("election", "leader_replication", "follower_fetch")


def _transition_calls(path: Path) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr.startswith("transition_to_")
    ]


def _raft_imports(path: Path) -> set[str]:
    return {
        node.module.removeprefix("kraftlake.raft.")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kraftlake.raft.")
    }


def test_transitions_are_made_in_node_py_only() -> None:
    elsewhere = {
        path.name: lines
        for path in sorted(PACKAGE.glob("*.py"))
        if path.name not in ("node.py", "quorum_state.py") and (lines := _transition_calls(path))
    }
    assert not elsewhere, f"transitions called outside node.py (file: lines): {elsewhere}"
    assert len(_transition_calls(PACKAGE / "node.py")) >= 7  # one per kind of state at least


def test_concerns_build_on_node_base_alone() -> None:
    for name in CONCERNS:
        imported = _raft_imports(PACKAGE / f"{name}.py")
        assert "node_base" in imported, name
        assert not imported & {"node", *CONCERNS}, f"{name} imports {imported & {'node', *CONCERNS}}"


def test_raft_node_is_its_concerns() -> None:
    assert RaftNode.__mro__[1:5] == (Election, LeaderReplication, FollowerFetch, NodeBase)
    assert not getattr(RaftNode, "__abstractmethods__", None)
