"""Generate, from the specs, the record classes and one decoder and encoder per (struct, version).

The decode loop of a log runs these for every record, so they are specialized Python source compiled once
with ``exec``: fixed-width runs of fields are one ``Struct.unpack_from``, one-byte varints are inlined, and
version gating is resolved at generation time instead of at run time.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from kraftlake.protocol import runtime
from kraftlake.protocol.errors import InvalidFieldError
from kraftlake.protocol.spec import FieldSpec, StructSpec
from kraftlake.protocol.versions import Versions

CLASS_MODULE = "kraftlake.protocol.messages"

_FIXED = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "bool": ("?", 1),
    "uuid": ("16s", 16),
}

_VARLEN = ("string", "bytes", "records")

Decoder = Callable[[bytes, int, int], tuple[Any, int]]
Encoder = Callable[[Any, bytearray], None]


class Record(tuple[Any, ...]):
    """Base of every generated record class: an immutable tuple of the fields, compared by type and value."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _spec: StructSpec
    #: apiKey (metadata records) or control type (control records); None on nested structs.
    _api_key: int | None = None

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((type(self).__qualname__, tuple(self)))

    def __repr__(self) -> str:
        body = ", ".join(f"{n}={v!r}" for n, v in zip(self._fields, self, strict=True))
        return f"{type(self).__qualname__}({body})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), tuple(self)))

    def _asdict(self) -> dict[str, Any]:
        """The fields as a dict (nested records stay records)."""
        return dict(zip(self._fields, self, strict=True))

    def _replace(self, **changes: Any) -> Any:
        """A copy with some fields changed."""
        values = self._asdict()
        unknown = set(changes) - set(values)
        if unknown:
            raise TypeError(f"{type(self).__qualname__} has no fields {sorted(unknown)}")
        values.update(changes)
        return type(self)(**values)


def _rebuild(cls: type, values: tuple[Any, ...]) -> Any:
    return tuple.__new__(cls, values)


def make_class(struct_spec: StructSpec, nested: dict[str, type]) -> type:
    """Build the record class of one struct; ``nested`` holds the classes of its nested structs."""
    ns: dict[str, Any] = {"_tnew": tuple.__new__, "_tuple": tuple}
    params: list[str] = []
    values: list[str] = []
    for i, f in enumerate(struct_spec.fields):
        # a struct's default is its all-defaults instance
        default = nested[f.struct.qualname]() if f.struct is not None and not f.is_array else f.default
        ns[f"_D{i}"] = default
        params.append(f"{f.attr}=_D{i}")
        values.append(f"({f.attr} if {f.attr} is None else _tuple({f.attr}))" if f.is_array else f.attr)
    name = struct_spec.name
    sig = ", ".join(["cls", "*", *params]) if params else "cls"
    tup = "(" + "".join(v + ", " for v in values) + ")"
    src = f"def __new__({sig}):\n    return _tnew(cls, {tup})\n"
    exec(compile(src, f"<kraftlake class {struct_spec.qualname}>", "exec"), ns)
    body: dict[str, Any] = {
        "__slots__": (),
        "__new__": ns["__new__"],
        "_fields": tuple(f.attr for f in struct_spec.fields),
        "_spec": struct_spec,
        "__module__": CLASS_MODULE,
        "__qualname__": struct_spec.qualname,
        "__doc__": f"Kafka's {struct_spec.qualname}.",
    }
    for i, f in enumerate(struct_spec.fields):
        body[f.attr] = property(itemgetter(i), doc=f.about)
    for sub in nested.values():
        if sub.__qualname__.rsplit(".", 1)[0] == struct_spec.qualname:
            body[sub.__name__] = sub
    return type(name, (Record,), body)


# Uuid arrays by their raw bytes, read by the generated decoders with one ``dict.get``: a partition's
# directories repeat across its records. Arrays of up to 8 uuids, at most 16k of them (2 MB of keys).
_UUID_ARRAY_CACHE: dict[bytes, tuple[str, ...]] = {}
UUID_ARRAY_CACHE_MAX_LEN = 8
_UUID_ARRAY_CACHE_MAX = 1 << 14


