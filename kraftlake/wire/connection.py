"""A blocking client connection to one Kafka listener: TCP, TLS, SASL, ApiVersions, then requests.

Kafka's clients open a connection in this order, and so does this one: TCP connect, the TLS handshake (SSL,
SASL_SSL), ApiVersions (highest version first; a server that lacks it answers with v0 and its range), SASL
(SaslHandshake, then SaslAuthenticate rounds), then requests at the highest version both sides speak. One
request is in flight at a time (a KRaft observer fetches in a loop; nothing to pipeline).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
from typing import Any

from kraftlake.protocol import rpc, rpc_messages
from kraftlake.protocol.errors import ProtocolError, UnsupportedVersionError
from kraftlake.protocol.rpc import ApiKey
from kraftlake.wire.client_config import ClientSecurity
from kraftlake.wire.errors import (
    AuthenticationError,
    ConnectError,
    PeerError,
    RequestTimeoutError,
    TlsError,
)

DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
"""Larger responses are refused: a Fetch answers at most its MaxBytes (8 MiB by default) plus framing."""

_SIZE = struct.Struct(">i")
_TLS_RECORD_TYPES = {0x14, 0x15, 0x16, 0x17}
UNSUPPORTED_VERSION = 35


def _looks_like_tls(prefix: bytes) -> bool:
    # a TLS record starts with its content type and version 3.x: as a size that is ~350 MB, never a frame
    return len(prefix) >= 3 and prefix[0] in _TLS_RECORD_TYPES and prefix[1] == 3


class KafkaConnection:
    """One connection to ``host:port``, opened with :meth:`open`.

    Parameters
    ----------
    host, port
        The listener.
    security
        Client security settings (``--command-config``); None is PLAINTEXT.
    client_id
        Sent in every request header.
    timeout_s
        Connect, handshake and request timeout (a long-polling request adds its own wait to it).
    max_frame_bytes
        Larger response frames close the connection with a `PeerError`.
    """

    def __init__(
        self,
        host: str,
        port: int,
        security: ClientSecurity | None = None,
        *,
        client_id: str = "kraftlake",
        timeout_s: float = 10.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self.host = host
        self.port = port
        self.security = security
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.max_frame_bytes = max_frame_bytes
        self.versions: dict[int, int] = {}
        self.ranges: dict[int, tuple[int, int]] = {}
        """Every API key the peer advertised, with its (min, max) version, as ApiVersions answered."""
        self._sock: socket.socket | None = None
        self._corr = 0

    @property
    def peer(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def is_open(self) -> bool:
        return self._sock is not None

    @property
    def raw_socket(self) -> socket.socket:
        """The open (secured, authenticated) socket, for a request in Kafka's framing that is not one of Kafka's
        RPCs (kraftlake's append); the caller reads the answer itself.

        Raises
        ------
        PeerError
            If the connection is closed.
        """
        if self._sock is None:
            raise PeerError(f"connection to {self.peer} is closed")
        return self._sock

    def open(self) -> KafkaConnection:
        """Connect, secure, negotiate versions and authenticate.

        Raises
        ------
        ConnectError, TlsError, AuthenticationError, PeerError
        """
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        except OSError as exc:
            raise ConnectError(f"cannot connect to {self.peer}: {exc.strerror or exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            context = self.security.ssl_context() if self.security is not None else None
            if context is not None:
                sock = self._tls(sock, context)
            self._sock = sock
            self._negotiate()
            if self.security is not None and self.security.uses_sasl:
                self._authenticate()
        except BaseException:
            self.close()
            raise
        return self

    def _tls(self, sock: socket.socket, context: ssl.SSLContext) -> socket.socket:
        try:
            return context.wrap_socket(sock, server_hostname=self.host)
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            raise TlsError.from_handshake(self.host, self.port, exc) from exc

    def close(self) -> None:
        """Close the socket (idempotent)."""
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> KafkaConnection:
        return self.open() if self._sock is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests ------------------------------------------------------------------------------------------

    def request(self, api_key: int, message: Any, *, extra_wait_s: float = 0.0) -> Any:
        """Send `message` (a request of `api_key`) at the negotiated version and return the response body.

        Raises
        ------
        PeerError
            On a malformed, oversized or unexpected answer, or a closed connection (the connection is closed).
        RequestTimeoutError
            If no answer comes within the timeout plus `extra_wait_s` (the connection is closed).
        """
        version = self.versions.get(api_key)
        if version is None:
            raise UnsupportedVersionError(f"{self.peer} does not offer {rpc.api(api_key).name}")
        return self._roundtrip(api_key, version, message, extra_wait_s)

    def version(self, api_key: int) -> int:
        """The negotiated version of `api_key` (KeyError if the peer lacks it)."""
        return self.versions[api_key]

    def _roundtrip(self, api_key: int, version: int, message: Any, extra_wait_s: float = 0.0) -> Any:
        payload, corr = self._exchange(api_key, version, message, extra_wait_s)
        try:
            got_corr, body = rpc.decode_response(payload, api_key, version)
        except ProtocolError as exc:
            self.close()
            raise PeerError(f"{self.peer} sent a malformed {rpc.api(api_key).name} response: {exc}") from exc
        if got_corr != corr:
            self.close()
            raise PeerError(f"{self.peer} answered correlation id {got_corr}, expected {corr}")
        return body

    def _exchange(self, api_key: int, version: int, message: Any, extra_wait_s: float) -> tuple[bytes, int]:
        sock = self._sock
        if sock is None:
            raise PeerError(f"connection to {self.peer} is closed")
        self._corr = (self._corr + 1) & 0x7FFFFFFF
        corr = self._corr
        frame = rpc.encode_request(message, version, corr, self.client_id)
        try:
            sock.settimeout(self.timeout_s + extra_wait_s)
            sock.sendall(frame)
            return self._read_frame(sock), corr
        except TimeoutError as exc:
            self.close()
            raise RequestTimeoutError(
                f"{self.peer} did not answer {rpc.api(api_key).name} within {self.timeout_s + extra_wait_s:.1f}s"
            ) from exc
        except (OSError, ssl.SSLError) as exc:
            self.close()
            raise PeerError(f"connection to {self.peer} failed: {exc}") from exc

    def _read_frame(self, sock: socket.socket) -> bytes:
        prefix = self._recv_exact(sock, 4)
        (size,) = _SIZE.unpack(prefix)
        if _looks_like_tls(prefix):
            self.close()
            raise TlsError(
                self.host,
                self.port,
                "the server answered a plaintext request with TLS: the "
                "listener is SSL or SASL_SSL (set security.protocol in the client properties)",
            )
        if size < 4 or size > self.max_frame_bytes:
            self.close()
            raise PeerError(
                f"{self.peer} sent a frame of {size} bytes (limit {self.max_frame_bytes}): "
                f"not a Kafka response"
            )
        return self._recv_exact(sock, size)

    def _recv_exact(self, sock: socket.socket, n: int) -> bytes:
        chunks = []
        left = n
        while left:
            chunk = sock.recv(min(left, 1 << 20))
            if not chunk:
                raise ConnectionResetError(f"{self.peer} closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    # -- opening -------------------------------------------------------------------------------------------

    def _negotiate(self) -> None:
        version = rpc.SUPPORTED[ApiKey.API_VERSIONS].highest
        request = rpc_messages.ApiVersionsRequest(
            client_software_name="kraftlake", client_software_version="0.1.0"
        )
        payload, _ = self._exchange(ApiKey.API_VERSIONS, version, request, 0.0)
        try:
            _, response = rpc.decode_response(payload, ApiKey.API_VERSIONS, version)
        except ProtocolError:
            # a server without this ApiVersions version answers in v0 with UNSUPPORTED_VERSION and its range
            try:
                _, response = rpc.decode_response(payload, ApiKey.API_VERSIONS, 0)
            except ProtocolError as exc:
                self.close()
                raise PeerError(
                    f"{self.peer} did not answer ApiVersions as a Kafka server would: {exc}"
                ) from exc
        if response.error_code == UNSUPPORTED_VERSION:
            theirs = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            lower = rpc.choose_version(
                ApiKey.API_VERSIONS, theirs.get(ApiKey.API_VERSIONS, (0, 0)), self.peer
            )
            response = self._roundtrip(ApiKey.API_VERSIONS, lower, request)
        if response.error_code:
            raise PeerError(f"{self.peer} refused ApiVersions with error {response.error_code}")
        self.versions = {}
        self.ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        for key in response.api_keys:
            if key.api_key in rpc.SUPPORTED and key.api_key in rpc.apis():
                try:
                    self.versions[key.api_key] = rpc.choose_version(
                        key.api_key, (key.min_version, key.max_version), self.peer
                    )
                except UnsupportedVersionError:
                    continue

    def require(self, *api_keys: int) -> None:
        """Raise `PeerError` naming what is missing unless the peer speaks every one of `api_keys`."""
        missing = [rpc.api(k).name for k in api_keys if k not in self.versions]
        if missing:
            raise PeerError(
                f"{self.peer} speaks no version of {', '.join(missing)} that kraftlake speaks "
                f"(kraftlake: {', '.join(f'{rpc.api(k).name} v{rpc.SUPPORTED[k]}' for k in api_keys)})"
            )

    def _authenticate(self) -> None:
        from kraftlake.wire.sasl import mechanism_for

        assert self.security is not None
        mechanism = mechanism_for(self.security)
        self.require(ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
        handshake = self.request(
            ApiKey.SASL_HANDSHAKE, rpc_messages.SaslHandshakeRequest(mechanism=mechanism.mechanism_name)
        )
        if handshake.error_code:
            raise AuthenticationError(
                mechanism.mechanism_name,
                f"{self.peer} does not enable it (it offers "
                f"{', '.join(handshake.mechanisms) or 'none'}: check sasl.mechanism)",
            )
        token: bytes | None = mechanism.initial_response()
        while token is not None:
            answer = self.request(
                ApiKey.SASL_AUTHENTICATE, rpc_messages.SaslAuthenticateRequest(auth_bytes=token)
            )
            if answer.error_code:
                raise AuthenticationError(
                    mechanism.mechanism_name,
                    f"{self.peer}: {answer.error_message or f'error {answer.error_code}'}",
                )
            token = mechanism.respond(answer.auth_bytes)
            if token is None and not mechanism.complete:
                raise AuthenticationError(
                    mechanism.mechanism_name, f"{self.peer}: the exchange did not complete"
                )
