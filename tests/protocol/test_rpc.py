"""Kafka's RPC codecs generated from schemas/rpc: encodings, headers, versions, and the schemas' freshness."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kraftlake import kafka_tools
from kraftlake.protocol import rpc
from kraftlake.protocol.errors import ProtocolError, UnsupportedVersionError
from kraftlake.protocol.kafka_specs import generate, generate_records
from kraftlake.protocol.rpc import ApiKey
from kraftlake.protocol.spec import load_rpcs

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas" / "rpc"


@pytest.mark.kafka
def test_rpc_schemas_match_the_kafka_clients_jar() -> None:
    """schemas/rpc is what `make schemas` converts from Kafka 4.4.0's own specs (fails when stale)."""
    expected = generate(kafka_tools.kafka_jars_dir())
    found = {p.name: p.read_text() for p in SCHEMAS.glob("*.avsc")}
    assert sorted(found) == sorted(expected)
    stale = [name for name, text in expected.items() if found[name] != text]
    assert stale == []


@pytest.mark.kafka
def test_record_schemas_match_the_kafka_jars() -> None:
    """schemas/*.avsc is what `make schemas` converts from Kafka 4.4.0's metadata and control record specs."""
    expected = generate_records(kafka_tools.kafka_jars_dir())
    found = {p.name: p.read_text() for p in SCHEMAS.parent.glob("*.avsc")}
    assert sorted(found) == sorted(expected)
    stale = [name for name, text in expected.items() if found[name] != text]
    assert stale == []


def test_every_message_round_trips_at_every_version() -> None:
    for name, spec in load_rpcs().items():
        message = rpc.make(name)
        for version in range(spec.valid_versions.lowest, spec.valid_versions.highest + 1):
            body = bytes(rpc.encode(message, version))
            assert rpc.decode(name, version, body)[0] == message, (name, version)


def test_classic_encoding_of_strings_arrays_and_nulls() -> None:
    # SaslHandshake has no flexible version: int16 string lengths, int32 array counts
    body = bytes(rpc.encode(rpc.make("SaslHandshakeRequest", mechanism="PLAIN"), 1))
    assert body == b"\x00\x05PLAIN"
    response = rpc.make("SaslHandshakeResponse", error_code=33, mechanisms=["PLAIN", "SCRAM-SHA-256"])
    body = bytes(rpc.encode(response, 1))
    assert body == b"\x00\x21" + b"\x00\x00\x00\x02" + b"\x00\x05PLAIN" + b"\x00\x0dSCRAM-SHA-256"
    assert rpc.decode("SaslHandshakeResponse", 1, body)[0] == response
    # SaslAuthenticate v1 (classic) bytes, nullable error message as -1
    auth = rpc.make("SaslAuthenticateResponse", error_message=None, auth_bytes=b"xy")
    assert bytes(rpc.encode(auth, 1)) == b"\x00\x00" + b"\xff\xff" + b"\x00\x00\x00\x02xy" + b"\x00" * 8


def test_request_header_keeps_the_classic_client_id_in_flexible_versions() -> None:
    frame = rpc.encode_request(rpc.make("DescribeQuorumRequest"), 2, 0x01020304, "abc")
    (size,) = struct.unpack(">i", frame[:4])
    assert size == len(frame) - 4
    # api key 55, version 2, correlation id, int16 client id length + bytes, then no tagged fields
    assert frame[4:17] == b"\x00\x37\x00\x02\x01\x02\x03\x04\x00\x03abc" and frame[17] == 0
    header, body = rpc.decode_request(frame[4:])
    assert header == rpc.RequestHeader(55, 2, 0x01020304, "abc")
    assert body == rpc.make("DescribeQuorumRequest")
    # a null client id
    header, _ = rpc.decode_request(rpc.encode_request(rpc.make("ApiVersionsRequest"), 0, 9, None)[4:])
    assert header.client_id is None and header.api_version == 0


def test_response_headers() -> None:
    # ApiVersions always answers with header v0 (no tagged fields), others v1 in flexible versions
    api_versions = rpc.encode_response(rpc.make("ApiVersionsResponse"), ApiKey.API_VERSIONS, 4, 7)
    assert api_versions[4:8] == b"\x00\x00\x00\x07" and api_versions[8:10] == b"\x00\x00"
    vote = rpc.encode_response(rpc.make("VoteResponse"), ApiKey.VOTE, 2, 7)
    assert vote[4:9] == b"\x00\x00\x00\x07\x00"
    corr, body = rpc.decode_response(vote[4:], ApiKey.VOTE, 2)
    assert corr == 7 and body == rpc.make("VoteResponse")


def test_unsupported_versions_and_keys_are_refused_by_name() -> None:
    frame = rpc.encode_request(rpc.make("FetchRequest"), 12, 1, None)  # by topic name: below what we speak
    with pytest.raises(UnsupportedVersionError, match="Fetch v12"):
        rpc.decode_request(frame[4:])
    key, version, corr, client, _ = rpc.peek_request(frame[4:])
    assert (key, version, corr, client) == (1, 12, 1, None)
    unknown = struct.pack(">hhih", 3, 0, 5, -1)  # Metadata
    with pytest.raises(UnsupportedVersionError, match="API key 3"):
        rpc.decode_request(unknown)
    with pytest.raises(UnsupportedVersionError, match="no version in common"):
        rpc.choose_version(ApiKey.FETCH, (4, 12), "peer:1")
    assert rpc.choose_version(ApiKey.FETCH, (4, 18), "peer:1") == 18


def test_truncated_and_padded_bodies_are_errors() -> None:
    body = bytes(rpc.encode(rpc.make("FetchResponse", responses=[]), 18))
    with pytest.raises(ProtocolError):
        rpc.decode("FetchResponse", 18, body[:-1])
    with pytest.raises(ProtocolError):
        rpc.decode("FetchResponse", 18, body + b"\x00")
    with pytest.raises(ProtocolError):
        rpc.decode_request(b"\x00\x01")