def _uuid_tuple(buf: bytes, start: int, end: int) -> tuple[str, ...]:
    raw = bytes(buf[start:end])
    out = tuple(runtime.uuid_str(raw[i : i + 16]) for i in range(0, len(raw), 16))
    if len(_UUID_ARRAY_CACHE) < _UUID_ARRAY_CACHE_MAX:
        _UUID_ARRAY_CACHE[raw] = out
    return out


class _Emitter:
    """Accumulates the source of one module of generated functions and the constants they use."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {
            "_tnew": tuple.__new__,
            "_uv": runtime.read_uvarint,
            "_uvb": runtime.uvarint_bytes,
            "_uuid": runtime.uuid_str,
            "_uuidb": runtime.uuid_bytes,
            "_past": runtime.past_end,
            "_nullerr": runtime.null_in_non_nullable,
            "_strerr": runtime.bad_string_length,
            "_tagerr": runtime.tagged_size_mismatch,
            "_unsup": runtime.write_unsupported,
            "_wnull": runtime.write_null,
            "_encstr": runtime.encode_string,
            "_i32a": runtime.int32_array,
            "_SUV": runtime.SMALL_UVARINTS,
            "_InvalidField": InvalidFieldError,
            "_tuple": tuple,
            "_bytes": bytes,
            "_len": len,
            "_range": range,
            "_type": type,
            "_I32A": runtime.INT32_ARRAYS,
            "_U16A": runtime.UUID_ARRAYS,
            "_u16a": runtime.uuid_array,
            "_ucget": runtime.UUID_CACHE.get,
            "_I32AS": (None, *runtime.INT32_ARRAYS[:64]),
            "_uacget": _UUID_ARRAY_CACHE.get,
            "_uarr": _uuid_tuple,
        }
        self._consts: dict[Any, str] = {}
        self.counter = 0

    def const(self, value: Any) -> str:
        key = (type(value), value) if isinstance(value, (int, float, str, bytes, bool)) else id(value)
        name = self._consts.get(key)
        if name is None:
            name = f"_K{len(self._consts)}"
            self._consts[key] = name
            self.ns[name] = value
        return name

    def temp(self) -> str:
        self.counter += 1
        return f"_t{self.counter}"


def _uvarint_read(e: _Emitter, out: list[str], ind: str, var: str) -> None:
    out.append(f"{ind}{var} = buf[pos]")
    out.append(f"{ind}if {var} < 128: pos += 1")
    out.append(f"{ind}else: {var}, pos = _uv(buf, pos)")


def _fast_length_path(
    e: _Emitter, out: list[str], ind: str, f: FieldSpec, var: str, bound: str, label: str, n: str
) -> bool:
    """Emit the common case of a string, bytes, int32 array or uuid array: a non-null one-byte length.

    The length varint, the null test, the ``- 1`` and the size table lookup fold into one range test on the
    first byte (``n`` is then length + 1); the errors raised are the general path's, with the same arguments.
    Returns False for fields without a fast path (struct and string arrays: the per-element work dominates).
    """
    base = f.base_type
    end = e.temp()
    if not f.is_array and base in ("string", "bytes"):
        out.append(f"{ind}{n} = buf[pos]")
        out.append(f"{ind}if 0 < {n} < 128:")
        out.append(f"{ind}    {end} = pos + {n}")
        if base == "string":
            out.append(f"{ind}    if {end} > {bound}: raise _strerr({label}, pos + 1, {n} - 1, {bound})")
            out.append(f"{ind}    {var} = buf[pos + 1:{end}].decode()")
        else:
            out.append(f"{ind}    if {end} > {bound}: raise _past({label}, pos + 1, {n} - 1, {bound})")
            out.append(f"{ind}    {var} = buf[pos + 1:{end}]")
        out.append(f"{ind}    pos = {end}")
        return True
    if f.is_array and base == "int32":
        out.append(f"{ind}{n} = buf[pos]")
        out.append(f"{ind}if 0 < {n} < 65:")
        out.append(f"{ind}    {end} = pos + 4 * {n} - 3")
        out.append(f"{ind}    if {end} > {bound}: raise _past({label}, pos + 1, 4 * ({n} - 1), {bound})")
        # _I32AS[n]: the Struct of n - 1 int32s
        out.append(f"{ind}    {var} = _I32AS[{n}].unpack_from(buf, pos + 1)")
        out.append(f"{ind}    pos = {end}")
        return True
    if f.is_array and base == "uuid":
        out.append(f"{ind}{n} = buf[pos]")
        out.append(f"{ind}if 0 < {n} < {UUID_ARRAY_CACHE_MAX_LEN + 2}:")
        out.append(f"{ind}    {end} = pos + 16 * {n} - 15")
        out.append(f"{ind}    if {end} > {bound}: raise _past({label}, pos + 1, 16 * ({n} - 1), {bound})")
        # Uuid arrays repeat (a partition's directories): one cache lookup by the raw bytes.
        out.append(f"{ind}    {var} = _uacget(buf[pos + 1:{end}]) or _uarr(buf, pos + 1, {end})")
        out.append(f"{ind}    pos = {end}")
        return True
    return False


def _decode_value(
    e: _Emitter,
    out: list[str],
    ind: str,
    f: FieldSpec,
    var: str,
    version: int,
    bound: str,
    struct_decoders: dict[tuple[str, int], str],
    flexible: bool = True,
) -> None:
    """Emit code reading one (non-tagged-framing) value of field ``f`` into ``var``.

    ``flexible`` is whether the message version is flexible: lengths are then compact unsigned varints (length
    + 1, 0 for null); otherwise classic signed int16 (strings) or int32 (bytes, arrays) lengths, -1 for null.
    """
    label = e.const(f.name)
    nullable = f.nullable_in(version)
    base = f.base_type
    fx = f.flexible_in(version, flexible)
    if f.is_array or base in _VARLEN:
        n = e.temp()
        if fx and _fast_length_path(e, out, ind, f, var, bound, label, n):
            # The general code below becomes the else branch of the one-byte-length fast path.
            out.append(f"{ind}else:")
            ind += "    "
        ind2 = ind + "    "
        if fx:
            _uvarint_read(e, out, ind, n)
            out.append(f"{ind}if {n} == 0:")
            out.append(f"{ind}    {var} = None" if nullable else f"{ind}    raise _nullerr({label}, pos)")
            out.append(f"{ind}else:")
            out.append(f"{ind2}{n} -= 1")
        else:
            size = 2 if base == "string" and not f.is_array else 4
            st = e.const(struct.Struct(">h" if size == 2 else ">i"))
            out.append(f"{ind}if pos + {size} > {bound}: raise _past({label}, pos, {size}, {bound})")
            out.append(f"{ind}{n}, = {st}.unpack_from(buf, pos)")
            out.append(f"{ind}pos += {size}")
            out.append(f"{ind}if {n} < 0:")
            out.append(f"{ind}    {var} = None" if nullable else f"{ind}    raise _nullerr({label}, pos)")
            out.append(f"{ind}else:")
        if not f.is_array:
            end = e.temp()
            out.append(f"{ind2}{end} = pos + {n}")
            if base == "string":
                out.append(
                    f"{ind2}if {end} > {bound} or {n} > 32767: raise _strerr({label}, pos, {n}, {bound})"
                )
                out.append(f"{ind2}{var} = buf[pos:{end}].decode()")
            else:  # bytes, records
                out.append(f"{ind2}if {end} > {bound}: raise _past({label}, pos, {n}, {bound})")
                out.append(f"{ind2}{var} = buf[pos:{end}]")
            out.append(f"{ind2}pos = {end}")
            return
        if base in _FIXED and base != "uuid":
            fmt, size = _FIXED[base]
            end = e.temp()
            out.append(f"{ind2}{end} = pos + {size} * {n}")
            out.append(f"{ind2}if {end} > {bound}: raise _past({label}, pos, {size} * {n}, {bound})")
            if base == "int32":
                out.append(f"{ind2}{var} = (_I32A[{n}] if {n} < 64 else _i32a({n})).unpack_from(buf, pos)")
            else:
                st = e.const(struct.Struct(">" + fmt))
                out.append(
                    f"{ind2}{var} = _tuple({st}.unpack_from(buf, p)[0] for p in _range(pos, {end}, {size}))"
                )
            out.append(f"{ind2}pos = {end}")
            return
        if base == "uuid":
            end = e.temp()
            out.append(f"{ind2}{end} = pos + 16 * {n}")
            out.append(f"{ind2}if {end} > {bound}: raise _past({label}, pos, 16 * {n}, {bound})")
            raws = e.temp()
            out.append(f"{ind2}{raws} = (_U16A[{n}] if {n} < 64 else _u16a({n})).unpack_from(buf, pos)")
            # Uuids repeat (topic ids, directory ids): the C-level cache lookup avoids a Python call per uuid.
            out.append(f"{ind2}{var} = _tuple(map(_ucget, {raws}))")
            out.append(f"{ind2}if None in {var}: {var} = _tuple(map(_uuid, {raws}))")
            out.append(f"{ind2}pos = {end}")
            return
        # Elements of at least one byte each: a count beyond the remaining bytes is rejected before any
        # allocation, which bounds memory on hostile input.
        out.append(f"{ind2}if {n} > {bound} - pos: raise _past({label}, pos, {n}, {bound})")
        items = e.temp()
        out.append(f"{ind2}{items} = []")
        out.append(f"{ind2}for _ in _range({n}):")
        elem = e.temp()
        ind3 = ind2 + "    "
        if f.struct is not None:
            fn = struct_decoders[(f.struct.qualname, version)]
            out.append(f"{ind3}{elem}, pos = {fn}(buf, pos, {bound})")
        else:  # string elements
            sub = FieldSpec(
                **{
                    **f.__dict__,
                    "is_array": False,
                    "kafka_type": base,
                    "nullable_versions": f.nullable_versions.__class__(1, 0),
                }
            )
            _decode_value(e, out, ind3, sub, elem, version, bound, struct_decoders, flexible)
        out.append(f"{ind3}{items}.append({elem})")
        out.append(f"{ind2}{var} = _tuple({items})")
        return
    if f.struct is not None:
        fn = struct_decoders[(f.struct.qualname, version)]
        out.append(f"{ind}{var}, pos = {fn}(buf, pos, {bound})")
        return
    fmt, size = _FIXED[base]
    st = e.const(struct.Struct(">" + fmt))
    out.append(f"{ind}if pos + {size} > {bound}: raise _past({label}, pos, {size}, {bound})")
    out.append(f"{ind}{var}, = {st}.unpack_from(buf, pos)")
    out.append(f"{ind}pos += {size}")
    if base == "uuid":
        out.append(f"{ind}{var} = _ucget({var}) or _uuid({var})")


def gen_decoder(
    e: _Emitter,
    s: StructSpec,
    version: int,
    fn: str,
    cls_const: str,
    struct_decoders: dict[tuple[str, int], str],
    flexible: bool = True,
) -> None:
    out = [f"def {fn}(buf, pos, end):"]
    ind = "    "
    body = [(i, f) for i, f in enumerate(s.fields) if version in f.versions and not f.tagged_in(version)]
    tagged = sorted(
        ((i, f) for i, f in enumerate(s.fields) if version in f.versions and f.tagged_in(version)),
        key=lambda x: x[1].tag or 0,
    )
    k = 0
    while k < len(body):
        # Group consecutive fixed-width fields into one unpack.
        run = []
        while k < len(body) and not body[k][1].is_array and body[k][1].base_type in _FIXED:
            run.append(body[k])
            k += 1
        if run:
            fmt = ">" + "".join(_FIXED[f.base_type][0] for _, f in run)
            size = struct.calcsize(fmt)
            st = e.const(struct.Struct(fmt))
            names = e.const(" ".join(f.name for _, f in run))
            out.append(f"{ind}if pos + {size} > end: raise _past({names}, pos, {size}, end)")
            out.append(f"{ind}{''.join(f'f{i}, ' for i, _ in run)}= {st}.unpack_from(buf, pos)")
            out.append(f"{ind}pos += {size}")
            for i, f in run:
                if f.base_type == "uuid":
                    out.append(f"{ind}f{i} = _ucget(f{i}) or _uuid(f{i})")
            continue
        i, f = body[k]
        k += 1
        _decode_value(e, out, ind, f, f"f{i}", version, "end", struct_decoders, flexible)
    for i, _ in tagged:
        out.append(f"{ind}f{i} = _D{i}")
    if not flexible:
        # classic versions have no tagged fields section
        values = [f"f{i}" if version in f.versions else f"_D{i}" for i, f in enumerate(s.fields)]
        out.append(f"{ind}return _tnew({cls_const}, ({''.join(v + ', ' for v in values)})), pos")
        e.lines.extend(out)
        return
    # Tagged fields: almost always none, so the count byte is read and tested once, its varint slow path and
    # the loop live under that test.
    out.append(f"{ind}nt = buf[pos]")
    out.append(f"{ind}pos += 1")
    out.append(f"{ind}if nt:")
    out.append(f"{ind}    if nt > 127: nt, pos = _uv(buf, pos - 1)")
    out.append(f"{ind}    while nt:")
    ind2 = ind + "        "
    _uvarint_read(e, out, ind2, "tag")
    _uvarint_read(e, out, ind2, "size")
    out.append(f"{ind2}te = pos + size")
    out.append(f"{ind2}if te > end: raise _past('tagged field %d' % tag, pos, size, end)")
    first = True
    for i, f in tagged:
        out.append(f"{ind2}{'if' if first else 'elif'} tag == {f.tag}:")
        first = False
        out.append(f"{ind2}    ts = pos")
        _decode_value(e, out, ind2 + "    ", f, f"f{i}", version, "te", struct_decoders)
        out.append(f"{ind2}    if pos != te: raise _tagerr(tag, ts, size, pos - ts)")
    if tagged:
        out.append(f"{ind2}else:")
        out.append(f"{ind2}    pos = te")  # an unknown tag: Kafka keeps it aside, we skip it
    else:
        out.append(f"{ind2}pos = te")
    out.append(f"{ind2}nt -= 1")
    values = []
    for i, _ in enumerate(s.fields):
        present = version in s.fields[i].versions
        values.append(f"f{i}" if present else f"_D{i}")
    out.append(f"{ind}return _tnew({cls_const}, ({''.join(v + ', ' for v in values)})), pos")
    e.lines.extend(out)


def _encode_value(
    e: _Emitter,
    out: list[str],
    ind: str,
    f: FieldSpec,
    var: str,
    version: int,
    w: str,
    struct_encoders: dict[tuple[str, int], str],
    struct_classes: dict[str, str],
    flexible: bool = True,
) -> None:
    label = e.const(f.name)
    nullable = f.nullable_in(version)
    base = f.base_type
    if f.is_array or base in _VARLEN:
        if f.flexible_in(version, flexible):
            null = "b'\\x00'"

            def length(x: str) -> str:
                return f"_uvb({x} + 1)"
        else:
            st = e.const(struct.Struct(">h" if base == "string" and not f.is_array else ">i"))
            null = f"{st}.pack(-1)"

            def length(x: str) -> str:
                return f"{st}.pack({x})"

        out.append(f"{ind}if {var} is None:")
        out.append(f"{ind}    {w} += {null}" if nullable else f"{ind}    raise _wnull({label})")
        out.append(f"{ind}else:")
        ind2 = ind + "    "
        if base == "string" and not f.is_array:
            b = e.temp()
            out.append(f"{ind2}{b} = _encstr({var}, {label})")
            out.append(f"{ind2}{w} += {length(f'_len({b})')}")
            out.append(f"{ind2}{w} += {b}")
            return
        if base in ("bytes", "records"):
            out.append(f"{ind2}{w} += {length(f'_len({var})')}")
            out.append(f"{ind2}{w} += {var}")
            return
        out.append(f"{ind2}{w} += {length(f'_len({var})')}")
        if base == "int32":
            out.append(f"{ind2}{w} += _i32a(_len({var})).pack(*{var})")
            return
        elem = e.temp()
        out.append(f"{ind2}for {elem} in {var}:")
        sub = FieldSpec(
            **{
                **f.__dict__,
                "is_array": False,
                "kafka_type": base,
                "nullable_versions": f.nullable_versions.__class__(1, 0),
            }
        )
        _encode_value(e, out, ind2 + "    ", sub, elem, version, w, struct_encoders, struct_classes, flexible)
        return
    if f.struct is not None:
        cls = struct_classes[f.struct.qualname]
        out.append(
            f"{ind}if _type({var}) is not {cls}: raise _InvalidField("
            f"'field %s: expected %s, got %r' % ({label}, {cls}.__qualname__, {var}))"
        )
        out.append(f"{ind}{struct_encoders[(f.struct.qualname, version)]}({var}, {w})")
        return
    fmt, _ = _FIXED[base]
    st = e.const(struct.Struct(">" + fmt))
    if base == "uuid":
        out.append(f"{ind}{w} += _uuidb({var}, {label})")
    else:
        out.append(f"{ind}{w} += {st}.pack({var})")


def gen_encoder(
    e: _Emitter,
    s: StructSpec,
    version: int,
    fn: str,
    message: str,
    struct_encoders: dict[tuple[str, int], str],
    struct_classes: dict[str, str],
    flexible: bool = True,
) -> None:
    out = [f"def {fn}(o, w):"]
    ind = "    "
    n = len(s.fields)
    if n:
        out.append(f"{ind}{''.join(f'f{i}, ' for i in range(n))}= o")
    msg = e.const(message)
    for i, f in enumerate(s.fields):
        if version not in f.versions:
            out.append(f"{ind}if f{i} != _D{i}: raise _unsup({msg}, {e.const(f.name)}, {version})")
    for i, f in enumerate(s.fields):
        if version in f.versions and not f.tagged_in(version):
            _encode_value(e, out, ind, f, f"f{i}", version, "w", struct_encoders, struct_classes, flexible)
    if not flexible:
        e.lines.extend(out)
        return
    tagged = sorted(
        ((i, f) for i, f in enumerate(s.fields) if version in f.versions and f.tagged_in(version)),
        key=lambda x: x[1].tag or 0,
    )
    if not tagged:
        out.append(f"{ind}w.append(0)")
    else:
        out.append(f"{ind}tags = []")
        for i, f in tagged:
            out.append(f"{ind}if f{i} != _D{i}:")
            out.append(f"{ind}    tb = bytearray()")
            _encode_value(e, out, ind + "    ", f, f"f{i}", version, "tb", struct_encoders, struct_classes)
            out.append(f"{ind}    tags.append(({f.tag}, tb))")
        out.append(f"{ind}w += _uvb(_len(tags))")
        out.append(f"{ind}for tag, tb in tags:")
        out.append(f"{ind}    w += _uvb(tag)")
        out.append(f"{ind}    w += _uvb(_len(tb))")
        out.append(f"{ind}    w += tb")
    e.lines.extend(out)


def generate_codecs(
    structs: list[StructSpec],
    versions: range,
    classes: dict[str, type],
    message: str,
    flexible_versions: Versions | None = None,
) -> tuple[dict[int, Decoder], dict[int, Encoder], str]:
    """Compile the decoders and encoders of every struct of one message, for each version in ``versions``.

    ``flexible_versions`` are the message's flexible versions (None: every version is flexible, as for records).

    Returns the top-level struct's decoder and encoder per version, and the generated source (for debugging).
    """
    e = _Emitter()
    decs: dict[tuple[str, int], str] = {}
    encs: dict[tuple[str, int], str] = {}
    cls_names: dict[str, str] = {}
    for idx, s in enumerate(structs):
        cls_names[s.qualname] = e.const(classes[s.qualname])
        for v in versions:
            decs[(s.qualname, v)] = f"_dec{idx}_v{v}"
            encs[(s.qualname, v)] = f"_enc{idx}_v{v}"
    # Nested structs first so that names resolve when the module runs (they are looked up at call time
    # anyway, but a stable order keeps the source readable).
    for idx in reversed(range(len(structs))):
        s = structs[idx]
        cls = classes[s.qualname]
        for v in versions:
            e.lines.append(f"# {s.qualname} v{v}")
            # Defaults are per struct: bind them under struct-specific names.
            pre = len(e.lines)
            flexible = flexible_versions is None or v in flexible_versions
            gen_decoder(e, s, v, decs[(s.qualname, v)], cls_names[s.qualname], decs, flexible)
            gen_encoder(e, s, v, encs[(s.qualname, v)], message, encs, cls_names, flexible)
            for i, f in enumerate(s.fields):
                default = f.default
                if f.struct is not None and not f.is_array:
                    default = getattr(cls, f.attr).fget(cls())
                name = e.const(default)
                token = re.compile(rf"\b_D{i}\b")
                for j in range(pre, len(e.lines)):
                    e.lines[j] = token.sub(name, e.lines[j])
    src = "\n".join(e.lines) + "\n"
    exec(compile(src, f"<kraftlake codec {message}>", "exec"), e.ns)
    top = structs[0].qualname
    return ({v: e.ns[decs[(top, v)]] for v in versions}, {v: e.ns[encs[(top, v)]] for v in versions}, src)
