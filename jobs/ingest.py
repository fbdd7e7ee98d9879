"""``ingest --log-dir D --warehouse W``: import a Kafka metadata log directory (``spark-submit jobs/ingest.py``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from jobs._cli import add_warehouse, main_of, session
from kraftlake.commands._args import positive_int
from kraftlake.progress import Progress


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-dir", required=True, help="a Kafka log dir or its __cluster_metadata-0 directory"
    )
    add_warehouse(parser)
    parser.add_argument(
        "--batch-records", type=positive_int, default=500_000, help="records per committed slice"
    )


def run(args: argparse.Namespace) -> int:
    from pipelines.commit import gap_line
    from pipelines.ingest import IngestResult, ingest

    spark = session("ingest", args.warehouse, args.verbose)
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

        result = ingest(spark, args.log_dir, args.warehouse, args.batch_records, progress=report)
    rate = result.records / result.seconds if result.seconds else 0.0
    for first, last in result.gaps:
        print(f"kraftlake ingest: {gap_line(first, last, last + 1)}", file=sys.stderr)
    print(
        f"ingested {result.records} records (offsets {result.first_offset}..{result.last_offset}) in "
        f"{result.slices} slices, {result.seconds:.1f}s, {rate:.0f} records/s"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("ingest", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
