"""SASL server mechanisms as step objects (the client's token in, our answer out, no sockets), and SCRAM
credentials stored salted as Kafka stores them.

The server side of `kraftlake.wire.sasl`: PLAIN (RFC 4616) checks a username and password against a list (Kafka's
``user_<name>="<password>"`` JAAS options); SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802 / RFC 7677) as Kafka's
ScramSaslServer: no channel binding, at least 4096 and at most 16384 iterations, and the server keeps only the
salt, the iteration count, StoredKey and ServerKey (`ScramCredential`, Kafka's ``credentialToString`` form
``salt=...,stored_key=...,server_key=...,iterations=N``), never the password.

A failure raises `AuthenticationError` whose ``reason`` is what the client is told: Kafka's messages, which never
say whether the user exists.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field

from kraftlake.wire.errors import AuthenticationError, SecurityConfigError
from kraftlake.wire.sasl import SCRAM_MIN_ITERATIONS

SCRAM_MAX_ITERATIONS = 16384
"""Kafka's ScramMechanism.maxIterations (for SHA-256 and SHA-512 alike)."""
SCRAM_DIGESTS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
PLAIN_FAILURE = "Authentication failed: Invalid username or password"
"""Kafka's PlainSaslServer answer to a wrong user or password (one message for both)."""


def scram_failure(mechanism: str) -> str:
    """Kafka's answer to a SCRAM exchange that fails (unknown user, wrong proof): it names only the mechanism."""
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


