"""Client security properties (``client.properties``, ``--command-config``) as Kafka's Java clients read them.

:func:`load_client_properties` / :func:`parse_client_properties` turn a Java ``.properties`` file into a
:class:`ClientSecurity`: the security protocol, TLS trust and client certificate (PEM only), the SASL
mechanism and the credentials of its ``sasl.jaas.config``. :meth:`ClientSecurity.ssl_context` builds the TLS
client context. Checks follow Kafka's ``DefaultSslEngineFactory`` and ``JaasConfig``; properties kraftlake
does not use are kept in :attr:`ClientSecurity.properties` and otherwise ignored.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TypedDict

from kraftlake.wire.errors import SecurityConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# mechanisms Kafka has that kraftlake does not implement: named, so the error says "not supported" rather than
# "unknown"
_UNSUPPORTED_MECHANISMS = ("GSSAPI", "OAUTHBEARER")
_LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)
_TRUSTSTORE_CONVERT = (
    "convert it to PEM: for JKS first `keytool -importkeystore -srckeystore STORE.jks -destkeystore "
    "STORE.p12 -deststoretype PKCS12`, then `openssl pkcs12 -in STORE.p12 -nokeys -out truststore.pem`; "
    "set ssl.truststore.type=PEM and ssl.truststore.location=truststore.pem"
)
_KEYSTORE_CONVERT = (
    "convert it to PEM: for JKS first `keytool -importkeystore -srckeystore STORE.jks -destkeystore "
    "STORE.p12 -deststoretype PKCS12`, then `openssl pkcs12 -in STORE.p12 -out keystore.pem` (the file holds "
    "the private key and the certificate chain; the PEM pass phrase it asks for goes in ssl.key.password); "
    "set ssl.keystore.type=PEM and ssl.keystore.location=keystore.pem"
)


@dataclass(frozen=True)
class ClientSecurity:
    """A Kafka client's security settings, validated; secrets are left out of ``repr``.

    ``source`` names where they came from (a file path) for error messages. PEM text is kept as given; paths
    are kept as written and, as in Kafka, resolve against the working directory, not the properties file.
    """

    source: str = "<defaults>"
    protocol: str = "PLAINTEXT"
    client_id: str | None = None
    truststore_location: Path | None = None
    truststore_certificates: str | None = field(default=None, repr=False)
    keystore_location: Path | None = None
    keystore_key: str | None = field(default=None, repr=False)
    keystore_certificate_chain: str | None = field(default=None, repr=False)
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    sasl_token_auth: bool = False
    # every property read, unknown ones included (with secrets: kept out of repr; a mapping is not hashable)
    properties: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}), repr=False, hash=False
    )

    @property
    def uses_tls(self) -> bool:
        """Whether connections are TLS (``SSL``, ``SASL_SSL``)."""
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        """Whether connections authenticate with SASL (``SASL_PLAINTEXT``, ``SASL_SSL``)."""
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS client context for these settings, or None when the protocol is not TLS.

        Trusts the truststore's certificates (the system's default CAs when there is none), presents the
        keystore's certificate chain when one is configured, and checks the broker's host name unless
        ``ssl.endpoint.identification.algorithm`` is empty (the chain is verified either way).
        """
        if not self.uses_tls:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        # Kafka's default ssl.enabled.protocols is TLSv1.2,TLSv1.3
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.check_hostname = self.check_hostname
        context.verify_mode = ssl.CERT_REQUIRED
        self.load_stores(context)
        return context

    def load_stores(self, context: ssl.SSLContext) -> None:
        """Load the truststore (the CAs trusted; the system's when none is set) and the keystore (our own
        certificate chain, if one is set) into `context`: a server's context needs the same two."""
        self._load_trust(context)
        self._load_client_certificate(context)

    def _error(self, prop: str, message: str) -> SecurityConfigError:
        return SecurityConfigError(message, source=self.source, property=prop)

    def _load_trust(self, context: ssl.SSLContext) -> None:
        if self.truststore_certificates is not None:
            prop, text = "ssl.truststore.certificates", self.truststore_certificates
        elif self.truststore_location is not None:
            prop = "ssl.truststore.location"
            text = self._read_pem_file(prop, self.truststore_location, _TRUSTSTORE_CONVERT)
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
            return
        self._require_pem(prop, text, "CERTIFICATE")
        certificates = [block for label, block in pem_blocks(text) if label == "CERTIFICATE"]
        try:
            context.load_verify_locations(cadata="".join(certificates))
        except (ssl.SSLError, ValueError) as exc:  # ValueError: text that is not ASCII
            raise self._error(prop, f"invalid PEM certificate: {exc}") from exc

    def _load_client_certificate(self, context: ssl.SSLContext) -> None:
        if self.keystore_location is not None:
            prop = "ssl.keystore.location"
            text = self._read_pem_file(prop, self.keystore_location, _KEYSTORE_CONVERT)
            self._require_pem(prop, text, "PRIVATE KEY")
            self._require_pem(prop, text, "CERTIFICATE")
            self._load_cert_chain(context, prop, self.keystore_location)
        elif self.keystore_key is not None and self.keystore_certificate_chain is not None:
            prop = "ssl.keystore.key"
            self._require_pem(prop, self.keystore_key, "PRIVATE KEY")
            chain = self.keystore_certificate_chain
            self._require_pem("ssl.keystore.certificate.chain", chain, "CERTIFICATE")
            blocks = pem_blocks(chain + "\n" + self.keystore_key)
            # load_cert_chain reads only files: the key goes to a file only we can read, removed at once
            fd, name = tempfile.mkstemp(prefix="kraftlake-keystore-", suffix=".pem")
            try:
                with os.fdopen(fd, "w", encoding="ascii", errors="replace") as out:
                    out.write("".join(block for _, block in blocks))
                self._load_cert_chain(context, prop, Path(name))
            finally:
                os.unlink(name)

    def _load_cert_chain(self, context: ssl.SSLContext, prop: str, path: Path) -> None:
        asked = False

        def password() -> str:
            # a callback, not the string: it says whether the key was encrypted, and without one OpenSSL
            # would prompt for the pass phrase on the terminal
            nonlocal asked
            asked = True
            if self.key_password is None:
                raise self._error(
                    "ssl.key.password", f"the private key in {prop} is encrypted; set ssl.key.password"
                )
            return self.key_password

        try:
            context.load_cert_chain(path, password=password)
        except ssl.SSLError as exc:
            detail = exc.strerror or str(exc)
            if exc.reason == "KEY_VALUES_MISMATCH":
                raise self._error(
                    prop, "the private key does not belong to the first certificate of the chain"
                ) from exc
            if asked:
                raise self._error(
                    "ssl.key.password",
                    f"cannot decrypt the private key in {prop}: wrong password? ({detail})",
                ) from exc
            raise self._error(prop, f"cannot load the private key and certificate chain: {detail}") from exc

    def _require_pem(self, prop: str, text: str, kind: str) -> None:
        # "PRIVATE KEY" also stands for ENCRYPTED / RSA / EC PRIVATE KEY
        if not any(label.endswith(kind) for label, _ in pem_blocks(text)):
            raise self._error(prop, f"no PEM {kind.lower()} (-----BEGIN {kind}-----) found")

    def _read_pem_file(self, prop: str, path: Path, convert: str) -> str:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise self._error(prop, f"cannot read {path}: {exc.strerror or exc}") from exc
        if b"-----BEGIN " not in data:
            raise self._error(prop, f"{path} is not a PEM file (only PEM files are supported); {convert}")
        return data.decode("ascii", errors="replace")


