"""Records as Kafka's generated ``JsonConverter`` writes them (what ``kafka-dump-log`` prints).

Rules of ``JsonConverterGenerator.generateWrite``: fields in schema order with lowerCamel names; a field not
in the version is left out; a tagged field is written only when it differs from its default; uuids print in
base64url, bytes in standard base64 (Jackson's default variant), float64 as Java's ``Double.toString``.

Two writers of the same text: :func:`record_data` + :func:`dumps` (a dict, then Jackson's compact form), the
reference, and :func:`data_writer`, one function per (message, version) generated from the specs as the codec
is, which formats straight from the record's values (what ``kraftlake decode`` prints a log with).
"""

from __future__ import annotations

import base64
import binascii
import json.encoder
import math
from collections.abc import Callable
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from kraftlake.protocol.codegen import Record
from kraftlake.protocol.control import ControlRecordType
from kraftlake.protocol.messages import spec_of
from kraftlake.protocol.spec import INT_RANGES, FieldSpec, StructSpec


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
    """Java's ``Double.toString`` (JDK 19+'s specification): plain between 1e-3 and 1e7, else ``d.dddE±n``;
    the shortest digits, or of the 1- and 2-digit ones the closest. JDK 17's older algorithm prints more digits
    for a few values (``1.0E23`` as ``9.999999999999999E22``, ``1.0E-323`` for ``9.9E-324``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    _, digits, exp = Decimal(repr(abs(value))).as_tuple()
    if len(digits) == 1:
        # Java picks among the 1- and 2-digit decimals that round to the value the one closest to it: only
        # the smallest subnormals have a 2-digit one other than d.0 (Double.MIN_VALUE prints 4.9E-324)
        exact = Decimal(abs(value))
        two = exact.quantize(Decimal(1).scaleb(exact.adjusted() - 1), rounding=ROUND_HALF_EVEN)
        if float(two) == abs(value) and abs(two - exact) < abs(Decimal(repr(abs(value))) - exact):
            _, digits, exp = two.as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    # exponent of the first digit in scientific notation
    sci = len(digits) + int(exp) - 1
    a = abs(value)
    if 1e-3 <= a < 1e7:
        if sci >= 0:
            intpart = ds[: sci + 1].ljust(sci + 1, "0")
            frac = ds[sci + 1 :] or "0"
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
            out.append(
                {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}.get(ch, f"\\u{o:04X}")
            )
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


# --- generated writers -----------------------------------------------------------------------------------------

DataWriter = Callable[[Record], str]

# The C string encoder of the json module (ensure_ascii off): the same text as Jackson's writer except that it
# spells the \u escapes of control characters in lower-case hex; a writer whose text holds a "\u" (rare: such a
# control character or a literal backslash-u) writes that record again the reference way.
_c_string: Callable[[str], str] = json.encoder.encode_basestring
_WRITERS: dict[tuple[type, int], DataWriter] = {}
_INT_FORMATS = tuple(",".join(["%d"] * n) for n in range(32))
_QUOTE, _OPEN_UUIDS, _CLOSE_UUIDS, _BACKSLASH_U = '"', '["', '"]', "\\u"
_SOURCES: dict[str, str] = {}
_EMITTERS: dict[str, _WriterEmitter] = {}


def _b64_json(value: bytes) -> str:
    return '"' + binascii.b2a_base64(value, newline=False).decode("ascii") + '"'


def _reference_text(record: Record, version: int) -> str:
    return dumps(record_data(record, version))


class _WriterEmitter:
    """The source of one message's writers and the names it uses."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {
            "_c": _c_string,
            "_jd": java_double,
            "_b64": _b64_json,
            "_str": str,
            "_map": map,
            "_CJ": ",".join,
            "_UJ": '","'.join,
            "_TF": ("false", "true"),
            "_slow": _reference_text,
            "_IF": _INT_FORMATS,
            "_len": len,
        }
        self._consts: dict[tuple[type, Any], str] = {}

    def const(self, value: Any) -> str:
        key = (type(value), value)
        name = self._consts.get(key)
        if name is None:
            name = f"_K{len(self._consts)}"
            self._consts[key] = name
            self.ns[name] = value
        return name


def _has_strings(s: StructSpec, version: int) -> bool:
    return any(
        version in f.versions
        and (f.base_type == "string" or (f.struct is not None and _has_strings(f.struct, version)))
        for f in s.fields
    )


