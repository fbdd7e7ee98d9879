"""Kafka's on-disk formats, payload-agnostic: a record value is bytes here.

Framing (`kraftlake.logformat.framing`)
    the v2 header layout; `BatchHeader`, `scan_batch_headers` / `scan_file_headers` (headers with their
    positions, no record decoded), `batch_header` (one batch's header fields, unchecked).
Batches (`batch`, `record`, `record_decoding`, `batch_encoding`)
    `RecordBatch`, `Record`, `decode_batch`, `encode_batch`, `encode_record`, `reencode`,
    `build_data_batch` / `build_control_batch` (batches as KRaft writes them), `ControlRecordType`,
    `control_record_key` / `control_record_type`, `TimestampType`, `Compression`.
Reading (`kraftlake.logformat.reader`)
    `BatchReader`, `read_batches`, `recover_batches`, `iter_file_batches`, `read_file_batches`,
    `recover_file_batches`, `truncate_to_valid`, `RecoveryReport` (``recover=True`` = Kafka's log recovery).
Files
    segments and `SegmentedLog` (append, roll, flush, truncate, delete below), `MetadataLogDir` (a whole
    ``__cluster_metadata-0``), snapshots (`SnapshotId`, `write_snapshot`, `read_snapshot`), ``quorum-state``
    (`QuorumStateFile`), ``leader-epoch-checkpoint`` (`EpochEntry`), ``meta.properties`` (`MetaProperties`),
    ``partition.metadata``.
Errors (`kraftlake.logformat.errors`)
    `LogFormatError` and its subclasses; each names the source, byte position and base offset.
"""

from __future__ import annotations

from kraftlake.logformat.batch import (
    HEADER_SIZE,
    MAGIC,
    ControlRecordType,
    Record,
    RecordBatch,
    TimestampType,
    build_control_batch,
    build_data_batch,
    control_record_key,
    control_record_type,
    decode_batch,
    encode_batch,
    encode_record,
    reencode,
)
from kraftlake.logformat.checkpoint_file import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    read_leader_epoch_checkpoint,
    read_offset_checkpoint,
    write_leader_epoch_checkpoint,
    write_offset_checkpoint,
)
from kraftlake.logformat.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, Compression, compress, decompress
from kraftlake.logformat.errors import (
    BadMagicError,
    CompressionError,
    CorruptBatchError,
    CorruptRecordError,
    CrcMismatchError,
    DecompressionLimitError,
    FileAccessError,
    LogFormatError,
    MalformedFileError,
    RecordCountMismatchError,
    SegmentError,
    SnapshotFormatError,
    TruncatedBatchError,
)
from kraftlake.logformat.framing import (
    BatchHeader,
    batch_header,
    scan_batch_headers,
    scan_file_headers,
)
from kraftlake.logformat.logdir import METADATA_PARTITION_DIR, MetadataLogDir
from kraftlake.logformat.properties import (
    META_PROPERTIES_FILE,
    METADATA_TOPIC_ID,
    PARTITION_METADATA_FILE,
    MetaProperties,
    read_meta_properties,
    read_partition_metadata,
    write_meta_properties,
    write_partition_metadata,
)
from kraftlake.logformat.quorum_state import (
    QUORUM_STATE_FILE,
    QuorumStateFile,
    read_quorum_state,
    write_quorum_state,
)
from kraftlake.logformat.reader import (
    BatchReader,
    RecoveryReport,
    iter_file_batches,
    read_batches,
    read_file_batches,
    recover_batches,
    recover_file_batches,
    truncate_to_valid,
)
from kraftlake.logformat.segment import (
    DEFAULT_SEGMENT_BYTES,
    BatchLocation,
    Segment,
    SegmentedLog,
    list_segments,
    parse_segment_filename,
    segment_filename,
)
from kraftlake.logformat.snapshot import (
    BOOTSTRAP_FILE,
    SnapshotId,
    check_snapshot_batches,
    iter_snapshot,
    iter_valid_snapshot,
    list_snapshots,
    read_snapshot,
    snapshot_path,
    write_snapshot,
    write_snapshot_file,
)

__all__ = [
    "BOOTSTRAP_FILE",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "DEFAULT_SEGMENT_BYTES",
    "HEADER_SIZE",
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "MAGIC",
    "METADATA_PARTITION_DIR",
    "METADATA_TOPIC_ID",
    "META_PROPERTIES_FILE",
    "PARTITION_METADATA_FILE",
    "QUORUM_STATE_FILE",
    "BadMagicError",
    "BatchHeader",
    "BatchLocation",
    "BatchReader",
    "Compression",
    "CompressionError",
    "ControlRecordType",
    "CorruptBatchError",
    "CorruptRecordError",
    "CrcMismatchError",
    "DecompressionLimitError",
    "EpochEntry",
    "FileAccessError",
    "LogFormatError",
    "MalformedFileError",
    "MetaProperties",
    "MetadataLogDir",
    "QuorumStateFile",
    "Record",
    "RecordBatch",
    "RecordCountMismatchError",
    "RecoveryReport",
    "Segment",
    "SegmentError",
    "SegmentedLog",
    "SnapshotFormatError",
    "SnapshotId",
    "TimestampType",
    "TruncatedBatchError",
    "batch_header",
    "build_control_batch",
    "build_data_batch",
    "check_snapshot_batches",
    "compress",
    "control_record_key",
    "control_record_type",
    "decode_batch",
    "decompress",
    "encode_batch",
    "encode_record",
    "iter_file_batches",
    "iter_snapshot",
    "iter_valid_snapshot",
    "list_segments",
    "list_snapshots",
    "parse_segment_filename",
    "read_batches",
    "read_file_batches",
    "read_leader_epoch_checkpoint",
    "read_meta_properties",
    "read_offset_checkpoint",
    "read_partition_metadata",
    "read_quorum_state",
    "read_snapshot",
    "recover_batches",
    "recover_file_batches",
    "reencode",
    "scan_batch_headers",
    "scan_file_headers",
    "segment_filename",
    "snapshot_path",
    "truncate_to_valid",
    "write_leader_epoch_checkpoint",
    "write_meta_properties",
    "write_offset_checkpoint",
    "write_partition_metadata",
    "write_quorum_state",
    "write_snapshot",
    "write_snapshot_file",
]
