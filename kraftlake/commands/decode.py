"""``kraftlake decode PATH``: the records of a segment, a snapshot or a log directory, one JSON object per line.

Each line is ``{"offset","epoch","timestamp","batch_offset","control","type","version","data"}``. ``type``
and ``data`` are what ``kafka-dump-log --cluster-metadata-decoder`` prints: for a metadata record Kafka's
record type (``TOPIC_RECORD``) and its JSON; for a control record dump-log's label (``LeaderChange``,
``SnapshotHeader``, ``SnapshotFooter``, ``KRaftVersion``, ``KRaftVoters``) and its JSON.

PATH may be a ``.log`` segment, a ``.checkpoint`` snapshot, a ``bootstrap.checkpoint``, a
``__cluster_metadata-0`` directory or the log directory holding one; a directory means its segments, in
offset order. ``--summary`` prints one JSON object instead: counts per type and version, offsets, epochs,
batches and CRC status. A corrupt file stops the command with the typed error (file, byte position, offset)
unless ``--recover``, which keeps every whole, valid batch up to the first bad one, as Kafka's log recovery
does, and reports what it dropped on stderr.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from kraftlake.commands._args import non_negative_int
from kraftlake.errors import KraftlakeError
from kraftlake.logformat.logdir import MetadataLogDir
from kraftlake.logformat.reader import BatchReader, RecoveryReport
from kraftlake.logformat.segment import LOG_SUFFIX
from kraftlake.logformat.snapshot import BOOTSTRAP_FILE, SUFFIX
from kraftlake.protocol.messages import MESSAGE_CLASSES, spec_of
from kraftlake.protocol.spec import StructSpec
from kraftlake.records.kafka_json import CONTROL_LABELS, dumps, line_writer, record_data
from kraftlake.records.reader import MetadataRecord, iter_records


class DecodeInputError(KraftlakeError):
    """Raised when the decode PATH is not a segment, a snapshot or a log directory, --types names no type, or
    --from-offset is above --to-offset."""


# --- type names --------------------------------------------------------------------------------------------


def _norm(name: str) -> str:
    return name.replace("_", "").replace(":", "").upper()


def _type_names() -> dict[str, str]:
    """Every accepted spelling (normalised) -> the name decode prints."""
    names: dict[str, str] = {}
    for class_name, cls in MESSAGE_CLASSES.items():
        spec = spec_of(cls)
        if spec.control_type is not None:
            printed = CONTROL_LABELS.get(spec.control_type, class_name).rstrip(":")
        else:
            printed = spec.record_type_name
        for spelling in (class_name, printed, spec.record_type_name):
            names[_norm(spelling)] = printed
            if _norm(spelling).endswith("RECORD"):
                names[_norm(spelling)[: -len("RECORD")]] = printed
    return names


def parse_types(text: str | None) -> frozenset[str] | None:
    """``--types TopicRecord,PARTITION_CHANGE_RECORD,LeaderChange`` -> the printed names, or None for all."""
    if text is None:
        return None
    known = _type_names()
    chosen = set()
    for word in (w.strip() for w in text.split(",")):
        if not word:
            continue
        printed = known.get(_norm(word))
        if printed is None:
            raise DecodeInputError(f"--types: unknown record type {word!r}")
        chosen.add(printed)
    return frozenset(chosen)


_PRINTED_TYPE: dict[type, str] = {}
_HAS_DOUBLE: dict[type, bool] = {}


def printed_type(record: MetadataRecord) -> str:
    """The ``type`` decode prints for a record (dump-log's name for it)."""
    if record.record is None:
        return record.type
    cls = type(record.record)
    name = _PRINTED_TYPE.get(cls)
    if name is None:
        spec = spec_of(cls)
        if spec.control_type is not None:
            name = CONTROL_LABELS.get(spec.control_type, spec.name).rstrip(":")
        else:
            name = spec.record_type_name
        _PRINTED_TYPE[cls] = name
    return name


def _has_double(cls: type) -> bool:
    """Whether a message class has a float64 field anywhere (Java prints doubles its own way)."""
    found = _HAS_DOUBLE.get(cls)
    if found is None:
        todo: list[StructSpec] = [spec_of(cls).struct]
        found = False
        while todo and not found:
            struct = todo.pop()
            for f in struct.fields:
                found = found or f.base_type == "float64"
                if f.struct is not None:
                    todo.append(f.struct)
        _HAS_DOUBLE[cls] = found
    return found


# --- inputs --------------------------------------------------------------------------------------------------


def resolve_files(path: Path) -> list[Path]:
    """The files PATH stands for: itself, or a directory's segments in offset order."""
    if path.is_file():
        if path.name.endswith((LOG_SUFFIX, SUFFIX)):
            return [path]
        raise DecodeInputError(f"{path}: not a segment ({LOG_SUFFIX}) or snapshot ({SUFFIX})")
    if not path.is_dir():
        raise DecodeInputError(f"{path}: no such file or directory")
    log = MetadataLogDir(path)
    segments = [p for _, p in log.segments()]
    if not segments:
        raise DecodeInputError(f"{log.path}: no {LOG_SUFFIX} segments")
    return segments


def file_kind(path: Path) -> str:
    """``segment``, ``snapshot`` or ``bootstrap``."""
    if path.name == BOOTSTRAP_FILE:
        return "bootstrap"
    return "snapshot" if path.name.endswith(SUFFIX) else "segment"


def _gaps(path: str | os.PathLike[str]) -> list[Any]:
    """The holes of a log directory (`kraftlake.image.gaps.log_gaps`); none for a file."""
    from kraftlake.image.gaps import log_gaps

    return log_gaps(path) if Path(path).is_dir() else []


@dataclass
class Stats:
    """What ``--summary`` reports, gathered while reading."""

    files: list[dict[str, Any]] = field(default_factory=list)
    types: Counter[tuple[str, int]] = field(default_factory=Counter)
    epochs: dict[int, dict[str, int]] = field(default_factory=dict)
    records: int = 0
    control_records: int = 0
    batches: int = 0
    control_batches: int = 0
    compression: Counter[str] = field(default_factory=Counter)
    first_offset: int | None = None
    last_offset: int | None = None
    first_timestamp: int | None = None
    last_timestamp: int | None = None
    recovered: list[RecoveryReport] = field(default_factory=list)

    def add_record(self, record: MetadataRecord, type_name: str) -> None:
        self.records += 1
        self.control_records += record.is_control
        self.types[(type_name, record.version)] += 1
        epoch = self.epochs.get(record.epoch)
        if epoch is None:
            self.epochs[record.epoch] = {
                "records": 1,
                "first_offset": record.offset,
                "last_offset": record.offset,
            }
        else:
            epoch["records"] += 1
            epoch["last_offset"] = record.offset
        if self.first_offset is None:
            self.first_offset = record.offset
            self.first_timestamp = record.timestamp
        self.last_offset = record.offset
        self.last_timestamp = record.timestamp

    def as_json(self, crc_verified: bool) -> dict[str, Any]:
        dropped = [r for r in self.recovered if not r.clean]
        return {
            "files": self.files,
            "records": self.records,
            "control_records": self.control_records,
            "offsets": {"first": self.first_offset, "last": self.last_offset},
            "timestamps": {"first": self.first_timestamp, "last": self.last_timestamp},
            "epochs": [{"epoch": e, **v} for e, v in sorted(self.epochs.items())],
            "batches": {
                "total": self.batches,
                "control": self.control_batches,
                "compression": dict(sorted(self.compression.items())),
            },
            "types": [{"type": t, "version": v, "count": n} for (t, v), n in sorted(self.types.items())],
            "crc": {
                "verified": crc_verified,
                "status": "ok" if not dropped else "recovered",
                "dropped": [
                    {
                        "file": r.source,
                        "position": r.first_bad_position,
                        "bytes": r.truncated_bytes,
                        "reason": r.reason,
                    }
                    for r in dropped
                ],
            },
        }


@contextmanager
def _mapped(path: Path) -> Iterator[Any]:
    """The bytes of ``path``, memory-mapped (a segment can be larger than we want to copy)."""
    with path.open("rb") as f:
        if path.stat().st_size == 0:
            yield b""
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            yield buf


def _batches(path: Path, recover: bool, stats: Stats) -> Iterator[Any]:
    """The batches of one file, counted into ``stats``; in recovery the report goes to ``stats.recovered``."""
    entry: dict[str, Any] = {"file": str(path), "kind": file_kind(path), "batches": 0, "bytes": 0}
    stats.files.append(entry)
    with _mapped(path) as buf:
        reader = BatchReader(buf, str(path), recover=recover)
        for batch in reader:
            entry["batches"] += 1
            entry["bytes"] += batch.size
            stats.batches += 1
            stats.control_batches += batch.is_control
            stats.compression[batch.compression.name.lower()] += 1
            yield batch
        if recover and reader.report is not None:
            stats.recovered.append(reader.report)


def decoded_records(
    paths: Iterable[Path],
    *,
    from_offset: int | None = None,
    to_offset: int | None = None,
    types: frozenset[str] | None = None,
    recover: bool = False,
    stats: Stats | None = None,
    count: bool = True,
) -> Iterator[tuple[MetadataRecord, str]]:
    """The records of ``paths`` in order, filtered, each with the type name decode prints; counted into
    ``stats`` (files and batches always, records unless ``count`` is false)."""
    stats = stats if stats is not None else Stats()
    for path in paths:
        batches = _batches(path, recover, stats)
        if from_offset is not None:
            batches = (b for b in batches if b.last_offset >= from_offset)
        for record in iter_records(batches, source=str(path)):
            if from_offset is not None and record.offset < from_offset:
                continue
            if to_offset is not None and record.offset > to_offset:
                # segments and snapshots are in offset order: nothing further in this file qualifies
                break
            name = printed_type(record)
            if types is not None and name not in types:
                continue
            if count:
                stats.add_record(record, name)
            yield record, name


_plain_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def record_json(record: MetadataRecord, type_name: str) -> str:
    """One output line (without the newline), the reference way (a dict, then Jackson's form for ``data``):
    :func:`write_lines` prints the same text faster."""
    head = _plain_json(
        {
            "offset": record.offset,
            "epoch": record.epoch,
            "timestamp": record.timestamp,
            "batch_offset": record.batch_offset,
            "control": record.is_control,
            "type": type_name,
            "version": record.version,
        }
    )
    if record.record is None:
        return f'{head[:-1]},"data":null}}'
    data = record_data(record.record, record.version)
    if _has_double(type(record.record)):
        text = dumps(data)  # doubles as Java's Double.toString prints them (1.0E7)
    else:
        # the C encoder agrees with Jackson except in the hex case of \u escapes: use the slow writer then
        text = _plain_json(data)
        if "\\u" in text:
            text = dumps(data)
    return f'{head[:-1]},"data":{text}}}'


_Line = Callable[[Any, str], str]


def _line_writer(record: MetadataRecord) -> _Line:
    """``(payload, head) -> line`` for records of this one's type and version: ``head`` is the line up to its
    batch offset, the rest (control flag, type, version, data, newline) is the writer's."""
    if record.record is None:  # ABORT, COMMIT, an unknown control type: no body
        tail = _plain_json({"control": record.is_control, "type": record.type, "version": record.version})
        text = "," + tail[1:-1] + ',"data":null}\n'
        return lambda _, head: head + text
    mid = _plain_json({"control": record.is_control, "type": printed_type(record), "version": record.version})
    return line_writer(type(record.record), record.version, "," + mid[1:-1] + ',"data":', "}\n")


# Values up to this size (NoOpRecord, heartbeats: most of a quiet log) are printed once and their text reused;
# the reader already shares one decoded record between equal values of the same sizes.
_SMALL_VALUE = 24
_SMALL_CACHE_MAX = 4096
_FLUSH_LINES = 2048


def write_lines(records: Iterable[MetadataRecord], write: Callable[[str], Any]) -> None:
    """Print ``records`` as decode prints them (what :func:`record_json` gives, one per line), with the
    generated per-(type, version) writers, in chunks of lines. When reading fails (a corrupt batch), the lines
    of the records before it are written before the error propagates, as if written one by one."""
    writers: dict[tuple[str, int], _Line] = {}
    small: dict[bytes, str] = {}
    out: list[str] = []
    add = out.append
    # epoch, timestamp and batch offset are the same for every record of a KRaft batch: formatted once a batch
    last: tuple[int, int, int] | None = None
    middle = ""
    try:
        for m in records:
            offset, epoch, timestamp, batch_offset, control, type_name, _, version, rec, raw = m
            if last is None or last[2] != batch_offset or last[1] != timestamp or last[0] != epoch:
                last = epoch, timestamp, batch_offset
                middle = f',"epoch":{epoch},"timestamp":{timestamp},"batch_offset":{batch_offset}'
            if len(raw) <= _SMALL_VALUE and not control:  # a control value does not carry its type: not a key
                tail = small.get(raw)
                if tail is None:
                    fn = writers.get((type_name, version)) or writers.setdefault(
                        (type_name, version), _line_writer(m)
                    )
                    tail = fn(rec, "")
                    if len(small) >= _SMALL_CACHE_MAX:
                        small.clear()
                    small[raw] = tail
                add(f'{{"offset":{offset}{middle}{tail}')
            else:
                fn = writers.get((type_name, version)) or writers.setdefault(
                    (type_name, version), _line_writer(m)
                )
                add(fn(rec, f'{{"offset":{offset}{middle}'))
            if len(out) >= _FLUSH_LINES:
                text = "".join(out)
                out.clear()
                write(text)
    finally:
        if out:
            write("".join(out))


# --- the command ---------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``kraftlake decode``."""
    parser.add_argument(
        "path", type=Path, metavar="PATH", help="segment, .checkpoint, bootstrap.checkpoint or log dir"
    )
    parser.add_argument(
        "--from-offset", type=non_negative_int, metavar="N", help="only records at offset >= N"
    )
    parser.add_argument("--to-offset", type=non_negative_int, metavar="M", help="only records at offset <= M")
    parser.add_argument(
        "--types", metavar="T,...", help="only these types (TopicRecord, TOPIC_RECORD, LeaderChange, ...)"
    )
    parser.add_argument(
        "--summary", action="store_true", help="print counts, offsets, epochs, batches, CRC status"
    )
    parser.add_argument(
        "--recover",
        action="store_true",
        help="stop quietly at the first bad batch, like Kafka's log recovery",
    )


def _check_from_offset(files: list[Path], from_offset: int, recover: bool, path: Path) -> None:
    """Raise when ``--from-offset`` lies past the last offset of ``files`` (nothing could be printed).

    Raises
    ------
    DecodeInputError
        Naming the path and its last offset.
    """
    last = max(
        (b.last_offset for f in files for b in _batches(f, recover, Stats())),
        default=None,
    )
    if last is None:
        raise DecodeInputError(f"--from-offset {from_offset}: {path} holds no records")
    if from_offset > last:
        raise DecodeInputError(
            f"--from-offset {from_offset} is past the end of {path}: its last offset is {last}"
        )


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``kraftlake decode``; returns the exit status (errors raise and the CLI prints them)."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    if args.from_offset is not None and args.to_offset is not None and args.from_offset > args.to_offset:
        raise DecodeInputError(
            f"--from-offset {args.from_offset} is above --to-offset {args.to_offset}: "
            "no offset is in that range"
        )
    files = resolve_files(args.path)
    types = parse_types(args.types)
    stats = Stats()
    filtered = args.from_offset is not None or args.to_offset is not None or types is not None
    if args.summary or filtered:
        records = decoded_records(
            files,
            from_offset=args.from_offset,
            to_offset=args.to_offset,
            types=types,
            recover=args.recover,
            stats=stats,
            count=args.summary,
        )
        seen = [False]

        def taken(records: Iterator[tuple[MetadataRecord, str]]) -> Iterator[tuple[MetadataRecord, str]]:
            for item in records:
                seen[0] = True
                yield item

        records = taken(records)
        if args.summary:
            for _ in records:
                pass
        else:
            write_lines((r for r, _ in records), out.write)
        if not seen[0] and args.from_offset is not None:
            _check_from_offset(files, args.from_offset, args.recover, args.path)
        if args.summary:
            summary = stats.as_json(crc_verified=True)
            gaps = _gaps(args.path)
            summary["gaps"] = [
                {
                    "first_missing": g.first_missing,
                    "next_present": g.next_present,
                    "snapshot": None if g.snapshot is None else g.snapshot.path.name,
                    "no_state": None if g.unknown[0] > g.unknown[1] else list(g.unknown),
                }
                for g in gaps
            ]
            out.write(json.dumps(summary, indent=2) + "\n")
            for g in gaps:
                err.write(f"kraftlake decode: {g.describe()}\n")
    else:
        # every record: straight from the reader, no per-record filtering or counting
        write_lines(
            (r for path in files for r in iter_records(_batches(path, args.recover, stats), str(path))),
            out.write,
        )
    for report in stats.recovered:
        if not report.clean:
            err.write(
                f"kraftlake decode: recovered {report.source}: kept {report.valid_batches} batches "
                f"({report.valid_bytes} bytes), dropped {report.truncated_bytes} bytes from byte position "
                f"{report.first_bad_position}: {report.reason}\n"
            )
    return 0
