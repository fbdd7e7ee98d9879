"""The wire layer's exceptions: client security configuration, SASL and TLS failures.

Every exception here derives from :class:`WireError`; add a subclass per kind of failure a caller may want to
tell apart, and give it the context a user needs to act (which property, which file, which broker).
"""

from __future__ import annotations

import ssl

from kraftlake.errors import KraftlakeError


class WireError(KraftlakeError):
    """Raised when talking to a Kafka broker fails: its security settings, authentication, the connection."""


class SecurityConfigError(WireError):
    """Raised when a client security property is missing or invalid; names the property and the file."""

    def __init__(self, message: str, *, source: str, property: str | None = None) -> None:
        where = source if property is None else f"{source}: {property}"
        super().__init__(f"{where}: {message}")
        self.source = source
        self.property = property


class AuthenticationError(WireError):
    """Raised when SASL authentication fails; names the mechanism and the server's (or our) reason."""

    def __init__(self, mechanism: str, reason: str) -> None:
        super().__init__(f"SASL {mechanism} authentication failed: {reason}")
        self.mechanism = mechanism
        self.reason = reason


class TlsError(WireError):
    """Raised when the TLS handshake with a broker fails; names the broker's host:port and the cause."""

    def __init__(self, host: str, port: int, cause: str) -> None:
        super().__init__(f"TLS handshake with {host}:{port} failed: {cause}")
        self.host = host
        self.port = port
        self.cause = cause

    @classmethod
    def from_handshake(cls, host: str, port: int, exc: BaseException) -> TlsError:
        """The TlsError for an exception raised by ``SSLSocket.do_handshake`` (or the first read after it)."""
        return cls(host, port, describe_tls_failure(exc))


# OpenSSL's reason codes (ssl.SSLError.reason) when the peer answers the ClientHello with bytes that are not
# a TLS record: the usual sign of a PLAINTEXT listener that wrote something back
_NOT_TLS_REASONS = {
    "WRONG_VERSION_NUMBER",
    "PACKET_LENGTH_TOO_LONG",
    "RECORD_LAYER_FAILURE",
    "HTTP_REQUEST",
    "UNKNOWN_PROTOCOL",
}
_X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY = 20
_X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN = 19
_X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT = 18
_X509_V_ERR_HOSTNAME_MISMATCH = 62
_X509_V_ERR_IP_ADDRESS_MISMATCH = 64


def describe_tls_failure(exc: BaseException) -> str:
    """A TLS failure's cause in words a user can act on, with the client property that usually fixes it."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        code = exc.verify_code
        detail = f"certificate verify failed: {exc.verify_message}"
        if code in (_X509_V_ERR_HOSTNAME_MISMATCH, _X509_V_ERR_IP_ADDRESS_MISMATCH):
            return (
                f"{detail} (the broker's certificate does not name the host connected to; an empty "
                "ssl.endpoint.identification.algorithm disables the hostname check)"
            )
        if code in (
            _X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
            _X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
            _X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT,
        ):
            return (
                f"{detail} (is the CA that signed the broker's certificate in ssl.truststore.location or "
                "ssl.truststore.certificates?)"
            )
        return detail
    if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError | ConnectionResetError | BrokenPipeError):
        # a Kafka PLAINTEXT listener reads the ClientHello's first bytes as a huge request size and hangs up
        return (
            "the server closed the connection during the handshake: the server does not speak TLS "
            "(is the listener PLAINTEXT?), or it requires a client certificate and refused ours or its "
            "absence (ssl.keystore.location)"
        )
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or ""
        if reason in _NOT_TLS_REASONS:
            return "the server does not speak TLS (is the listener PLAINTEXT?)"
        if "CERTIFICATE_REQUIRED" in reason or reason == "SSLV3_ALERT_HANDSHAKE_FAILURE":
            return (
                f"{exc.strerror or reason}: the server may require a client certificate "
                "(ssl.keystore.location, or ssl.keystore.key with ssl.keystore.certificate.chain)"
            )
        if "BAD_CERTIFICATE" in reason or "UNKNOWN_CA" in reason:
            return f"{exc.strerror or reason}: the server rejected our client certificate"
        return str(exc.strerror or exc)
    return str(exc) or type(exc).__name__


class ConnectError(WireError):
    """Raised when a TCP connection to a listener cannot be made; names host:port and the cause."""


class PeerError(WireError):
    """Raised when a peer answers what no Kafka server sends (garbage, an oversized frame, a wrong
    correlation id) or drops the connection; the connection is closed."""


class RequestTimeoutError(WireError):
    """Raised when a request gets no answer within its timeout; the connection is closed."""
