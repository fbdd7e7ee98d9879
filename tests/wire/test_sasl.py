"""SASL client mechanisms: PLAIN's message, SCRAM against RFC 7677's test vector and a server's mistakes."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from kraftlake.wire.client_config import ClientSecurity, parse_client_properties
from kraftlake.wire.errors import AuthenticationError, SecurityConfigError
from kraftlake.wire.sasl import PlainMechanism, ScramMechanism, mechanism_for

# RFC 7677 section 3
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = f"r={SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = f"c=biws,r={SERVER_NONCE},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
# the same first 22 characters, then wrong: a signature that is nearly right must fail as surely as any other
NEARLY_SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZK1e/ZGBPDjBFJuHgmw="


def rfc7677() -> ScramMechanism:
    return ScramMechanism("SHA-256", "user", "pencil", nonce=CLIENT_NONCE)


def test_plain_initial_response_completes_the_exchange() -> None:
    plain = PlainMechanism("alice", "pä55")
    assert plain.mechanism_name == "PLAIN"
    assert not plain.complete
    assert plain.initial_response() == b"\0alice\0p\xc3\xa455"
    assert plain.complete
    assert plain.respond(b"") is None  # Kafka's PLAIN server answers with empty auth bytes
    with pytest.raises(AuthenticationError, match=r"PLAIN.*after the exchange completed"):
        plain.respond(b"more")


def test_plain_refuses_nul() -> None:
    with pytest.raises(ValueError, match="NUL"):
        PlainMechanism("a\0b", "p")


def test_scram_sha256_rfc7677_vector() -> None:
    scram = rfc7677()
    assert scram.mechanism_name == "SCRAM-SHA-256"
    assert scram.initial_response() == f"n,,n=user,r={CLIENT_NONCE}".encode()
    assert scram.respond(SERVER_FIRST.encode()) == CLIENT_FINAL.encode()
    assert not scram.complete
    assert scram.respond(SERVER_FINAL.encode()) is None
    assert scram.complete


def test_scram_sha512_round_trip_against_a_reference_server() -> None:
    # no RFC vector for SHA-512: play RFC 5802's server from the stored credentials
    salt, iterations, password = b"0123456789abcdef", 4096, b"s3cr3t"
    scram = ScramMechanism("SHA-512", "bob", password.decode(), nonce="abc")
    client_first_bare = scram.initial_response().decode()[len("n,,") :]
    server_first = f"r=abcXYZ,s={base64.b64encode(salt).decode()},i={iterations}"
    client_final = scram.respond(server_first.encode())
    assert client_final is not None
    without_proof, proof_b64 = client_final.decode().rsplit(",p=", 1)
    salted = hashlib.pbkdf2_hmac("sha512", password, salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha512")
    stored_key = hashlib.sha512(client_key).digest()
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(stored_key, auth_message, "sha512")
    recovered = bytes(p ^ s for p, s in zip(base64.b64decode(proof_b64), signature, strict=True))
    assert hashlib.sha512(recovered).digest() == stored_key  # the server's check of the proof
    server_signature = hmac.digest(hmac.digest(salted, b"Server Key", "sha512"), auth_message, "sha512")
    assert scram.respond(b"v=" + base64.b64encode(server_signature)) is None
    assert scram.complete


def test_scram_escapes_the_username() -> None:
    scram = ScramMechanism("SHA-256", "a=b,c", "p", nonce="n0nce")
    assert scram.initial_response() == b"n,,n=a=3Db=2Cc,r=n0nce"


def test_scram_default_nonce_is_random_base36() -> None:
    first = ScramMechanism("SHA-512", "u", "p").initial_response()
    second = ScramMechanism("SHA-512", "u", "p").initial_response()
    assert first != second
    nonce = first.decode().split(",r=")[1]
    assert nonce.isalnum() and nonce == nonce.lower() and len(nonce) >= 20


def test_scram_token_auth_extension() -> None:
    scram = ScramMechanism("SHA-256", "tokenid", "hmac", nonce="n", extensions={"tokenauth": "true"})
    assert scram.initial_response() == b"n,,n=tokenid,r=n,tokenauth=true"


@pytest.mark.parametrize("server_final", [NEARLY_SERVER_FINAL, "v=" + base64.b64encode(bytes(32)).decode()])
def test_scram_wrong_server_signature_raises(server_final: str) -> None:
    scram = rfc7677()
    scram.initial_response()
    scram.respond(SERVER_FIRST.encode())
    with pytest.raises(AuthenticationError, match=r"SCRAM-SHA-256.*invalid server signature"):
        scram.respond(server_final.encode())
    assert not scram.complete


@pytest.mark.parametrize("server_final", ["x=1", "v=not*base64"])
def test_scram_malformed_server_final(server_final: str) -> None:
    scram = rfc7677()
    scram.initial_response()
    scram.respond(SERVER_FIRST.encode())
    with pytest.raises(AuthenticationError, match=r"SCRAM-SHA-256.*server"):
        scram.respond(server_final.encode())


def test_scram_server_nonce_must_extend_ours() -> None:
    scram = rfc7677()
    scram.initial_response()
    with pytest.raises(AuthenticationError, match="does not extend the client nonce"):
        scram.respond(SERVER_FIRST.replace("r=rOpr", "r=XOpr").encode())


def test_scram_refuses_fewer_than_4096_iterations() -> None:
    scram = rfc7677()
    scram.initial_response()
    with pytest.raises(AuthenticationError, match="iterations 4095 is less than the minimum 4096"):
        scram.respond(SERVER_FIRST.replace("i=4096", "i=4095").encode())


@pytest.mark.parametrize("stage", ["first", "final"])
def test_scram_server_error_names_mechanism_and_message(stage: str) -> None:
    scram = ScramMechanism("SHA-512", "user", "pencil", nonce=CLIENT_NONCE)
    scram.initial_response()
    if stage == "final":
        scram.respond(SERVER_FIRST.encode())
    with pytest.raises(
        AuthenticationError, match="SASL SCRAM-SHA-512 authentication failed: server error: invalid-proof"
    ) as info:
        scram.respond(b"e=invalid-proof")
    assert info.value.mechanism == "SCRAM-SHA-512"


@pytest.mark.parametrize(
    "server_first",
    [
        "garbage",
        f"s=W22ZaJ0SNY7soEsUEjb6gQ==,r={SERVER_NONCE},i=4096",
        f"r={SERVER_NONCE},s=not*base64,i=4096",
        f"r={SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=lots",
        f"m=ext,r={SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    ],
)
def test_scram_malformed_server_first(server_first: str) -> None:
    scram = rfc7677()
    scram.initial_response()
    with pytest.raises(AuthenticationError, match="SCRAM-SHA-256"):
        scram.respond(server_first.encode())


def test_scram_server_first_extensions_are_accepted() -> None:
    scram = rfc7677()
    scram.initial_response()
    client_final = scram.respond(f"{SERVER_FIRST},x=1".encode())
    assert client_final is not None and client_final.startswith(f"c=biws,r={SERVER_NONCE},p=".encode())


def test_scram_respond_before_the_first_message() -> None:
    with pytest.raises(AuthenticationError, match="before the client's first message"):
        rfc7677().respond(SERVER_FIRST.encode())


def test_scram_rejects_unknown_hash() -> None:
    with pytest.raises(ValueError, match="SHA-1"):
        ScramMechanism("SHA-1", "u", "p")


def test_mechanism_for_reads_the_jaas_credentials() -> None:
    scram = mechanism_for(
        parse_client_properties(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="user" password="pencil" tokenauth=true;\n'
        )
    )
    assert isinstance(scram, ScramMechanism)
    assert scram.mechanism_name == "SCRAM-SHA-256"
    assert scram.initial_response().startswith(b"n,,n=user,r=")
    assert scram.initial_response().endswith(b",tokenauth=true")
    plain = mechanism_for(
        parse_client_properties(
            "security.protocol=SASL_PLAINTEXT\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="u" password="p";\n'
        )
    )
    assert isinstance(plain, PlainMechanism)
    assert plain.initial_response() == b"\0u\0p"


def test_mechanism_for_without_sasl() -> None:
    with pytest.raises(SecurityConfigError, match=r"security.protocol: PLAINTEXT does not use SASL"):
        mechanism_for(ClientSecurity())