def _element_text(e: _WriterEmitter, f: FieldSpec, writers: dict[str, str]) -> tuple[str, bool]:
    """How one element (or the scalar) of ``f`` is written: a function over it, or (True) a bare ``str``-able
    value to be quoted (uuids) or printed as is (integers)."""
    base = f.base_type
    if f.struct is not None:
        return writers[f.struct.qualname], False
    if base in INT_RANGES:
        return "_str", True
    if base == "bool":
        return "_TF.__getitem__", False
    if base == "float64":
        return "_jd", False
    if base == "string":
        return "_c", False
    if base == "bytes":
        return "_b64", False
    if base == "uuid":
        return "", True
    raise NotImplementedError(f"no JSON writer for {f.kafka_type} (field {f.name})")


def _elements_expr(f: FieldSpec, fn: str, var: str) -> str:
    """The elements of array ``var``, comma-separated: short arrays of integers (replicas, ISR) through one
    %-format (faster than a ``str`` call per element), the rest element by element."""
    if f.base_type in INT_RANGES:
        return f"(_IF[_len({var})] % {var} if _len({var}) < {len(_INT_FORMATS)} else _CJ(_map(_str, {var})))"
    return f"_CJ(_map({fn}, {var}))"


def _value_expr(e: _WriterEmitter, f: FieldSpec, var: str, version: int, writers: dict[str, str]) -> str:
    """An expression (names only: it goes inside an f-string) giving the JSON text of ``var``."""
    fn, plain = _element_text(e, f, writers)
    if f.is_array:
        if f.base_type == "uuid":
            # uuids are base64url (no character needs escaping): one join between quotes
            text = f"({e.const(_OPEN_UUIDS)} + _UJ({var}) + {e.const(_CLOSE_UUIDS)} if {var} else {e.const('[]')})"
        else:
            text = f"{e.const('[')} + {_elements_expr(f, fn, var)} + {e.const(']')}"
    elif f.base_type == "uuid":
        text = f"{e.const(_QUOTE)} + {var} + {e.const(_QUOTE)}"
    elif plain:
        text = f"_str({var})"
    else:
        text = f"{fn}({var})"
    if f.nullable_in(version):
        text = f"({e.const('null')} if {var} is None else {text})"
    return text


def _struct_body(e: _WriterEmitter, s: StructSpec, version: int, writers: dict[str, str]) -> tuple[str, bool]:
    """The inside of the f-string writing struct ``s`` at ``version`` (its fields ``f0``, ``f1``... between the
    braces), and whether each piece carries its comma (then the first is cut off afterwards)."""
    present = [(i, f) for i, f in enumerate(s.fields) if version in f.versions]
    # A tagged field is written only when it differs from its default (a single struct always, as the
    # reference does); when the first written field may be left out, every piece carries its comma.
    optional = [f.tagged_in(version) and not (f.struct is not None and not f.is_array) for _, f in present]
    lead_optional = bool(present) and optional[0]
    pieces: list[str] = []
    for k, ((i, f), opt) in enumerate(zip(present, optional, strict=True)):
        key = ("," if k or lead_optional else "") + '"' + f.json_name + '":'
        if opt:
            if f.default is not None and not isinstance(f.default, (int, float, str, bytes, tuple)):
                raise NotImplementedError(f"tagged field {f.name} has a default the writer cannot compare")
            value = _value_expr(e, f, f"f{i}", version, writers)
            pieces.append(
                "{" + f"{e.const(key)} + {value} if f{i} != {e.const(f.default)} else {e.const('')}" + "}"
            )
        elif not f.is_array and f.struct is None and f.base_type in INT_RANGES and not f.nullable_in(version):
            pieces.append(key + "{f" + str(i) + "}")  # an int formats itself inside the f-string
        elif not f.is_array and f.base_type == "uuid" and not f.nullable_in(version):
            pieces.append(key + '"{f' + str(i) + '}"')
        elif not f.is_array and f.base_type == "bool":
            pieces.append(key + "{_TF[f" + str(i) + "]}")
        elif f.is_array and f.base_type != "uuid" and not f.nullable_in(version):
            fn, _ = _element_text(e, f, writers)
            pieces.append(key + "[{" + _elements_expr(f, fn, f"f{i}") + "}]")
        else:
            pieces.append(key + "{" + _value_expr(e, f, f"f{i}", version, writers) + "}")
    return "".join(pieces), lead_optional


def _literal(text: str) -> str:
    """``text`` as the literal part of an f-string."""
    return text.replace("{", "{{").replace("}", "}}")


