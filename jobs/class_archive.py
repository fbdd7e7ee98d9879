"""``python -m jobs.class_archive``: record the driver JVM's class-data archive (`make setup` runs it).

A session started with ``-XX:ArchiveClassesAtExit`` runs what kraftlake's commands run (a sliced ingest with
closes and their fold, the table functions, a compaction) on a synthetic log in a temporary warehouse; when its
JVM exits, the JVM writes every class it loaded into the archive, which later sessions map instead of loading
and verifying those classes again (see :mod:`kraftlake.spark.session`). Written under a temporary name and
renamed when the JVM is gone, so a session never maps half an archive.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from jobs._cli import log_file


def record(target: Path, timeout_s: float = 600.0) -> Path:
    """Run the workload in a JVM that writes its archive to ``target`` at exit; returns ``target``."""
    from pyspark import SparkContext

    from kraftlake.sim.workloads.entities import write_synthetic_log
    from kraftlake.spark.session import build_session
    from pipelines.compact import compact
    from pipelines.ingest import ingest
    from udfs.sql import register

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    spark = build_session(
        "kraftlake-class-archive",
        log_file=log_file("class-archive"),
        verbose=False,
        archive_classes_at_exit=partial,
    )
    with tempfile.TemporaryDirectory(prefix="kraftlake-class-archive-") as tmp:
        log = write_synthetic_log(Path(tmp) / "log")
        warehouse = Path(tmp) / "warehouse"
        result = ingest(spark, log, warehouse, batch_records=500)
        register(spark, warehouse)
        spark.sql(f"SELECT count(*) FROM partitions_at({result.last_offset // 2})").collect()
        spark.sql(f"SELECT * FROM brokers_at({result.last_offset})").toPandas()
        compact(spark, warehouse, progress=False)
    gateway = SparkContext._gateway
    assert gateway is not None
    proc = gateway.proc
    spark.stop()
    gateway.shutdown()
    proc.stdin.close()  # the JVM exits when its stdin closes, writing the archive on the way out
    proc.wait(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while not partial.is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    if not partial.is_file():
        raise SystemExit(f"the JVM exited without writing {partial}")
    partial.replace(target)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    from kraftlake.spark.session import class_archive

    parser = argparse.ArgumentParser(prog="python -m jobs.class_archive", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="the archive (default: the session's own)")
    parser.add_argument("--if-missing", action="store_true", help="do nothing when the archive exists")
    args = parser.parse_args(argv)
    target = args.out or class_archive()
    if args.if_missing and target.is_file():
        return 0
    t0 = time.monotonic()
    out = record(target)
    size = out.stat().st_size / 2**20
    print(f"class-data archive {out} ({size:.0f} MiB) in {time.monotonic() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
