"""The protocol layer's exceptions: everything that can go wrong reading or writing a Kafka message body.

Decoding errors carry ``position``, the byte position within the value being decoded; callers that know the
file and offset (``kraftlake.records``, ``kraftlake.logformat``) add that context.
"""

from __future__ import annotations

from kraftlake.errors import KraftlakeError


class ProtocolError(KraftlakeError):
    """Raised when a message cannot be decoded or encoded according to its Kafka schema."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message if position is None else f"{message} (at byte {position})")
        self.position = position


class SchemaError(ProtocolError):
    """Raised when a file under ``schemas/`` is missing or does not describe a Kafka message correctly."""


class UnknownApiKeyError(ProtocolError):
    """Raised when a metadata record carries an apiKey (or a control record a type) that no schema defines."""


class UnsupportedVersionError(ProtocolError):
    """Raised when a version is outside a message's validVersions, or a field is set in a version without it."""


class MalformedVarintError(ProtocolError):
    """Raised when an unsigned varint runs longer than five bytes (Kafka's limit for 32-bit varints)."""


class LengthPastEndError(ProtocolError):
    """Raised when a length, count or fixed-width field reaches past the end of the value."""


class GarbageAtEndError(ProtocolError):
    """Raised when bytes are left over after a complete message body (Kafka: "garbage at the end")."""


class InvalidFieldError(ProtocolError):
    """Raised when a field's bytes or value are invalid: null in a non-nullable field, bad UTF-8, out of range."""


class FrameVersionError(ProtocolError):
    """Raised when a metadata record's frame version is not 1 (0 was the 2.8 preview format)."""
