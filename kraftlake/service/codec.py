"""The wire codec: length-prefixed binary frames carrying the cluster id, and a struct-based body per message.

Frame layout (big-endian)::

    u32 length of the rest | u8 format (0) | u8 kind (0 request, 1 response) | i16 api key
    | i64 correlation id | i32 source node | i32 destination node | u16 n + n bytes cluster id (UTF-8)
    | body

The body is the message's fields in declaration order, each with a fixed encoding: ``i32``/``i64`` integers,
``bool`` as one byte, an optional node id as i32 with -1 for None, an error code as i16, ``str`` and ``bytes``
as u32 length + data, lists as u32 count + items, an optional (offset, epoch) as a presence byte + i64 + i32;
log entries as runs of one leader write (a header, the values' lengths, the values).
Api keys are Kafka's where Kafka has the RPC (Fetch 1, Vote 52, BeginQuorumEpoch 53, EndQuorumEpoch 54,
DescribeQuorum 55, FetchSnapshot 59); the service's own RPCs use keys from 1000.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kraftlake.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    Errors,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    OffsetAndEpoch,
    VoteRequest,
    VoteResponse,
)
from kraftlake.service.errors import CodecError, FrameTooLargeError
from kraftlake.service.messages import (
    AppendRequest,
    AppendResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    ErrorCode,
    ErrorResponse,
    ObserverFetchRequest,
    ObserverFetchResponse,
    ObserverFetchSnapshotRequest,
    ObserverFetchSnapshotResponse,
    QuorumDescription,
    ReplicaInfo,
    VoterInfo,
)

FORMAT = 0
REQUEST = 0
RESPONSE = 1
DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
"""Twice Kafka's default max fetch size (8 MiB), so a full fetch response always fits."""

