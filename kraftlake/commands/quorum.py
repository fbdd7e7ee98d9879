"""`kraftlake quorum`: run a local KRaft quorum (all voters here, or one voter per process) or describe one.

    kraftlake quorum start --voters 3 --data-dir D [--cluster-id X]
    kraftlake quorum start --node-id 1 --voters 1@127.0.0.1:9001,2@127.0.0.1:9002,3@127.0.0.1:9003 --data-dir D
    kraftlake quorum describe --bootstrap 127.0.0.1:9001 [--replication]
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from kraftlake.commands._args import directory, non_negative_int, port, positive_int
from kraftlake.raft.config import QuorumConfig
from kraftlake.service.client import QuorumClient, parse_endpoint
from kraftlake.service.config import NodeConfig, parse_voters
from kraftlake.service.errors import ServiceError
from kraftlake.service.gctune import tune_for_service
from kraftlake.service.runner import ensure_append_secret
from kraftlake.service.service import LocalQuorum, RaftService

DEFAULT_CLUSTER_ID = "kraftlake-local"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's options."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = sub.add_parser("start", help="run a quorum (or one voter) in the foreground")
    start.add_argument("--voters", required=True,
                       help="a count (all voters in this process) or id@host:port,... (with --node-id)")
    start.add_argument("--node-id", type=non_negative_int, help="run only this voter of --voters id@host:port,...")
    start.add_argument("--data-dir", required=True, type=directory,
                       help="parent of node-<id> log dirs (count form) or this voter's log dir (--node-id)")
    start.add_argument("--cluster-id", default=DEFAULT_CLUSTER_ID, help=f"default {DEFAULT_CLUSTER_ID}")
    start.add_argument("--base-port", type=port, default=0,
                       help="count form: voter i listens on base-port + i - 1 (default: free ports)")
    start.add_argument("--no-fsync", action="store_true", help="do not fsync log flushes")
    start.add_argument("--append-secret", type=Path,
                       help="--node-id form: the append credential file of the cluster (one voter's append.secret), "
                            "copied into this voter's data dir at its first start; without it the voter writes a "
                            "random one (clients that append need the file: QuorumClient(append_secret=...))")
    start.add_argument("--quiet", action="store_true", help="no status line")
    start.add_argument("--election-timeout-ms", type=positive_int, default=1000, help="default 1000 (Kafka's)")
    start.add_argument("--fetch-timeout-ms", type=positive_int, default=2000, help="default 2000 (Kafka's)")
    start.add_argument("--linger-ms", type=non_negative_int, default=25, help="append linger, default 25 (Kafka's)")
    start.add_argument("--snapshot-max-bytes", type=positive_int, default=20 * 1024 * 1024,
                       help="committed record bytes between snapshots, default 20 MiB (Kafka's "
                            "metadata.log.max.record.bytes.between.snapshots)")
    start.add_argument("--snapshot-interval-ms", type=non_negative_int, default=3_600_000,
                       help="time between snapshots, default 1 hour (metadata.log.max.snapshot.interval.ms)")
    start.add_argument("--retention-bytes", type=non_negative_int, default=100 * 1024 * 1024,
                       help="log kept behind the latest snapshot for slow readers, default 100 MiB (Kafka's "
                            "metadata.max.retention.bytes; 0: delete it at each snapshot)")
    start.add_argument("--no-snapshots", action="store_true",
                       help="never snapshot (as Kafka's TestRaftServer, which has no state machine)")
    describe = sub.add_parser("describe", help="print the quorum status like kafka-metadata-quorum")
    describe.add_argument("--bootstrap", required=True, help="host:port of a voter")
    describe.add_argument("--cluster-id", default=DEFAULT_CLUSTER_ID, help=f"default {DEFAULT_CLUSTER_ID}")
    describe.add_argument("--replication", action="store_true", help="the per-replica table")


def run(args: argparse.Namespace) -> int:
    """Start or describe."""
    if args.action == "describe":
        return _describe(args)
    return _start(args)


def _describe(args: argparse.Namespace) -> int:
    client = QuorumClient([parse_endpoint(args.bootstrap)], args.cluster_id)
    try:
        description, from_leader = client.describe()
    finally:
        client.close()
    lines = description.replication_lines() if args.replication else description.status_lines()
    print("\n".join(lines))
    if not from_leader:
        print(f"(answered by a non-leader; leader {description.leader_id} unreachable)", file=sys.stderr)
    return 0


def _wait_for_signal() -> threading.Event:
    done = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return done


def _start(args: argparse.Namespace) -> int:
    done = _wait_for_signal()
    fsync = not args.no_fsync
    if args.node_id is None:
        try:
            count = int(args.voters)
        except ValueError:
            raise ServiceError("--voters id@host:port,... needs --node-id") from None
        if args.base_port and args.base_port + count - 1 > 65535:
            raise ServiceError(f"--base-port {args.base_port}: voter {count} would listen on port "
                               f"{args.base_port + count - 1}, above 65535")
        ports = {i: args.base_port + i - 1 for i in range(1, count + 1)} if args.base_port else None
        quorum = LocalQuorum(count, args.data_dir, args.cluster_id, fsync=fsync, ports=ports,
                             quorum=_quorum_config(args, frozenset(range(1, count + 1))),
                             node_options=_snapshot_options(args)).start()
        tune_for_service()
        voters = ",".join(f"{i}@{h}:{p}" for i, (h, p) in sorted(quorum.endpoints.items()))
        print(f"quorum {args.cluster_id}: voters {voters}; data in {args.data_dir}; append credential in "
              f"{quorum.append_secret_path}", flush=True)
        try:
            while not done.wait(1.0):
                if not args.quiet:
                    _status(" ".join(_node_status(s) for s in quorum.services.values()))
        finally:
            quorum.stop()
        return 0
    endpoints = parse_voters(args.voters)
    if args.append_secret is not None:
        try:
            shared = args.append_secret.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ServiceError(f"--append-secret {args.append_secret}: {exc}") from None
        ensure_append_secret(args.data_dir, shared)
    config = NodeConfig(args.node_id, endpoints, args.data_dir, args.cluster_id, fsync=fsync,
                        quorum=_quorum_config(args, frozenset(endpoints)), **_snapshot_options(args))
    service = RaftService(config).start()
    tune_for_service()
    print(f"node {args.node_id} of {args.cluster_id} on 127.0.0.1:{service.port}; data in {args.data_dir}",
          flush=True)
    try:
        while not done.wait(1.0):
            if not args.quiet:
                _status(_node_status(service))
    finally:
        service.stop()
    return 0


def _snapshot_options(args: argparse.Namespace) -> dict[str, Any]:
    if args.no_snapshots:
        return {"snapshot_max_bytes": 1 << 62, "snapshot_interval_ms": 0}
    return {"snapshot_max_bytes": args.snapshot_max_bytes, "snapshot_interval_ms": args.snapshot_interval_ms,
            "retention_bytes": args.retention_bytes}


def _quorum_config(args: argparse.Namespace, voters: frozenset[int]) -> QuorumConfig:
    return QuorumConfig(voters=voters, election_timeout_ms=args.election_timeout_ms, append_linger_ms=args.linger_ms,
                        fetch_timeout_ms=args.fetch_timeout_ms,
                        election_backoff_max_ms=args.election_timeout_ms,
                        request_timeout_ms=max(2000, args.fetch_timeout_ms),
                        max_fetch_wait_ms=min(500, args.fetch_timeout_ms // 2))


def _node_status(service: RaftService) -> str:
    node = service.runner.node
    role = node.role if node is not None else "Stopped"
    return f"[{service.node_id} {role} epoch={service.epoch} leader={service.leader_id} hw={service.high_watermark}]"


def _status(line: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    if sys.stdout.isatty():
        sys.stdout.write(f"\r{stamp} {line}\x1b[K")
    else:
        sys.stdout.write(f"{stamp} {line}\n")
    sys.stdout.flush()
