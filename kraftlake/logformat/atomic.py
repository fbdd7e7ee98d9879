"""Atomic file replacement as Kafka's ``Utils.atomicMoveWithFallback``: write a temp file, flush, fsync, rename."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Fsync a directory so a rename or create in it is durable (a no-op where unsupported)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(
    path: str | os.PathLike[str], data: bytes, *, tmp_suffix: str = ".tmp", fsync: bool = True
) -> None:
    """Replace `path` with `data` atomically through ``path + tmp_suffix``; the temp file never survives."""
    target = Path(path)
    tmp = target.with_name(target.name + tmp_suffix)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, target)
        if fsync:
            fsync_dir(target.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
