"""Client security properties: Java .properties parsing, the checks Kafka makes, and the TLS context at work.

The TLS tests make a throwaway CA and certificates with the ``openssl`` CLI (skipped without it) and talk to
a one-message TLS echo server on 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kraftlake.wire.client_config import (
    ClientSecurity,
    load_client_properties,
    parse_client_properties,
    parse_jaas_config,
    parse_properties,
)
from kraftlake.wire.errors import SecurityConfigError, TlsError, WireError

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";'

# --- java.util.Properties -------------------------------------------------------------------------------


def props(text: str) -> dict[str, str]:
    return parse_properties(text, "test.properties")


def test_separators_and_whitespace() -> None:
    assert props("a=1\nb: 2\nc 3\n  d = 4\ne\t:\t5\nf==6\ng=:7\nh\n") == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4",
        "e": "5",
        "f": "=6",
        "g": ":7",
        "h": "",
    }


def test_value_keeps_trailing_whitespace_and_inner_separators() -> None:
    assert props("url = http://host:9092/x=y  \n") == {"url": "http://host:9092/x=y  "}


def test_comments_and_blank_lines() -> None:
    assert props("# a comment\n! another\n   # indented\n\n\t\na=1\n") == {"a": "1"}


def test_comment_lines_do_not_continue() -> None:
    assert props("# comment \\\na=1\n") == {"a": "1"}


def test_continuation_lines() -> None:
    text = "list=one, \\\n     two, \\\n\t three\n"
    assert props(text) == {"list": "one, two, three"}


def test_continuation_line_is_never_a_comment() -> None:
    assert props("a=x\\\n  # not a comment\n") == {"a": "x# not a comment"}


def test_even_backslashes_do_not_continue() -> None:
    assert props("path=C:\\\\dir\\\\\nnext=1\n") == {"path": "C:\\dir\\", "next": "1"}


def test_backslash_at_end_of_file_is_dropped() -> None:
    assert props("a=b\\") == {"a": "b"}


def test_line_endings() -> None:
    assert props("a=1\r\nb=2\rc=3\\\r\n  4") == {"a": "1", "b": "2", "c": "34"}


def test_escapes() -> None:
    text = "k\\=ey\\ 1=\\tx\\ny\\u0041\\u00e9\\q\\:\\\\\n"
    assert props(text) == {"k=ey 1": "\tx\nyA\u00e9q:\\"}


def test_last_repeated_key_wins() -> None:
    assert props("a=1\na=2\n") == {"a": "2"}


def test_malformed_unicode_escape_names_file_line_and_key() -> None:
    with pytest.raises(SecurityConfigError, match=r"^test.properties: client.id: line 2: malformed \\uXXXX"):
        props("a=1\nclient.id=\\u12g4\n")


def test_file_is_read_as_iso_8859_1_like_kafka(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_bytes(b"client.id=caf\xe9\\u00e9\n")
    assert load_client_properties(path).client_id == "caf\u00e9\u00e9"


# --- the security settings ------------------------------------------------------------------------------


def test_defaults_are_plaintext() -> None:
    security = parse_client_properties("# nothing\n")
    assert security == ClientSecurity(source="<string>")
    assert security.protocol == "PLAINTEXT"
    assert not security.uses_tls and not security.uses_sasl
    assert security.ssl_context() is None


def test_unknown_keys_are_kept() -> None:
    security = parse_client_properties("client.id = me \nlinger.ms=5\n")
    assert security.client_id == "me"  # Kafka trims string values
    assert security.properties["linger.ms"] == "5"


def test_protocol_is_case_insensitive_and_flags() -> None:
    security = parse_client_properties(f"security.protocol=sasl_ssl\nsasl.jaas.config={PLAIN_JAAS}\n")
    assert security.protocol == "SASL_SSL"
    assert security.uses_tls and security.uses_sasl
    assert security.sasl_mechanism == "PLAIN"  # Kafka's default
    sasl_plaintext = parse_client_properties(
        f"security.protocol=SASL_PLAINTEXT\nsasl.jaas.config={PLAIN_JAAS}\n"
    )
    assert sasl_plaintext.uses_sasl and not sasl_plaintext.uses_tls
    assert sasl_plaintext.ssl_context() is None


def test_tls_properties() -> None:
    security = parse_client_properties(
        "security.protocol=SSL\nssl.truststore.type=pem\nssl.truststore.location=/etc/ca.pem\n"
        "ssl.keystore.location=/etc/client.pem\nssl.key.password=secret\n"
        "ssl.endpoint.identification.algorithm=\n"
    )
    assert security.truststore_location == Path("/etc/ca.pem")
    assert security.keystore_location == Path("/etc/client.pem")
    assert security.key_password == "secret"
    assert not security.check_hostname
    assert parse_client_properties("security.protocol=SSL\n").check_hostname
    assert parse_client_properties(
        "security.protocol=SSL\nssl.endpoint.identification.algorithm=HTTPS\n"
    ).check_hostname


def test_tls_properties_are_ignored_without_tls() -> None:
    # Kafka does not look at ssl.* unless the protocol is SSL or SASL_SSL; neither does this
    security = parse_client_properties("ssl.truststore.type=JKS\nssl.truststore.location=x.jks\n")
    assert security.truststore_location is None


def test_a_store_type_without_a_store_is_harmless() -> None:
    security = parse_client_properties(
        "security.protocol=SSL\nssl.keystore.type=JKS\nssl.truststore.type=JKS\n"
    )
    assert security.keystore_location is None and security.truststore_location is None


def test_security_is_hashable() -> None:
    security = parse_client_properties("security.protocol=SSL\nlinger.ms=5\n")
    assert hash(security) == hash(parse_client_properties("security.protocol=SSL\nlinger.ms=5\n"))


def test_secrets_stay_out_of_repr() -> None:
    security = parse_client_properties(
        "security.protocol=SASL_SSL\nssl.key.password=hunter2\nsasl.jaas.config=org.apache.kafka.common."
        'security.plain.PlainLoginModule required username="alice" password="pencil";\n'
    )
    assert "alice" in repr(security)
    assert "pencil" not in repr(security) and "hunter2" not in repr(security)


def test_sasl_credentials() -> None:
    # two layers of escapes: the .properties file's, then the JAAS quoted string's
    security = parse_client_properties(r"""security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="al\\"ice" \
    password="p\\\\w;d";
