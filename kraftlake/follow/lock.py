"""`WriterLock`: one writer per directory, held by the process for as long as it writes.

A lock file (``flock``, exclusive, non-blocking) with the holder's pid in it. The kernel drops the lock when
the holder's file is closed or its process dies, so the lock of a dead process is taken over without any
staleness test; the pid in the file is only what a refused second writer reports. Two writers inside one
process are refused as well (each opening is its own lock). The follower holds ``<mirror>/.lock`` (the name of
the lock file Kafka keeps in its log directories), ``stream`` holds one per cluster it writes
(`stream_lock`): two processes may stream different clusters into one warehouse, never the same one.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from kraftlake.errors import KraftlakeError


class LockedError(KraftlakeError):
    """Raised when another writer holds the lock: names the lock file and the holder's pid."""


class WriterLock:
    """Takes the lock on construction; `release` (or the context manager) gives it back.

    Parameters
    ----------
    path
        The lock file (created if missing; never deleted: deleting it would let a third writer lock a new file
        while the second still holds the old one).
    what
        What the lock guards, for the refusal's message (``mirror /data/m``).
    """

    def __init__(self, path: str | os.PathLike[str], what: str) -> None:
        self.path = Path(path)
        self.what = what
        self._fd: int | None = None
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LockedError(f"cannot open the lock file {self.path}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"process {holder}" if holder is not None else "another process"
            raise LockedError(
                f"{what} is being written by {who} (it holds {self.path}): one writer at a time"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Give the lock back (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the file releases the flock

    def __del__(self) -> None:
        self.release()  # an owner that failed half-way through its construction leaves no lock behind

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def stream_lock(warehouse: str | os.PathLike[str], cluster: str) -> WriterLock:
    """The lock of the stream of ``cluster`` into ``warehouse``: ``<warehouse>/.stream-<cluster>.lock``."""
    return WriterLock(
        Path(warehouse) / f".stream-{cluster}.lock", f"cluster {cluster} of the warehouse {warehouse}"
    )


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