def pem_blocks(text: str) -> list[tuple[str, str]]:
    """The PEM blocks in ``text`` as (label, block re-wrapped at 64 columns), in order.

    Inline PEM in a ``.properties`` file usually arrives on one line (continuation lines are joined without
    their line breaks); Kafka's PemParser accepts that and so does this, OpenSSL does not.
    """
    blocks = []
    for match in _PEM_BLOCK.finditer(text):
        label, body = match.group(1), match.group(2)
        if ":" in body:
            # RFC 1421 headers (Proc-Type, DEK-Info of a traditional encrypted key) need their line breaks
            blocks.append((label, match.group(0).strip() + "\n"))
            continue
        data = "".join(body.split())
        lines = [data[i : i + 64] for i in range(0, len(data), 64)]
        blocks.append((label, "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----", ""])))
    return blocks


# --- java.util.Properties ---------------------------------------------------------------------------------

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, source: str) -> dict[str, str]:
    """``text`` parsed as ``java.util.Properties.load`` does (the last of repeated keys wins).

    Comments are lines whose first non-blank character is ``#`` or ``!``; a key ends at the first unescaped
    ``=``, ``:`` or blank; a line ending in an odd number of backslashes continues on the next line, whose
    leading blanks are dropped; escapes are ``\\t \\n \\r \\f \\uXXXX`` and backslash-anything-else.
    """
    properties: dict[str, str] = {}
    natural = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(natural):
        start = i
        line = natural[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i == len(natural):
                break
            line += natural[i].lstrip(_WHITESPACE)
            i += 1
        key, value = _split_line(line)
        where = f"line {start + 1}"
        name = _unescape(key, source, where, None)
        properties[name] = _unescape(value, source, where, name)
    return properties


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_line(line: str) -> tuple[str, str]:
    escaped = False
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    for pos, char in enumerate(line):
        if not escaped and char in "=:":
            key_end, value_start, has_separator = pos, pos + 1, True
            break
        if not escaped and char in _WHITESPACE:
            key_end, value_start = pos, pos + 1
            break
        escaped = char == "\\" and not escaped
    while value_start < len(line):
        char = line[value_start]
        if char not in _WHITESPACE:
            if has_separator or char not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(text: str, source: str, where: str, key: str | None) -> str:
    if "\\" not in text:
        return text
    out = []
    pos = 0
    while pos < len(text):
        char = text[pos]
        pos += 1
        if char != "\\" or pos == len(text):
            out.append(char)
            continue
        char = text[pos]
        pos += 1
        if char == "u":
            digits = text[pos : pos + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise SecurityConfigError(f"{where}: malformed \\uXXXX escape", source=source, property=key)
            out.append(chr(int(digits, 16)))
            pos += 4
        else:
            out.append(_ESCAPES.get(char, char))
    return "".join(out)


# --- JAAS (sasl.jaas.config) ----------------------------------------------------------------------------

_JAAS_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<quoted>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<word>[A-Za-z0-9._$\u00a0-\u00ff-]+)
  | (?P<symbol>[=;])
""",
    re.VERBOSE | re.DOTALL,
)
_STRING_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


@dataclass(frozen=True)
class JaasEntry:
    """One JAAS login module entry: ``<class> <flag> name="value" ...;``."""

    login_module: str
    control_flag: str
    options: Mapping[str, str] = field(repr=False)


def parse_jaas_config(text: str, source: str) -> JaasEntry:
    """``sasl.jaas.config`` parsed as Kafka's JaasConfig does; a client's has exactly one login module."""

    def error(message: str) -> SecurityConfigError:
        return SecurityConfigError(message, source=source, property="sasl.jaas.config")

    tokens = _jaas_tokens(text, error)
    entries: list[JaasEntry] = []
    pos = 0
    while pos < len(tokens):
        kind, module = tokens[pos]
        if kind != "word":
            raise error(f"expected a login module class name, found {module!r}")
        if pos + 1 >= len(tokens) or tokens[pos + 1][0] != "word":
            raise error(f"login module {module} has no control flag ({', '.join(_CONTROL_FLAGS)})")
        flag = tokens[pos + 1][1]
        if flag.lower() not in _CONTROL_FLAGS:
            raise error(f"invalid control flag {flag!r} (expected one of {', '.join(_CONTROL_FLAGS)})")
        pos += 2
        options: dict[str, str] = {}
        while True:
            if pos >= len(tokens):
                raise error(f"login module {module} is not terminated by ';'")
            kind, name = tokens[pos]
            if (kind, name) == ("symbol", ";"):
                pos += 1
                break
            if kind != "word":
                raise error(f"expected an option name, found {name!r}")
            if pos + 2 >= len(tokens) or tokens[pos + 1] != ("symbol", "=") or tokens[pos + 2][0] == "symbol":
                raise error(f"value not specified for option {name!r}")
            options[name] = tokens[pos + 2][1]
            pos += 3
        entries.append(JaasEntry(module, flag.lower(), MappingProxyType(options)))
    if len(entries) != 1:
        raise error(f"contains {len(entries)} login modules, should be 1 module")
    return entries[0]


def _jaas_tokens(text: str, error: Callable[[str], SecurityConfigError]) -> list[tuple[str, str]]:
    """(kind, text) tokens, ``word`` or ``symbol``; quoted strings are unescaped words."""
    tokens = []
    pos = 0
    while pos < len(text):
        match = _JAAS_TOKEN.match(text, pos)
        if match is None:
            char = text[pos]
            if char in "\"'":
                raise error("unterminated quoted string")
            raise error(f"unexpected character {char!r} at position {pos}")
        kind = match.lastgroup
        assert kind is not None
        pos = match.end()
        if kind == "space":
            continue
        value = match.group(kind)
        if kind == "quoted":
            kind, value = "word", _unquote(value[1:-1])
        tokens.append((kind, value))
    return tokens


def _unquote(body: str) -> str:
    out = []
    pos = 0
    while pos < len(body):
        char = body[pos]
        pos += 1
        if char != "\\":
            out.append(char)
            continue
        char = body[pos]
        pos += 1
        octal = re.match(r"[0-3][0-7]{0,2}|[4-7][0-7]?", body[pos - 1 :])
        if octal:
            out.append(chr(int(octal.group(0), 8)))
            pos += len(octal.group(0)) - 1
        else:
            out.append(_STRING_ESCAPES.get(char, char))
    return "".join(out)


# --- client properties ----------------------------------------------------------------------------------


def load_client_properties(path: str | os.PathLike[str]) -> ClientSecurity:
    """The client security settings in a ``.properties`` file.

    Read as ISO-8859-1, as Kafka's tools read it (``Properties.load`` of a stream): other characters must be
    written as ``\\uXXXX``.
    """
    source = os.fspath(path)
    return parse_client_properties(read_properties_file(source, "client"), source)


def read_properties_file(source: str, what: str) -> str:
    """A ``.properties`` file's text, decoded as Kafka's ``Properties.load`` of a stream decodes it
    (ISO-8859-1); ``what`` names its kind in the error when it cannot be read."""
    try:
        data = Path(source).read_bytes()
    except OSError as exc:
        raise SecurityConfigError(
            f"cannot read the {what} properties: {exc.strerror or exc}", source=source
        ) from exc
    return data.decode("iso-8859-1")


def parse_client_properties(text: str, source: str = "<string>") -> ClientSecurity:
    """The client security settings in ``.properties`` text; ``source`` names it in error messages."""
    props = parse_properties(text, source)

    def get(name: str) -> str | None:
        # Kafka's ConfigDef trims STRING and PASSWORD values
        value = props.get(name)
        return None if value is None else value.strip()

    def error(name: str, message: str) -> SecurityConfigError:
        return SecurityConfigError(message, source=source, property=name)

    protocol = (get("security.protocol") or "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise error(
            "security.protocol",
            f"unknown security protocol {props['security.protocol']!r} "
            f"(expected one of {', '.join(PROTOCOLS)})",
        )
    # as in Kafka, the TLS and SASL properties are read (and checked) only when the protocol uses them
    tls = tls_settings(get, error) if protocol in ("SSL", "SASL_SSL") else _TlsSettings()
    sasl = (
        _sasl_settings(get, error, source) if protocol in ("SASL_PLAINTEXT", "SASL_SSL") else _SaslSettings()
    )
    return ClientSecurity(
        source=source,
        protocol=protocol,
        client_id=get("client.id"),
        properties=MappingProxyType(dict(props)),
        **tls,
        **sasl,
    )


_Get = Callable[[str], str | None]
_Error = Callable[[str, str], SecurityConfigError]


class _TlsSettings(TypedDict, total=False):
    truststore_location: Path | None
    truststore_certificates: str | None
    keystore_location: Path | None
    keystore_key: str | None
    keystore_certificate_chain: str | None
    key_password: str | None
    check_hostname: bool


class _SaslSettings(TypedDict, total=False):
    sasl_mechanism: str
    sasl_username: str
    sasl_password: str
    sasl_token_auth: bool


def tls_settings(get: _Get, error: _Error) -> _TlsSettings:
    """The ``ssl.*`` store properties, checked as Kafka's DefaultSslEngineFactory checks them (PEM only); a
    server's listener has the same ones."""
    stores = {
        "truststore": ("ssl.truststore.location", "ssl.truststore.certificates"),
        "keystore": ("ssl.keystore.location", "ssl.keystore.key"),
    }
    for kind, convert in (("truststore", _TRUSTSTORE_CONVERT), ("keystore", _KEYSTORE_CONVERT)):
        store_type = get(f"ssl.{kind}.type")
        # a type with no store is harmless (Kafka then uses no keystore, the default trust)
        configured = any(get(name) for name in stores[kind])
        if configured and store_type is not None and store_type.upper() != "PEM":
            raise error(f"ssl.{kind}.type", f"{store_type} is not supported; only PEM files are; {convert}")
        if get(f"ssl.{kind}.password") is not None:
            hint = " (only ssl.key.password, for an encrypted private key)" if kind == "keystore" else ""
            raise error(
                f"ssl.{kind}.password", f"a {kind} password cannot be specified with PEM format{hint}"
            )
    truststore_location = get("ssl.truststore.location")
    truststore_certificates = get("ssl.truststore.certificates")
    if truststore_location and truststore_certificates:
        raise error(
            "ssl.truststore.certificates",
            "both ssl.truststore.location and ssl.truststore.certificates are specified; set one",
        )
    keystore_location = get("ssl.keystore.location")
    keystore_key = get("ssl.keystore.key")
    keystore_chain = get("ssl.keystore.certificate.chain")
    if keystore_key and keystore_location:
        raise error(
            "ssl.keystore.key", "both ssl.keystore.location and ssl.keystore.key are specified; set one"
        )
    if keystore_key and not keystore_chain:
        raise error(
            "ssl.keystore.certificate.chain",
            "ssl.keystore.key is specified, but the certificate chain is not",
        )
    if keystore_chain and not keystore_key:
        raise error(
            "ssl.keystore.key", "ssl.keystore.certificate.chain is specified, but the private key is not"
        )
    algorithm = get("ssl.endpoint.identification.algorithm")
    if algorithm is not None and algorithm.lower() not in ("", "https"):
        raise error(
            "ssl.endpoint.identification.algorithm",
            f"unknown algorithm {algorithm!r} (expected https, or empty to disable the hostname check)",
        )
    return _TlsSettings(
        truststore_location=Path(truststore_location) if truststore_location else None,
        truststore_certificates=truststore_certificates or None,
        keystore_location=Path(keystore_location) if keystore_location else None,
        keystore_key=keystore_key or None,
        keystore_certificate_chain=keystore_chain or None,
        key_password=get("ssl.key.password"),
        check_hostname=algorithm != "",
    )


def _sasl_settings(get: _Get, error: _Error, source: str) -> _SaslSettings:
    mechanism = get("sasl.mechanism") or "PLAIN"
    if mechanism.upper() in _UNSUPPORTED_MECHANISMS:
        raise error(
            "sasl.mechanism", f"{mechanism} is not supported (supported: {', '.join(SASL_MECHANISMS)})"
        )
    if mechanism not in SASL_MECHANISMS:
        raise error(
            "sasl.mechanism",
            f"unknown SASL mechanism {mechanism!r} (supported: {', '.join(SASL_MECHANISMS)})",
        )
    jaas_text = get("sasl.jaas.config")
    if not jaas_text:
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        raise error(
            "sasl.jaas.config",
            f"not set; {mechanism} needs e.g. sasl.jaas.config="
            f'org.apache.kafka.common.security.{module} required username="..." password="...";',
        )
    entry = parse_jaas_config(jaas_text, source)
    if entry.login_module not in _LOGIN_MODULES:
        raise error(
            "sasl.jaas.config",
            f"login module {entry.login_module} is not supported "
            f"(supported: {', '.join(sorted(_LOGIN_MODULES))})",
        )
    username, password = entry.options.get("username"), entry.options.get("password")
    for name, value in (("username", username), ("password", password)):
        if value is None:
            raise error("sasl.jaas.config", f'{entry.login_module} has no {name}="..." option')
        if mechanism == "PLAIN" and "\0" in value:
            raise error("sasl.jaas.config", f"the PLAIN {name} cannot contain NUL")
    assert username is not None and password is not None
    return _SaslSettings(
        sasl_mechanism=mechanism,
        sasl_username=username,
        sasl_password=password,
        sasl_token_auth=entry.options.get("tokenauth", "").lower() == "true",
    )
