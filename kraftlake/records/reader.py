"""Committed records: ``kraftlake.logformat`` batches turned into typed :class:`MetadataRecord` envelopes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from kraftlake.protocol.codec import decode_body
from kraftlake.protocol.codegen import Record
from kraftlake.protocol.control import ControlRecordType, control_spec, decode_control_key
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


def _decode_control(key: bytes | None, value: bytes) -> tuple[str, int, int, Record | None]:
    ctype = decode_control_key(key)
    if not isinstance(ctype, ControlRecordType) or ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        name = ctype.name if isinstance(ctype, ControlRecordType) else f"UNKNOWN({ctype})"
        return name, int(ctype), 0, None
    spec = control_spec(ctype)
    return spec.name, int(ctype), 0, decode_body(spec, 0, value)


def iter_records(batches: Iterable[Any], source: str | None = None) -> Iterator[MetadataRecord]:
    """The records of ``batches`` (``kraftlake.logformat.RecordBatch``) as :class:`MetadataRecord` s.

    Control batches give control records (LeaderChange, SnapshotHeader, ...), other batches metadata
    records. A value that cannot be decoded raises :class:`RecordDecodeError` naming the source (``source`` or
    the batch's own), the batch's byte position, the record's offset and the position within the value.
    """
    decode = decode_metadata_record
    for batch in batches:
        epoch = batch.partition_leader_epoch
        base = batch.base_offset
        name = source if source is not None else getattr(batch, "source", "<bytes>")
        if batch.is_control:
            for r in batch.records:
                value = r.value or b""
                try:
                    type_name, api_key, version, rec = _decode_control(r.key, value)
                except ProtocolError as exc:
                    raise _wrap(exc, name, batch, r.offset, "control record") from exc
                yield MetadataRecord(r.offset, epoch, r.timestamp, base, True, type_name, api_key, version, rec,
                                     value)
            continue
        for r in batch.records:
            value = r.value
            if value is None:
                raise RecordDecodeError("metadata record has a null value", source=name,
                                        position=batch.position, offset=r.offset)
            try:
                rec, version = decode(value)
            except ProtocolError as exc:
                raise _wrap(exc, name, batch, r.offset, "metadata record") from exc
            yield MetadataRecord(r.offset, epoch, r.timestamp, base, False, type(rec).__name__,
                                 rec._api_key or 0, version, rec, value)


def _wrap(exc: ProtocolError, source: str, batch: Any, offset: int, what: str) -> RecordDecodeError:
    return RecordDecodeError(f"bad {what} in the batch at this position: {exc} within the value", source=source,
                             position=batch.position, offset=offset, cause=exc)
