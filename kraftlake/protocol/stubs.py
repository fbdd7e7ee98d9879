"""Type stubs of the generated record classes: ``messages.pyi`` and ``rpc_messages.pyi``, from ``schemas/``.

The classes are built from the schemas when :mod:`kraftlake.protocol.messages` is imported (and, for the RPCs,
when :mod:`kraftlake.protocol.rpc_messages` is first asked for one), so a type checker cannot see them; these
stubs declare each class as the generator builds it: a :class:`~kraftlake.protocol.codegen.Record` subclass
with a keyword-only constructor (every field has its default), read-only attributes of the field types, a typed
``_replace`` and its nested structs as class attributes. ``make stubs`` rewrites them and
``python -m kraftlake.protocol.stubs --check`` (and the test suite) fails when they differ from the schemas.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from kraftlake.protocol.spec import FieldSpec, MessageSpec, StructSpec, load_all, load_rpcs

LINE_LENGTH = 110
"""ruff's line length for the tree: the stubs are written as ``ruff format`` would lay them out."""

_SCALARS = {
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "int64": "int",
    "float64": "float",
    "bool": "bool",
    "string": "str",
    "uuid": "str",
    "bytes": "bytes",
    "records": "bytes",
}

_HEADER = "# Generated from schemas/ by `make stubs` (python -m kraftlake.protocol.stubs): do not edit.\n"

_MESSAGES_PREAMBLE = """
from collections.abc import Iterable
from typing import Any, Self

from kraftlake.protocol.codegen import Record as Record
from kraftlake.protocol.spec import MessageSpec, StructSpec

__all__ = ["MESSAGE_CLASSES", "Record", "class_for", "spec_of"]

MESSAGE_CLASSES: dict[str, type[Record]]

def class_for(name: str) -> type[Record]: ...
def spec_of(record_or_class: Any) -> MessageSpec: ...
def struct_classes() -> dict[str, type[Record]]: ...
def struct_spec_of(cls: type[Record]) -> StructSpec: ...
"""

_RPC_PREAMBLE = """
from collections.abc import Iterable
from typing import Self

from kraftlake.protocol.codegen import Record
"""


def _element_type(f: FieldSpec, owner: str) -> str:
    if f.struct is not None:
        return f"{owner}.{f.struct.name}"
    return _SCALARS[f.base_type]


def _attribute_type(f: FieldSpec, owner: str) -> str:
    """The type of the attribute: what the decoder and the constructor store."""
    t = _element_type(f, owner)
    if f.is_array:
        t = f"tuple[{t}, ...]"
    return f"{t} | None" if not f.nullable_versions.empty else t


def _parameter_type(f: FieldSpec, owner: str) -> str:
    """The type the constructor takes: any iterable for an array (it is stored as a tuple)."""
    t = _element_type(f, owner)
    if f.is_array:
        t = f"Iterable[{t}]"
    return f"{t} | None" if not f.nullable_versions.empty else t


def _def(indent: str, head: str, params: list[str], tail: str, pragma: str = "") -> list[str]:
    """``def head(params) tail`` laid out as ruff format does: one line, the parameters on one line of their
    own, or one parameter a line with a trailing comma. A ``# type:`` pragma does not count in the width."""
    one = f"{indent}{head}({', '.join(params)}){tail}"
    if len(one) <= LINE_LENGTH:
        return [one + pragma]
    inner = indent + "    "
    hugged = f"{inner}{', '.join(params)}"
    if len(hugged) <= LINE_LENGTH:
        return [f"{indent}{head}({pragma}", hugged, f"{indent}){tail}"]
    return [f"{indent}{head}({pragma}", *(f"{inner}{p}," for p in params), f"{indent}){tail}"]


def _struct_body(s: StructSpec, owner: str, indent: str) -> list[str]:
    params = [f"{f.attr}: {_parameter_type(f, owner)} = ..." for f in s.fields]
    keywords = ["*", *params] if params else []
    lines = _def(indent, "def __new__", ["cls", *keywords], " -> Self: ...")
    # Record._replace takes **changes; each class narrows it to its own fields.
    lines += _def(indent, "def _replace", ["self", *keywords], " -> Self: ...", "  # type: ignore[override]")
    for f in s.fields:
        ignore = "  # type: ignore[override]" if hasattr(tuple, f.attr) else ""
        lines += [
            f"{indent}@property",
            f"{indent}def {f.attr}(self) -> {_attribute_type(f, owner)}: ...{ignore}",
        ]
    return lines


def _message_class(spec: MessageSpec) -> list[str]:
    """The stub of one message class, its nested structs (all of them, flattened as Kafka does) inside it."""
    lines = [f"class {spec.name}(Record):"]
    for s in spec.structs()[1:]:
        lines.append(f"    class {s.name}(Record):")
        lines += _struct_body(s, spec.name, "        ")
        lines.append("")
    lines += _struct_body(spec.struct, spec.name, "    ")
    return lines


def _render(preamble: str, specs: Iterable[MessageSpec]) -> str:
    blocks = ["\n".join(_message_class(spec)) for spec in specs]
    return _HEADER + preamble + "\n" + "\n\n".join(blocks) + "\n"


def render_messages() -> str:
    """The text of ``messages.pyi``: every metadata and control record of ``schemas/``."""
    return _render(_MESSAGES_PREAMBLE, load_all())


def render_rpc_messages() -> str:
    """The text of ``rpc_messages.pyi``: every RPC message and header of ``schemas/rpc``, by name."""
    return _render(_RPC_PREAMBLE, sorted(load_rpcs().values(), key=lambda s: s.name))


def stub_files() -> dict[Path, str]:
    """Each stub's path beside its module and the text the schemas give it."""
    here = Path(__file__).parent
    return {here / "messages.pyi": render_messages(), here / "rpc_messages.pyi": render_rpc_messages()}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--check"]):
        print("usage: python -m kraftlake.protocol.stubs [--check]", file=sys.stderr)
        return 2
    stale = []
    for path, text in stub_files().items():
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        if args:
            stale.append(path)
        else:
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print(f"stale (run make stubs): {', '.join(map(str, stale))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
