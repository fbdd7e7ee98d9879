"""KRaft control records: the 4-byte key (version 0, type) and the raw body (no frame, no apiKey).

Kafka reads every control body at version 0 (``ControlRecordUtils.*_CURRENT_VERSION``); the body's own
``Version`` field says which data version was meant.
"""

from __future__ import annotations

import struct

from kraftlake.logformat.batch import ControlRecordType as ControlRecordType
from kraftlake.protocol.codec import decode_body, encode_body
from kraftlake.protocol.codegen import Record
from kraftlake.protocol.errors import (
    InvalidFieldError,
    LengthPastEndError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from kraftlake.protocol.messages import MESSAGE_CLASSES, spec_of
from kraftlake.protocol.spec import MessageSpec, load_all

_KEY = struct.Struct(">hh")
CONTROL_KEY_SIZE = _KEY.size
#: The version Kafka reads and writes control bodies at.
CONTROL_BODY_VERSION = 0


def _specs_by_type() -> dict[int, MessageSpec]:
    return {s.control_type: s for s in load_all() if s.kind == "control" and s.control_type is not None}


_BY_TYPE = _specs_by_type()


def control_spec(control_type: int) -> MessageSpec:
    """The message spec of a control type that carries a KRaft message (2-6)."""
    spec = _BY_TYPE.get(control_type)
    if spec is None:
        raise UnknownApiKeyError(f"control type {control_type} has no KRaft message schema")
    return spec


def control_type_of(record: Record) -> ControlRecordType:
    """The control type of a control message (``LeaderChangeMessage`` -> ``LEADER_CHANGE``)."""
    spec = spec_of(record)
    if spec.control_type is None:
        raise InvalidFieldError(f"{spec.name} is not a control record")
    return ControlRecordType(spec.control_type)


def encode_control_key(control_type: int) -> bytes:
    """The 4-byte key: int16 version 0, int16 type."""
    return _KEY.pack(0, control_type)


def decode_control_key(key: bytes | None) -> ControlRecordType | int:
    """The type of a control key; a type Kafka does not know is returned as a plain int (Kafka: UNKNOWN).

    Raises
    ------
    LengthPastEndError
        if the key is shorter than 4 bytes (or null).
    UnsupportedVersionError
        if the key version is negative (Kafka rejects those and accepts larger ones with a warning).
    """
    if key is None or len(key) < CONTROL_KEY_SIZE:
        raise LengthPastEndError(f"control record key needs 4 bytes, got {0 if key is None else len(key)}", 0)
    version: int
    ctype: int
    version, ctype = _KEY.unpack_from(key, 0)
    if version < 0:
        raise UnsupportedVersionError(f"invalid version {version} of control record key", 0)
    try:
        return ControlRecordType(ctype)
    except ValueError:
        return ctype


def encode_control_body(record: Record, version: int = CONTROL_BODY_VERSION) -> bytes:
    """The raw value of a control record."""
    if spec_of(record).kind != "control":
        raise InvalidFieldError(f"{type(record).__name__} is not a control record")
    return encode_body(record, version)


def decode_control_body(control_type: int, value: bytes, version: int = CONTROL_BODY_VERSION) -> Record:
    """Decode the value of a control record of ``control_type`` (2-6)."""
    return decode_body(control_spec(control_type), version, value)


def control_classes() -> dict[ControlRecordType, type[Record]]:
    return {ControlRecordType(t): MESSAGE_CLASSES[s.name] for t, s in _BY_TYPE.items()}