_LEN = struct.Struct(">I")
_HEAD = struct.Struct(">BBhqiiH")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_OE = struct.Struct(">qi")


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def take(self, st: struct.Struct) -> tuple[Any, ...]:
        if self.pos + st.size > len(self.buf):
            raise CodecError(f"frame truncated at byte {self.pos} (needs {st.size} more bytes)")
        values = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return values

    def raw(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise CodecError(f"frame truncated at byte {self.pos} (needs {n} more bytes)")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(out)


Enc = Callable[[list[bytes], Any], None]
Dec = Callable[[_Reader], Any]


def _int(st: struct.Struct) -> tuple[Enc, Dec]:
    return (lambda out, v: out.append(st.pack(v))), (lambda r: r.take(st)[0])


def _enc_bytes(out: list[bytes], v: bytes) -> None:
    out.append(_U32.pack(len(v)))
    out.append(v)


def _dec_bytes(r: _Reader) -> bytes:
    return r.raw(r.take(_U32)[0])


def _enc_str(out: list[bytes], v: str) -> None:
    _enc_bytes(out, v.encode("utf-8"))


def _dec_str(r: _Reader) -> str:
    try:
        return _dec_bytes(r).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CodecError(f"bad UTF-8 string before byte {r.pos}") from exc


def _enc_node(out: list[bytes], v: int | None) -> None:
    out.append(_I32.pack(-1 if v is None else v))


def _dec_node(r: _Reader) -> int | None:
    v = r.take(_I32)[0]
    return None if v < 0 else int(v)


def _enum(kind: type[Errors] | type[ErrorCode]) -> tuple[Enc, Dec]:
    def dec(r: _Reader) -> Any:
        code = r.take(_I16)[0]
        try:
            return kind(code)
        except ValueError:
            raise CodecError(f"unknown {kind.__name__} code {code} before byte {r.pos}") from None

    return (lambda out, v: out.append(_I16.pack(v.value))), dec


def _enc_oe(out: list[bytes], v: OffsetAndEpoch) -> None:
    out.append(_OE.pack(v.offset, v.epoch))


def _dec_oe(r: _Reader) -> OffsetAndEpoch:
    offset, epoch = r.take(_OE)
    return OffsetAndEpoch(offset, epoch)


def _enc_opt_oe(out: list[bytes], v: OffsetAndEpoch | None) -> None:
    if v is None:
        out.append(b"\x00")
    else:
        out.append(b"\x01")
        _enc_oe(out, v)


def _dec_opt_oe(r: _Reader) -> OffsetAndEpoch | None:
    return _dec_oe(r) if r.raw(1) == b"\x01" else None


def _list(enc: Enc, dec: Dec) -> tuple[Enc, Dec]:
    def encode(out: list[bytes], items: Any) -> None:
        out.append(_U32.pack(len(items)))
        for item in items:
            enc(out, item)

    def decode(r: _Reader) -> tuple[Any, ...]:
        n = r.take(_U32)[0]
        if n > len(r.buf) - r.pos:
            raise CodecError(f"list of {n} items cannot fit in the frame at byte {r.pos}")
        return tuple(dec(r) for _ in range(n))

    return encode, decode


_RUN = struct.Struct(">qiBhqqI")


def _enc_entries(out: list[bytes], entries: Any) -> None:
    """Entries as runs of one leader write: a run header (first offset, epoch, control, control type,
    timestamp, batch base, count), the values' lengths, then the values."""
    runs: list[tuple[int, int]] = []
    n = len(entries)
    i = 0
    while i < n:
        first = entries[i]
        j = i + 1
        key = (first.epoch, first.is_control, first.control_type, first.timestamp, first.batch_base)
        while j < n:
            e = entries[j]
            if e.offset != first.offset + (j - i) or (e.epoch, e.is_control, e.control_type, e.timestamp,
                                                      e.batch_base) != key:
                break
            j += 1
        runs.append((i, j))
        i = j
    out.append(_U32.pack(len(runs)))
    for i, j in runs:
        e = entries[i]
        count = j - i
        values = [x.value for x in entries[i:j]]
        out.append(_RUN.pack(e.offset, e.epoch, 1 if e.is_control else 0, e.control_type, e.timestamp,
                             e.batch_base, count))
        out.append(struct.pack(f">{count}I", *map(len, values)))
        out.append(b"".join(values))


def _dec_entries(r: _Reader) -> tuple[Entry, ...]:
    (nruns,) = r.take(_U32)
    out: list[Entry] = []
    buf = r.buf
    new = tuple.__new__
    for _ in range(nruns):
        offset, epoch, control, ctype, ts, base, count = r.take(_RUN)
        if count * 4 > len(buf) - r.pos:
            raise CodecError(f"run of {count} entries cannot fit in the frame at byte {r.pos}")
        lengths = struct.unpack_from(f">{count}I", buf, r.pos)
        pos = r.pos + count * 4
        if pos + sum(lengths) > len(buf):
            raise CodecError(f"frame truncated in a run of {count} entries at byte {pos}")
        is_control = bool(control)
        for k, n in enumerate(lengths):
            out.append(new(Entry, (offset + k, epoch, is_control, buf[pos : pos + n], ts, base, ctype)))
            pos += n
        r.pos = pos
    return tuple(out)


def _enc_values(out: list[bytes], values: Any) -> None:
    n = len(values)
    out.append(_U32.pack(n))
    out.append(struct.pack(f">{n}I", *map(len, values)))
    out.append(b"".join(values))


def _dec_values(r: _Reader) -> tuple[bytes, ...]:
    (n,) = r.take(_U32)
    buf = r.buf
    if n * 4 > len(buf) - r.pos:
        raise CodecError(f"list of {n} values cannot fit in the frame at byte {r.pos}")
    lengths = struct.unpack_from(f">{n}I", buf, r.pos)
    pos = r.pos + n * 4
    if pos + sum(lengths) > len(buf):
        raise CodecError(f"frame truncated in a list of {n} values at byte {pos}")
    out = []
    for length in lengths:
        out.append(buf[pos : pos + length])
        pos += length
    r.pos = pos
    return tuple(out)


def _struct(cls: type, fields: list[tuple[Enc, Dec]]) -> tuple[Enc, Dec]:
    names = [f.name for f in dataclasses.fields(cls)]

    def encode(out: list[bytes], v: Any) -> None:
        for name, (enc, _) in zip(names, fields, strict=True):
            enc(out, getattr(v, name))

    def decode(r: _Reader) -> Any:
        return cls(*(dec(r) for _, dec in fields))

    return encode, decode


I32, I64 = _int(_I32), _int(_I64)
BOOL: tuple[Enc, Dec] = ((lambda out, v: out.append(b"\x01" if v else b"\x00")), (lambda r: r.raw(1) != b"\x00"))
NODE: tuple[Enc, Dec] = (_enc_node, _dec_node)
RERR, ECODE = _enum(Errors), _enum(ErrorCode)
STR: tuple[Enc, Dec] = (_enc_str, _dec_str)
BYTES: tuple[Enc, Dec] = (_enc_bytes, _dec_bytes)
OE: tuple[Enc, Dec] = (_enc_oe, _dec_oe)
OPT_OE: tuple[Enc, Dec] = (_enc_opt_oe, _dec_opt_oe)
IDS = _list(*I32)
ENTRIES: tuple[Enc, Dec] = (_enc_entries, _dec_entries)
DESCRIPTION = _struct(QuorumDescription, [
    STR, I32, I32, I64, I64, I64,
    _list(*_struct(VoterInfo, [I32, STR, STR])),
    IDS,
    _list(*_struct(ReplicaInfo, [I32, STR, I64, I64, I64, I64, STR])),
])


@dataclass(frozen=True)
class _Spec:
    cls: type[Message]
    api_key: int
    kind: int
    fields: list[tuple[Enc, Dec]]


_SPECS = [
    _Spec(VoteRequest, 52, REQUEST, [I32, I32, I32, I64, BOOL]),
    _Spec(VoteResponse, 52, RESPONSE, [I32, NODE, BOOL, BOOL, I32, RERR]),
    _Spec(BeginQuorumEpochRequest, 53, REQUEST, [I32, I32]),
    _Spec(BeginQuorumEpochResponse, 53, RESPONSE, [I32, NODE, RERR]),
    _Spec(EndQuorumEpochRequest, 54, REQUEST, [I32, I32, IDS]),
    _Spec(EndQuorumEpochResponse, 54, RESPONSE, [I32, NODE, RERR]),
    _Spec(FetchRequest, 1, REQUEST, [I32, I32, I64, I32, I32, STR]),
    _Spec(FetchResponse, 1, RESPONSE, [I32, NODE, I64, ENTRIES, OPT_OE, OPT_OE, RERR]),
    _Spec(FetchSnapshotRequest, 59, REQUEST, [I32, I32, OE, I64, I32]),
    _Spec(FetchSnapshotResponse, 59, RESPONSE, [I32, NODE, OE, I64, I64, BYTES, RERR]),
    _Spec(DescribeQuorumRequest, 55, REQUEST, []),
    _Spec(DescribeQuorumResponse, 55, RESPONSE, [ECODE, STR, DESCRIPTION]),
    _Spec(AppendRequest, 1000, REQUEST, [(_enc_values, _dec_values)]),
    _Spec(AppendResponse, 1000, RESPONSE, [ECODE, NODE, STR, I32, I64, I64, STR]),
    _Spec(ObserverFetchRequest, 1001, REQUEST, [I64, I32, I32, I32]),
    _Spec(ObserverFetchResponse, 1001, RESPONSE, [ECODE, NODE, I32, I64, I64, ENTRIES, OPT_OE]),
    _Spec(ObserverFetchSnapshotRequest, 1003, REQUEST, [OE, I64, I32]),
    _Spec(ObserverFetchSnapshotResponse, 1003, RESPONSE, [ECODE, OE, I64, I64, BYTES]),
    _Spec(ErrorResponse, 1002, RESPONSE, [ECODE, STR]),
]
_BY_CLASS = {s.cls: s for s in _SPECS}
_BY_KEY = {(s.api_key, s.kind): s for s in _SPECS}
_HEADER_FIELDS = 3  # src, dst, correlation_id: carried in the frame header
MESSAGE_TYPES: tuple[type[Message], ...] = tuple(s.cls for s in _SPECS)
"""Every message class the codec carries."""


def is_response(message: Message) -> bool:
    """Whether `message` answers a request (it goes back on the connection the request came in on)."""
    return _BY_CLASS[type(message)].kind == RESPONSE


def encode_frame(message: Message, cluster_id: str, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> bytes:
    """The whole frame (with its length prefix) of `message`.

    Raises
    ------
    FrameTooLargeError
        If the frame would exceed `max_frame_bytes`.
    """
    spec = _BY_CLASS.get(type(message))
    if spec is None:
        raise CodecError(f"no wire encoding for {type(message).__name__}")
    cid = cluster_id.encode("utf-8")
    out: list[bytes] = [b"", _HEAD.pack(FORMAT, spec.kind, spec.api_key, message.correlation_id, message.src,
                                       message.dst, len(cid)), cid]
    names = list(type(message).__dataclass_fields__)[_HEADER_FIELDS:]
    for name, (enc, _) in zip(names, spec.fields, strict=True):
        enc(out, getattr(message, name))
    size = sum(len(p) for p in out)
    if size > max_frame_bytes:
        raise FrameTooLargeError(f"{type(message).__name__} frame of {size} bytes exceeds {max_frame_bytes}")
    out[0] = _LEN.pack(size)
    return b"".join(out)


def decode_frame(payload: bytes) -> tuple[str, Message]:
    """``(cluster id, message)`` of a frame's payload (the bytes after the length prefix).

    Raises
    ------
    CodecError
        On a truncated frame, an unknown format, api key or code, or trailing bytes.
    """
    r = _Reader(payload if type(payload) is bytes else bytes(payload), 0)
    fmt, kind, api_key, corr, src, dst, n = r.take(_HEAD)
    if fmt != FORMAT:
        raise CodecError(f"unknown frame format {fmt}")
    cid = r.raw(n).decode("utf-8", errors="replace")
    spec = _BY_KEY.get((api_key, kind))
    if spec is None:
        raise CodecError(f"unknown api key {api_key} (kind {kind})")
    try:
        values = [dec(r) for _, dec in spec.fields]
    except (struct.error, ValueError) as exc:
        raise CodecError(f"bad {spec.cls.__name__} body at byte {r.pos}: {exc}") from exc
    if r.pos != len(payload):
        raise CodecError(f"{len(payload) - r.pos} trailing bytes after {spec.cls.__name__}")
    return cid, spec.cls(src, dst, corr, *values)


def peek_header(payload: bytes) -> tuple[int, int, int, str]:
    """``(api key, correlation id, source, cluster id)`` of a frame's payload, without decoding the body."""
    r = _Reader(payload, 0)
    _fmt, _kind, api_key, corr, src, _dst, n = r.take(_HEAD)
    return api_key, corr, src, r.raw(n).decode("utf-8", errors="replace")


def frame_length(prefix: bytes) -> int:
    """The payload length in a 4-byte frame prefix."""
    return int(_LEN.unpack(prefix)[0])
