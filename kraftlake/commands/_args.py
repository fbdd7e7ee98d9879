"""Argument types shared by the subcommands: numbers refused at parse time (argparse prints one error line
and exits with 2) rather than answered as if they made sense."""

from __future__ import annotations

import argparse
from pathlib import Path


def _int(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def non_negative_int(text: str) -> int:
    """An integer >= 0 (an offset, a count that may be zero)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive (at least 1)")
    return value


def port(text: str) -> int:
    """A TCP port, 0 (any free port) to 65535."""
    value = _int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a TCP port (0-65535)")
    return value


def directory(text: str) -> Path:
    """A directory to use or create: refused when it, or the nearest existing one above it, is not a directory."""
    path = Path(text)
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        what = "is not a directory" if probe == path else f"cannot be created: {probe} is not a directory"
        raise argparse.ArgumentTypeError(f"{text} {what}")
    return path