""")
    assert security.sasl_mechanism == "SCRAM-SHA-512"
    assert security.sasl_username == 'al"ice'
    assert security.sasl_password == "p\\w;d"
    assert not security.sasl_token_auth


def test_jaas_syntax() -> None:
    entry = parse_jaas_config(
        "/* a comment */ org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED // flag\n"
        'username=bob password=\'it s\' tokenauth="true" note="tab\\there\\101";',
        "x",
    )
    assert entry.login_module == "org.apache.kafka.common.security.scram.ScramLoginModule"
    assert entry.control_flag == "required"
    assert dict(entry.options) == {
        "username": "bob",
        "password": "it s",
        "tokenauth": "true",
        "note": "tab\there" + "A",
    }


def test_token_auth() -> None:
    security = parse_client_properties(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config="
        + SCRAM_JAAS.replace(";", " tokenauth=true;")
        + "\n"
    )
    assert security.sasl_token_auth


TLS = "security.protocol=SSL\n"
SASL = "security.protocol=SASL_PLAINTEXT\n"


@pytest.mark.parametrize(
    ("text", "prop", "fragment"),
    [
        ("security.protocol=TLS\n", "security.protocol", "unknown security protocol 'TLS'"),
        (
            TLS + "ssl.truststore.type=JKS\nssl.truststore.location=t.jks\n",
            "ssl.truststore.type",
            "JKS is not supported; only PEM files are; convert it to PEM",
        ),
        (
            TLS + "ssl.keystore.type=PKCS12\nssl.keystore.location=k.p12\n",
            "ssl.keystore.type",
            "openssl pkcs12 -in STORE.p12 -out keystore.pem",
        ),
        (
            TLS + "ssl.truststore.location=t.pem\nssl.truststore.password=x\n",
            "ssl.truststore.password",
            "cannot be specified with PEM",
        ),
        (
            TLS + "ssl.keystore.location=k.pem\nssl.keystore.password=x\n",
            "ssl.keystore.password",
            "only ssl.key.password",
        ),
        (
            TLS + "ssl.truststore.location=t.pem\nssl.truststore.certificates=x\n",
            "ssl.truststore.certificates",
            "both",
        ),
        (
            TLS + "ssl.keystore.location=k.pem\nssl.keystore.key=x\nssl.keystore.certificate.chain=y\n",
            "ssl.keystore.key",
            "both",
        ),
        (TLS + "ssl.keystore.key=x\n", "ssl.keystore.certificate.chain", "certificate chain is not"),
        (TLS + "ssl.keystore.certificate.chain=x\n", "ssl.keystore.key", "private key is not"),
        (
            TLS + "ssl.endpoint.identification.algorithm=ldap\n",
            "ssl.endpoint.identification.algorithm",
            "unknown algorithm 'ldap'",
        ),
        (SASL + "sasl.mechanism=GSSAPI\n", "sasl.mechanism", "GSSAPI is not supported"),
        (SASL + "sasl.mechanism=OAUTHBEARER\n", "sasl.mechanism", "OAUTHBEARER is not supported"),
        (SASL + "sasl.mechanism=scram-sha-256\n", "sasl.mechanism", "unknown SASL mechanism 'scram-sha-256'"),
        (SASL, "sasl.jaas.config", "not set; PLAIN needs e.g. sasl.jaas.config="),
        (
            SASL + "sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required;\n",
            "sasl.jaas.config",
            "Krb5LoginModule is not supported",
        ),
        (SASL + "sasl.jaas.config=" + PLAIN_JAAS[:-1] + "\n", "sasl.jaas.config", "not terminated by ';'"),
        (
            SASL + "sasl.jaas.config=" + PLAIN_JAAS.replace(' password="p"', "") + "\n",
            "sasl.jaas.config",
            'no password="..." option',
        ),
        (
            SASL + "sasl.jaas.config=" + PLAIN_JAAS + PLAIN_JAAS + "\n",
            "sasl.jaas.config",
            "contains 2 login modules, should be 1",
        ),
        (
            SASL + "sasl.jaas.config=" + PLAIN_JAAS.replace("required", "mandatory") + "\n",
            "sasl.jaas.config",
            "invalid control flag 'mandatory'",
        ),
        (
            SASL + "sasl.jaas.config=" + PLAIN_JAAS.replace('="p"', "=") + "\n",
            "sasl.jaas.config",
            "value not specified for option 'password'",
        ),
        (
            SASL + "sasl.jaas.config=" + PLAIN_JAAS.replace('="p"', '="p') + "\n",
            "sasl.jaas.config",
            "unterminated quoted string",
        ),
        (
            SASL + "sasl.jaas.config=" + PLAIN_JAAS.replace('"u"', r'"a\\0b"') + "\n",
            "sasl.jaas.config",
            "cannot contain NUL",
        ),
    ],
)
def test_bad_config_names_property_and_file(tmp_path: Path, text: str, prop: str, fragment: str) -> None:
    path = tmp_path / "client.properties"
    path.write_text(text)
    with pytest.raises(SecurityConfigError) as info:
        load_client_properties(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {prop}: "), message
    assert fragment in message
    assert (info.value.source, info.value.property) == (str(path), prop)
    assert isinstance(info.value, WireError)


def test_missing_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.properties"
    with pytest.raises(SecurityConfigError, match=f"^{path}: cannot read the client properties"):
        load_client_properties(path)


# --- TLS ------------------------------------------------------------------------------------------------

OPENSSL_CONFIG = """\
[req]
distinguished_name = dn
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""
KEY_PASSWORD = "s3cret"


