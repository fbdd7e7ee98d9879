"""Kafka's RPCs on the wire: message classes and codecs generated from ``schemas/rpc``, headers and frames.

A frame is an int32 size and then a request (request header v1, or v2 in flexible versions, and the body) or
a response (response header v0, or v1 in flexible versions; ApiVersions answers with header v0 always, so that
a client that sent a version the server lacks can still read the answer). The classes are built like the
metadata record classes (immutable tuples with snake_case fields, nested structs as attributes of their
message: ``FetchRequest.FetchTopic``); ``make(name, **fields)`` builds one.

This module knows the bytes only; which versions a peer speaks is negotiated with ApiVersions by the
connection (``kraftlake.wire``), from :data:`SUPPORTED`. The schemas hold every version Kafka defines, so the
codec also reads and writes versions kraftlake does not speak: ApiVersions v5 (Kafka 4.4, KIP-1242: the
request's ClusterId and NodeId) is one; kraftlake asks and answers in v0-4, which every 4.4 peer accepts.

Why kraftlake's own generator (:mod:`kraftlake.protocol.codegen`) and not a Kafka protocol package such as
``kio``: the dependency set is fixed, the generator already built a codec per (struct, version) for the
records, and the RPC codec is not what costs (decoding the records of a Fetch answer is).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

from kraftlake.protocol.codegen import Decoder, Encoder, Record, generate_codecs, make_class
from kraftlake.protocol.errors import (
    GarbageAtEndError,
    InvalidFieldError,
    LengthPastEndError,
    ProtocolError,
    UnsupportedVersionError,
)
from kraftlake.protocol.spec import MessageSpec, load_rpcs
from kraftlake.protocol.versions import Versions

_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")
_CORR = struct.Struct(">i")


class ApiKey:
    """Kafka's API keys of the RPCs kraftlake speaks."""

    FETCH = 1
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    SASL_AUTHENTICATE = 36
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    DESCRIBE_CLUSTER = 60
    FETCH_SNAPSHOT = 59


SUPPORTED: dict[int, Versions] = {
    ApiKey.FETCH: Versions(13, 18),
    ApiKey.SASL_HANDSHAKE: Versions(0, 1),
    ApiKey.API_VERSIONS: Versions(0, 4),
    ApiKey.SASL_AUTHENTICATE: Versions(0, 2),
    ApiKey.VOTE: Versions(0, 2),
    ApiKey.BEGIN_QUORUM_EPOCH: Versions(0, 1),
    ApiKey.END_QUORUM_EPOCH: Versions(0, 1),
    ApiKey.DESCRIBE_QUORUM: Versions(0, 2),
    ApiKey.FETCH_SNAPSHOT: Versions(0, 1),
    ApiKey.DESCRIBE_CLUSTER: Versions(0, 2),
}
"""The versions kraftlake encodes and decodes per API key. Fetch starts at 13, the first that names topics by
id (the metadata topic has no name on the wire from then on)."""


@dataclass(frozen=True)
class Api:
    """One RPC: its key, name, and request and response specs."""

    key: int
    name: str
    request: MessageSpec
    response: MessageSpec

    def flexible(self, version: int) -> bool:
        """Whether `version` of the RPC uses the flexible encoding (and header v2 / v1)."""
        return version in self.request.flexible_versions


@cache
def apis() -> dict[int, Api]:
    """Every RPC of ``schemas/rpc`` by API key."""
    specs = load_rpcs()
    out: dict[int, Api] = {}
    for spec in specs.values():
        if spec.kind != "request":
            continue
        name = spec.name.removesuffix("Request")
        response = specs.get(name + "Response")
        if response is None or spec.api_key is None or response.api_key != spec.api_key:
            raise ProtocolError(f"{spec.name} has no matching {name}Response")
        out[spec.api_key] = Api(spec.api_key, name, spec, response)
    return out


def api(key: int) -> Api:
    """The RPC with API key `key`."""
    found = apis().get(key)
    if found is None:
        raise UnsupportedVersionError(f"API key {key} is not one kraftlake speaks")
    return found


