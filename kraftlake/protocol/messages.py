"""The record classes, one per Kafka message (``PartitionChangeRecord``, ``LeaderChangeMessage``, ...).

Generated from ``schemas/`` when this module is first imported. Each class is an immutable, slotted value
object (a tuple subclass, compared by type and value) with snake_case attributes; nested structs are classes
of their own, reachable as attributes of their message class as in Kafka (``RegisterBrokerRecord.BrokerEndpoint``).
Type checkers read ``messages.pyi`` instead, generated from the same schemas (``make stubs``).

Every field of every version is an attribute; a field the record's version lacks holds its default, and the
version itself is not kept (serde returns and takes it beside the record). Unknown tagged fields are skipped on
decode. A tuple subclass because the generated decoders build each record with ``tuple.__new__``: the cheapest
immutable object CPython makes, for a log that decodes millions of them.
"""

from __future__ import annotations

from typing import Any, cast

from kraftlake.protocol.codegen import Record, make_class
from kraftlake.protocol.spec import MessageSpec, StructSpec, load_all

__all__ = ["MESSAGE_CLASSES", "Record", "class_for", "spec_of"]

#: Message name -> class, metadata records first (by apiKey), then control records (by control type).
MESSAGE_CLASSES: dict[str, type[Record]] = {}
_SPEC_BY_CLASS: dict[type, MessageSpec] = {}
_STRUCT_CLASSES: dict[str, type[Record]] = {}


def _build() -> None:
    for spec in load_all():
        nested: dict[str, type] = {}
        # Inner structs first: a class needs the default instances of the structs it holds.
        for s in reversed(spec.structs()):
            deps = {f.struct.qualname: nested[f.struct.qualname] for f in s.fields if f.struct is not None}
            if s is spec.struct:
                deps = dict(nested)
            nested[s.qualname] = make_class(s, deps)
            _STRUCT_CLASSES[s.qualname] = nested[s.qualname]
        cls = cast(type[Record], nested[spec.name])
        MESSAGE_CLASSES[spec.name] = cls
        _SPEC_BY_CLASS[cls] = spec
        # apiKey (metadata) or control type (control), for the per-record envelope without a dict lookup.
        cls._api_key = spec.api_key if spec.api_key is not None else spec.control_type
        globals()[spec.name] = cls


def class_for(name: str) -> type[Record]:
    """The class of a message or nested struct by Kafka's (qualified) name, e.g. ``VotersRecord.Endpoint``."""
    return _STRUCT_CLASSES[name]


def spec_of(record_or_class: Any) -> MessageSpec:
    """The :class:`MessageSpec` of a message class or instance."""
    cls = record_or_class if isinstance(record_or_class, type) else type(record_or_class)
    return _SPEC_BY_CLASS[cls]


def struct_classes() -> dict[str, type[Record]]:
    """Every generated class by qualified name (messages and nested structs)."""
    return dict(_STRUCT_CLASSES)


def struct_spec_of(cls: type[Record]) -> StructSpec:
    return cls._spec


_build()


def __getattr__(name: str) -> Any:  # a typo names what it is not
    raise AttributeError(f"module {__name__!r} has no record class {name!r}")
