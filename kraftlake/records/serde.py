"""Metadata record values: ``uvarint frame version (1) | uvarint apiKey | uvarint version | body``.

Kafka's ``AbstractApiMessageSerde``. Frame version 0 (the 2.8 preview format) and any other are rejected.
"""

from __future__ import annotations

from kraftlake.protocol import runtime
from kraftlake.protocol.codec import decoder, encode_body
from kraftlake.protocol.codegen import Record
from kraftlake.protocol.errors import (
    FrameVersionError,
    GarbageAtEndError,
    InvalidFieldError,
    LengthPastEndError,
    ProtocolError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from kraftlake.protocol.messages import MESSAGE_CLASSES, spec_of
from kraftlake.protocol.spec import MessageSpec, load_all

FRAME_VERSION = 1

_BY_API_KEY: dict[int, MessageSpec] = {s.api_key: s for s in load_all() if s.kind == "metadata"}  # type: ignore[misc]
_BY_NAME: dict[str, MessageSpec] = {s.name: s for s in load_all()}
_read_uvarint = runtime.read_uvarint


def metadata_spec(api_key: int) -> MessageSpec:
    """The spec of a metadata record by apiKey."""
    spec = _BY_API_KEY.get(api_key)
    if spec is None:
        raise UnknownApiKeyError(f"unknown metadata record apiKey {api_key}")
    return spec


def spec_by_name(name: str) -> MessageSpec:
    """The spec of any message (metadata or control) by Kafka's class name."""
    spec = _BY_NAME.get(name)
    if spec is None:
        raise UnknownApiKeyError(f"unknown record type {name!r}")
    return spec


def metadata_class(api_key: int) -> type[Record]:
    """The record class of a metadata apiKey."""
    return MESSAGE_CLASSES[metadata_spec(api_key).name]


def metadata_api_keys() -> list[int]:
    return sorted(_BY_API_KEY)


def metadata_header(record: Record, version: int) -> bytes:
    """The frame header of a metadata record's value at ``version`` (frame version, apiKey, version)."""
    spec = spec_of(record)
    if spec.kind != "metadata" or spec.api_key is None:
        raise InvalidFieldError(f"{spec.name} is not a metadata record")
    if version not in spec.valid_versions:
        raise UnsupportedVersionError(f"{spec.name} has no version {version} (valid: {spec.valid_versions})")
    return (
        runtime.uvarint_bytes(FRAME_VERSION)
        + runtime.uvarint_bytes(spec.api_key)
        + runtime.uvarint_bytes(version)
    )


def encode_metadata_record(record: Record, version: int) -> bytes:
    """The full value of a metadata record at ``version``."""
    out = bytearray(metadata_header(record, version))
    encode_body(record, version, out)
    return bytes(out)


def fast_decoder(api_key: int, version: int) -> object | None:
    """The compiled body decoder ``(buf, pos, end) -> (record, pos)`` of a known (apiKey, version), else None.

    For hot loops that parse the three one-byte header varints themselves; on any failure they should call
    :func:`decode_metadata_record` again, which raises the typed error.
    """
    fn = _DECODER_CACHE.get((api_key, version))
    if fn is None:
        try:
            fn = _lookup(api_key, version, 0)
        except ProtocolError:
            return None
    return fn


# Decoders by (apiKey, version), filled lazily, so that the per-record path is two dict lookups.
_DECODER_CACHE: dict[tuple[int, int], object] = {}


def _lookup(api_key: int, version: int, pos: int) -> object:
    spec = _BY_API_KEY.get(api_key)
    if spec is None:
        raise UnknownApiKeyError(f"unknown metadata record apiKey {api_key}", pos)
    if version not in spec.valid_versions:
        raise UnsupportedVersionError(
            f"unsupported version {version} of {spec.name} (valid: {spec.valid_versions})", pos
        )
    fn = decoder(spec, version)
    _DECODER_CACHE[(api_key, version)] = fn
    return fn


def decode_metadata_record(value: bytes) -> tuple[Record, int]:
    """Decode a metadata record value into ``(record, version)``.

    Raises
    ------
    ProtocolError
        one of its subclasses, with the byte position within ``value``.
    """
    if type(value) is not bytes:
        value = bytes(value)
    end = len(value)
    try:
        # The frame header is three one-byte varints for every record Kafka writes today.
        frame = value[0]
        if frame < 128:
            pos = 1
        else:
            frame, pos = _read_uvarint(value, 0)
        if frame != FRAME_VERSION:
            raise FrameVersionError(
                f"unsupported metadata record frame version {frame}"
                + (" (the 2.8 preview format)" if frame == 0 else ""),
                0,
            )
        api_key = value[pos]
        if api_key < 128:
            pos += 1
        else:
            api_key, pos = _read_uvarint(value, pos)
        vpos = pos
        version = value[pos]
        if version < 128:
            pos += 1
        else:
            version, pos = _read_uvarint(value, pos)
        fn = _DECODER_CACHE.get((api_key, version)) or _lookup(api_key, version, vpos)
        record, stop = fn(value, pos, end)  # type: ignore[operator]
    except ProtocolError:
        raise
    except IndexError as exc:
        raise LengthPastEndError("metadata record runs past the end of the value", end) from exc
    except UnicodeDecodeError as exc:
        raise InvalidFieldError(
            f"a string is not valid UTF-8 ({exc.reason})", runtime.utf8_error_position(value, exc)
        ) from exc
    except Exception as exc:  # struct.error: a fixed-width read past the end
        raise LengthPastEndError(f"metadata record runs past the end of the value ({exc})", end) from exc
    if stop != end:
        if stop > end:
            raise LengthPastEndError("metadata record runs past the end of the value", end)
        raise GarbageAtEndError(
            f"{end - stop} bytes of garbage after {type(record).__name__} v{version}", stop
        )
    return record, version
