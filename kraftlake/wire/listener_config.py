"""A server listener's security (``--listener-config``), in the names of Kafka's ``server.properties``.

The listener is Kafka's ``CONTROLLER`` listener of a KRaft controller; the properties that secure it are Kafka's:

- ``listener.security.protocol.map=CONTROLLER:SASL_SSL`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; default
  PLAINTEXT);
- TLS (SSL, SASL_SSL): ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (key + chain; an encrypted key
  needs ``ssl.key.password``) or ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``;
  ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` or ``ssl.truststore.certificates`` (the CAs that
  sign client certificates); ``ssl.client.auth`` none / requested / required (mutual TLS); the principal of a
  client certificate is ``User:`` + its subject in RFC 2253 form (Kafka's DefaultKafkaPrincipalBuilder with
  ``ssl.principal.mapping.rules=DEFAULT``);
- SASL (SASL_PLAINTEXT, SASL_SSL): ``sasl.enabled.mechanisms`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and per
  mechanism ``listener.name.controller.<mechanism>.sasl.jaas.config``: PlainLoginModule with Kafka's
  ``user_<name>="<password>"`` options; ScramLoginModule with ``user_<name>="<credential>"`` where the credential
  is stored salted in Kafka's form (``salt=...,stored_key=...,server_key=...,iterations=N``: Kafka keeps SCRAM
  credentials in its metadata log, kraftlake in this file; `kraftlake.wire.sasl_server.scram_credential` makes
  one). The principal is ``User:<name>``.

Authorization properties (``authorizer.class.name``, ``super.users``, ACLs) are read by the service from
`ListenerSecurity.properties` (`kraftlake.service.authorizer`).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kraftlake.wire.client_config import (
    PROTOCOLS,
    SASL_MECHANISMS,
    ClientSecurity,
    parse_jaas_config,
    parse_properties,
    read_properties_file,
    tls_settings,
)
from kraftlake.wire.errors import SecurityConfigError
from kraftlake.wire.sasl_server import PlainServer, SaslServerMechanism, ScramCredential, ScramServer

LISTENER_NAME = "CONTROLLER"
"""kraftlake's voter listener, as Kafka's controllers name theirs."""
CLIENT_AUTH = ("none", "requested", "required")
ANONYMOUS = "User:ANONYMOUS"
"""Kafka's principal of a connection that did not authenticate (PLAINTEXT, or TLS without a client certificate)."""

