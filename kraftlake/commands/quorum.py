"""`kraftlake quorum`: run a local KRaft quorum (all voters here, or one voter per process) or describe one.

    kraftlake quorum start --voters 3 --data-dir D [--cluster-id X]
    kraftlake quorum start --node-id 1 --voters 1@127.0.0.1:9001,2@127.0.0.1:9002,3@127.0.0.1:9003 --data-dir D
    kraftlake quorum describe --bootstrap 127.0.0.1:9001 [--replication] [--command-config client.properties]
    kraftlake quorum append --bootstrap 127.0.0.1:9001 --append-secret D/append.secret [--command-config F] V...
    kraftlake quorum scram-credential --mechanism SCRAM-SHA-512 --user alice < password

A secured quorum: ``start --listener-config server.properties`` (each voter's listener: Kafka's TLS, SASL and
authorizer properties, `kraftlake.wire.listener_config`) and ``--command-config client.properties`` (how the voters
connect to each other, as any Kafka client); a non-loopback address needs one (or ``--allow-plaintext``).
"""

from __future__ import annotations

import argparse
import getpass
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
from kraftlake.wire.client_config import ClientSecurity, load_client_properties
from kraftlake.wire.listener_config import ListenerSecurity, load_listener_properties
from kraftlake.wire.sasl_server import SCRAM_DIGESTS, SCRAM_MAX_ITERATIONS, scram_credential

DEFAULT_CLUSTER_ID = "kraftlake-local"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's options."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = sub.add_parser("start", help="run a quorum (or one voter) in the foreground")
    start.add_argument(
        "--voters",
        required=True,
        help="a count (all voters in this process) or id@host:port,... (with --node-id)",
    )
    start.add_argument(
        "--node-id", type=non_negative_int, help="run only this voter of --voters id@host:port,..."
    )
    start.add_argument(
        "--data-dir",
        required=True,
        type=directory,
        help="parent of node-<id> log dirs (count form) or this voter's log dir (--node-id)",
    )
    start.add_argument("--cluster-id", default=DEFAULT_CLUSTER_ID, help=f"default {DEFAULT_CLUSTER_ID}")
    start.add_argument(
        "--base-port",
        type=port,
        default=0,
        help="count form: voter i listens on base-port + i - 1 (default: free ports)",
    )
    start.add_argument("--no-fsync", action="store_true", help="do not fsync log flushes")
    start.add_argument(
        "--append-secret",
        type=Path,
        help="--node-id form: the append credential file of the cluster (one voter's append.secret), "
        "copied into this voter's data dir at its first start; without it the voter writes a "
        "random one (clients that append need the file: QuorumClient(append_secret=...))",
    )
    start.add_argument(
        "--listener-config",
        type=Path,
        help="the voters' listener security, in Kafka's server.properties names "
        "(listener.security.protocol.map=CONTROLLER:SASL_SSL, ssl.*, sasl.enabled.mechanisms, "
        "listener.name.controller.<mechanism>.sasl.jaas.config, authorizer.class.name, "
        "super.users, kraftlake.acl.cluster.<Operation>); default PLAINTEXT",
    )
    start.add_argument(
        "--command-config",
        type=Path,
        help="Kafka client properties the voters connect to each other with (security.protocol, "
        "ssl.*, sasl.*)",
    )
    start.add_argument(
        "--allow-plaintext",
        action="store_true",
        help="listen in PLAINTEXT on a non-loopback address (anyone reaching it can vote)",
    )
    start.add_argument("--quiet", action="store_true", help="no status line")
    start.add_argument(
        "--election-timeout-ms", type=positive_int, default=1000, help="default 1000 (Kafka's)"
    )
    start.add_argument("--fetch-timeout-ms", type=positive_int, default=2000, help="default 2000 (Kafka's)")
    start.add_argument(
        "--linger-ms", type=non_negative_int, default=25, help="append linger, default 25 (Kafka's)"
    )
    start.add_argument(
        "--snapshot-max-bytes",
        type=positive_int,
        default=20 * 1024 * 1024,
        help="committed record bytes between snapshots, default 20 MiB (Kafka's "
        "metadata.log.max.record.bytes.between.snapshots)",
    )
    start.add_argument(
        "--snapshot-interval-ms",
        type=non_negative_int,
        default=3_600_000,
        help="time between snapshots, default 1 hour (metadata.log.max.snapshot.interval.ms)",
    )
    start.add_argument(
        "--retention-bytes",
        type=non_negative_int,
        default=100 * 1024 * 1024,
        help="log kept behind the latest snapshot for slow readers, default 100 MiB (Kafka's "
        "metadata.max.retention.bytes; 0: delete it at each snapshot)",
    )
    start.add_argument(
        "--no-snapshots",
        action="store_true",
        help="never snapshot (as Kafka's TestRaftServer, which has no state machine)",
    )
    describe = sub.add_parser("describe", help="print the quorum status like kafka-metadata-quorum")
    describe.add_argument("--bootstrap", required=True, help="host:port of a voter")
    describe.add_argument("--cluster-id", default=DEFAULT_CLUSTER_ID, help=f"default {DEFAULT_CLUSTER_ID}")
    describe.add_argument("--replication", action="store_true", help="the per-replica table")
    describe.add_argument("--command-config", type=Path, help="Kafka client properties (a secured quorum)")
    append = sub.add_parser("append", help="append values (one record each) and print where they committed")
    append.add_argument("--bootstrap", required=True, help="host:port of a voter")
    append.add_argument("--cluster-id", default=DEFAULT_CLUSTER_ID, help=f"default {DEFAULT_CLUSTER_ID}")
    append.add_argument("--append-secret", type=Path, required=True, help="the voters' append.secret file")
    append.add_argument("--command-config", type=Path, help="Kafka client properties (a secured quorum)")
    append.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds to keep retrying an unreachable quorum (default 30)",
    )
    append.add_argument("values", nargs="+", help="record values (UTF-8)")
    scram = sub.add_parser(
        "scram-credential", help="print a SCRAM credential (salted, as Kafka stores it) for a listener config"
    )
    scram.add_argument("--mechanism", choices=sorted(SCRAM_DIGESTS), default="SCRAM-SHA-512")
    scram.add_argument("--user", required=True, help="the user name")
    scram.add_argument(
        "--iterations", type=positive_int, default=8192, help=f"4096-{SCRAM_MAX_ITERATIONS}, default 8192"
    )
    scram.add_argument(
        "--password-file",
        type=Path,
        help="read the password from this file (default: the terminal, or stdin's first line)",
    )


