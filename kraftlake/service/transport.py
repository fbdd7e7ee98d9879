"""Asyncio TCP transport (TLS when the listener is secured): Kafka-framed connections, outgoing peer channels with reconnect and backoff.

A node sends its requests on its own outgoing connection to each peer (`PeerChannel`) and answers requests on
the connection they came in on (`InboundConnection`). Frames are Kafka's (an int32 size, then the header and
body); a response carries only its correlation id, so the channel keeps what it needs to read each outstanding
request's answer (its API key, version and the raft request) under the int32 correlation id it assigned. A
channel that has had a request unanswered for longer than its request timeout is closed and reconnected (as
Kafka's NetworkClient disconnects on request timeout); the raft node re-sends what it still needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from kraftlake.service.append_rpc import frame_length
from kraftlake.service.authenticator import SaslHandshake
from kraftlake.service.errors import FrameTooLargeError
from kraftlake.wire.errors import AuthenticationError, describe_tls_failure

log = logging.getLogger(__name__)

MAX_QUEUED_FRAMES = 10_000

Login = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
"""Authenticates a fresh outgoing connection (SASL) before any request goes on it; raises to refuse it."""


async def read_frame(
    reader: asyncio.StreamReader, max_frame_bytes: int, body_timeout_s: float | None = None
) -> bytes:
    """The payload of the next frame; once its length arrived, the rest must within `body_timeout_s`.

    Raises
    ------
    FrameTooLargeError
        If the length prefix announces more than `max_frame_bytes` (the payload is not read).
    asyncio.IncompleteReadError
        If the connection closes mid-frame or before a frame.
    TimeoutError
        If a frame started but did not complete within `body_timeout_s` (a peer holding memory half-sent).
    """
    size = frame_length(await reader.readexactly(4))
    if size > max_frame_bytes or size < 0:
        raise FrameTooLargeError(f"frame of {size} bytes exceeds the maximum of {max_frame_bytes}", size)
    if body_timeout_s is None:
        return await reader.readexactly(size)
    return await asyncio.wait_for(reader.readexactly(size), body_timeout_s)


class InboundConnection:
    """A connection accepted by a node's server: requests come in, responses go out."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.pending: asyncio.Task[None] | None = None
        """The observer fetch being answered (at most one per connection: the next request waits for it)."""
        self.principal: str | None = None
        """Who the connection is (Kafka's ``User:<name>``), None until its SASL exchange completes."""
        self.handshake: SaslHandshake | None = None
        """The SASL exchange of a SASL listener's connection."""
        self.opened = time.monotonic()
        self.last_active = self.opened
        """When the last request came in or the last response went out (`time.monotonic()`)."""
        self.proven = False
        """Authenticated (SASL, a client certificate), or sent a voter's request or an authorized append:
        kept when unproven connections are closed to make room."""

    @property
    def closed(self) -> bool:
        """Closed here or lost (the peer reset or ended it): nothing more is sent, so no answer is built."""
        return self.writer.is_closing()

    def send(self, frame: bytes) -> None:
        """Queue a frame (dropped if the connection is gone: the requester will time out and retry)."""
        if not self.closed:
            self.writer.write(frame)
            self.last_active = time.monotonic()

    def close(self) -> None:
        """Close the connection."""
        self.writer.close()


