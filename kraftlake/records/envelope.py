"""The committed-record envelope, :class:`MetadataRecord`, and the one set of rules that builds it.

Every reader of committed records (log files, a service's committed batches, the warehouse's rows, the in-memory
logs of the controller and the simulator) builds its envelopes here, so that a record reads the same wherever it
comes from: a data record's type is its class name and its ``api_key`` Kafka's apiKey; a control record's
``api_key`` is its control type, its version 0, and a type without a KRaft message (ABORT, COMMIT, a type Kafka
does not know) gives its name (``ABORT``, ``UNKNOWN(9)``) and ``record`` None. A value that cannot be decoded
raises :class:`RecordDecodeError` naming the source, the batch's byte position (None where the records never
were in a file) and the record's offset.
"""

from __future__ import annotations

from typing import NamedTuple

from kraftlake.protocol.codec import decode_body
from kraftlake.protocol.codegen import Record
from kraftlake.protocol.control import ControlRecordType, control_spec, control_type_of
from kraftlake.protocol.errors import ProtocolError
from kraftlake.records.errors import RecordDecodeError
from kraftlake.records.serde import decode_metadata_record


class MetadataRecord(NamedTuple):
    """One committed record of the metadata log (or a snapshot).

    Attributes
    ----------
    offset : int
    epoch : int
        The batch's partition leader epoch (the Raft epoch).
    timestamp : int
        Batch base timestamp + the record's delta (ms).
    batch_offset : int
        The base offset of the batch holding it.
    is_control : bool
    type : str
        The class name (``PartitionChangeRecord``, ``LeaderChangeMessage``, ...); for a control type without a
        KRaft message (ABORT, COMMIT, unknown) the type's name and ``record`` None.
    api_key : int
        The apiKey, or for control records the control type.
    version : int
        The record version (control records: the version their body is read at, 0 as in Kafka).
    record : Record or None
        The typed payload.
    raw : bytes
        The value bytes.
    """

    offset: int
    epoch: int
    timestamp: int
    batch_offset: int
    is_control: bool
    type: str
    api_key: int
    version: int
    record: Record | None
    raw: bytes


def data_envelope(
    offset: int, epoch: int, timestamp: int, batch_offset: int, record: Record, version: int, raw: bytes = b""
) -> MetadataRecord:
    """The envelope of a data record already in hand (decoded, or about to be encoded: `raw` then empty)."""
    return MetadataRecord(
        offset,
        epoch,
        timestamp,
        batch_offset,
        False,
        type(record).__name__,
        int(record._api_key or 0),
        version,
        record,
        raw,
    )


def decode_data_envelope(
    value: bytes,
    offset: int,
    epoch: int,
    timestamp: int,
    batch_offset: int,
    *,
    source: str,
    position: int | None,
) -> MetadataRecord:
    """The envelope of a metadata record value, decoded with the checked decoder.

    Raises
    ------
    RecordDecodeError
        Naming `source`, `position` (the batch's byte position) and `offset`.
    """
    try:
        record, version = decode_metadata_record(value)
    except ProtocolError as exc:
        raise decode_error(exc, source, position, offset, "metadata record") from exc
    return data_envelope(offset, epoch, timestamp, batch_offset, record, version, value)


def control_envelope(
    control_type: int,
    value: bytes,
    offset: int,
    epoch: int,
    timestamp: int,
    batch_offset: int,
    *,
    source: str,
    position: int | None,
) -> MetadataRecord:
    """The envelope of a control record of `control_type` (its key's type) with body `value`.

    Raises
    ------
    RecordDecodeError
        When the body of a type that has a KRaft message cannot be decoded, naming `source`, `position` and
        `offset`.
    """
    try:
        kind = ControlRecordType(control_type)
    except ValueError:
        kind = None
    if kind is None or kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        name = kind.name if kind is not None else f"UNKNOWN({control_type})"
        return MetadataRecord(
            offset, epoch, timestamp, batch_offset, True, name, control_type, 0, None, value
        )
    spec = control_spec(kind)
    try:
        record = decode_body(spec, 0, value)
    except ProtocolError as exc:
        raise decode_error(exc, source, position, offset, "control record") from exc
    return MetadataRecord(
        offset, epoch, timestamp, batch_offset, True, spec.name, int(kind), 0, record, value
    )


def typed_control_envelope(
    offset: int, epoch: int, timestamp: int, batch_offset: int, record: Record, raw: bytes = b""
) -> MetadataRecord:
    """The envelope of a control message already in hand (a ``LeaderChangeMessage`` a leader writes)."""
    kind = control_type_of(record)
    return MetadataRecord(
        offset, epoch, timestamp, batch_offset, True, type(record).__name__, int(kind), 0, record, raw
    )


def decode_error(
    exc: ProtocolError, source: str, position: int | None, offset: int, what: str
) -> RecordDecodeError:
    """The `RecordDecodeError` for `exc`, raised decoding the `what` at `offset` of the batch at `position`."""
    return RecordDecodeError(
        f"bad {what} in the batch at this position: {exc} within the value",
        source=source,
        position=position,
        offset=offset,
        cause=exc,
    )
