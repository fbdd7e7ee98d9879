"""SASL client mechanisms as step objects: the server's challenge in, our response out, no sockets.

A caller sends :meth:`SaslMechanism.initial_response`, then passes each server answer to
:meth:`SaslMechanism.respond` and sends what it returns, until it returns None; :attr:`SaslMechanism.complete`
then says the exchange finished (and, for SCRAM, that the server proved it knows the password).

PLAIN is RFC 4616; SCRAM-SHA-256 and SCRAM-SHA-512 are RFC 5802 / RFC 7677 as Kafka's ScramSaslClient speaks
them: no channel binding, passwords as UTF-8 bytes (Kafka does no SASLprep), at least 4096 iterations.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from abc import ABC, abstractmethod
from collections.abc import Mapping

from kraftlake.wire.client_config import ClientSecurity
from kraftlake.wire.errors import AuthenticationError, SecurityConfigError

SCRAM_MIN_ITERATIONS = 4096
"""Kafka's ScramMechanism.minIterations, for SHA-256 and SHA-512 alike; fewer is refused as Kafka does."""

_SCRAM_HASHES = {"SHA-256": "sha256", "SHA-512": "sha512"}
_GS2_HEADER = "n,,"  # no channel binding, no authorization identity
_PRINTABLE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")  # RFC 5802 "printable": visible ASCII except ','


class SaslMechanism(ABC):
    """A SASL client mechanism: one authentication exchange, stepped by the caller."""

    mechanism_name: str
    """The name sent in SaslHandshake (Kafka's ``sasl.mechanism``)."""

    def __init__(self) -> None:
        self.complete = False

    @abstractmethod
    def initial_response(self) -> bytes:
        """The client's first message (the first SaslAuthenticate's auth_bytes)."""

    def respond(self, challenge: bytes) -> bytes | None:
        """Our answer to the server's ``challenge``, or None when the exchange is complete.

        Raises AuthenticationError when the server's message is an error, is malformed or fails verification.
        """
        if self.complete:
            if challenge:
                raise self._failure(f"unexpected server message after the exchange completed: {challenge!r}")
            return None
        return self._step(challenge)

    def _step(self, challenge: bytes) -> bytes | None:
        raise self._failure("unexpected server message before the client's first message")

    def _failure(self, reason: str) -> AuthenticationError:
        return AuthenticationError(self.mechanism_name, reason)


class PlainMechanism(SaslMechanism):
    """SASL PLAIN (RFC 4616): the username and password in one message, no authorization identity."""

    mechanism_name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        super().__init__()
        if "\0" in username or "\0" in password:
            raise ValueError("a PLAIN username or password cannot contain NUL")
        self._username = username
        self._password = password

    def initial_response(self) -> bytes:
        """``\\0username\\0password`` in UTF-8; the exchange is complete once it is sent."""
        self.complete = True
        return f"\0{self._username}\0{self._password}".encode()


