"""``ingest --log-dir D --warehouse W``: import a Kafka metadata log directory (``spark-submit jobs/ingest.py``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jobs._cli import add_cluster, add_warehouse, main_of, session
from kraftlake.commands._args import positive_int
from kraftlake.errors import KraftlakeError
from kraftlake.progress import Progress


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-dir",
        required=True,
        action="append",
        metavar="[NAME=]DIR",
        help="a Kafka log dir or its __cluster_metadata-0 directory, as the cluster NAME (default: its cluster "
        "id, from meta.properties); repeat it to ingest several clusters into the one warehouse (their "
        "histories replayed on the executors, one task a cluster)",
    )
    add_warehouse(parser)
    add_cluster(parser, "the name of the cluster of a single --log-dir DIR (same as --log-dir NAME=DIR)")
    parser.add_argument(
        "--batch-records", type=positive_int, default=500_000, help="records per committed slice"
    )
    parser.add_argument(
        "--replay",
        choices=("auto", "driver", "executors"),
        default="auto",
        help="where the histories are replayed: in the driver, one log dir after another, or on the executors, "
        "every cluster at once (auto: the executors for several log dirs, the driver for one)",
    )


def log_dirs(values: list[str], cluster: str | None) -> list[tuple[str | None, str]]:
    """The ``--log-dir`` values as (cluster name or None, directory), in order; a value ``NAME=DIR`` whose
    ``NAME`` is a cluster name and ``DIR`` exists names its cluster (a directory whose own name holds ``=``
    stays a directory). Refused: a name given twice, ``--cluster`` beside several log dirs or a named one."""
    from kraftlake.spark.tables.clusters import NAME_PATTERN

    out: list[tuple[str | None, str]] = []
    for value in values:
        name, sep, path = value.partition("=")
        if sep and NAME_PATTERN.fullmatch(name) and not Path(value).exists():
            out.append((name, path))
        else:
            out.append((None, value))
    if cluster is not None:
        if len(out) > 1 or out[0][0] is not None:
            raise KraftlakeError(
                "--cluster names the cluster of a single --log-dir DIR: use --log-dir NAME=DIR"
            )
        out = [(cluster, out[0][1])]
    named = [n for n, _ in out if n is not None]
    twice = sorted({n for n in named if named.count(n) > 1})
    if twice:
        raise KraftlakeError(f"cluster {twice[0]!r} is named by two --log-dir: one name, one cluster")
    return out


def run(args: argparse.Namespace) -> int:
    dirs = log_dirs(args.log_dir, args.cluster)
    spark = session("ingest", args.warehouse, args.verbose)
    if args.replay == "executors" or (args.replay == "auto" and len(dirs) > 1):
        _ingest_fleet(spark, args, dirs)
        return 0
    for name, log_dir in dirs:
        _ingest_one(spark, args, name, log_dir)
    return 0


def _ingest_fleet(spark: Any, args: argparse.Namespace, dirs: list[tuple[str | None, str]]) -> None:
    """The log dirs replayed on the executors, one line per committed slice and one summary line a cluster."""
    from pipelines.fleet_ingest import ingest_fleet
    from pipelines.ingest import IngestResult

    def report(so_far: IngestResult) -> None:
        print(
            f"cluster {so_far.cluster} slice {so_far.slices}: offsets up to {so_far.last_offset} "
            f"({so_far.records} records, {so_far.seconds:.1f}s)",
            file=sys.stderr,
        )

    for result in ingest_fleet(spark, dirs, args.warehouse, args.batch_records, progress=report):
        _summary(result)


def _ingest_one(spark: Any, args: argparse.Namespace, name: str | None, log_dir: str) -> None:
    """One log dir into the warehouse as its cluster, with its progress and its summary line."""
    from pipelines.ingest import IngestResult, ingest

    # a progress line on a terminal; elsewhere (logs, CI) one line per committed slice
    with Progress("ingest", unit="records") as bar:

        def report(so_far: IngestResult) -> None:
            if bar.enabled:
                bar.update(so_far.records, note=f"offset {so_far.last_offset}")
            else:
                print(
                    f"slice {so_far.slices}: offsets up to {so_far.last_offset} "
                    f"({so_far.records} records, {so_far.seconds:.1f}s)",
                    file=sys.stderr,
                )

        result = ingest(spark, log_dir, args.warehouse, args.batch_records, progress=report, cluster=name)
    _summary(result)


def _summary(result: Any) -> None:
    """A cluster's gap lines and its summary line."""
    from pipelines.commit import gap_line

    rate = result.records / result.seconds if result.seconds else 0.0
    for first, last in result.gaps:
        print(f"kraftlake ingest: {gap_line(first, last, last + 1)}", file=sys.stderr)
    print(
        f"ingested {result.records} records of cluster {result.cluster} (offsets {result.first_offset}.."
        f"{result.last_offset}) in {result.slices} slices, {result.seconds:.1f}s, {rate:.0f} records/s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("ingest", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
