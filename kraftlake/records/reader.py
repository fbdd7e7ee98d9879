"""Committed records: ``kraftlake.logformat`` batches turned into typed :class:`MetadataRecord` envelopes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from kraftlake.protocol.codec import decode_body
from kraftlake.protocol.codegen import Record
from kraftlake.protocol.control import ControlRecordType, control_spec, decode_control_key
from kraftlake.protocol.errors import ProtocolError
from kraftlake.records.errors import RecordDecodeError
from kraftlake.records.serde import decode_metadata_record, fast_decoder, metadata_spec


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
    fast: dict[int, tuple[Any, str, int, int]] = {}
    memo: dict[bytes, tuple[str, int, int, Record]] = {}
    memo_get = memo.get
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
        # Records unpack as logformat's Record named tuple: (offset, timestamp, key, value, headers).
        for offset, timestamp, _key, value, _headers in batch.records:
            # Records are immutable, so equal small values (NoOpRecord above all, most of a quiet log) can share
            # one decoded record.
            hit = memo_get(value)
            if hit is not None:
                yield _tnew(MetadataRecord, (offset, epoch, timestamp, base, False, *hit, value))
                continue
            # Fast path: frame 1 and one-byte apiKey and version (every record Kafka writes today), decoded
            # by the compiled body decoder directly; anything else, or any failure, takes the checked path.
            try:
                if value[0] == 1 and value[1] < 128 and value[2] < 128:
                    key = value[1] << 7 | value[2]
                    entry = fast.get(key)
                    if entry is None:
                        entry = fast[key] = _fast_entry(value[1], value[2])
                    end = len(value)
                    rec, stop = entry[0](value, 3, end)
                    if stop == end:
                        hit = (entry[1], entry[2], entry[3], rec)
                        if end <= _MEMO_MAX_VALUE:
                            if len(memo) >= _MEMO_MAX_ENTRIES:
                                memo.clear()
                            memo[value] = hit
                        yield _tnew(MetadataRecord, (offset, epoch, timestamp, base, False, *hit, value))
                        continue
            except Exception:  # the checked path below reports it with its typed error
                pass
            if value is None:
                raise RecordDecodeError("metadata record has a null value", source=name,
                                        position=batch.position, offset=offset)
            try:
                rec, version = decode(value)
            except ProtocolError as exc:
                raise _wrap(exc, name, batch, offset, "metadata record") from exc
            yield MetadataRecord(offset, epoch, timestamp, base, False, type(rec).__name__,
                                 rec._api_key or 0, version, rec, value)


def _checked(value: bytes, pos: int, end: int) -> Any:
    raise ValueError("no compiled decoder")  # forces the checked path, which raises the typed error


_MEMO_MAX_VALUE = 24
_MEMO_MAX_ENTRIES = 4096


def _fast_entry(api_key: int, version: int) -> tuple[Any, str, int, int]:
    fn = fast_decoder(api_key, version)
    if fn is None:
        return (_checked, "", api_key, version)
    return (fn, metadata_spec(api_key).name, api_key, version)


_tnew = tuple.__new__


def _wrap(exc: ProtocolError, source: str, batch: Any, offset: int, what: str) -> RecordDecodeError:
    return RecordDecodeError(f"bad {what} in the batch at this position: {exc} within the value", source=source,
                             position=batch.position, offset=offset, cause=exc)
