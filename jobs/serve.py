"""``serve --warehouse W [--port P] [--jdbc-port Q] [--host H]``: the warehouse as a SQL endpoint.

A Spark Connect server (``sc://H:P``) and, with ``--jdbc-port``, a Thrift JDBC/ODBC server
(``jdbc:hive2://H:Q/``) in one driver, with ``partitions_at(N)`` and friends and the warehouse tables
registered (:mod:`pipelines.serve`); on a loopback address also ``kraftlake sql``'s SQL route
(:mod:`pipelines.sql_route`, printing as :func:`jobs.sql.printed`). Prints the endpoints once clients can query
and records the Connect one and the route in the warehouse (:mod:`pipelines.endpoint_file`: ``kraftlake sql``
over that warehouse finds them there), then
runs until SIGINT or SIGTERM, and removes the record and stops the endpoints and the session before it exits.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from jobs._cli import add_warehouse, main_of
from jobs.sql import printed
from kraftlake.commands._args import port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_warehouse(parser)
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address both endpoints bind (default 127.0.0.1); another one needs a token",
    )
    parser.add_argument(
        "--port", type=port, default=15002, help="the Spark Connect port (default 15002; 0: any)"
    )
    parser.add_argument(
        "--jdbc-port",
        type=port,
        default=None,
        help="also serve JDBC/ODBC (HiveServer2's protocol) on this port (0: any); loopback only",
    )
    parser.add_argument(
        "--token-file",
        default=None,
        help="a file whose first line is the token Connect clients must send (default: "
        "$SPARK_CONNECT_AUTHENTICATE_TOKEN, if set); needed off loopback",
    )


def run(args: argparse.Namespace) -> int:
    from pipelines.endpoint_file import record_endpoint, remove_endpoint
    from pipelines.serve import ServeConfig, Server, check, read_token

    config = ServeConfig(
        warehouse=Path(args.warehouse),
        host=args.host,
        port=args.port,
        jdbc_port=args.jdbc_port,
        token=read_token(args.token_file),
    )
    check(config)  # the refusals come before the JVM's start-up
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    server = Server(
        config, progress=lambda text: print(f"serve: {text}", file=sys.stderr, flush=True), answer=printed
    )
    try:
        if not stop.is_set():
            endpoints = server.start()
            port = int(endpoints.connect.rsplit(":", 1)[1])
            host = endpoints.connect[len("sc://") :].rsplit(":", 1)[0]
            record_endpoint(
                config.warehouse,
                endpoints.connect,
                host,
                port,
                config.token is not None,
                sql_route=endpoints.sql_route,
            )
            print(f"Spark Connect: {endpoints.connect}")
            if endpoints.jdbc is not None:
                print(f"JDBC: {endpoints.jdbc}")
            print(
                f"ready: {len(endpoints.functions)} functions, {len(endpoints.tables)} tables over "
                f"{config.warehouse.resolve()}; Ctrl-C or SIGTERM stops",
                flush=True,
            )
            if config.token is None:
                print("serve: no token: anyone who can reach the ports can query", file=sys.stderr)
            elif endpoints.connect.startswith("sc://localhost"):
                print(
                    "serve: clients need the token ($SPARK_CONNECT_AUTHENTICATE_TOKEN or ;token=... in the "
                    "URL)",
                    file=sys.stderr,
                )
            else:
                print(
                    "serve: the Connect server speaks plaintext: put a TLS-terminating proxy in front (pyspark's "
                    "client sends a token over TLS only) or tunnel to localhost",
                    file=sys.stderr,
                )
        # a wait with a timeout: the loop also notices a JVM that died under us
        while not stop.wait(1.0):
            if not server.alive():
                print("serve: the Spark driver exited", file=sys.stderr)
                return 1
    finally:
        remove_endpoint(config.warehouse)
        server.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
    print(f"stopped ({received[0] if received else 'exit'})", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("serve", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
