"""The SQL endpoint: a long-running Spark Connect server (and, on request, a Thrift JDBC/ODBC server) over a
warehouse, with the table functions (``partitions_at(N)`` ...) and the warehouse tables registered; and the
client side, a Connect session for ``kraftlake sql/state --remote``.

Where the functions live. Spark Connect gives every client its own session (``newSession()`` of the server's)
and so does the Thrift server for each JDBC connection; temporary functions belong to one session, so they
would be invisible there. What every session of one JVM shares is the catalog (``SharedState``). The server
therefore runs with Spark's in-memory catalog and creates the functions *permanently* in its ``default``
database (and the warehouse tables as external tables beside them): each client resolves
``partitions_at(N)`` unqualified, keeps its own temporary views and settings, and nothing outlives the server
(no metastore is written; ``kraftlake functions`` is the way to store them in one). Both endpoints run in the
one driver this process starts (Connect with ``SparkConnectService.start``, as Spark's own
``SparkConnectServer`` does, and ``HiveThriftServer2.startWithContext``), after the functions exist: a client
never sees a half-registered server.

Security. Both endpoints bind 127.0.0.1 by default, and so does the driver itself in local mode (its RPC and
block manager ports would otherwise listen on the host's address). Another address needs authentication:
Spark Connect's pre-shared token (``spark.connect.authenticate.token``, read here from the
``SPARK_CONNECT_AUTHENTICATE_TOKEN`` environment variable or ``--token-file`` and handed to the JVM through
that variable, so it is not in the session's configuration where ``SET`` would show it). The Connect server
speaks plaintext gRPC: the token then crosses the network in clear unless a TLS-terminating proxy is put in
front, which pyspark's client insists on anyway (it sends a token without TLS only to ``localhost``). The
Thrift server's own authentication (``hive.server2.authentication``) needs an LDAP server, Kerberos or a Java
class of ours: none is at hand, so JDBC is served on a loopback address only and refused elsewhere.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftlake.errors import KraftlakeError
from pipelines.endpoint_file import TOKEN_ENV

#: Spark Connect's and HiveServer2's usual ports.
DEFAULT_PORT = 15002
DEFAULT_JDBC_PORT = 10000
#: The Spark conf key through which a client learns which warehouse a server serves.
WAREHOUSE_CONF = "spark.kraftlake.warehouse"
#: Environment variables HiveServer2 prefers to its configuration (ThriftCLIService reads them first): left in
#: place they could move the JDBC server to another port, address or transport than the one checked here.
_HIVE_ENV = ("HIVE_SERVER2_THRIFT_PORT", "HIVE_SERVER2_THRIFT_BIND_HOST", "HIVE_SERVER2_TRANSPORT_MODE")
_CONNECT_SERVICE = "org.apache.spark.sql.connect.service.SparkConnectService"


def is_loopback(host: str) -> bool:
    """:func:`kraftlake.service.request_server.is_loopback` (imported when asked: the service's modules are a
    fifth of a second of a client's start)."""
    from kraftlake.service.request_server import is_loopback as loopback

    return loopback(host)


class EndpointError(KraftlakeError):
    """Raised when an endpoint cannot be served as asked (an address that needs authentication, a port in use,
    no warehouse) or cannot be reached (nothing listening, a refused token)."""


@dataclass(frozen=True)
class ServeConfig:
    """What ``kraftlake serve`` serves and where. ``port``/``jdbc_port`` 0 take any free port."""

    warehouse: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    jdbc_port: int | None = None
    token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Endpoints:
    connect: str
    jdbc: str | None
    functions: list[str]
    tables: list[str]
    sql_route: str | None = None


def read_token(path: str | None) -> str | None:
    """The Connect token: the first line of ``path``, else ``$SPARK_CONNECT_AUTHENTICATE_TOKEN``, else None."""
    if path is not None:
        try:
            text = Path(path).read_text().strip()
        except OSError as exc:
            raise EndpointError(f"cannot read the token file {path}: {exc.strerror}") from None
        token = text.splitlines()[0].strip() if text else ""
        if not token:
            raise EndpointError(f"the token file {path} is empty")
        return token
    return os.environ.get(TOKEN_ENV) or None


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _port_free(host: str, port: int) -> bool:
    try:
        with socket.create_server((host, port)):
            return True
    except OSError:
        return False


def check(config: ServeConfig) -> None:
    """Refuse, before any JVM starts, what cannot be served safely or at all (:class:`EndpointError`)."""
    from kraftlake.spark.tables.layout import OFFSETS, table_path

    if not Path(table_path(config.warehouse, OFFSETS), "_delta_log").is_dir():
        raise EndpointError(
            f"{config.warehouse} holds no kraftlake warehouse (no {OFFSETS} table): run ingest first"
        )
    loopback = is_loopback(config.host)
    if not loopback and config.token is None:
        raise EndpointError(
            f"{config.host} is not a loopback address: Spark Connect there needs a token "
            f"(${TOKEN_ENV} or --token-file); or bind 127.0.0.1"
        )
    if config.jdbc_port is not None and not loopback:
        raise EndpointError(
            f"the JDBC server has no authentication here (hive.server2.authentication needs LDAP "
            f"or Kerberos): it binds a loopback address only, not {config.host}"
        )
    for name, port in (("Spark Connect", config.port), ("JDBC", config.jdbc_port)):
        if port and not _port_free(config.host, port):
            raise EndpointError(f"{name} port {port} on {config.host} is in use")
    if config.jdbc_port and config.jdbc_port == config.port:
        raise EndpointError(f"Spark Connect and JDBC cannot share port {config.port}")


def server_conf(config: ServeConfig) -> dict[str, str]:
    """The session settings of a server (static ones: they are set when its JVM starts)."""
    from kraftlake.spark.session import DEFAULT_CONF, read_conf

    conf = {
        # the catalog every session of this JVM shares, and only for as long as it runs (module docstring)
        "spark.sql.catalogImplementation": "in-memory",
        "spark.connect.grpc.binding.address": config.host,
        "spark.connect.grpc.binding.port": str(config.port),
        "spark.hadoop.hive.server2.thrift.bind.host": config.host,
        "spark.hadoop.hive.server2.thrift.port": str(config.jdbc_port or 0),
        "spark.hadoop.hive.server2.transport.mode": "binary",
        "spark.hadoop.hive.server2.authentication": "NONE",
        # An endpoint answers small interactive queries: adaptive execution submits each query stage as a job of
        # its own once the one before has finished (a `partitions_at` is 14 jobs with it, 9 without), which is
        # latency here and buys nothing at this size. A client's session may turn it back on (SET).
        "spark.sql.adaptive.enabled": "false",
        WAREHOUSE_CONF: str(config.warehouse.resolve()),
    }
    master = (read_conf(DEFAULT_CONF) if DEFAULT_CONF.is_file() else {}).get("spark.master", "local[*]")
    if master.startswith("local"):
        # no executor needs to reach a local driver: keep its RPC and block manager ports off the network
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.host"] = "127.0.0.1"
    return conf


class Server:
    """One driver serving a warehouse over Spark Connect (and JDBC; and, with ``answer`` on a loopback address,
    the SQL route of :mod:`pipelines.sql_route`, printing with it). ``start`` returns once clients can query;
    ``stop`` stops the endpoints, then the session."""

    def __init__(
        self,
        config: ServeConfig,
        progress: Callable[[str], None] | None = None,
        answer: Callable[[Any, str, str], str] | None = None,
    ) -> None:
        self.config = config
        self.progress = progress or (lambda _: None)
        self.answer = answer
        self.spark: Any = None
        self._thrift: Any = None
        self._connect_started = False
        self._route: Any = None

    def start(self) -> Endpoints:
        check(self.config)
        from kraftlake.spark.session import build_session

        for name in _HIVE_ENV:
            os.environ.pop(name, None)
        if self.config.token is not None:
            # read by Spark Connect when it starts (Connect.getAuthenticateToken); the JVM inherits it
            os.environ[TOKEN_ENV] = self.config.token
        else:
            os.environ.pop(TOKEN_ENV, None)
        self.progress("starting Spark")
        self.spark = build_session("kraftlake-serve", conf=server_conf(self.config))
        if str(self.spark.conf.get("spark.sql.catalogImplementation")) != "in-memory":
            raise EndpointError("a session with another catalog was already running in this process")
        self.progress("registering the functions and tables")
        functions, tables = register_catalog(self.spark, self.config.warehouse)
        jvm = self.spark.sparkContext._jvm
        jvm.org.apache.spark.sql.connect.service.SparkConnectService.start(self.spark.sparkContext._jsc.sc())
        self._connect_started = True
        service = jvm.java.lang.Class.forName(_CONNECT_SERVICE + "$").getField("MODULE$").get(None)
        host = _url_host(
            "localhost"
            if self.config.token is not None and is_loopback(self.config.host)
            else self.config.host
        )
        # pyspark's client sends a token over plaintext to "localhost" only (else it wants TLS)
        connect = f"sc://{host}:{service.localPort()}"
        jdbc = None
        if self.config.jdbc_port is not None:
            thrift = jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2
            self._thrift = thrift.startWithContext(self.spark._jsparkSession.sqlContext())
            jdbc = f"jdbc:hive2://{_url_host(self.config.host)}:{self._jdbc_port()}/"
        route = None
        if self.answer is not None and is_loopback(self.config.host):
            from pipelines.sql_route import SqlRoute

            prepare = guarded_functions(self.config.warehouse)
            self._route = SqlRoute(self.spark, self.answer, self.config.token, prepare)
            route = self._route.start(self.config.host)
        return Endpoints(connect, jdbc, functions, tables, route)

    def _jdbc_port(self, timeout: float = 60.0) -> int:
        # HiveServer2 binds on a thread of its own after startWithContext returns; its port number is the bound
        # one from then on (the configured one, or the free port it got for 0)
        binary = [
            s
            for s in self._thrift.getServices()
            if s.getClass().getName() == "org.apache.hive.service.cli.thrift.ThriftBinaryCLIService"
        ]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            port = int(binary[0].getPortNumber()) if binary else 0
            if port:
                try:
                    with socket.create_connection((self.config.host, port), timeout=1.0):
                        return port
                except OSError:
                    pass
            time.sleep(0.2)
        raise EndpointError(f"the JDBC server did not start listening within {timeout:.0f} s")

    def alive(self) -> bool:
        """Whether the driver's JVM still runs (HiveServer2 exits it when its listener fails)."""
        proc = getattr(getattr(self.spark, "sparkContext", None), "_gateway", None)
        proc = getattr(proc, "proc", None)
        return proc is None or proc.poll() is None

    def stop(self) -> None:
        if self._route is not None:
            self._route.stop()
            self._route = None
        if self.spark is None:
            return
        if not self.alive():  # nothing left to ask
            self.spark = None
            return
        jvm = self.spark.sparkContext._jvm
        if self._thrift is not None:
            self._thrift.stop()
            self._thrift = None
        if self._connect_started:
            empty = jvm.scala.Option.empty()
            jvm.org.apache.spark.sql.connect.service.SparkConnectService.stop(empty, empty)
            self._connect_started = False
        self.spark.stop()
        self.spark = None


def guarded_functions(warehouse: Path) -> Callable[[Any, str], None]:
    """What readies a SQL route request's session (:class:`pipelines.sql_route.SqlRoute`'s ``prepare``): the
    table functions its query names created in it with the guards' values as literals
    (:func:`udfs.sql.register_for_query`), read from the warehouse without Spark and kept until one of their
    tables has a new version (:class:`kraftlake.warehouse.guard_values.GuardCache`). Where they cannot be read
    so, the query runs with the catalog's functions, which read the tables themselves."""
    from kraftlake.delta.append import DeltaAppendError
    from kraftlake.warehouse.guard_values import GuardCache
    from udfs.sql import register_for_query

    cache = GuardCache(warehouse)

    def prepare(session: Any, query: str) -> None:
        try:
            known = cache.values()
        except (DeltaAppendError, OSError):
            return
        register_for_query(session, warehouse, query, known)

    return prepare


def register_catalog(spark: Any, warehouse: Path) -> tuple[list[str], list[str]]:
    """The table functions, permanent in the current database, and the warehouse tables as external tables."""
    from kraftlake.spark.tables.layout import table_path
    from udfs.catalog import CATALOG_TABLES
    from udfs.sql import register

    functions = register(spark, warehouse, temporary=False)
    tables = []
    for name in CATALOG_TABLES:
        path = table_path(warehouse, name)
        if Path(path, "_delta_log").is_dir():
            spark.sql(f"CREATE TABLE IF NOT EXISTS `{name}` USING DELTA LOCATION '{path}'")
            tables.append(name)
    return functions, tables


# --- the client side ---------------------------------------------------------------------------------------


def remote_url(given: str | None) -> str | None:
    """The endpoint a command should use: ``--remote``, else ``$SPARK_REMOTE``, else None (a local session)."""
    url = given or os.environ.get("SPARK_REMOTE") or None
    if url is not None and not url.startswith("sc://"):
        # SPARK_REMOTE=local would make pyspark start a Connect server of its own, without the functions
        raise EndpointError(
            f"{_shown(url)!r} is not a Spark Connect endpoint (sc://host:port, as `kraftlake serve` prints)"
        )
    return url


def same_endpoint(a: str, b: str) -> bool:
    """Whether two Spark Connect URLs name the same server (host and port; parameters such as a token aside)."""

    def where(url: str) -> str:
        return url.removeprefix("sc://").split("/", 1)[0].split(";", 1)[0].lower()

    return where(a) == where(b)


def _shown(url: str) -> str:
    """``url`` fit to print: its token, if any, left out."""
    return re.sub(r"(?i)(;token=)[^;]*", r"\1...", url)


def _channel(url: str) -> Any:
    """pyspark's own reading of a Connect URL (host, port, token, use_ssl)."""
    from pyspark.errors import PySparkValueError
    from pyspark.sql.connect.client import DefaultChannelBuilder

    try:
        return DefaultChannelBuilder(url)
    except PySparkValueError as exc:
        raise EndpointError(
            f"{_shown(url)}: {(exc.getMessageParameters() or {}).get('detail', exc)}"
        ) from None


def _reachable(url: str, host: str, port: int, timeout: float = 5.0) -> None:
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=timeout):
            pass
    except OSError as exc:
        # the Connect client would retry for about ten minutes before saying anything
        raise EndpointError(
            f"nothing answers at {_shown(url)} ({exc.strerror or exc}): is `kraftlake serve` running?"
        ) from None


