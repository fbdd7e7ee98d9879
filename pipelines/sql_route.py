"""The endpoint's SQL route: ``kraftlake sql``'s printed answer over HTTP, for a client on the same host.

A ``kraftlake serve`` bound to a loopback address also listens on ``http://<host>:<port>/sql`` (another port,
the same address) and records that URL beside its Connect one (:mod:`pipelines.endpoint_file`). A client that
found the server through that record POSTs ``{"query": ..., "format": "table"|"jsonl"}`` and gets the text
``kraftlake sql`` prints, made by the server: the query runs in a new session of the server's own driver
(each request its own, as each Connect client gets its own: the catalog's functions are shared, settings and
temporary views are not; the record UDFs are registered for it when the query names one, and so are the
table functions it names with their guards' values as literals: ``prepare``,
:func:`pipelines.serve.guarded_functions`) and is printed by the same code as a local run's. The client imports neither pyspark nor grpc and opens no Connect session: its
cost is Python's start, this module and one round trip.

Answers: 200 with the printed text (UTF-8); 422 with ``{"error": line}`` for a query the command refuses
(Spark's parse and analysis errors, an offset the warehouse does not hold: the line the command prints); 401
when the server has a token and the request does not carry it (``Authorization: Bearer <token>``); 400 for a
body that is not such a request; 500 with ``{"error": line}`` for anything else.

A TIMESTAMP is printed in the local time zone of the Python process that collects it (pyspark's rule, in
process and over Connect alike): the server's record carries its zone, and a client in another one is not
given the route (it goes through Connect, where its own zone applies).
"""

from __future__ import annotations

import hmac
import json
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kraftlake.errors import KraftlakeError
from pipelines.record_udf_names import calls_record_udfs

#: The path of the route on the server.
PATH = "/sql"
#: A request body larger than this is refused (a query is text a user typed or a script holds).
MAX_BODY = 1 << 20
FORMATS = ("table", "jsonl")

#: What prints an answer: ``(session, query, format) -> text``; raises :class:`KraftlakeError` for a refused
#: query (its message is the one line the command prints).
Answer = Callable[[Any, str, str], str]
#: What readies a request's new session for its query: ``(session, query) -> None``.
Prepare = Callable[[Any, str], None]


class RouteError(KraftlakeError):
    """Raised by the client when the server refused the request (a wrong token, a malformed request) or broke
    off its answer."""


class RefusedQuery(KraftlakeError):
    """Raised by the client for a query the server refused, with the line the command prints."""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


class _Handler(BaseHTTPRequestHandler):
    server: _RouteServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        if self.path != PATH:
            self._send(404, {"error": f"no route {self.path} (POST {PATH})"})
            return
        if not self.server.authorized(self.headers.get("Authorization", "")):
            self._send(401, {"error": "a token is needed (Authorization: Bearer <token>)"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BODY:
            self._send(413 if length else 411, {"error": f"a body of 1 to {MAX_BODY} bytes is needed"})
            return
        try:
            doc = json.loads(self.rfile.read(length))
            query, fmt = doc["query"], doc.get("format", "table")
            if not isinstance(query, str) or fmt not in FORMATS:
                raise ValueError
        except (ValueError, KeyError, TypeError):
            self._send(400, {"error": 'the body is {"query": "...", "format": "table"|"jsonl"}'})
            return
        try:
            text = self.server.answer_for(query, fmt)
        except KraftlakeError as exc:
            self._send(422, {"error": str(exc)})
        except Exception as exc:  # one request fails, the server goes on serving
            self._send(500, {"error": _one_line(exc)})
        else:
            self._send(200, text.encode("utf-8"), "text/plain; charset=utf-8")

    def _send(self, status: int, body: dict[str, str] | bytes, kind: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged: a query's text is the user's, and the server's stderr is its progress."""


class _RouteServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, host: str, spark: Any, answer: Answer, token: str | None, prepare: Prepare | None
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, 0), _Handler)
        self.spark = spark
        self.answer = answer
        self.token = token
        self.prepare = prepare

    def authorized(self, header: str) -> bool:
        if self.token is None:
            return True
        return hmac.compare_digest(header.encode("utf-8"), f"Bearer {self.token}".encode())

    def answer_for(self, query: str, fmt: str) -> str:
        session = self.spark.newSession()
        if calls_record_udfs(query):
            from udfs.records import register_udfs

            register_udfs(session)
        if self.prepare is not None:
            self.prepare(session, query)
        return self.answer(session, query, fmt)


class SqlRoute:
    """The route of one server: :meth:`start` listens (a thread of its own) and returns the URL; :meth:`stop`
    closes it. ``prepare`` readies each request's session for its query before ``answer`` runs it."""

    def __init__(self, spark: Any, answer: Answer, token: str | None, prepare: Prepare | None = None) -> None:
        self.spark = spark
        self.answer = answer
        self.token = token
        self.prepare = prepare
        self._server: _RouteServer | None = None

    def start(self, host: str) -> str:
        self._server = _RouteServer(host, self.spark, self.answer, self.token, self.prepare)
        threading.Thread(target=self._server.serve_forever, name="kraftlake-sql-route", daemon=True).start()
        port = self._server.server_address[1]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}{PATH}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


# --- the client side ---------------------------------------------------------------------------------------


def ask(route: str, query: str, fmt: str, token: str | None, connect_timeout_s: float = 2.0) -> str | None:
    """The text the server at ``route`` prints for ``query``; None when nothing listens there (the caller goes
    through Connect). Raises :class:`RefusedQuery` for a refused query, :class:`RouteError` for a refused
    request or a broken answer."""
    from http.client import HTTPConnection, HTTPException
    from urllib.parse import urlsplit

    where = urlsplit(route)
    if where.hostname is None or where.port is None:
        raise RouteError(f"the endpoint's record names no host and port in its SQL route {route}")
    conn = HTTPConnection(where.hostname, where.port, timeout=connect_timeout_s)
    try:
        try:
            conn.connect()
        except OSError:
            return None
        assert conn.sock is not None
        conn.sock.settimeout(None)  # a query takes the time it takes (Ctrl-C stops the client)
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        body = json.dumps({"query": query, "format": fmt}).encode("utf-8")
        try:
            conn.request("POST", where.path, body, headers)
            answer = conn.getresponse()
            data = answer.read()
        except (OSError, HTTPException) as exc:
            raise RouteError(f"the SQL route {route} broke off its answer: {_one_line(exc)}") from None
    finally:
        conn.close()
    if answer.status == 200:
        return data.decode("utf-8")
    try:
        message = str(json.loads(data)["error"])
    except (ValueError, KeyError, TypeError):
        message = data.decode("utf-8", "replace").strip()[:200]
    if answer.status == 422:
        raise RefusedQuery(message)
    raise RouteError(f"the SQL route {route} answered {answer.status}: {message}")