@dataclass(frozen=True)
class Pki:
    """A throwaway CA, a server certificate for DNS name ``localhost`` and a client certificate."""

    dir: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client: Path  # key and certificate in one PEM file, as ssl.keystore.location has them
    client_encrypted: Path  # the same with the key encrypted under KEY_PASSWORD (PKCS#8)

    def text(self, name: str) -> str:
        return (self.dir / name).read_text()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl CLI")
    d = tmp_path_factory.mktemp("pki")
    (d / "openssl.cnf").write_text(OPENSSL_CONFIG)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    openssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=kraftlake test CA",
        "-config",
        "openssl.cnf",
        "-extensions",
        "ca",
    )
    for name, subject, serial in (
        ("server", "/CN=localhost", "1001"),
        ("client", "/CN=kraftlake client", "1002"),
    ):
        openssl(
            "req",
            "-new",
            *ec,
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            subject,
            "-config",
            "openssl.cnf",
        )
        openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-set_serial",
            serial,
            "-days",
            "2",
            "-out",
            f"{name}.pem",
            "-extfile",
            "openssl.cnf",
            "-extensions",
            name,
        )
    openssl(
        "pkcs8",
        "-topk8",
        "-in",
        "client.key",
        "-out",
        "client-encrypted.key",
        "-v2",
        "aes-256-cbc",
        "-passout",
        f"pass:{KEY_PASSWORD}",
    )
    (d / "client-keystore.pem").write_text((d / "client.key").read_text() + (d / "client.pem").read_text())
    (d / "client-keystore-encrypted.pem").write_text(
        (d / "client-encrypted.key").read_text() + (d / "client.pem").read_text()
    )
    return Pki(
        d,
        d / "ca.pem",
        d / "server.pem",
        d / "server.key",
        d / "client-keystore.pem",
        d / "client-keystore-encrypted.pem",
    )