def connect_session(url: str, warehouse: str | Path | None = None, record_udfs: bool = True) -> Any:
    """A Spark Connect session on a ``kraftlake serve`` endpoint; with ``warehouse``, checks that the server
    serves that warehouse; with ``record_udfs``, registers :data:`pipelines.record_udf_names.RECORD_UDFS` for
    the session. Raises :class:`EndpointError` when nothing listens or the server refuses us."""
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    channel = _channel(url)
    host, port = channel.host, int(channel.endpoint.rsplit(":", 1)[1])
    if (
        channel.token is not None
        and not channel.use_ssl
        and host != "localhost"
        and is_loopback(host.strip("[]"))
    ):
        # with a token pyspark speaks TLS to any host but "localhost", and the server speaks plaintext: the
        # handshake would fail and be retried for minutes
        raise EndpointError(
            f"with a token, name the local endpoint sc://localhost:{port}, not {host} (pyspark's "
            f"client sends a token without TLS to localhost only)"
        )
    _reachable(url, host, port)
    # not SparkSession.builder.remote(): that switches this whole process to Connect mode (an environment
    # variable), which a later local session would inherit
    spark = RemoteSession.builder.remote(url).create()
    try:
        served = spark.conf.get(WAREHOUSE_CONF, None)
    except SparkConnectGrpcException as exc:
        # a refusal before any session exists is a bare gRPC status, printed as the repr of grpc's error
        status = getattr(exc.getGrpcStatusCode(), "name", "UNKNOWN")
        details = re.search(r'details = "([^"\n]*)"', str(exc))
        text = details.group(1) if details else str(exc).strip().split("\n", 1)[0]
        if status == "UNAUTHENTICATED":
            raise EndpointError(
                f"{_shown(url)} refused us: {text} (set ${TOKEN_ENV} or add ;token=... to the URL)"
            ) from None
        raise EndpointError(f"{_shown(url)}: {status}: {text}") from None
    if served is None:
        raise EndpointError(
            f"{_shown(url)} is a Spark Connect server, but not `kraftlake serve`'s (no {WAREHOUSE_CONF})"
        )
    if warehouse is not None and Path(served) != Path(warehouse).resolve():
        raise EndpointError(f"{_shown(url)} serves the warehouse {served}, not {Path(warehouse).resolve()}")
    # Python UDFs live in one session, never in the server's catalog: each client session registers its own
    # (they run in the server's Python workers)
    if record_udfs:
        from udfs.records import register_udfs

        register_udfs(spark)
    return spark


