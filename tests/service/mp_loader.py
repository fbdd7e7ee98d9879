"""The client process of the multi-process test: appends until told to stop, logging every acknowledgement.

Each attempt carries a fresh value (``<seq>-<attempt>``), so an attempt whose answer was lost can appear at
most once, and every acknowledged value must appear exactly once, at its acknowledged offset.

    python mp_loader.py CLUSTER_ID ACK_FILE STOP_FILE SECRET_FILE HOST:PORT [HOST:PORT ...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from kraftlake.service.client import QuorumClient, parse_endpoint
from kraftlake.service.errors import NotLeaderError, ServiceError


def main(argv: list[str]) -> int:
    cluster_id, ack_file, stop_file, secret_file, *endpoints = argv
    client = QuorumClient(
        [parse_endpoint(e) for e in endpoints], cluster_id, timeout_s=5.0, append_secret=secret_file
    )
    stop = Path(stop_file)
    seq = 0
    with open(ack_file, "w") as out:
        while not stop.exists():
            attempt = 0
            while not stop.exists():
                values = [f"{seq}-{attempt}-{k}".encode() for k in range(4)]
                try:
                    base, _ = client.append(values, timeout_s=5.0)
                except (NotLeaderError, ServiceError, OSError):
                    attempt += 1
                    time.sleep(0.05)
                    continue
                for k, value in enumerate(values):
                    out.write(f"{base + k} {value.decode()}\n")
                out.flush()
                break
            seq += 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
