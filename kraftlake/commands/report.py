"""``kraftlake report``: what happened to a cluster in a window of its history, as one page, Markdown or JSON.

``--warehouse W`` reads the warehouse's Delta tables without Spark (``--cluster`` names the cluster of a
warehouse holding several); ``--log-dir DIR`` reads a metadata log directory (a Kafka controller's, or a
mirror's) and replays it. Neither starts a JVM. The window is ``--from``/``--to``: offsets, or ISO-8601 times (UTC unless a zone is given;
a time stands for the last record at or before it, as ``<entity>_at_time``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kraftlake.report.errors import ReportError
from kraftlake.warehouse.location import warehouse_argument

FORMATS = ("html", "md", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--warehouse", type=warehouse_argument, help="a kraftlake warehouse (read without Spark)"
    )
    source.add_argument("--log-dir", help="a metadata log directory (__cluster_metadata-0), replayed")
    parser.add_argument("--from", dest="start", help="the window's start: an offset or an ISO-8601 time")
    parser.add_argument("--to", dest="end", help="the window's end (included): an offset or an ISO-8601 time")
    parser.add_argument(
        "--cluster", help="the cluster (of a warehouse holding several; with --log-dir, its name)"
    )
    parser.add_argument("--out", help="the file to write (.html, .md or .json); default: Markdown on stdout")
    parser.add_argument("--format", choices=FORMATS, help="the output format (default: from --out's suffix)")


def output_format(out: str | None, fmt: str | None) -> str:
    """The format asked, else the one ``out``'s suffix names, else Markdown (for a terminal or a ticket)."""
    if fmt is not None:
        return fmt
    if out is None:
        return "md"
    suffix = Path(out).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise ReportError(f"--out {out}: write .html, .md or .json (or say which with --format)")
    return suffix


#: ``prctl``'s PR_SET_THP_DISABLE (linux/prctl.h).
_PR_SET_THP_DISABLE = 41


def _without_huge_pages() -> None:
    """Ask Linux to back this process's memory with ordinary pages from now on.

    A report touches many fresh buffers once (columns, their JSON) and exits; with transparent huge pages
    ``always``, each first touch of a region clears a whole 2 MB page, which costs the kernel more than the
    report's own work saves. Elsewhere, or where the call is refused, nothing changes."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_THP_DISABLE, 1, 0, 0, 0)


def run(args: argparse.Namespace) -> int:
    _without_huge_pages()
    # a report allocates hundreds of thousands of small containers (cells, tuples, rows) and keeps them to the
    # end: the cyclic collector's passes over them would find nothing to free
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        if was_enabled:
            gc.enable()


def _run(args: argparse.Namespace) -> int:
    from kraftlake.report.render import render_chunks
    from kraftlake.report.sections import build_report

    fmt = output_format(args.out, args.format)
    if args.warehouse is not None:
        from kraftlake.report import warehouse

        data = warehouse.report_input(args.warehouse, args.start, args.end, args.cluster)
        source = str(args.warehouse)
    else:
        from kraftlake.report import log_dir

        data = log_dir.report_input(args.log_dir, args.start, args.end, args.cluster)
        source = str(args.log_dir)
    with ThreadPoolExecutor(max_workers=2) as pool:
        # the large sections' JSON is written by Arrow (without the GIL): its first pieces while the next
        # sections are computed, then two pieces at once while the ones before are written out
        report = build_report(data, source, pool if fmt == "json" else None)
        _write(args.out, render_chunks(report, fmt, data, pool))
    if args.out is not None:
        print(f"kraftlake report: wrote {Path(args.out)} ({data.window.text()})", file=sys.stderr)
    return 0


def _write(out: str | None, chunks: Iterator[bytes | memoryview]) -> None:
    """``chunks`` one after the other to the file ``out`` (its directory made), else to stdout."""
    if out is None:
        binary = getattr(sys.stdout, "buffer", None)
        if binary is None:  # a text stream only (an embedding's)
            sys.stdout.write(b"".join(chunks).decode("utf-8"))
        else:
            sys.stdout.flush()
            for chunk in chunks:
                binary.write(chunk)
            binary.flush()
    else:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            for chunk in chunks:
                f.write(chunk)