#: The repository root: jobs, pipelines and udfs are top-level packages beside kraftlake.
REPO = Path(__file__).resolve().parents[1]


def command_env(**extra: str) -> dict[str, str]:
    """The environment of a ``kraftlake`` command this process starts as a user's shell would: without this
    process's py4j gateway, Connect endpoint or token, with this interpreter for Python workers and the
    repository on the path; ``extra`` on top."""
    drop = ("PYSPARK_GATEWAY", "SPARK_REMOTE", "SPARK_CONNECT_AUTHENTICATE_TOKEN")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return dict(env, PYTHONPATH=str(REPO), PYSPARK_PYTHON=sys.executable, **extra)


@contextmanager
def serve_process(
    warehouse: str | Path,
    log: Path,
    *options: str,
    env: Mapping[str, str] | None = None,
    start_timeout_s: float = 600.0,
) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    """``kraftlake serve --warehouse W [options]`` as a child process (its stderr into ``log``): yields the process
    and its endpoints by the names it prints (``Spark Connect``, ``JDBC``) once it is ready. At the end of the
    block a server still running gets SIGTERM (and a kill after 60 s).

    Raises
    ------
    EndpointError
        When the server ends or stays silent before it is ready (the tail of its log in the message).
    """
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kraftlake.cli", "serve", "--warehouse", str(warehouse), *options],
            env=None if env is None else dict(env),
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + start_timeout_s
        while time.monotonic() < deadline and (line := proc.stdout.readline()):
            lines.append(line.strip())
            if line.startswith("ready:"):
                break
        if not lines or not lines[-1].startswith("ready:"):
            raise EndpointError(f"kraftlake serve did not start: {lines} {log.read_text()[-4000:]}")
        yield proc, dict(line.split(": ", 1) for line in lines[:-1])
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
