"""The CLI imports only the command it runs: `kraftlake --help` and the file commands never load pyspark
(nor pandas or altair), and every entry of the dispatch table names a module with the two hooks."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from shared_paths import KAFKA_LOGS

from kraftlake.cli import COMMANDS, build_parser, chosen

GOLDEN = Path(__file__).parent / "records" / "golden" / "every_type.log"
MULTI_EPOCH = KAFKA_LOGS / "kafkademo-multi-epoch"

_PROBE = """
import contextlib, io, json, sys
from kraftlake.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j", "delta", "pandas", "altair"))
commands = sorted(m for m in sys.modules if m.startswith(("kraftlake.commands.", "jobs.", "pipelines")))
print(json.dumps({"code": code, "heavy": heavy, "commands": commands, "printed": len(out.getvalue())}))
"""


def _imports(argv: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_help_imports_no_command() -> None:
    seen = _imports(["--help"])
    assert seen["code"] == 0 and seen["printed"]
    assert seen["heavy"] == []
    assert seen["commands"] == []


@pytest.mark.parametrize(
    "argv",
    [
        ["decode", "--summary", str(GOLDEN)],
        ["image", str(MULTI_EPOCH)],
        ["compact", "--help"],
        ["sql", "--help"],
        ["report", "--help"],
    ],
)
def test_a_command_imports_its_module_and_no_spark(argv: list[str]) -> None:
    seen = _imports(argv)
    assert seen["code"] == 0 and seen["printed"]
    assert seen["heavy"] == []
    module = COMMANDS[argv[0]].module
    assert module in seen["commands"]
    others = {c.module for name, c in COMMANDS.items() if name != argv[0]}
    assert others.isdisjoint(seen["commands"])


def test_every_table_entry_has_its_hooks() -> None:
    for name, command in COMMANDS.items():
        module = importlib.import_module(command.module)
        assert callable(module.add_arguments) and callable(module.run), name
    args = build_parser().parse_args(["decode", str(GOLDEN)])
    assert args.command == "decode"


def test_chosen_is_the_first_word() -> None:
    assert chosen(["decode", "x"]) == "decode"
    assert chosen(["-h", "sql", "--help"]) == "sql"
    assert chosen(["nope", "decode"]) is None
    assert chosen([]) is None
