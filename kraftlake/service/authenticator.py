"""The SASL handshake of an inbound connection, as Kafka's SaslServerAuthenticator runs it (no sockets).

On a SASL listener a connection must authenticate before anything else: ApiVersions (at most once, first),
SaslHandshake v1 naming an enabled mechanism, then SaslAuthenticate rounds until the mechanism completes. Any
other request before that closes the connection without an answer (Kafka's rule: "Unexpected Kafka request of
type ... during SASL handshake"), as does a failed exchange, after its error response: UNSUPPORTED_SASL_MECHANISM
(33) with the enabled mechanisms, or SASL_AUTHENTICATION_FAILED (58) with Kafka's message. SaslHandshake v0 (raw
tokens without SaslAuthenticate framing) and re-authentication (KIP-368) are not spoken: a client is told a
session lifetime of 0 (never re-authenticate).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kraftlake.protocol import rpc, rpc_messages
from kraftlake.protocol.errors import ProtocolError
from kraftlake.protocol.rpc import ApiKey
from kraftlake.protocol.versions import Versions
from kraftlake.wire.errors import AuthenticationError
from kraftlake.wire.listener_config import ListenerSecurity
from kraftlake.wire.sasl_server import SaslServerMechanism

log = logging.getLogger(__name__)

SASL_SERVED: dict[int, Versions] = {
    ApiKey.SASL_HANDSHAKE: Versions(1, 1),
    ApiKey.SASL_AUTHENTICATE: Versions(0, 2),
}
"""What a SASL listener adds to its ApiVersions."""
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_VERSION = 35
SASL_AUTHENTICATION_FAILED = 58


class SaslHandshake:
    """One connection's authentication; `handle` each request frame until `principal` is set.

    Parameters
    ----------
    security
        The listener's mechanisms and credentials.
    api_versions
        ``(version, correlation id) -> frame``: the listener's ApiVersions answer (the same before and after
        authentication, as Kafka's).
    peer
        For log lines.
    """

    def __init__(
        self, security: ListenerSecurity, api_versions: Callable[[int, int], bytes], peer: str
    ) -> None:
        self.security = security
        self.api_versions = api_versions
        self.peer = peer
        self.principal: str | None = None
        """``User:<name>`` once the exchange has completed."""
        self._state = "initial"
        self._mechanism: SaslServerMechanism | None = None

    def handle(self, payload: bytes) -> tuple[bytes | None, bool]:
        """``(frame to send or None, keep the connection open)`` for one request frame before authentication."""
        try:
            api_key, version, corr, _client, _ = rpc.peek_request(payload)
        except ProtocolError:
            return self._close("a frame that is not a Kafka request")
        if api_key == ApiKey.API_VERSIONS and self._state == "initial":
            self._state = "handshake"
            return self.api_versions(version, corr), True
        if api_key == ApiKey.SASL_HANDSHAKE and self._state in ("initial", "handshake"):
            return self._handshake(payload, version, corr)
        if api_key == ApiKey.SASL_AUTHENTICATE and self._state == "authenticate":
            return self._authenticate(payload, version, corr)
        name = rpc.apis()[api_key].name if api_key in rpc.apis() else f"API key {api_key}"
        return self._close(f"unexpected {name} request during the SASL handshake (state {self._state})")

    def _close(self, why: str) -> tuple[None, bool]:
        log.warning("closing a connection from %s before authentication: %s", self.peer, why)
        return None, False

    def _decode(self, payload: bytes) -> Any:
        try:
            return rpc.decode_request(payload)[1]
        except ProtocolError:
            return None

    def _handshake(self, payload: bytes, version: int, corr: int) -> tuple[bytes | None, bool]:
        if version not in SASL_SERVED[ApiKey.SASL_HANDSHAKE]:
            return self._close(f"SaslHandshake v{version} (only v1, with SaslAuthenticate, is spoken)")
        body = self._decode(payload)
        if body is None:
            return self._close("a malformed SaslHandshake")
        mechanism: str = body.mechanism
        enabled = list(self.security.mechanisms)
        self._mechanism = self.security.sasl_server(mechanism)
        if self._mechanism is None:
            log.warning("%s asked for SASL mechanism %r; enabled: %s", self.peer, mechanism, enabled)
            answer = rpc_messages.SaslHandshakeResponse(
                error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled
            )
            return rpc.encode_response(answer, ApiKey.SASL_HANDSHAKE, version, corr), False
        self._state = "authenticate"
        answer = rpc_messages.SaslHandshakeResponse(error_code=0, mechanisms=enabled)
        return rpc.encode_response(answer, ApiKey.SASL_HANDSHAKE, version, corr), True

    def _authenticate(self, payload: bytes, version: int, corr: int) -> tuple[bytes | None, bool]:
        mechanism = self._mechanism
        assert mechanism is not None
        if version not in SASL_SERVED[ApiKey.SASL_AUTHENTICATE]:
            return self._close(f"SaslAuthenticate v{version}")
        body = self._decode(payload)
        if body is None:
            return self._close("a malformed SaslAuthenticate")
        try:
            token = mechanism.respond(bytes(body.auth_bytes))
        except AuthenticationError as exc:
            log.warning(
                "SASL %s authentication from %s failed: %s", mechanism.mechanism_name, self.peer, exc.reason
            )
            answer = rpc_messages.SaslAuthenticateResponse(
                error_code=SASL_AUTHENTICATION_FAILED,
                error_message=exc.reason,
                auth_bytes=b"",
                session_lifetime_ms=0,
            )
            return rpc.encode_response(answer, ApiKey.SASL_AUTHENTICATE, version, corr), False
        if mechanism.complete:
            self._state = "complete"
            self.principal = f"User:{mechanism.username}"
        answer = rpc_messages.SaslAuthenticateResponse(
            error_code=0,
            error_message=None,
            auth_bytes=token,
            session_lifetime_ms=0,
        )
        return rpc.encode_response(answer, ApiKey.SASL_AUTHENTICATE, version, corr), True