@dataclass
class _Codec:
    cls: type[Record]
    decoders: dict[int, Decoder]
    encoders: dict[int, Encoder]


_CODECS: dict[str, _Codec] = {}
_SPEC_OF: dict[type, MessageSpec] = {}


def _codec(name: str) -> _Codec:
    codec = _CODECS.get(name)
    if codec is None:
        spec = load_rpcs().get(name)
        if spec is None:
            raise UnsupportedVersionError(f"no schema for {name} in schemas/rpc")
        classes: dict[str, type] = {}
        for s in reversed(spec.structs()):
            deps = {f.struct.qualname: classes[f.struct.qualname] for f in s.fields if f.struct is not None}
            if s is spec.struct:
                deps = dict(classes)
            classes[s.qualname] = make_class(s, deps)
        valid = spec.valid_versions
        decs, encs, _ = generate_codecs(
            spec.structs(), range(valid.lowest, valid.highest + 1), classes, name, spec.flexible_versions
        )
        codec = _Codec(classes[spec.name], decs, encs)
        _CODECS[name] = codec
        _SPEC_OF[codec.cls] = spec
    return codec


def message_class(name: str) -> Any:
    """The class of an RPC message or header (``"FetchRequest"``, ``"RequestHeader"``); typed ``Any`` as the
    record classes are, since the classes are built from the schemas at run time."""
    return _codec(name).cls


def make(name: str, **fields: Any) -> Any:
    """A message of class `name` with `fields` (the rest at their defaults)."""
    return message_class(name)(**fields)


def encode(message: Record, version: int, out: bytearray | None = None) -> bytearray:
    """Append `message`'s body at `version` to `out` (a new bytearray if None) and return it."""
    spec = _SPEC_OF.get(type(message))
    if spec is None:
        raise InvalidFieldError(f"not an RPC message: {type(message).__name__}")
    fn = _codec(spec.name).encoders.get(version)
    if fn is None:
        raise UnsupportedVersionError(f"{spec.name} has no version {version} (valid: {spec.valid_versions})")
    w = bytearray() if out is None else out
    try:
        fn(message, w)
    except ProtocolError:
        raise
    except (struct.error, TypeError, OverflowError, ValueError, AttributeError) as exc:
        raise InvalidFieldError(f"cannot encode {spec.name} v{version}: {exc}") from exc
    return w


def decode(
    name: str, version: int, buf: bytes, pos: int = 0, end: int | None = None, whole: bool = True
) -> tuple[Any, int]:
    """``(message, next position)`` of a `name` body at `version` in ``buf[pos:end]``.

    With `whole`, bytes left over after the body are an error (as in Kafka).
    """
    codec = _codec(name)
    fn = codec.decoders.get(version)
    if fn is None:
        raise UnsupportedVersionError(f"{name} has no version {version}")
    stop = len(buf) if end is None else end
    try:
        message, at = fn(buf, pos, stop)
    except ProtocolError:
        raise
    except (IndexError, struct.error) as exc:
        raise LengthPastEndError(f"{name} v{version} runs past the end of the frame", stop) from exc
    except UnicodeDecodeError as exc:
        raise InvalidFieldError(f"{name} v{version}: a string is not valid UTF-8", pos) from exc
    if at > stop:
        raise LengthPastEndError(f"{name} v{version} runs past the end of the frame", stop)
    if whole and at != stop:
        raise GarbageAtEndError(f"{stop - at} bytes left over after {name} v{version}", at)
    return message, at


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The header of a request frame."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def request_header_version(api_key: int, api_version: int) -> int:
    """Kafka's request header version for a request: 2 in flexible versions, else 1."""
    return 2 if api(api_key).flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Kafka's response header version: 1 in flexible versions, else 0; ApiVersions always 0."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if api(api_key).flexible(api_version) else 0


def frame(body: bytearray) -> bytes:
    """`body` with its int32 size prefix (`body` starts with 4 reserved bytes)."""
    _SIZE.pack_into(body, 0, len(body) - 4)
    return bytes(body)


