"""Scripted scenarios under tests/raft/testdata/ (run `pytest tests/raft --rewrite` to regenerate)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from datadriven import parse, run_file

from kraftlake.sim.script import ScriptedQuorum

TESTDATA = Path(__file__).parent / "testdata"


@pytest.mark.parametrize("path", sorted(TESTDATA.glob("*.txt")), ids=lambda p: p.stem)
def test_script(path: Path, request: pytest.FixtureRequest) -> None:
    rewrite = bool(request.config.getoption("--rewrite", default=False)) or bool(
        os.environ.get("KRAFTLAKE_REWRITE")
    )
    quorum = ScriptedQuorum()
    mismatches = run_file(path, quorum.run, rewrite)
    assert not mismatches, "\n\n".join(mismatches)


def test_parse_rejects_a_block_without_separator() -> None:
    with pytest.raises(ValueError, match="expected '----'"):
        parse("status\nnot a separator\n")