def run(args: argparse.Namespace) -> int:
    """Start or describe."""
    if args.action == "describe":
        return _describe(args)
    if args.action == "append":
        return _append(args)
    if args.action == "scram-credential":
        return _scram_credential(args)
    return _start(args)


def _client_security(args: argparse.Namespace) -> ClientSecurity | None:
    return load_client_properties(args.command_config) if args.command_config else None


def _listener_security(args: argparse.Namespace) -> ListenerSecurity | None:
    return load_listener_properties(args.listener_config) if args.listener_config else None


def _append(args: argparse.Namespace) -> int:
    client = QuorumClient(
        [parse_endpoint(args.bootstrap)],
        args.cluster_id,
        append_secret=args.append_secret,
        security=_client_security(args),
    )
    try:
        base, last = client.append_retrying([v.encode() for v in args.values], deadline_s=args.timeout)
    except (OSError, TimeoutError) as exc:  # ConnectionError is an OSError
        raise ServiceError(
            f"no voter answered the append within {args.timeout:g} s (from {args.bootstrap}): "
            f"{exc or type(exc).__name__}"
        ) from None
    finally:
        client.close()
    print(f"committed at offsets {base}-{last}")
    return 0


def _scram_credential(args: argparse.Namespace) -> int:
    if args.password_file is not None:
        password = args.password_file.read_text(encoding="utf-8").rstrip("\r\n")
    elif sys.stdin.isatty():
        password = getpass.getpass(f"password of {args.user}: ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise ServiceError("an empty password")
    if args.iterations > SCRAM_MAX_ITERATIONS:
        raise ServiceError(f"--iterations {args.iterations}: Kafka's maximum is {SCRAM_MAX_ITERATIONS}")
    try:
        credential = scram_credential(args.mechanism, password, args.iterations)
    except ValueError as exc:
        raise ServiceError(str(exc)) from None
    # the JAAS option to put into listener.name.controller.<mechanism>.sasl.jaas.config
    print(f'user_{args.user}="{credential.to_string()}"')
    return 0


def _describe(args: argparse.Namespace) -> int:
    client = QuorumClient([parse_endpoint(args.bootstrap)], args.cluster_id, security=_client_security(args))
    try:
        description, from_leader = client.describe()
    except (OSError, TimeoutError) as exc:
        raise ServiceError(
            f"no answer to describe from {args.bootstrap}: {exc or type(exc).__name__}"
        ) from None
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
            raise ServiceError(
                f"--base-port {args.base_port}: voter {count} would listen on port "
                f"{args.base_port + count - 1}, above 65535"
            )
        ports = {i: args.base_port + i - 1 for i in range(1, count + 1)} if args.base_port else None
        quorum = LocalQuorum(
            count,
            args.data_dir,
            args.cluster_id,
            fsync=fsync,
            ports=ports,
            quorum=_quorum_config(args, frozenset(range(1, count + 1))),
            node_options=_snapshot_options(args),
            listener_security=_listener_security(args),
            security=_client_security(args),
        ).start()
        tune_for_service()
        voters = ",".join(f"{i}@{h}:{p}" for i, (h, p) in sorted(quorum.endpoints.items()))
        print(
            f"quorum {args.cluster_id}: voters {voters}; data in {args.data_dir}; append credential in "
            f"{quorum.append_secret_path}",
            flush=True,
        )
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
    listener = _listener_security(args)
    security_options: dict[str, Any] = {
        "peer_security": _client_security(args),
        "allow_plaintext": args.allow_plaintext,
    }
    if listener is not None:
        security_options["listener_security"] = listener
    config = NodeConfig(
        args.node_id,
        endpoints,
        args.data_dir,
        args.cluster_id,
        fsync=fsync,
        quorum=_quorum_config(args, frozenset(endpoints)),
        **_snapshot_options(args),
        **security_options,
    )
    service = RaftService(config).start()
    tune_for_service()
    host = endpoints[args.node_id][0]
    print(
        f"node {args.node_id} of {args.cluster_id} on {host}:{service.port} "
        f"({config.listener_security.protocol}); data in {args.data_dir}",
        flush=True,
    )
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
    return {
        "snapshot_max_bytes": args.snapshot_max_bytes,
        "snapshot_interval_ms": args.snapshot_interval_ms,
        "retention_bytes": args.retention_bytes,
    }


def _quorum_config(args: argparse.Namespace, voters: frozenset[int]) -> QuorumConfig:
    return QuorumConfig(
        voters=voters,
        election_timeout_ms=args.election_timeout_ms,
        append_linger_ms=args.linger_ms,
        fetch_timeout_ms=args.fetch_timeout_ms,
        election_backoff_max_ms=args.election_timeout_ms,
        request_timeout_ms=max(2000, args.fetch_timeout_ms),
        max_fetch_wait_ms=min(500, args.fetch_timeout_ms // 2),
    )


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
