"""Metadata records: the frame serde, Kafka's JSON form, and committed records read from logs.

Arrow and Avro views live in :mod:`kraftlake.records.arrow` and :mod:`kraftlake.records.avro` (imported on
demand, as they pull in pyarrow / fastavro).
"""

from __future__ import annotations

from kraftlake.records.envelope import (
    MetadataRecord,
    control_envelope,
    data_envelope,
    decode_data_envelope,
    typed_control_envelope,
)
from kraftlake.records.errors import RecordDecodeError, RecordsError
from kraftlake.records.kafka_json import control_to_kafka_json, dumps, to_kafka_json
from kraftlake.records.reader import iter_records
from kraftlake.records.serde import (
    decode_metadata_record,
    encode_metadata_record,
    metadata_class,
    metadata_spec,
    spec_by_name,
)

__all__ = [
    "MetadataRecord",
    "RecordDecodeError",
    "RecordsError",
    "control_envelope",
    "control_to_kafka_json",
    "data_envelope",
    "decode_data_envelope",
    "decode_metadata_record",
    "dumps",
    "encode_metadata_record",
    "iter_records",
    "metadata_class",
    "metadata_spec",
    "spec_by_name",
    "to_kafka_json",
    "typed_control_envelope",
]