class EchoServer:
    """A TLS server on 127.0.0.1 that echoes one message per connection; handshake failures are recorded."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self.context = context
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port: int = self.listener.getsockname()[1]
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    with self.context.wrap_socket(conn, server_side=True) as tls:
                        tls.sendall(tls.recv(1024))
                except (ssl.SSLError, OSError) as exc:
                    self.errors.append(exc)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.listener.close()


def server_context(pki: Pki, *, require_client_cert: bool = False) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(pki.ca)
    return context


@pytest.fixture
def server(pki: Pki) -> Iterator[EchoServer]:
    echo = EchoServer(server_context(pki))
    yield echo
    echo.close()


@pytest.fixture
def mtls_server(pki: Pki) -> Iterator[EchoServer]:
    echo = EchoServer(server_context(pki, require_client_cert=True))
    yield echo
    echo.close()


def echo(security: ClientSecurity, port: int, server_hostname: str = "localhost") -> bytes:
    context = security.ssl_context()
    assert context is not None
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=server_hostname) as tls,
    ):
        tls.sendall(b"ping")
        return tls.recv(1024)


def tls_config(*lines: str, source: str = "client.properties") -> ClientSecurity:
    return parse_client_properties("\n".join(["security.protocol=SSL", *lines]) + "\n", source)


def inline(name: str, pem: str) -> str:
    """``name=<pem>`` across continuation lines, as inline PEM is written in a .properties file."""
    return f"{name}=" + " \\\n    ".join(line for line in pem.splitlines() if line)


def test_truststore_location_verifies_the_server(pki: Pki, server: EchoServer) -> None:
    assert echo(tls_config(f"ssl.truststore.location={pki.ca}"), server.port) == b"ping"


def test_inline_truststore_certificates(pki: Pki, server: EchoServer) -> None:
    security = tls_config(inline("ssl.truststore.certificates", pki.ca.read_text()))
    assert "\n" not in (security.truststore_certificates or "")  # one line, as Kafka would see it too
    assert echo(security, server.port) == b"ping"


def test_without_the_ca_verification_fails(server: EchoServer) -> None:
    # no truststore: the system's default CAs, which never signed this test CA
    with pytest.raises(ssl.SSLCertVerificationError) as info:
        echo(tls_config(), server.port)
    error = TlsError.from_handshake("127.0.0.1", server.port, info.value)
    assert str(error).startswith(
        f"TLS handshake with 127.0.0.1:{server.port} failed: certificate verify failed"
    )
    assert "ssl.truststore.location" in str(error)


def test_hostname_is_checked_by_default(pki: Pki, server: EchoServer) -> None:
    security = tls_config(f"ssl.truststore.location={pki.ca}")
    with pytest.raises(ssl.SSLCertVerificationError) as info:
        echo(security, server.port, server_hostname="127.0.0.1")  # the certificate names only localhost
    assert "ssl.endpoint.identification.algorithm" in str(TlsError.from_handshake("127.0.0.1", 1, info.value))


def test_empty_endpoint_identification_skips_the_hostname_check(pki: Pki, server: EchoServer) -> None:
    security = tls_config(f"ssl.truststore.location={pki.ca}", "ssl.endpoint.identification.algorithm=")
    assert echo(security, server.port, server_hostname="127.0.0.1") == b"ping"
    # ... but the chain is still verified
    with pytest.raises(ssl.SSLCertVerificationError):
        echo(tls_config("ssl.endpoint.identification.algorithm="), server.port, server_hostname="127.0.0.1")


def test_client_certificate_from_keystore_location(pki: Pki, mtls_server: EchoServer) -> None:
    security = tls_config(f"ssl.truststore.location={pki.ca}", f"ssl.keystore.location={pki.client}")
    assert echo(security, mtls_server.port) == b"ping"


def test_encrypted_client_key_with_key_password(pki: Pki, mtls_server: EchoServer) -> None:
    security = tls_config(
        f"ssl.truststore.location={pki.ca}",
        f"ssl.keystore.location={pki.client_encrypted}",
        f"ssl.key.password={KEY_PASSWORD}",
    )
    assert echo(security, mtls_server.port) == b"ping"


def test_inline_keystore_leaves_no_key_file(
    pki: Pki, mtls_server: EchoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    security = tls_config(
        f"ssl.truststore.location={pki.ca}",
        inline("ssl.keystore.key", pki.text("client-encrypted.key")),
        inline("ssl.keystore.certificate.chain", pki.text("client.pem")),
        f"ssl.key.password={KEY_PASSWORD}",
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    context = security.ssl_context()
    assert list(scratch.iterdir()) == []
    assert context is not None
    assert echo(security, mtls_server.port) == b"ping"


def test_without_a_client_certificate_the_server_refuses(pki: Pki, mtls_server: EchoServer) -> None:
    security = tls_config(f"ssl.truststore.location={pki.ca}")
    # TLS 1.3: the client's handshake completes; the server's refusal arrives as an alert on the first read
    with pytest.raises((ssl.SSLError, ConnectionResetError)) as info:
        echo(security, mtls_server.port)
    assert "client certificate" in str(TlsError.from_handshake("127.0.0.1", mtls_server.port, info.value))


@pytest.mark.parametrize(
    ("lines", "prop", "fragment"),
    [
        (["ssl.truststore.location={dir}/absent.pem"], "ssl.truststore.location", "cannot read"),
        (
            ["ssl.truststore.location={dir}/store.jks"],
            "ssl.truststore.location",
            "is not a PEM file (only PEM files are supported); convert it to PEM",
        ),
        (["ssl.truststore.location={dir}/client.key"], "ssl.truststore.location", "no PEM certificate"),
        (["ssl.keystore.location={dir}/client.pem"], "ssl.keystore.location", "no PEM private key"),
        (["ssl.keystore.location={dir}/client.key"], "ssl.keystore.location", "no PEM certificate"),
        (
            ["ssl.keystore.location={dir}/client-keystore-encrypted.pem"],
            "ssl.key.password",
            "is encrypted; set ssl.key.password",
        ),
        (
            ["ssl.keystore.location={dir}/client-keystore-encrypted.pem", "ssl.key.password=wrong"],
            "ssl.key.password",
            "cannot decrypt the private key in ssl.keystore.location",
        ),
        (
            ["ssl.keystore.location={dir}/mismatch.pem"],
            "ssl.keystore.location",
            "the private key does not belong to the first certificate",
        ),
        (
            [
                "ssl.keystore.key=-----BEGIN CERTIFICATE----- AAAA -----END CERTIFICATE-----",
                "ssl.keystore.certificate.chain=-----BEGIN CERTIFICATE----- AAAA -----END CERTIFICATE-----",
            ],
            "ssl.keystore.key",
            "no PEM private key",
        ),
        (
            [
                "ssl.keystore.key=-----BEGIN PRIVATE KEY----- AAAA -----END PRIVATE KEY-----",
                "ssl.keystore.certificate.chain=not pem",
            ],
            "ssl.keystore.certificate.chain",
            "no PEM certificate",
        ),
        (
            ["ssl.truststore.certificates=-----BEGIN CERTIFICATE----- AAAA -----END CERTIFICATE-----"],
            "ssl.truststore.certificates",
            "invalid PEM certificate",
        ),
        (
            [
                "ssl.keystore.key=-----BEGIN PRIVATE KEY----- AAAA -----END PRIVATE KEY-----",
                "ssl.keystore.certificate.chain=-----BEGIN CERTIFICATE----- AAAA -----END CERTIFICATE-----",
            ],
            "ssl.keystore.key",
            "cannot load the private key and certificate chain",
        ),
    ],
)
def test_bad_stores_name_property_and_file(pki: Pki, lines: list[str], prop: str, fragment: str) -> None:
    (pki.dir / "store.jks").write_bytes(bytes.fromhex("feedfeed00000002") + os.urandom(64))
    (pki.dir / "mismatch.pem").write_text(pki.text("client.key") + pki.text("server.pem"))
    security = tls_config(
        *(line.format(dir=pki.dir) for line in lines), source="/etc/kafka/client.properties"
    )
    with pytest.raises(SecurityConfigError) as info:
        security.ssl_context()
    message = str(info.value)
    assert message.startswith(f"/etc/kafka/client.properties: {prop}: "), message
    assert fragment in message


# --- what a TLS client sees from a listener that is not TLS ------------------------------------------------


def not_tls_listener(reply: bytes) -> tuple[socket.socket, threading.Thread]:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            # a Kafka PLAINTEXT listener reads the ClientHello as an oversized request and hangs up (no reply)
            if reply:
                conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


@pytest.mark.parametrize("reply", [b"", b"HTTP/1.0 400 Bad Request\r\n\r\n"], ids=["hangs-up", "answers"])
def test_a_listener_that_does_not_speak_tls(reply: bytes) -> None:
    listener, thread = not_tls_listener(reply)
    port = listener.getsockname()[1]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            pytest.raises((ssl.SSLError, ConnectionResetError)) as info,
        ):
            context.wrap_socket(raw, server_hostname="localhost")
    finally:
        thread.join()
        listener.close()
    message = str(TlsError.from_handshake("127.0.0.1", port, info.value))
    assert message.startswith(f"TLS handshake with 127.0.0.1:{port} failed: ")
    assert "the server does not speak TLS (is the listener PLAINTEXT?)" in message
