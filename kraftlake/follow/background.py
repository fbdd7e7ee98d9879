"""`BackgroundFollower`: a `Follower` on a daemon thread, for a driver that reads the mirror as it grows.

The Spark stream's ``--source kafka`` runs one in the driver: the follower mirrors the quorum's committed
batches into a directory, the log-tail streaming source reads that directory, and the driver watches
`error` so that a follower that had to stop (authorization, another cluster, a controller gone for good)
fails the stream with its cause instead of leaving it idle.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from kraftlake.follow.bootstrap import Bootstrap
from kraftlake.follow.errors import FollowError
from kraftlake.follow.follower import Follower, FollowProgress
from kraftlake.follow.mirror import MetadataMirror
from kraftlake.follow.observer import Endpoint
from kraftlake.wire.client_config import ClientSecurity


class BackgroundFollower:
    """Starts following on construction; `stop` (or the context manager) ends it and closes the mirror."""

    def __init__(
        self,
        bootstrap: Sequence[Endpoint] | Bootstrap,
        data_dir: str | Path,
        *,
        security: ClientSecurity | None = None,
        cluster_id: str | None = None,
        observer_id: int | None = None,
        fsync: bool = True,
        give_up_s: float | None = 60.0,
    ) -> None:
        self.mirror = MetadataMirror(data_dir, cluster_id=cluster_id, observer_id=observer_id, fsync=fsync)
        self.follower = Follower(bootstrap, self.mirror, security=security, give_up_s=give_up_s)
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kraftlake-follow", daemon=True)
        self._thread.start()

    @property
    def path(self) -> Path:
        """The mirror's ``__cluster_metadata-0`` directory."""
        return self.mirror.partition_dir

    @property
    def progress(self) -> FollowProgress:
        return self.follower.progress

    def _run(self) -> None:
        try:
            self.follower.run(self._stop)
        except BaseException as exc:  # reported to the driver through `error` / `check`
            self.error = exc
        finally:
            self.mirror.close()

    def check(self) -> None:
        """Raise the follower's error, if it stopped with one."""
        if self.error is not None:
            if isinstance(self.error, FollowError):
                raise self.error
            raise FollowError(f"following stopped: {self.error}") from self.error

    def wait_caught_up(self, timeout_s: float) -> FollowProgress:
        """Block until the mirror holds the leader's high watermark as first seen (or raise on an error)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.check()
            o = self.follower.observer
            if o.high_watermark >= 0 and o.log_end >= o.high_watermark and o.download is None:
                return self.progress
            time.sleep(0.05)
        self.check()
        raise FollowError(
            f"the mirror did not catch up within {timeout_s:.0f}s: {self.progress.line()} "
            f"{self.progress.last_error}"
        )

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop following and wait for the thread (the mirror is closed by it)."""
        self._stop.set()
        self._thread.join(timeout_s)

    def __enter__(self) -> BackgroundFollower:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