@dataclass(frozen=True)
class ScramCredential:
    """What a server stores of a SCRAM password (RFC 5802 section 3): never the password itself."""

    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    def to_string(self) -> str:
        """Kafka's ``ScramCredentialUtils.credentialToString``: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,
        iterations=<n>``."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def parse(cls, text: str, *, source: str, property: str) -> ScramCredential:
        """The credential in Kafka's string form (`to_string`).

        Raises
        ------
        SecurityConfigError
            If `text` is not one (a password in clear included: SCRAM passwords are never stored).
        """
        fields: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.strip().partition("=")
            if sep:
                fields[key] = value
        try:
            credential = cls(
                base64.b64decode(fields["salt"], validate=True),
                base64.b64decode(fields["stored_key"], validate=True),
                base64.b64decode(fields["server_key"], validate=True),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError, binascii.Error):
            raise SecurityConfigError(
                "not a SCRAM credential (salt=...,stored_key=...,server_key=...,iterations=N): passwords are "
                "stored salted, make one with `kraftlake quorum scram-credential`",
                source=source,
                property=property,
            ) from None
        if not SCRAM_MIN_ITERATIONS <= credential.iterations <= SCRAM_MAX_ITERATIONS:
            raise SecurityConfigError(
                f"iterations {credential.iterations} outside Kafka's "
                f"{SCRAM_MIN_ITERATIONS}-{SCRAM_MAX_ITERATIONS}",
                source=source,
                property=property,
            )
        return credential


def scram_credential(
    mechanism: str, password: str, iterations: int = SCRAM_MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """The stored form of `password` for `mechanism` (SCRAM-SHA-256 or SCRAM-SHA-512), with a random 32-byte
    salt unless one is given (Kafka's ``kafka-storage format --add-scram`` and ``kafka-configs`` make the same).
    """
    digest = SCRAM_DIGESTS.get(mechanism)
    if digest is None:
        raise ValueError(
            f"unknown SCRAM mechanism {mechanism!r} (expected one of {', '.join(SCRAM_DIGESTS)})"
        )
    if not SCRAM_MIN_ITERATIONS <= iterations <= SCRAM_MAX_ITERATIONS:
        raise ValueError(
            f"iterations must be {SCRAM_MIN_ITERATIONS}-{SCRAM_MAX_ITERATIONS}, got {iterations}"
        )
    salt = secrets.token_bytes(32) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", digest)
    return ScramCredential(
        salt, hashlib.new(digest, client_key).digest(), hmac.digest(salted, b"Server Key", digest), iterations
    )


class SaslServerMechanism(ABC):
    """One authentication exchange on the server side: `respond` to each client token until `complete`."""

    mechanism_name: str

    def __init__(self) -> None:
        self.complete = False
        self.username: str | None = None
        """The authenticated user once `complete` (Kafka's principal is ``User:<username>``)."""

    @abstractmethod
    def respond(self, token: bytes) -> bytes:
        """Our answer to the client's `token` (empty when there is nothing to say).

        Raises
        ------
        AuthenticationError
            The exchange failed; its ``reason`` is what the client is told.
        """

    def _fail(self, reason: str) -> AuthenticationError:
        return AuthenticationError(self.mechanism_name, reason)


class PlainServer(SaslServerMechanism):
    """SASL PLAIN against Kafka's ``user_<name>="<password>"`` list (passwords compared in constant time)."""

    mechanism_name = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        super().__init__()
        self._users = users

    def respond(self, token: bytes) -> bytes:
        if self.complete:
            raise self._fail("unexpected message after the exchange completed")
        try:
            authzid, username, password = token.decode("utf-8").split("\0")
        except (UnicodeDecodeError, ValueError):
            raise self._fail("Invalid SASL/PLAIN response: expected 3 tokens separated by NUL") from None
        if not username or not password:
            raise self._fail(
                f"Authentication failed: {'username' if not username else 'password'} not specified"
            )
        if authzid and authzid != username:
            raise self._fail(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        expected = self._users.get(username)
        # compared even for an unknown user, so the time taken does not say whether the user exists
        if (
            not hmac.compare_digest(password.encode(), (expected if expected is not None else "\0").encode())
            or expected is None
        ):
            raise self._fail(PLAIN_FAILURE)
        self.username = username
        self.complete = True
        return b""


class ScramServer(SaslServerMechanism):
    """SCRAM-SHA-256 / SCRAM-SHA-512, the server side (Kafka's ScramSaslServer): client-first in, server-first
    out; client-final in (its proof checked against StoredKey), server-final (``v=<ServerSignature>``) out."""

    def __init__(
        self, mechanism: str, credentials: Mapping[str, ScramCredential], nonce: str | None = None
    ) -> None:
        super().__init__()
        if mechanism not in SCRAM_DIGESTS:
            raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
        self.mechanism_name = mechanism
        self._digest = SCRAM_DIGESTS[mechanism]
        self._credentials = credentials
        self._server_nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = ""
        self._nonce = ""

    def respond(self, token: bytes) -> bytes:
        if self.complete:
            raise self._fail("unexpected message after the exchange completed")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail(scram_failure(self.mechanism_name)) from None
        if self._credential is None:
            return self._server_first_message(text)
        return self._server_final_message(text)

    def _server_first_message(self, client_first: str) -> bytes:
        parts = client_first.split(",")
        # gs2 header: "n" (no channel binding) or "y" (client could, thinks we cannot); "p=" asks for binding
        if len(parts) < 4 or parts[0] not in ("n", "y") or (parts[1] and not parts[1].startswith("a=")):
            raise self._fail(
                f"Invalid SCRAM client first message (channel binding is not supported): "
                f"{client_first[:100]!r}"
            )
        if not parts[2].startswith("n=") or not parts[3].startswith("r=") or len(parts[3]) <= 2:
            raise self._fail(f"Invalid SCRAM client first message {client_first[:100]!r}")
        username = parts[2][2:].replace("=2C", ",").replace("=3D", "=")
        if parts[1] and parts[1][2:] != username:
            raise self._fail(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        extensions = dict(p.partition("=")[::2] for p in parts[4:])
        if extensions.get("tokenauth", "").lower() == "true":
            # delegation tokens live in Kafka's metadata; a kraftlake voter has none
            raise self._fail(scram_failure(self.mechanism_name))
        credential = self._credentials.get(username)
        if credential is None:
            raise self._fail(scram_failure(self.mechanism_name))
        self._credential = credential
        self.username = username
        self._gs2_header = ",".join(parts[:2]) + ","
        self._client_first_bare = ",".join(parts[2:])
        self._nonce = parts[3][2:] + self._server_nonce
        self._server_first = (
            f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},i={credential.iterations}"
        )
        return self._server_first.encode()

    def _server_final_message(self, client_final: str) -> bytes:
        credential = self._credential
        assert credential is not None
        without_proof, sep, proof_attr = client_final.rpartition(",p=")
        attrs = without_proof.split(",")
        expected_binding = "c=" + base64.b64encode(self._gs2_header.encode()).decode()
        if not sep or len(attrs) < 2 or attrs[0] != expected_binding or attrs[1] != f"r={self._nonce}":
            raise self._fail("Invalid SCRAM client final message (nonce or channel binding)")
        try:
            proof = base64.b64decode(proof_attr, validate=True)
        except binascii.Error:
            raise self._fail(scram_failure(self.mechanism_name)) from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(credential.stored_key, auth_message, self._digest)
        if len(proof) != len(signature):
            raise self._fail(scram_failure(self.mechanism_name))
        client_key = bytes(p ^ s for p, s in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._digest, client_key).digest(), credential.stored_key):
            raise self._fail(scram_failure(self.mechanism_name))
        self.complete = True
        server_signature = hmac.digest(credential.server_key, auth_message, self._digest)
        return f"v={base64.b64encode(server_signature).decode()}".encode()
