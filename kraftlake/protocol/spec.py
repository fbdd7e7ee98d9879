"""``schemas/*.avsc`` loaded as Kafka message specs: the one place that reads the schema files.

Each Avro record schema carries a ``kafka`` annotation (message name, kind, apiKey or control type,
validVersions, flexibleVersions) and each field one with Kafka's field name, type, versions, nullableVersions,
taggedVersions, tag, default, mapKey and about. Everything else (classes, codec, StructTypes, Arrow, Avro export)
is derived from the :class:`MessageSpec` objects built here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import kraftlake
from kraftlake.protocol.errors import SchemaError
from kraftlake.protocol.versions import Versions

#: Kafka's primitive types and the Avro type each maps to.
PRIMITIVES: dict[str, str] = {
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "int64": "long",
    "float64": "double",
    "bool": "boolean",
    "string": "string",
    "bytes": "bytes",
    "uuid": "string",
    "records": "bytes",
}
INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
#: What a schema's ``kafka.kind`` may be: a metadata or control record, or an RPC message or header.
KINDS = ("metadata", "control", "request", "response", "header")
#: Kafka's Uuid.ZERO_UUID as it prints (base64url of 16 zero bytes, unpadded).
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


def snake_case(name: str) -> str:
    """Kafka's ``MessageGenerator.toSnakeCase``: ``KRaftVersion`` -> ``kraft_version``, ``LastKnownElr`` -> ``last_known_elr``."""
    out: list[str] = []
    prev_upper = True
    for ch in name:
        if ch.isupper():
            if not prev_upper:
                out.append("_")
            out.append(ch.lower())
            prev_upper = True
        else:
            out.append(ch)
            prev_upper = False
    return "".join(out)


def lower_camel(name: str) -> str:
    """Kafka's ``FieldSpec.camelCaseName`` (the JSON field name): the first letter lower-cased."""
    return name[:1].lower() + name[1:]


@dataclass(frozen=True, eq=False)
class FieldSpec:
    """One field of a Kafka struct, with the Avro field it came from."""

    name: str
    attr: str
    kafka_type: str
    base_type: str
    is_array: bool
    struct: StructSpec | None
    versions: Versions
    nullable_versions: Versions
    tagged_versions: Versions
    tag: int | None
    default: Any
    default_text: str | None
    map_key: bool
    about: str
    avro: dict[str, Any] = field(repr=False)
    flexible_versions: Versions | None = None
    """Set where the field overrides its message (RequestHeader's ClientId keeps the classic encoding)."""

    @property
    def json_name(self) -> str:
        return lower_camel(self.name)

    def tagged_in(self, version: int) -> bool:
        return version in self.tagged_versions

    def nullable_in(self, version: int) -> bool:
        return version in self.nullable_versions

    def flexible_in(self, version: int, message_flexible: bool) -> bool:
        """Whether the field's value uses the flexible (compact) encoding in a message version."""
        if self.flexible_versions is None:
            return message_flexible
        return message_flexible and version in self.flexible_versions


@dataclass(frozen=True, eq=False)
class StructSpec:
    """A Kafka struct: the top level of a message or a nested (array element or single) struct."""

    name: str
    qualname: str
    versions: Versions
    fields: tuple[FieldSpec, ...]
    avro_fullname: str


@dataclass(frozen=True, eq=False)
class MessageSpec:
    """One Kafka message: a metadata record (with apiKey) or a KRaft control record (with control type)."""

    name: str
    kind: str
    api_key: int | None
    control_type: int | None
    valid_versions: Versions
    flexible_versions: Versions
    struct: StructSpec
    avro: dict[str, Any] = field(repr=False)
    path: Path | Traversable = field(repr=False)

    @property
    def record_type_name(self) -> str:
        """Kafka's ``MetadataRecordType`` constant name, e.g. ``PARTITION_CHANGE_RECORD``."""
        return snake_case(self.name).upper()

    def structs(self) -> list[StructSpec]:
        """Every struct of the message, outermost first, each once."""
        seen: dict[str, StructSpec] = {}

        def walk(s: StructSpec) -> None:
            if s.qualname in seen:
                return
            seen[s.qualname] = s
            for f in s.fields:
                if f.struct is not None:
                    walk(f.struct)

        walk(self.struct)
        return list(seen.values())