class ScramMechanism(SaslMechanism):
    """SCRAM-SHA-256 or SCRAM-SHA-512 (RFC 5802, RFC 7677), the client side as Kafka's ScramSaslClient.

    ``nonce`` is for tests (RFC test vectors); by default it is 130 random bits in base 36, as Kafka makes it.
    ``extensions`` are appended to the client-first message (Kafka's ``tokenauth=true``: delegation tokens).
    """

    def __init__(
        self,
        hash_name: str,
        username: str,
        password: str,
        nonce: str | None = None,
        extensions: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        if hash_name not in _SCRAM_HASHES:
            raise ValueError(f"unknown SCRAM hash {hash_name!r} (expected one of {', '.join(_SCRAM_HASHES)})")
        self.mechanism_name = f"SCRAM-{hash_name}"
        self._digest = _SCRAM_HASHES[hash_name]
        self._username = username
        self._password = password.encode()
        self._nonce = nonce if nonce is not None else _base36(secrets.randbits(130))
        if not _PRINTABLE.fullmatch(self._nonce):
            raise ValueError(f"a SCRAM nonce must be printable ASCII without ',': {self._nonce!r}")
        attributes = [f"n={_sasl_name(username)}", f"r={self._nonce}"]
        attributes += [f"{key}={value}" for key, value in (extensions or {}).items()]
        self._client_first_bare = ",".join(attributes)
        self._auth_message: bytes | None = None
        self._server_key: bytes | None = None
        self._sent_first = False

    def initial_response(self) -> bytes:
        """The client-first message: ``n,,n=<name>,r=<nonce>[,extensions]``."""
        self._sent_first = True
        return (_GS2_HEADER + self._client_first_bare).encode()

    def _step(self, challenge: bytes) -> bytes | None:
        if not self._sent_first:
            return super()._step(challenge)
        message = self._decode(challenge)
        if self._auth_message is None:
            return self._client_final(message)
        self._verify_server_final(message)
        self.complete = True
        return None

    def _client_final(self, server_first: str) -> bytes:
        attributes = server_first.split(",")
        if attributes[0].startswith("e="):
            raise self._failure(f"server error: {attributes[0][2:]}")
        if attributes[0].startswith("m="):
            raise self._failure("the server requires an extension this client does not support (m=)")
        if len(attributes) < 3 or [a[:2] for a in attributes[:3]] != ["r=", "s=", "i="]:
            raise self._failure(f"invalid server-first message {server_first!r}")
        nonce, salt_b64, iterations_text = (a[2:] for a in attributes[:3])
        if not _PRINTABLE.fullmatch(nonce):
            raise self._failure(f"invalid server nonce {nonce!r}")
        if not nonce.startswith(self._nonce):
            raise self._failure("invalid server nonce: it does not extend the client nonce")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
        except binascii.Error as exc:
            raise self._failure(f"invalid salt {salt_b64!r} in server-first message") from exc
        if not iterations_text.isdigit() or not iterations_text.isascii():
            raise self._failure(f"invalid iteration count {iterations_text!r} in server-first message")
        iterations = int(iterations_text)
        if iterations < SCRAM_MIN_ITERATIONS:
            raise self._failure(
                f"requested iterations {iterations} is less than the minimum "
                f"{SCRAM_MIN_ITERATIONS} for {self.mechanism_name}"
            )
        salted = hashlib.pbkdf2_hmac(self._digest, self._password, salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._digest, client_key).digest()
        without_proof = "c=" + base64.b64encode(_GS2_HEADER.encode()).decode() + f",r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(k ^ s for k, s in zip(client_key, signature, strict=True))
        self._auth_message = auth_message
        self._server_key = self._hmac(salted, b"Server Key")
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_final: str) -> None:
        assert self._auth_message is not None and self._server_key is not None
        attribute = server_final.split(",")[0]
        if attribute.startswith("e="):
            raise self._failure(f"server error: {attribute[2:]}")
        if not attribute.startswith("v="):
            raise self._failure(f"invalid server-final message {server_final!r}")
        try:
            signature = base64.b64decode(attribute[2:], validate=True)
        except binascii.Error as exc:
            raise self._failure(f"invalid server signature {attribute[2:]!r}") from exc
        if not hmac.compare_digest(signature, self._hmac(self._server_key, self._auth_message)):
            # the server does not know the password: it is not the server we meant to talk to
            raise self._failure("invalid server signature in server-final message")

    def _decode(self, challenge: bytes) -> str:
        try:
            return challenge.decode()
        except UnicodeDecodeError as exc:
            raise self._failure(f"server message is not UTF-8: {challenge!r}") from exc

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.digest(key, message, self._digest)


def _sasl_name(username: str) -> str:
    # RFC 5802 saslname: '=' first, or the '=' of "=2C" would be escaped again
    return username.replace("=", "=3D").replace(",", "=2C")


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, digit = divmod(number, 36)
        out = digits[digit] + out
        if not number:
            return out


def mechanism_for(security: ClientSecurity) -> SaslMechanism:
    """A fresh mechanism for ``security``'s ``sasl.mechanism`` and credentials (one per connection)."""
    if not security.uses_sasl:
        raise SecurityConfigError(
            f"{security.protocol} does not use SASL", source=security.source, property="security.protocol"
        )
    mechanism = security.sasl_mechanism or "PLAIN"
    username, password = security.sasl_username, security.sasl_password
    if username is None or password is None:
        raise SecurityConfigError(
            "no username or password for SASL", source=security.source, property="sasl.jaas.config"
        )
    if mechanism == "PLAIN":
        return PlainMechanism(username, password)
    if mechanism.startswith("SCRAM-") and mechanism[len("SCRAM-") :] in _SCRAM_HASHES:
        extensions = {"tokenauth": "true"} if security.sasl_token_auth else None
        return ScramMechanism(mechanism[len("SCRAM-") :], username, password, extensions=extensions)
    raise SecurityConfigError(
        f"{mechanism} is not supported", source=security.source, property="sasl.mechanism"
    )
