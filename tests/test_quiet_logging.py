"""Quiet by default: pyspark's own Python loggers write to the job's log file, not stderr, unless verbose; the
JVM gets the log file and the console level as system properties for conf/log4j2.properties."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kraftlake.spark.session import REPO_ROOT, logging_options

_PROBE = """
import logging, sys
from pathlib import Path
from kraftlake.spark.session import route_python_logs
route_python_logs(Path(sys.argv[1]), sys.argv[2] == "verbose")
from pyspark.logger import PySparkLogger
PySparkLogger.getLogger("SQLQueryContextLogger").error("[UNRESOLVED_COLUMN] nope")
logging.getLogger("py4j.clientserver").warning("closing")
"""


def _run(log: Path, mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(log), mode], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stderr


def test_python_loggers_go_to_the_file_and_stderr_only_when_verbose(tmp_path: Path) -> None:
    quiet = tmp_path / "logs" / "quiet.log"
    assert _run(quiet, "quiet") == ""
    text = quiet.read_text()
    assert "ERROR SQLQueryContextLogger: [UNRESOLVED_COLUMN] nope" in text
    assert "WARNING py4j.clientserver: closing" in text
    loud = tmp_path / "loud.log"
    err = _run(loud, "verbose")
    assert "[UNRESOLVED_COLUMN] nope" in err and "closing" in err
    assert "[UNRESOLVED_COLUMN] nope" in loud.read_text()


def test_jvm_options_and_the_log4j2_file(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    assert logging_options(log, verbose=False) == f"-Dkraftlake.console.level=off -Dkraftlake.log.file={log}"
    assert logging_options(None, verbose=True) == "-Dkraftlake.console.level=warn"
    conf = (REPO_ROOT / "conf" / "log4j2.properties").read_text()
    assert "${sys:kraftlake.log.file:-/dev/null}" in conf
    assert "rootLogger.appenderRef.stdout.level = ${consoleLevel}" in conf
