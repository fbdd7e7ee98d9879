"""Kafka message schemas (``schemas/``) loaded as specs, generated record classes and the flexible codec.

Public API: :mod:`kraftlake.protocol.messages` (classes), :func:`decode_body` / :func:`encode_body`,
:mod:`kraftlake.protocol.control` (KRaft control records), :mod:`kraftlake.protocol.errors`.
"""

from __future__ import annotations

from kraftlake.protocol.codec import decode_body, encode_body
from kraftlake.protocol.errors import ProtocolError
from kraftlake.protocol.messages import MESSAGE_CLASSES, Record, spec_of
from kraftlake.protocol.spec import MessageSpec, load_all

__all__ = [
    "MESSAGE_CLASSES",
    "MessageSpec",
    "ProtocolError",
    "Record",
    "decode_body",
    "encode_body",
    "load_all",
    "spec_of",
]