class PeerChannel:
    """The outgoing connection of one node to one peer.

    Parameters
    ----------
    endpoint
        The peer's (host, port).
    on_frame
        Called with each response payload received and the context its request was sent with (None for an
        answer to no outstanding request: one that came after a reconnect, or a stray).
    max_frame_bytes
        Larger responses close the connection.
    request_timeout_ms
        A request unanswered this long closes and reopens the connection.
    backoff_ms
        (initial, maximum) reconnect backoff; it doubles after each failed attempt, with jitter.
    tls
        The TLS client context (None: plaintext); the peer's host is checked against its certificate if the
        context says so.
    login
        Run on each new connection before anything is sent on it (the SASL exchange).
    """

    def __init__(
        self,
        endpoint: tuple[str, int],
        on_frame: Callable[[bytes, Any], None],
        max_frame_bytes: int,
        request_timeout_ms: int,
        backoff_ms: tuple[int, int] = (20, 1000),
        *,
        tls: ssl.SSLContext | None = None,
        login: Login | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.tls = tls
        self.login = login
        self.failure: str | None = None
        """Why the last connection attempt failed to secure itself (TLS or SASL), None once one succeeds."""
        self.on_frame = on_frame
        self.max_frame_bytes = max_frame_bytes
        self.request_timeout_ms = request_timeout_ms
        self.backoff_ms = backoff_ms
        self._queue: deque[tuple[bytes, int, Any]] = deque()
        self._inflight: dict[int, float] = {}
        self._pending: dict[int, Any] = {}
        self._corr = random.randrange(1 << 30)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._stopped = False
        self.connected = False

    def start(self) -> None:
        """Start connecting (in the running loop)."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    def next_correlation_id(self) -> int:
        """A correlation id for the next request (int32, unique on this channel until it wraps)."""
        self._corr = (self._corr + 1) & 0x7FFFFFFF
        return self._corr

    def send(self, frame: bytes, correlation_id: int, context: Any = None) -> None:
        """Send a request frame now if connected, else queue it until connected (dropped if the connection
        fails first); its answer is handed to `on_frame` with `context`."""
        writer = self._writer
        if writer is not None and self.connected and not self._queue and not writer.is_closing():
            # straight into the transport: waking the writer task costs a loop iteration (and a wait_for
            # task) per request, on the follower's fetch path
            writer.write(frame)
            self._inflight[correlation_id] = time.monotonic()
            self._pending[correlation_id] = context
            return
        if len(self._queue) >= MAX_QUEUED_FRAMES:
            self._queue.popleft()
        self._queue.append((frame, correlation_id, context))
        self._wake.set()

    async def stop(self) -> None:
        """Close the connection for good."""
        self._stopped = True
        self._wake.set()
        if self._writer is not None:
            self._writer.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _run(self) -> None:
        backoff = self.backoff_ms[0]
        while not self._stopped:
            try:
                reader, writer = await self._connect()
            except OSError:
                self._queue.clear()
                await asyncio.sleep(backoff / 1000 * (0.5 + random.random() / 2))
                backoff = min(backoff * 2, self.backoff_ms[1])
                continue
            backoff = self.backoff_ms[0]
            self._writer = writer
            self.connected = True
            self._inflight.clear()
            self._pending.clear()
            reading = asyncio.get_running_loop().create_task(self._read(reader))
            try:
                await self._write(writer, reading)
            except (OSError, ConnectionError) as exc:
                log.debug("connection to %s failed: %s", self.endpoint, exc)
            finally:
                self.connected = False
                reading.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reading
                writer.close()
                self._writer = None
                self._queue.clear()
            if not self._stopped:
                await asyncio.sleep(backoff / 1000)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """TCP, TLS and the login; a refusal is logged once per distinct cause and raised as OSError."""
        host, port = self.endpoint
        timeout = self.request_timeout_ms / 1000
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    host, port, ssl=self.tls, server_hostname=host if self.tls is not None else None
                ),
                timeout,
            )
        except ssl.SSLError as exc:
            self._refused(f"TLS handshake with {host}:{port} failed: {describe_tls_failure(exc)}")
            raise
        except TimeoutError as exc:
            raise OSError(f"connecting to {host}:{port} timed out") from exc
        if self.login is not None:
            try:
                await asyncio.wait_for(self.login(reader, writer), timeout)
            except (AuthenticationError, OSError, TimeoutError) as exc:
                writer.close()
                self._refused(str(exc) or f"SASL exchange with {host}:{port} timed out")
                raise OSError(str(exc)) from exc
        self.failure = None
        return reader, writer

    def _refused(self, why: str) -> None:
        if why != self.failure:
            log.warning("cannot connect to peer %s:%d: %s", *self.endpoint, why)
        self.failure = why

    async def _write(self, writer: asyncio.StreamWriter, reading: asyncio.Task[None]) -> None:
        while not self._stopped and not reading.done():
            if not self._queue:
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=self.request_timeout_ms / 4000)
            now = time.monotonic()
            while self._queue:
                frame, corr, context = self._queue.popleft()
                writer.write(frame)
                self._inflight[corr] = now
                self._pending[corr] = context
            await writer.drain()
            if self._inflight and now - min(self._inflight.values()) > self.request_timeout_ms / 1000:
                log.debug("request to %s timed out; reconnecting", self.endpoint)
                return

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while True:
            payload = await read_frame(reader, self.max_frame_bytes)
            if len(payload) < 4:
                return
            corr = frame_length(payload[:4])  # a response starts with its int32 correlation id
            self._inflight.pop(corr, None)
            self.on_frame(payload, self._pending.pop(corr, None))


async def serve(
    host: str,
    port: int,
    handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    tls: ssl.SSLContext | None = None,
    handshake_timeout_s: float = 10.0,
) -> asyncio.Server:
    """Listen on (host, port); port 0 picks a free port. With `tls`, `handler` gets a connection only once its
    TLS handshake succeeded (a failed one is closed by asyncio; its client sees the alert)."""
    return await asyncio.start_server(
        handler,
        host,
        port,
        reuse_address=True,
        ssl=tls,
        ssl_handshake_timeout=handshake_timeout_s if tls is not None else None,
    )
