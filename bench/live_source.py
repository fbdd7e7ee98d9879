"""One cluster of ``bench_live_fleet``: a 3-voter kraftlake quorum in a process of its own, written at a real
cluster's rate (:mod:`bench.cluster_rate`), followed by the fleet stream over the network as it
follows Kafka's controllers (DescribeCluster, DescribeQuorum, KRaft Fetch as an observer).

A process per cluster, not threads of the driver: the voters then share neither the driver's GIL nor its
scheduling, as a real cluster's controllers do not. The driver tells each source how far its stream committed
(``committed``, a shared integer) so that a phase starts once the one before is queryable, and reads the
source's reports from ``reports``: ``("ready", name, bootstrap)``, ``("phase", name, phase, first, last,
ended)`` per phase written, ``("done", name)`` once its last phase is queryable, ``("failed", name, error)``.
"""

from __future__ import annotations

import threading
import time
import traceback
from pathlib import Path
from typing import Any

from bench.cluster_rate import Phase, cluster_records, write_noops, write_phases

#: Seconds a phase may wait for the stream to commit its last offset.
COMMIT_WAIT_S = 900.0


def serve_cluster(
    name: str,
    cluster_id: str,
    quorum_dir: str,
    log_dir: str,
    steady: int,
    churn_rate: float,
    burst: int,
    committed: Any,
    reports: Any,
    stop: Any,
) -> None:
    """The process's body: start the quorum, write the phases, keep the voters answering until ``stop``."""
    from kraftlake.protocol import messages as m
    from kraftlake.records import encode_metadata_record
    from kraftlake.service import LocalQuorum

    try:
        creation, churn = cluster_records(Path(log_dir), steady, burst)
        q = LocalQuorum(3, quorum_dir, cluster_id, fsync=True)
        q.start()
    except Exception:
        reports.put(("failed", name, traceback.format_exc(limit=3)))
        return
    done = threading.Event()

    def committed_to(offset: int) -> None:
        deadline = time.monotonic() + COMMIT_WAIT_S
        while committed.value < offset and time.monotonic() < deadline and not stop.is_set():
            time.sleep(0.05)

    def report_phases(phases: dict[str, Phase]) -> None:
        for phase, p in phases.items():
            reports.put(("phase", name, phase, p.first, p.last, p.ended))

    try:
        q.wait_for_leader()
        reports.put(("ready", name, ",".join(f"{h}:{p}" for h, p in q.endpoints.values())))
        noop = encode_metadata_record(m.NoOpRecord(), 0)
        noops = threading.Thread(target=write_noops, args=(q.append, done, noop), daemon=True)
        noops.start()
        phases: dict[str, Phase] = {}
        write_phases(
            q.append,
            committed_to,
            creation,
            churn,
            steady=steady,
            churn_rate=churn_rate,
            stop=stop,
            phases=phases,
        )
        report_phases(phases)
        reports.put(("done", name))
        # the NoOps go on while the other clusters finish: a controller never stops writing them
        stop.wait()
        done.set()
        noops.join(timeout=30)
    except Exception:
        reports.put(("failed", name, traceback.format_exc(limit=3)))
    finally:
        done.set()
        q.stop()
