"""The generated decoders' one-byte-length fast paths and their general paths agree, errors included."""

from __future__ import annotations

import base64

import pytest

from kraftlake.protocol import messages as m
from kraftlake.protocol.codec import decode_body, encode_body
from kraftlake.protocol.errors import InvalidFieldError, LengthPastEndError
from kraftlake.records.serde import metadata_spec


def _uuid(i: int) -> str:
    return base64.urlsafe_b64encode(i.to_bytes(16, "big")).rstrip(b"=").decode()


# Lengths around the boundaries: a one-byte varint holds length + 1 up to 127, the int32 table up to 63
# elements, the uuid-array cache up to 8.
SIZES = [0, 1, 2, 7, 8, 9, 62, 63, 64, 65, 126, 127, 200]


@pytest.mark.parametrize("n", SIZES)
def test_arrays_of_every_size_round_trip(n: int) -> None:
    ints = tuple(range(-n, 0)) if n % 2 else tuple(range(1 << 20, (1 << 20) + n))
    dirs = tuple(_uuid(1000 * n + i) for i in range(n))
    rec = m.PartitionRecord(
        partition_id=n,
        topic_id=_uuid(n),
        replicas=ints,
        isr=ints[: n // 2],
        removing_replicas=ints[:1],
        adding_replicas=(),
        leader=1,
        directories=dirs,
    )
    spec = metadata_spec(3)
    for version in (1, 2):
        body = encode_body(rec, version)
        assert decode_body(spec, version, body) == rec
        assert decode_body(spec, version, body) == rec  # the second time through the uuid-array cache
    change = m.PartitionChangeRecord(partition_id=1, topic_id=_uuid(1), isr=ints, directories=dirs)
    assert decode_body(metadata_spec(5), 2, encode_body(change, 2)) == change


@pytest.mark.parametrize("n", SIZES)
def test_strings_and_bytes_of_every_size_round_trip(n: int) -> None:
    text = "é" * (n // 2) + "x" * (n - n // 2)
    rec = m.ConfigRecord(resource_type=2, resource_name=text, name="n" * n, value=None if n == 8 else text)
    assert decode_body(metadata_spec(4), 0, encode_body(rec, 0)) == rec
    scram = m.UserScramCredentialRecord(
        name=text,
        mechanism=1,
        salt=bytes(range(n % 256)) * 2,
        stored_key=b"\xff" * n,
        server_key=b"",
        iterations=4096,
    )
    spec = metadata_spec(11)
    for version in range(spec.valid_versions.lowest, spec.valid_versions.highest + 1):
        assert decode_body(spec, version, encode_body(scram, version)) == scram


def test_cut_string_int32_array_and_uuid_array_raise_typed_errors() -> None:
    topic = encode_body(m.TopicRecord(name="abcdef", topic_id=_uuid(1)), 0)
    with pytest.raises(LengthPastEndError, match="Name") as info:
        decode_body(metadata_spec(2), 0, topic[:4])
    assert info.value.position == 1
    part = encode_body(
        m.PartitionRecord(
            partition_id=0, topic_id=_uuid(2), replicas=(1, 2, 3), isr=(1,), directories=(_uuid(3), _uuid(4))
        ),
        1,
    )
    with pytest.raises(LengthPastEndError, match="Replicas") as info:
        decode_body(metadata_spec(3), 1, part[:30])
    assert info.value.position == 21
    cut = len(part) - 1 - 20  # inside the second directory
    with pytest.raises(LengthPastEndError, match="Directories"):
        decode_body(metadata_spec(3), 1, part[:cut])


def test_null_in_non_nullable_and_bad_utf8() -> None:
    topic = bytearray(encode_body(m.TopicRecord(name="abc", topic_id=_uuid(1)), 0))
    topic[0] = 0  # null name
    with pytest.raises(InvalidFieldError, match="non-nullable field Name") as info:
        decode_body(metadata_spec(2), 0, bytes(topic))
    assert info.value.position == 1
    topic = bytearray(encode_body(m.TopicRecord(name="abc", topic_id=_uuid(1)), 0))
    topic[2] = 0xFF
    with pytest.raises(InvalidFieldError, match="UTF-8"):
        decode_body(metadata_spec(2), 0, bytes(topic))
