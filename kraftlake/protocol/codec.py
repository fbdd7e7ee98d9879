"""Encode and decode message bodies (flexible versions) with the generated per-version functions.

``decode_body`` / ``encode_body`` work on raw bodies: no frame, no apiKey. ``kraftlake.records`` adds the
metadata frame, ``kraftlake.protocol.control`` the control-record key.
"""

from __future__ import annotations

import struct
from typing import Any

from kraftlake.protocol import runtime
from kraftlake.protocol.codegen import Decoder, Encoder, Record, generate_codecs
from kraftlake.protocol.errors import (
    GarbageAtEndError,
    InvalidFieldError,
    LengthPastEndError,
    ProtocolError,
    UnsupportedVersionError,
)
from kraftlake.protocol.messages import MESSAGE_CLASSES, spec_of, struct_classes
from kraftlake.protocol.spec import MessageSpec

_DECODERS: dict[str, dict[int, Decoder]] = {}
_ENCODERS: dict[str, dict[int, Encoder]] = {}
_SOURCES: dict[str, str] = {}


def _codecs(spec: MessageSpec) -> tuple[dict[int, Decoder], dict[int, Encoder]]:
    decs = _DECODERS.get(spec.name)
    if decs is None:
        classes = struct_classes()
        versions = range(spec.valid_versions.lowest, spec.valid_versions.highest + 1)
        decs, encs, src = generate_codecs(spec.structs(), versions, classes, spec.name)
        _DECODERS[spec.name] = decs
        _ENCODERS[spec.name] = encs
        _SOURCES[spec.name] = src
    return decs, _ENCODERS[spec.name]


def decoder(spec: MessageSpec, version: int) -> Decoder:
    """The compiled decoder ``(buf, pos, end) -> (record, pos)`` of one message version."""
    fn = _codecs(spec)[0].get(version)
    if fn is None:
        raise UnsupportedVersionError(f"{spec.name} has no version {version} (valid: {spec.valid_versions})")
    return fn


def encoder(spec: MessageSpec, version: int) -> Encoder:
    """The compiled encoder ``(record, bytearray) -> None`` of one message version."""
    fn = _codecs(spec)[1].get(version)
    if fn is None:
        raise UnsupportedVersionError(f"{spec.name} has no version {version} (valid: {spec.valid_versions})")
    return fn


def generated_source(spec: MessageSpec) -> str:
    """The Python source generated for a message (for debugging and review)."""
    _codecs(spec)
    return _SOURCES[spec.name]


def decode_body(spec: MessageSpec, version: int, buf: bytes, pos: int = 0, end: int | None = None) -> Record:
    """Decode a whole body ``buf[pos:end]``; bytes left over are an error, as in Kafka."""
    fn = decoder(spec, version)
    if type(buf) is not bytes:
        buf = bytes(buf)
    if end is None:
        end = len(buf)
    record: Record
    try:
        record, stop = fn(buf, pos, end)
    except ProtocolError:
        raise
    except (IndexError, struct.error) as exc:
        raise LengthPastEndError(f"{spec.name} v{version} runs past the end of the value", end) from exc
    except UnicodeDecodeError as exc:
        raise InvalidFieldError(
            f"{spec.name} v{version}: a string is not valid UTF-8 ({exc.reason})",
            runtime.utf8_error_position(buf, exc),
        ) from exc
    if stop != end:
        if stop > end:
            raise LengthPastEndError(f"{spec.name} v{version} runs past the end of the value", end)
        raise GarbageAtEndError(f"{end - stop} bytes left over after {spec.name} v{version}", stop)
    return record


def encode_body(record: Record, version: int, out: bytearray | None = None) -> bytes:
    """Encode a record's body at ``version``; with ``out``, append to it (and still return the body)."""
    try:
        spec = spec_of(record)
    except KeyError:
        raise InvalidFieldError(f"not a message record: {type(record).__name__}") from None
    fn = encoder(spec, version)
    w = bytearray()
    try:
        fn(record, w)
    except ProtocolError:
        raise
    except (struct.error, TypeError, OverflowError, ValueError, AttributeError) as exc:
        raise InvalidFieldError(f"cannot encode {spec.name} v{version}: {exc}") from exc
    if out is not None:
        out += w
    return bytes(w)


def message_names() -> list[str]:
    return list(MESSAGE_CLASSES)


def _unused(_: Any) -> None:  # pragma: no cover
    pass
