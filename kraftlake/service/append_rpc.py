"""The service's append RPC (API key 1000 v0, no Kafka equivalent) and refusal frames, in Kafka's framing:
request header v2, response header v1, a fixed struct body, read with a bounds-checked reader."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kraftlake.service.errors import CodecError
from kraftlake.service.rpc_common import APPEND_API_KEY, from_wire_node, to_wire_node

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_APPEND_TAIL = struct.Struct(">iqq")
_SIZE = struct.Struct(">i")


def frame_length(prefix: bytes) -> int:
    """The payload size in a frame's 4-byte prefix (Kafka's int32)."""
    return int(_SIZE.unpack(prefix)[0])


def _string(text: str | None) -> bytes:
    if text is None:
        return _I16.pack(-1)
    raw = text.encode("utf-8")[:0x7FFF]
    return _I16.pack(len(raw)) + raw


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def take(self, st: struct.Struct) -> Any:
        if self.pos + st.size > len(self.buf):
            raise CodecError(f"frame truncated at byte {self.pos} (needs {st.size} more bytes)")
        values = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return values if len(values) > 1 else values[0]

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CodecError(f"frame truncated at byte {self.pos} (needs {n} more bytes)")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(out)

    def string(self) -> str | None:
        n = self.take(_I16)
        if n < 0:
            return None
        try:
            return self.raw(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CodecError(f"bad UTF-8 string before byte {self.pos}") from exc

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self.raw(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise CodecError(f"malformed varint before byte {self.pos}")

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.raw(self.uvarint())


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """A client asks the leader to append values; answered once they are committed (API key 1000 v0).

    Body: ``ClusterId`` (int16-length nullable string), ``Credential`` (int16-length string: the voters'
    ``append.secret``), int32 count n, n int32 value lengths, then the n values back to back (the lengths
    first: one unpack reads them all).
    """

    cluster_id: str | None
    values: tuple[bytes, ...]
    credential: str = ""


@dataclass(frozen=True, slots=True)
class AppendResponse:
    """Where the values landed (committed), or an error with the leader the node knows of.

    Body: int16 error code, int16-length nullable error message, int32 answering node id, int32 leader id (-1:
    unknown), int16-length leader endpoint (``host:port`` or empty), int32 epoch, int64 base offset, int64 last
    offset. A refusal of the whole frame (`encode_refusal`) is the first two fields alone (`refused`).
    """

    error: int
    message: str | None = None
    node_id: int = -1
    leader_id: int | None = None
    leader_endpoint: str = ""
    epoch: int = -1
    base_offset: int = -1
    last_offset: int = -1
    refused: bool = False


def encode_append_request(request: AppendRequest, correlation_id: int, client_id: str | None) -> bytes:
    """An append request frame (request header v2)."""
    values = request.values
    n = len(values)
    parts = [
        b"",
        struct.pack(">hhi", APPEND_API_KEY, 0, correlation_id),
        _string(client_id),
        b"\x00",
        _string(request.cluster_id),
        _string(request.credential),
        _I32.pack(n),
        struct.pack(f">{n}i", *map(len, values)),
        *values,
    ]
    parts[0] = _SIZE.pack(sum(map(len, parts)))
    return b"".join(parts)


def decode_append_request(payload: bytes, body_start: int) -> AppendRequest:
    """The append request in a frame's payload whose request header v1 part ends at `body_start`.

    Raises
    ------
    CodecError
        On a truncated or malformed body, or bytes left over.
    """
    r = _Reader(payload, body_start)
    r.tagged_fields()  # the rest of request header v2
    cluster_id = r.string()
    credential = r.string() or ""
    n = r.take(_I32)
    if n < 0 or n * 4 > len(payload) - r.pos:
        raise CodecError(f"append of {n} values cannot fit in the frame")
    lengths = struct.unpack_from(f">{n}i", payload, r.pos)
    pos = r.pos + 4 * n
    if min(lengths, default=0) < 0 or pos + sum(lengths) != len(payload):
        raise CodecError(f"the {n} value lengths of the append do not fill the frame")
    values: list[bytes] = []
    add = values.append
    for length in lengths:
        add(payload[pos : pos + length])
        pos += length
    return AppendRequest(cluster_id, tuple(values), credential)


def encode_append_response(response: AppendResponse, correlation_id: int) -> bytes:
    """An append response frame (response header v1)."""
    body = b"".join(
        (
            _I32.pack(correlation_id),
            b"\x00",
            _I16.pack(response.error),
            _string(response.message),
            _I32.pack(response.node_id),
            _I32.pack(to_wire_node(response.leader_id)),
            _string(response.leader_endpoint),
            _APPEND_TAIL.pack(response.epoch, response.base_offset, response.last_offset),
        )
    )
    return _SIZE.pack(len(body)) + body


def encode_refusal(correlation_id: int, code: int, message: str, *, header_v1: bool = False) -> bytes:
    """A frame refusing a whole request (undecodable, oversized, an unknown API key): the correlation id, an
    error code and a message. The connection is closed after it: a Kafka client cannot parse it as the answer it
    expected, kraftlake's clients read it (`decode_append_response`)."""
    body = _I32.pack(correlation_id) + (b"\x00" if header_v1 else b"") + _I16.pack(code) + _string(message)
    return _SIZE.pack(len(body)) + body


def decode_append_response(payload: bytes) -> tuple[int, AppendResponse]:
    """``(correlation id, response)`` of an append response payload, or of a refusal (`encode_refusal`).

    Raises
    ------
    CodecError
        On a truncated or malformed response.
    """
    r = _Reader(payload, 0)
    corr = r.take(_I32)
    r.tagged_fields()
    error = r.take(_I16)
    message = r.string()
    if r.pos == len(payload):
        return corr, AppendResponse(error, message, refused=True)
    node = r.take(_I32)
    leader = r.take(_I32)
    endpoint = r.string() or ""
    epoch, base, last = r.take(_APPEND_TAIL)
    if r.pos != len(payload):
        raise CodecError(f"{len(payload) - r.pos} bytes left over after the append response")
    return corr, AppendResponse(error, message, node, from_wire_node(leader), endpoint, epoch, base, last)


def decode_refusal(payload: bytes) -> tuple[int, int, str]:
    """``(correlation id, error code, message)`` of a refusal frame with response header v0."""
    r = _Reader(payload, 0)
    corr = r.take(_I32)
    code = r.take(_I16)
    return corr, code, r.string() or ""
