"""Records as Kafka's generated ``JsonConverter`` writes them (what ``kafka-dump-log`` prints).

Rules of ``JsonConverterGenerator.generateWrite``: fields in schema order with lowerCamel names; a field not
in the version is left out; a tagged field is written only when it differs from its default; uuids print in
base64url, bytes in standard base64 (Jackson's default variant), float64 as Java's ``Double.toString``.
"""

from __future__ import annotations

import base64
import math
from decimal import Decimal
from typing import Any

from kraftlake.protocol.codegen import Record
from kraftlake.protocol.control import ControlRecordType
from kraftlake.protocol.messages import spec_of
from kraftlake.protocol.spec import StructSpec


class JavaDouble(float):
    """A float that :func:`dumps` prints as Java's ``Double.toString`` does (``1.0E7``, ``0.001``)."""

    __slots__ = ()


def _struct_json(spec: StructSpec, record: Record, version: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for f, value in zip(spec.fields, record, strict=True):
        if version not in f.versions:
            continue
        if f.tagged_in(version) and value == f.default and not (f.struct is not None and not f.is_array):
            continue
        node[f.json_name] = _value_json(f.base_type, f.struct, f.is_array, value, version)
    return node


def _value_json(base: str, struct: StructSpec | None, is_array: bool, value: Any, version: int) -> Any:
    if value is None:
        return None
    if is_array:
        return [_value_json(base, struct, False, v, version) for v in value]
    if struct is not None:
        return _struct_json(struct, value, version)
    if base == "bytes":
        return base64.b64encode(value).decode("ascii")
    if base == "float64":
        return JavaDouble(value)
    return value


def record_data(record: Record, version: int) -> dict[str, Any]:
    """The ``data`` object of a record (metadata or control) at ``version``."""
    return _struct_json(spec_of(record).struct, record, version)


def to_kafka_json(record: Record, version: int) -> dict[str, Any]:
    """``{"type": "PARTITION_CHANGE_RECORD", "version": 0, "data": {...}}`` as dump-log prints a payload."""
    spec = spec_of(record)
    return {"type": spec.record_type_name, "version": version, "data": record_data(record, version)}


#: The label dump-log prints before a control record's JSON (``DumpLogSegments``).
CONTROL_LABELS: dict[int, str] = {
    ControlRecordType.LEADER_CHANGE: "LeaderChange:",
    ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeader",
    ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooter",
    ControlRecordType.KRAFT_VERSION: "KRaftVersion",
    ControlRecordType.KRAFT_VOTERS: "KRaftVoters",
}


def control_to_kafka_json(record: Record, version: int = 0) -> dict[str, Any]:
    """A control record's JSON object as dump-log prints it after its label (its body read at ``version``)."""
    return record_data(record, version)


def java_double(value: float) -> str:
    """Java's ``Double.toString``: plain between 1e-3 and 1e7, else ``d.dddE±n``; shortest digits."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    _, digits, exp = Decimal(repr(abs(value))).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    # exponent of the first digit in scientific notation
    sci = len(digits) + int(exp) - 1
    a = abs(value)
    if 1e-3 <= a < 1e7:
        if sci >= 0:
            intpart = ds[: sci + 1].ljust(sci + 1, "0")
            frac = ds[sci + 1:] or "0"
        else:
            intpart = "0"
            frac = "0" * (-sci - 1) + ds
        return f"{sign}{intpart}.{frac}"
    frac = ds[1:] or "0"
    return f"{sign}{ds[0]}.{frac}E{sci}"


def _escape(s: str) -> str:
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20:
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}.get(ch, f"\\u{o:04X}"))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dumps(node: Any) -> str:
    """Serialize like Jackson's compact writer: no spaces, non-ASCII kept, doubles as Java prints them."""
    if node is None:
        return "null"
    if node is True:
        return "true"
    if node is False:
        return "false"
    if isinstance(node, JavaDouble):
        return java_double(float(node))
    if isinstance(node, float):
        return java_double(node)
    if isinstance(node, int):
        return str(node)
    if isinstance(node, str):
        return _escape(node)
    if isinstance(node, dict):
        return "{" + ",".join(f"{_escape(k)}:{dumps(v)}" for k, v in node.items()) + "}"
    if isinstance(node, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in node) + "]"
    raise TypeError(f"cannot serialize {type(node).__name__}")