def _gen_writer(
    e: _WriterEmitter,
    s: StructSpec,
    version: int,
    name: str,
    writers: dict[str, str],
    top: bool,
    wrap: tuple[str, str] | None = None,
) -> list[str]:
    """One writer: ``def name(r) -> str``, the JSON object of struct ``s`` at ``version``; with ``wrap``
    (prefix, suffix), ``def name(r, h) -> str``: ``h + prefix + object + suffix`` in one string."""
    out = [f"def {name}(r{', h' if wrap else ''}):"]
    if s.fields:
        out.append(f"    {''.join(f'f{i}, ' for i in range(len(s.fields)))}= r")
    body, lead_optional = _struct_body(e, s, version, writers)
    head, tail = ("{h}" + _literal(wrap[0]), _literal(wrap[1])) if wrap else ("", "")
    check = top and _has_strings(s, version)
    assign = "t = " if check else "return "
    if lead_optional:
        out.append(f"    t = f{body!r}")
        out.append(f"    {assign}f{head + '{{{t[1:]}}}' + tail!r} if t else f{head + '{{}}' + tail!r}")
    else:
        out.append(f"    {assign}f{head + '{{' + body + '}}' + tail!r}")
    if check:
        # the text of a record with a \u in it (see _c_string) is written again the reference way
        slow = (
            f"h + {e.const(wrap[0])} + _slow(r, {version}) + {e.const(wrap[1])}"
            if wrap
            else f"_slow(r, {version})"
        )
        out.append(f"    if {e.const(_BACKSLASH_U)} in t: return {slow}")
        out.append("    return t")
    return out


def data_writer(cls: type[Record], version: int) -> DataWriter:
    """The generated writer of a message class at ``version``: ``record -> str``, the same text as
    ``dumps(record_data(record, version))`` for a record as the codec decodes it (uuids in base64url)."""
    fn = _WRITERS.get((cls, version))
    if fn is None:
        _generate(cls)
        fn = _WRITERS.get((cls, version))
        if fn is None:
            raise KeyError(f"{cls.__qualname__} has no version {version}")
    return fn


def generated_writer_source(cls: type[Record]) -> str:
    """The Python source of a message's generated writers (for debugging and review)."""
    _generate(cls)
    return _SOURCES[cls.__qualname__]


def _generate(cls: type[Record]) -> None:
    if cls.__qualname__ in _SOURCES:
        return
    spec = spec_of(cls)
    e = _WriterEmitter()
    structs = spec.structs()
    versions = range(spec.valid_versions.lowest, spec.valid_versions.highest + 1)
    for v in versions:
        writers = {s.qualname: f"_w{k}_v{v}" for k, s in enumerate(structs)}
        # nested structs first: a writer refers to the writers of its structs by name at call time anyway,
        # but this order reads top-down in the source
        for k, s in reversed(list(enumerate(structs))):
            e.lines += _gen_writer(e, s, v, writers[s.qualname], writers, top=k == 0)
    source = "\n".join(e.lines) + "\n"
    exec(compile(source, f"<kraftlake json writers {spec.name}>", "exec"), e.ns)
    for v in versions:
        _WRITERS[(cls, v)] = e.ns[f"_w0_v{v}"]
    _SOURCES[cls.__qualname__] = source
    _EMITTERS[cls.__qualname__] = e


LineWriter = Callable[[Record, str], str]
_LINE_WRITERS: dict[tuple[type, int, str, str], LineWriter] = {}


def line_writer(cls: type[Record], version: int, prefix: str, suffix: str) -> LineWriter:
    """``(record, head) -> head + prefix + data + suffix``, ``data`` the text :func:`data_writer` gives, all
    built as one string (``kraftlake decode`` prints a line with one call)."""
    key = (cls, version, prefix, suffix)
    fn = _LINE_WRITERS.get(key)
    if fn is None:
        data_writer(cls, version)
        spec = spec_of(cls)
        e = _EMITTERS[cls.__qualname__]
        writers = {s.qualname: f"_w{k}_v{version}" for k, s in enumerate(spec.structs())}
        name = f"_line{len(_LINE_WRITERS)}"
        source = "\n".join(
            _gen_writer(e, spec.struct, version, name, writers, top=True, wrap=(prefix, suffix))
        )
        exec(compile(source + "\n", f"<kraftlake json line writer {spec.name} v{version}>", "exec"), e.ns)
        fn = _LINE_WRITERS[key] = e.ns[name]
    return fn
