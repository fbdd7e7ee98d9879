"""Kafka's JSON message specs converted into kraftlake's annotated Avro schemas (``schemas/*.avsc``).

Kafka ships its message specs (JSON with ``//`` comments) inside its jars: the metadata records in
``kafka-metadata`` (``common/metadata/*.json``), the RPCs and the KRaft control records in ``kafka-clients``
(``common/message/*.json``). ``python -m kraftlake.protocol.kafka_specs JARS_DIR SCHEMAS_DIR`` (``make
schemas``) reads them from the jar cache and writes one ``.avsc`` per metadata and control record into
``SCHEMAS_DIR`` and one per RPC kraftlake speaks into ``SCHEMAS_DIR/rpc``, all in the same annotated form, so
the codec generator builds the RPC codecs exactly as it builds the record codecs. Tests regenerate them and
fail when the files are stale.
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

from kraftlake.protocol.errors import SchemaError
from kraftlake.protocol.spec import PRIMITIVES, snake_case

NAMESPACE = "kraftlake.kafka.rpc"
RECORD_NAMESPACE = "kraftlake.kafka"

CONTROL_TYPES: dict[str, int] = {
    "LeaderChangeMessage": 2,
    "SnapshotHeaderRecord": 3,
    "SnapshotFooterRecord": 4,
    "KRaftVersionRecord": 5,
    "VotersRecord": 6,
}
"""The KRaft control records' specs (``common/message``, spec type ``data``) and their control types (Kafka's
``ControlRecordType``: LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS)."""

RPC_SPEC_NAMES: tuple[str, ...] = (
    "RequestHeader",
    "ResponseHeader",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "VoteRequest",
    "VoteResponse",
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "DescribeQuorumRequest",
    "DescribeQuorumResponse",
    "DescribeClusterRequest",
    "DescribeClusterResponse",
)
"""The Kafka messages kraftlake encodes and decodes: the headers, the KRaft RPCs, what an observer and
``kafka-metadata-quorum`` need, and SASL."""

_KEYS = (
    "name",
    "type",
    "versions",
    "nullableVersions",
    "taggedVersions",
    "tag",
    "default",
    "mapKey",
    "flexibleVersions",
    "entityType",
    "ignorable",
    "about",
)


def strip_comments(text: str) -> str:
    """The JSON of a Kafka spec file without its ``//`` comment lines."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


def _avro_primitive(ktype: str) -> str:
    return "bytes" if ktype == "records" else PRIMITIVES[ktype]


def _avro_default(kfield: dict[str, Any], base: str, is_array: bool) -> Any:
    text = kfield.get("default")
    if text == "null":
        return None
    if is_array:
        return []
    if base in ("int8", "int16", "uint16", "int32", "int64"):
        return int(text, 0) if text else 0
    if base == "bool":
        return text == "true"
    if base == "float64":
        return float(text) if text else 0.0
    if base == "uuid":
        return text or "AAAAAAAAAAAAAAAAAAAAAA"
    if base in ("bytes", "records"):
        return ""
    if base == "string":
        return text or ""
    return None


class _Converter:
    def __init__(self, common: dict[str, dict[str, Any]]) -> None:
        self.common = common
        self.emitted: set[str] = set()

    def struct(
        self, name: str, fields: list[dict[str, Any]], namespace: str, versions: str
    ) -> dict[str, Any]:
        # Kafka flattens nested structs into classes of the message: one namespace per message.
        return {
            "type": "record",
            "name": name,
            "namespace": namespace,
            "kafka": {"name": name, "versions": versions},
            "fields": [self.field(f, namespace) for f in fields],
        }

    def field(self, kf: dict[str, Any], namespace: str) -> dict[str, Any]:
        default = kf.get("default")
        if default is not None and not isinstance(default, str):
            # a few specs write numeric defaults unquoted; Kafka's generator reads them as text
            kf = {**kf, "default": str(default).lower() if isinstance(default, bool) else str(default)}
        ktype: str = kf["type"]
        is_array = ktype.startswith("[]")
        base = ktype[2:] if is_array else ktype
        item: Any
        if base in PRIMITIVES or base == "records":
            item = _avro_primitive(base)
        else:
            sub_fields = kf.get("fields")
            if sub_fields is None:
                common = self.common.get(base)
                if common is None:
                    raise SchemaError(f"field {kf['name']}: unknown struct type {base}")
                if base in self.emitted:
                    item = f"{namespace}.{base}"
                else:
                    self.emitted.add(base)
                    item = self.struct(base, common["fields"], namespace, common["versions"])
            else:
                item = self.struct(base, sub_fields, namespace, kf["versions"])
        avro_type: Any = {"type": "array", "items": item} if is_array else item
        if "nullableVersions" in kf:
            avro_type = ["null", avro_type] if kf.get("default") == "null" else [avro_type, "null"]
        out: dict[str, Any] = {"name": snake_case(kf["name"]), "type": avro_type}
        if kf.get("about"):
            out["doc"] = kf["about"]
        if is_array or base in PRIMITIVES or base == "records" or "nullableVersions" in kf:
            # a single struct has no Avro default (Avro's default of a record is a record, never null)
            out["default"] = _avro_default(kf, base, is_array)
        out["kafka"] = {k: kf[k] for k in _KEYS if k in kf}
        return out


def _parse(text: str, spec_file: str) -> dict[str, Any]:
    try:
        spec: dict[str, Any] = json.loads(strip_comments(text))
    except ValueError as exc:
        raise SchemaError(f"{spec_file}: {exc}") from exc
    return spec