def schemas_dir() -> Path | Traversable:
    """The ``schemas/`` directory: beside the package in a checkout, ``kraftlake/_schemas`` in a built wheel.

    The packaged copy is read through ``importlib.resources``: on a Spark cluster the package is imported from
    the ``--py-files`` archive, where there is no directory to glob.
    """
    package = Path(kraftlake.__file__).parent
    checkout = package.parent / "schemas"
    if checkout.is_dir() and any(checkout.glob("*.avsc")):
        return checkout
    packaged = resources.files("kraftlake") / "_schemas"
    if packaged.is_dir() and any(p.name.endswith(".avsc") for p in packaged.iterdir()):
        return packaged
    raise SchemaError(f"no schemas found in {checkout} nor in the package's _schemas")


def schema_files() -> list[Path | Traversable]:
    """Every ``.avsc`` file of :func:`schemas_dir`, by name."""
    return sorted((p for p in schemas_dir().iterdir() if p.name.endswith(".avsc")), key=lambda p: p.name)


def _python_default(ktype: str, is_array: bool, text: str | None, where: str) -> Any:
    if text == "null":
        return None
    if is_array:
        if text not in (None, ""):
            raise SchemaError(f"{where}: array default must be null or absent, got {text!r}")
        return ()
    if ktype in INT_RANGES:
        return int(text, 0) if text else 0
    if ktype == "bool":
        return text == "true"
    if ktype == "float64":
        return float(text) if text else 0.0
    if ktype == "string":
        return text or ""
    if ktype in ("bytes", "records"):
        return b""
    if ktype == "uuid":
        return text or ZERO_UUID
    return None  # a struct: its default is an instance with all defaults, made by the class generator


def _avro_items(avro_type: Any) -> Any:
    """Strip the null branch of a union and the array wrapper from an Avro field type."""
    if isinstance(avro_type, list):
        non_null = [t for t in avro_type if t != "null"]
        if len(non_null) != 1:
            raise SchemaError(f"unexpected union {avro_type!r}")
        avro_type = non_null[0]
    if isinstance(avro_type, dict) and avro_type.get("type") == "array":
        return avro_type["items"], True
    return avro_type, False


def _load_struct(
    avro: dict[str, Any],
    qualname: str,
    namespace: str,
    versions: Versions,
    named: dict[str, StructSpec],
    where: str,
) -> StructSpec:
    ns = avro.get("namespace", namespace)
    fullname = f"{ns}.{avro['name']}"
    fields: list[FieldSpec] = []
    for af in avro["fields"]:
        ann = af.get("kafka")
        if not isinstance(ann, dict):
            raise SchemaError(f"{where}: field {af.get('name')!r} has no kafka annotation")
        ktype: str = ann["type"]
        is_array = ktype.startswith("[]")
        base = ktype[2:] if is_array else ktype
        items, avro_is_array = _avro_items(af["type"])
        if avro_is_array != is_array:
            raise SchemaError(
                f"{where}.{ann['name']}: Avro type and Kafka type {ktype} disagree on arrayness"
            )
        sub: StructSpec | None = None
        if base not in PRIMITIVES:
            if isinstance(items, str):
                if items not in named:
                    raise SchemaError(f"{where}.{ann['name']}: unknown named type {items}")
                sub = named[items]
            else:
                ann_s = items.get("kafka", {})
                # Kafka flattens nested structs into classes of the message itself (VotersRecord.Endpoint).
                sub = _load_struct(
                    items,
                    f"{qualname.split('.')[0]}.{items['name']}",
                    ns,
                    Versions.parse(ann_s.get("versions", ann["versions"])),
                    named,
                    f"{where}.{items['name']}",
                )
                named[sub.avro_fullname] = sub
        elif items != PRIMITIVES[base]:
            raise SchemaError(f"{where}.{ann['name']}: Avro type {items!r} is not the mapping of {base}")
        tag = ann.get("tag")
        tagged = Versions.parse(ann.get("taggedVersions"))
        if (tag is None) != tagged.empty:
            raise SchemaError(f"{where}.{ann['name']}: tag and taggedVersions must come together")
        default_text = ann.get("default")
        nullable = Versions.parse(ann.get("nullableVersions"))
        if default_text == "null" and nullable.empty:
            raise SchemaError(f"{where}.{ann['name']}: default null on a non-nullable field")
        fields.append(
            FieldSpec(
                name=ann["name"],
                attr=af["name"],
                kafka_type=ktype,
                base_type=base,
                is_array=is_array,
                struct=sub,
                versions=Versions.parse(ann["versions"]),
                nullable_versions=nullable,
                tagged_versions=tagged,
                tag=tag,
                default=_python_default(base, is_array, default_text, f"{where}.{ann['name']}"),
                default_text=default_text,
                map_key=bool(ann.get("mapKey", False)),
                about=ann.get("about", ""),
                avro=af,
                flexible_versions=Versions.parse(ann["flexibleVersions"])
                if "flexibleVersions" in ann
                else None,
            )
        )
        if af["name"] != snake_case(ann["name"]):
            raise SchemaError(f"{where}: Avro name {af['name']} is not the snake_case of {ann['name']}")
    return StructSpec(
        name=avro["name"], qualname=qualname, versions=versions, fields=tuple(fields), avro_fullname=fullname
    )