def encode_request(message: Record, version: int, correlation_id: int, client_id: str | None) -> bytes:
    """A whole request frame (size prefix, header, body)."""
    spec = _SPEC_OF.get(type(message)) or load_rpcs()[type(message).__name__]
    key = spec.api_key
    if key is None:
        raise InvalidFieldError(f"{spec.name} is not a request")
    out = bytearray(4)
    header = make(
        "RequestHeader",
        request_api_key=key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    encode(header, request_header_version(key, version), out)
    encode(message, version, out)
    return frame(out)


def decode_request_header(payload: bytes) -> tuple[RequestHeader, int]:
    """The header of a request frame's payload (the bytes after the size) and where the body starts.

    Raises `UnsupportedVersionError` for an API key or version kraftlake does not speak (the header is then
    still readable with :func:`peek_request`, to answer with the error).
    """
    key, version, corr, client_id, pos = peek_request(payload)
    versions = SUPPORTED.get(key)
    if versions is None or key not in apis():
        raise UnsupportedVersionError(f"API key {key} is not one kraftlake speaks")
    if version not in versions:
        raise UnsupportedVersionError(
            f"{api(key).name} v{version} is not supported (kraftlake speaks {versions})"
        )
    if request_header_version(key, version) == 2:
        _, pos = decode("RequestHeader", 2, payload, 0, whole=False)
    return RequestHeader(key, version, corr, client_id), pos


def peek_request(payload: bytes) -> tuple[int, int, int, str | None, int]:
    """``(api key, api version, correlation id, client id, end of the v1 header)`` of a request payload.

    Every request header starts with this v1 part, whatever the API and version.
    """
    if len(payload) < 10:
        raise LengthPastEndError(
            f"request of {len(payload)} bytes is shorter than a request header", len(payload)
        )
    key, version = _KEY_VERSION.unpack_from(payload, 0)
    (corr,) = _CORR.unpack_from(payload, 4)
    (n,) = struct.unpack_from(">h", payload, 8)
    pos = 10
    client_id: str | None = None
    if n >= 0:
        if pos + n > len(payload):
            raise LengthPastEndError("request header client id runs past the end of the frame", len(payload))
        client_id = payload[pos : pos + n].decode("utf-8", errors="replace")
        pos += n
    return key, version, corr, client_id, pos


def decode_request(payload: bytes) -> tuple[RequestHeader, Any]:
    """``(header, body)`` of a request frame's payload."""
    header, pos = decode_request_header(payload)
    body, _ = decode(api(header.api_key).request.name, header.api_version, payload, pos)
    return header, body


def encode_response(message: Record, api_key: int, version: int, correlation_id: int) -> bytes:
    """A whole response frame (size prefix, header, body)."""
    out = bytearray(4)
    out += _CORR.pack(correlation_id)
    if response_header_version(api_key, version) == 1:
        out.append(0)  # no tagged fields
    encode(message, version, out)
    return frame(out)


def peek_correlation_id(payload: bytes) -> int:
    """The correlation id of a response payload."""
    if len(payload) < 4:
        raise LengthPastEndError("response shorter than its correlation id", len(payload))
    return int(_CORR.unpack_from(payload, 0)[0])


def decode_response(payload: bytes, api_key: int, version: int) -> tuple[int, Any]:
    """``(correlation id, body)`` of a response payload to a request of `api_key` at `version`."""
    corr = peek_correlation_id(payload)
    pos = 4
    if response_header_version(api_key, version) == 1:
        _, pos = decode("ResponseHeader", 1, payload, 0, whole=False)
    body, _ = decode(api(api_key).response.name, version, payload, pos)
    return corr, body


def choose_version(api_key: int, theirs: tuple[int, int], peer: str) -> int:
    """The highest version of `api_key` both kraftlake and a peer (its ApiVersions range) speak.

    Raises
    ------
    UnsupportedVersionError
        If the ranges do not meet: names the RPC, both ranges and the peer.
    """
    ours = SUPPORTED[api_key]
    low, high = max(ours.lowest, theirs[0]), min(ours.highest, theirs[1])
    if low > high:
        raise UnsupportedVersionError(
            f"{peer} speaks {api(api_key).name} v{theirs[0]}-{theirs[1]}, kraftlake v{ours}: no version in common"
        )
    return high