_Error = Callable[[str, str], SecurityConfigError]
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class ListenerSecurity:
    """A listener's security settings, validated; secrets stay out of ``repr``."""

    source: str = "<defaults>"
    protocol: str = "PLAINTEXT"
    client_auth: str = "none"
    stores: ClientSecurity | None = field(default=None, repr=False)
    """The ``ssl.*`` key and trust stores (parsed and checked by the client-side code: the names are the same)."""
    mechanisms: tuple[str, ...] = ()
    plain_users: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}), repr=False, hash=False
    )
    scram_credentials: Mapping[str, Mapping[str, ScramCredential]] = field(
        default_factory=lambda: MappingProxyType({}), repr=False, hash=False
    )
    """Per SCRAM mechanism, per user, the stored credential."""
    properties: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}), repr=False, hash=False
    )

    @property
    def uses_tls(self) -> bool:
        """Whether connections are TLS (SSL, SASL_SSL)."""
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        """Whether connections authenticate with SASL first (SASL_PLAINTEXT, SASL_SSL)."""
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def secured(self) -> bool:
        """Whether a connection proves who it is or is encrypted (anything but PLAINTEXT)."""
        return self.protocol != "PLAINTEXT"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS server context (None unless TLS): our certificate chain, and the truststore's CAs checking
        client certificates as ``ssl.client.auth`` asks."""
        if not self.uses_tls:
            return None
        assert self.stores is not None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2  # Kafka's ssl.enabled.protocols: TLSv1.2,TLSv1.3
        context.verify_mode = {
            "none": ssl.CERT_NONE,
            "requested": ssl.CERT_OPTIONAL,
            "required": ssl.CERT_REQUIRED,
        }[self.client_auth]
        self.stores.load_stores(context)
        return context

    def sasl_server(self, mechanism: str) -> SaslServerMechanism | None:
        """A fresh server exchange for `mechanism`, or None if it is not enabled."""
        if mechanism not in self.mechanisms:
            return None
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        return ScramServer(mechanism, self.scram_credentials.get(mechanism, {}))


PLAINTEXT = ListenerSecurity()
"""The default: no TLS, no authentication (only for a loopback address)."""


def load_listener_properties(path: str | os.PathLike[str]) -> ListenerSecurity:
    """The listener security in a ``.properties`` file (ISO-8859-1, as Kafka reads ``server.properties``)."""
    source = os.fspath(path)
    return parse_listener_properties(read_properties_file(source, "listener"), source)


def parse_listener_properties(text: str, source: str = "<string>") -> ListenerSecurity:
    """The listener security in ``.properties`` text.

    Raises
    ------
    SecurityConfigError
        Naming the property: an unknown protocol or mechanism, a SASL listener without its JAAS entry, a TLS
        listener without a keystore, a SCRAM password in clear, a store that is not PEM.
    """
    props = parse_properties(text, source)

    def get(name: str) -> str | None:
        value = props.get(name)
        return None if value is None else value.strip()

    def error(name: str, message: str) -> SecurityConfigError:
        return SecurityConfigError(message, source=source, property=name)

    protocol = _protocol(get("listener.security.protocol.map"), error)
    client_auth = (get("ssl.client.auth") or "none").lower()
    if client_auth not in CLIENT_AUTH:
        raise error("ssl.client.auth", f"{client_auth!r} is not one of {', '.join(CLIENT_AUTH)}")
    rules = get("ssl.principal.mapping.rules")
    if rules not in (None, "DEFAULT"):
        raise error("ssl.principal.mapping.rules", "only DEFAULT (the subject's RFC 2253 name) is supported")
    stores = None
    if protocol in ("SSL", "SASL_SSL"):
        stores = ClientSecurity(source=source, protocol="SSL", **tls_settings(get, error))
        if stores.keystore_location is None and stores.keystore_key is None:
            raise error(
                "ssl.keystore.location",
                f"a {protocol} listener needs its certificate and key "
                "(ssl.keystore.location, or ssl.keystore.key with ssl.keystore.certificate.chain)",
            )
    elif client_auth != "none":
        raise error("ssl.client.auth", f"{client_auth} needs TLS: the protocol is {protocol}")
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = {}
    scram: dict[str, dict[str, ScramCredential]] = {}
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanisms = tuple(m.strip() for m in (get("sasl.enabled.mechanisms") or "").split(",") if m.strip())
        if not mechanisms:
            raise error(
                "sasl.enabled.mechanisms",
                f"a {protocol} listener needs its mechanisms ({', '.join(SASL_MECHANISMS)})",
            )
        for mechanism in mechanisms:
            if mechanism not in SASL_MECHANISMS:
                raise error(
                    "sasl.enabled.mechanisms",
                    f"{mechanism} is not supported (supported: {', '.join(SASL_MECHANISMS)})",
                )
            name = f"listener.name.{LISTENER_NAME.lower()}.{mechanism.lower()}.sasl.jaas.config"
            users = _jaas_users(get(name), name, mechanism, source, error)
            if mechanism == "PLAIN":
                plain_users = users
            else:
                scram[mechanism] = {
                    user: ScramCredential.parse(value, source=source, property=f"{name} user_{user}")
                    for user, value in users.items()
                }
    return ListenerSecurity(
        source=source,
        protocol=protocol,
        client_auth=client_auth,
        stores=stores,
        mechanisms=mechanisms,
        plain_users=MappingProxyType(plain_users),
        scram_credentials=MappingProxyType({m: MappingProxyType(c) for m, c in scram.items()}),
        properties=MappingProxyType(dict(props)),
    )


def _protocol(mapping: str | None, error: _Error) -> str:
    if not mapping:
        return "PLAINTEXT"
    entries = dict(item.strip().partition(":")[::2] for item in mapping.split(",") if item.strip())
    protocol = entries.get(LISTENER_NAME)
    if protocol is None:
        raise error(
            "listener.security.protocol.map",
            f"no entry for the {LISTENER_NAME} listener (e.g. {LISTENER_NAME}:SASL_SSL)",
        )
    protocol = protocol.strip().upper()
    if protocol not in PROTOCOLS:
        raise error(
            "listener.security.protocol.map",
            f"unknown security protocol {protocol!r} (expected one of {', '.join(PROTOCOLS)})",
        )
    return str(protocol)


def _jaas_users(text: str | None, name: str, mechanism: str, source: str, error: _Error) -> dict[str, str]:
    module = _PLAIN_MODULE if mechanism == "PLAIN" else _SCRAM_MODULE
    if not text:
        raise error(name, f'not set: {mechanism} needs {module} required user_<name>="...";')
    entry = parse_jaas_config(text, f"{source}: {name}")
    if entry.login_module != module:
        raise error(name, f"{mechanism} needs {module}, not {entry.login_module}")
    return {key[len("user_") :]: value for key, value in entry.options.items() if key.startswith("user_")}


def principal_of_certificate(peercert: Mapping[str, object] | None) -> str:
    """Kafka's principal of a TLS client: ``User:`` + the certificate subject as Java's
    ``X500Principal.getName()`` writes it (RFC 2253: the last RDN first, ``CN=client,O=org,C=US``), or
    ``User:ANONYMOUS`` without a certificate (`ssl.SSLSocket.getpeercert` gives the subject)."""
    if not peercert or not peercert.get("subject"):
        return ANONYMOUS
    rdns = peercert["subject"]
    assert isinstance(rdns, tuple)
    names = []
    for rdn in reversed(rdns):
        names.append("+".join(f"{_RDN_KEYS.get(key, key)}={_escape_rdn(value)}" for key, value in rdn))
    return "User:" + ",".join(names)


_RDN_KEYS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape_rdn(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