def load_message(path: Path | Traversable) -> MessageSpec:
    """Read one ``.avsc`` file into a :class:`MessageSpec`."""
    try:
        avro = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SchemaError(f"{path}: {exc}") from exc
    ann = avro.get("kafka")
    if not isinstance(ann, dict) or ann.get("name") != avro.get("name"):
        raise SchemaError(f"{path}: missing or inconsistent kafka annotation")
    kind = ann["kind"]
    if kind not in KINDS:
        raise SchemaError(f"{path}: unknown kind {kind!r}")
    valid = Versions.parse(ann["validVersions"])
    flexible = Versions.parse(ann["flexibleVersions"])
    if kind in ("metadata", "control") and (flexible.empty or flexible.lowest > valid.lowest):
        # Every KRaft record is flexible in all its versions; a record schema that says otherwise is wrong.
        raise SchemaError(f"{path}: a record must be flexible in every version")
    struct = _load_struct(avro, avro["name"], avro.get("namespace", ""), valid, {}, avro["name"])
    return MessageSpec(
        name=avro["name"],
        kind=kind,
        api_key=ann.get("apiKey"),
        control_type=ann.get("controlType"),
        valid_versions=valid,
        flexible_versions=flexible,
        struct=struct,
        avro=avro,
        path=path,
    )


@cache
def load_rpcs() -> dict[str, MessageSpec]:
    """Every RPC and header spec under ``schemas/rpc`` by message name (``FetchRequest``, ``RequestHeader``)."""
    rpc_dir = schemas_dir() / "rpc"
    if not rpc_dir.is_dir():
        raise SchemaError(f"no RPC schemas in {rpc_dir}")
    specs = [
        load_message(p) for p in sorted(rpc_dir.iterdir(), key=lambda p: p.name) if p.name.endswith(".avsc")
    ]
    out = {s.name: s for s in specs}
    for s in specs:
        if s.kind == "metadata" or s.kind == "control":
            raise SchemaError(f"{s.path}: a record schema among the RPCs")
    return out


@cache
def load_all() -> tuple[MessageSpec, ...]:
    """Every message under :func:`schemas_dir`, sorted by kind (metadata first) then apiKey / control type."""
    specs = [load_message(p) for p in schema_files()]
    specs.sort(
        key=lambda s: (s.kind != "metadata", s.api_key if s.api_key is not None else s.control_type or 0)
    )
    seen: set[tuple[str, int | None]] = set()
    for s in specs:
        key = (s.kind, s.api_key if s.kind == "metadata" else s.control_type)
        if key in seen:
            raise SchemaError(f"{s.path}: duplicate {key}")
        seen.add(key)
    return tuple(specs)
