"""Where a running ``kraftlake serve`` says it is: ``<warehouse>/_serve/endpoint.json``, so that ``kraftlake sql``
over the same warehouse queries it instead of starting a JVM of its own.

The file holds the Connect URL as the server prints it, its host and port, the server's pid and whether it
wants a token, and, when the server answers SQL over HTTP too (:mod:`pipelines.sql_route`), that route's URL
with the server's local time zone (in which it prints TIMESTAMP values); never the token (a client brings its own, ``$SPARK_CONNECT_AUTHENTICATE_TOKEN``, as with
``--remote``; a client without one does not use a server that wants one). The server writes it once clients can query (written
aside, then renamed into place: a reader never sees half of it) and removes it when it stops. A server killed
without stopping leaves it behind: a reader trusts it only while that pid is alive and the port answers.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The variable a client's Connect token is read from (and the server's, :mod:`pipelines.serve`).
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
#: Under the warehouse: beside its tables, a directory no table or command reads.
ENDPOINT_FILE = Path("_serve") / "endpoint.json"


def endpoint_path(warehouse: str | Path) -> Path:
    return Path(warehouse) / ENDPOINT_FILE


@dataclass(frozen=True)
class RunningEndpoint:
    """A live server's record: its Connect URL and, when a client may use it, its SQL route."""

    url: str
    sql_route: str | None


def local_time_zone() -> str:
    """This process's local time zone, as far as it decides how pyspark renders a TIMESTAMP (``$TZ``, the zone
    names and the UTC offsets, standard and daylight)."""
    return f"{os.environ.get('TZ', '')}|{'/'.join(time.tzname)}|{time.timezone}|{time.altzone}"


def record_endpoint(
    warehouse: str | Path,
    url: str,
    host: str,
    port: int,
    token_required: bool,
    pid: int | None = None,
    sql_route: str | None = None,
) -> Path:
    """Record that the server of process ``pid`` (this one by default) serves ``warehouse`` at ``url`` (and
    answers SQL at ``sql_route``, in this process's time zone)."""
    path = endpoint_path(warehouse)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "url": url,
        "host": host,
        "port": int(port),
        "pid": os.getpid() if pid is None else int(pid),
        "token_required": bool(token_required),
    }
    if sql_route is not None:
        doc["sql_route"] = sql_route
        doc["time_zone"] = local_time_zone()
    aside = path.with_name(f".{path.name}.{uuid.uuid4()}.tmp")
    aside.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    os.replace(aside, path)
    return path


def remove_endpoint(warehouse: str | Path, pid: int | None = None) -> None:
    """Remove the record, when it is still the one of process ``pid`` (this one by default): a server started
    since over the same warehouse keeps its own."""
    doc = _read(endpoint_path(warehouse))
    if doc is not None and doc.get("pid") == (os.getpid() if pid is None else pid):
        endpoint_path(warehouse).unlink(missing_ok=True)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process, alive
    return True


def running_endpoint(warehouse: str | Path, timeout_s: float = 0.5) -> str | None:
    """The Connect URL of the ``kraftlake serve`` recorded for ``warehouse`` when its process is alive, its
    port accepts a connection and this process has the token it wants, else None (no record, a stale one, a
    record that cannot be read, a server wanting a token this process lacks)."""
    running = running_record(warehouse, timeout_s)
    return None if running is None else running.url


def running_record(warehouse: str | Path, timeout_s: float = 0.5) -> RunningEndpoint | None:
    """What :func:`running_endpoint` trusts, with the server's SQL route when it has one and renders times in
    this process's time zone (else None there: the client goes through Connect)."""
    doc = _read(endpoint_path(warehouse))
    if doc is None:
        return None
    url, host, port, pid = doc.get("url"), doc.get("host"), doc.get("port"), doc.get("pid")
    if not (
        isinstance(url, str) and isinstance(host, str) and isinstance(port, int) and isinstance(pid, int)
    ):
        return None
    if doc.get("token_required") is not False and not os.environ.get(TOKEN_ENV):
        return None
    if not _alive(pid):
        return None
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=timeout_s):
            pass
    except OSError:
        return None
    route = doc.get("sql_route")
    same_zone = doc.get("time_zone") == local_time_zone()
    return RunningEndpoint(url, route if isinstance(route, str) and same_zone else None)