def convert(text: str, spec_file: str) -> dict[str, Any]:
    """One Kafka JSON spec as kraftlake's annotated Avro schema: an RPC or header (kind request, response or
    header, namespace ``kraftlake.kafka.rpc``), a metadata record (kind metadata) or a KRaft control record
    (kind control, a ``data`` spec named in :data:`CONTROL_TYPES`), the records in ``kraftlake.kafka``."""
    spec = _parse(text, spec_file)
    name = spec["name"]
    kind = spec["type"]
    versions = spec["validVersions"]
    ann: dict[str, Any] = {"name": name}
    if kind in ("request", "response", "header"):
        namespace = NAMESPACE
        ann.update(kind=kind, specFile=spec_file)
        if "apiKey" in spec:
            ann["apiKey"] = spec["apiKey"]
        what = f"API key {spec['apiKey']}, " if "apiKey" in spec else ""
        doc = f"Kafka {kind} {name} ({what}versions {versions})."
    elif kind == "metadata":
        namespace = RECORD_NAMESPACE
        ann.update(kind="metadata", specFile=spec_file, apiKey=spec["apiKey"])
        doc = f"Kafka metadata record {name} (apiKey {spec['apiKey']}, versions {versions})."
    elif kind == "data" and name in CONTROL_TYPES:
        namespace = RECORD_NAMESPACE
        ann.update(kind="control", specFile=spec_file, controlType=CONTROL_TYPES[name])
        doc = f"Kafka control record {name} (control type {CONTROL_TYPES[name]}, versions {versions})."
    else:
        raise SchemaError(f"{spec_file}: not an RPC, header, metadata or control record spec (type {kind!r})")
    ann["validVersions"] = versions
    ann["flexibleVersions"] = spec["flexibleVersions"]
    conv = _Converter({c["name"]: c for c in spec.get("commonStructs", [])})
    return {
        "type": "record",
        "name": name,
        "namespace": namespace,
        "doc": doc,
        "kafka": ann,
        "fields": [conv.field(f, f"{namespace}.{name}") for f in spec["fields"]],
    }


def render(schema: dict[str, Any]) -> str:
    """The file text of a schema (stable formatting, so a regeneration diff is empty)."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def read_specs_from_jar(jar: Path, names: tuple[str, ...] = RPC_SPEC_NAMES) -> dict[str, str]:
    """The spec texts of ``names`` from a ``kafka-clients`` jar."""
    out: dict[str, str] = {}
    with zipfile.ZipFile(jar) as zf:
        for name in names:
            out[name] = zf.read(f"common/message/{name}.json").decode("utf-8")
    return out


def _jar(jars_dir: Path, artifact: str) -> Path:
    found = sorted(
        p for p in jars_dir.glob(f"{artifact}-*.jar") if re.fullmatch(rf"{artifact}-[\d.]+\.jar", p.name)
    )
    if not found:
        raise SchemaError(f"no {artifact} jar in {jars_dir} (run make setup)")
    if len(found) > 1:
        raise SchemaError(f"more than one {artifact} jar in {jars_dir}: {[p.name for p in found]}")
    return found[0]


def clients_jar(jars_dir: Path) -> Path:
    """The ``kafka-clients-*.jar`` of a jar cache directory (which must hold one release's)."""
    return _jar(jars_dir, "kafka-clients")


def metadata_jar(jars_dir: Path) -> Path:
    """The ``kafka-metadata-*.jar`` of a jar cache directory (which must hold one release's)."""
    return _jar(jars_dir, "kafka-metadata")


def generate(jars_dir: Path) -> dict[str, str]:
    """File name -> text of every ``schemas/rpc`` schema, converted from the jar cache's specs."""
    texts = read_specs_from_jar(clients_jar(jars_dir))
    return {f"{name}.avsc": render(convert(texts[name], f"{name}.json")) for name in RPC_SPEC_NAMES}


def generate_records(jars_dir: Path) -> dict[str, str]:
    """File name -> text of every record schema of ``schemas/``: each metadata record spec of the
    ``kafka-metadata`` jar and the control records of :data:`CONTROL_TYPES` from ``kafka-clients``."""
    out: dict[str, str] = {}
    with zipfile.ZipFile(metadata_jar(jars_dir)) as zf:
        for entry in sorted(zf.namelist()):
            if entry.startswith("common/metadata/") and entry.endswith(".json"):
                spec_file = entry.rsplit("/", 1)[1]
                text = zf.read(entry).decode("utf-8")
                if _parse(text, spec_file).get("type") == "metadata":
                    schema = convert(text, spec_file)  # named as the record (ZkMigrationRecord.json holds
                    out[f"{schema['name']}.avsc"] = render(schema)  # ZkMigrationStateRecord)
    for name, text in read_specs_from_jar(clients_jar(jars_dir), tuple(CONTROL_TYPES)).items():
        out[f"{name}.avsc"] = render(convert(text, f"{name}.json"))
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m kraftlake.protocol.kafka_specs JARS_DIR SCHEMAS_DIR", file=sys.stderr)
        return 2
    jars_dir, out_dir = Path(args[0]), Path(args[1])
    for folder, schemas in ((out_dir, generate_records(jars_dir)), (out_dir / "rpc", generate(jars_dir))):
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in schemas.items():
            (folder / name).write_text(text)
        print(f"wrote {len(schemas)} schemas to {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
