"""The checked-in type stubs of the record classes: what the schemas give, what the runtime builds, what mypy
makes of a misspelt name or field."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from mypy import api as mypy_api

from kraftlake.protocol import messages, rpc_messages, stubs
from kraftlake.protocol.spec import load_all, load_rpcs

ROOT = Path(__file__).resolve().parents[2]


def test_the_checked_in_stubs_are_what_the_schemas_give() -> None:
    """Fails when schemas/ changed and `make stubs` was not run (the text is regenerated in memory)."""
    files = stubs.stub_files()
    assert sorted(p.name for p in files) == ["messages.pyi", "rpc_messages.pyi"]
    stale = [path.name for path, text in files.items() if path.read_text() != text]
    assert stale == []
    assert stubs.main(["--check"]) == 0


def test_check_reports_a_stale_stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "messages.pyi"
    path.write_text(stubs.render_messages().replace("def partition_id", "def partiton_id"))
    monkeypatch.setattr(stubs, "stub_files", lambda: {path: stubs.render_messages()})
    assert stubs.main(["--check"]) == 1
    assert stubs.main([]) == 0
    assert path.read_text() == stubs.render_messages()


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _properties(cls: ast.ClassDef) -> list[str]:
    return [
        n.name
        for n in cls.body
        if isinstance(n, ast.FunctionDef) and any(ast.unparse(d) == "property" for d in n.decorator_list)
    ]


def _keywords(cls: ast.ClassDef, method: str) -> list[str]:
    (fn,) = (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == method)
    return [a.arg for a in fn.args.kwonlyargs]


def _check_against_runtime(stub: Path, runtime: dict[str, type]) -> None:
    classes = _classes(ast.parse(stub.read_text()))
    assert sorted(classes) == sorted(runtime)
    for name, cls in runtime.items():
        node = classes[name]
        nested = _classes(ast.Module(body=node.body, type_ignores=[]))
        runtime_nested = {
            k: v for k, v in vars(cls).items() if isinstance(v, type) and v.__qualname__ == f"{name}.{k}"
        }
        assert sorted(nested) == sorted(runtime_nested), name
        for sub_name, sub in [(name, cls), *((k, runtime_nested[k]) for k in nested)]:
            sub_node = node if sub_name == name else nested[sub_name]
            fields = list(sub._fields)  # type: ignore[attr-defined]
            assert _properties(sub_node) == fields, sub.__qualname__
            assert _keywords(sub_node, "__new__") == fields, sub.__qualname__
            assert _keywords(sub_node, "_replace") == fields, sub.__qualname__


def test_the_record_stub_declares_each_class_the_runtime_builds() -> None:
    runtime = {spec.name: messages.MESSAGE_CLASSES[spec.name] for spec in load_all()}
    assert len(runtime) == 32
    _check_against_runtime(ROOT / "kraftlake/protocol/messages.pyi", runtime)


def test_the_rpc_stub_declares_each_class_the_runtime_builds() -> None:
    runtime = {name: getattr(rpc_messages, name) for name in load_rpcs()}
    assert "FetchRequest" in runtime and "RequestHeader" in runtime
    _check_against_runtime(ROOT / "kraftlake/protocol/rpc_messages.pyi", runtime)


def test_the_record_stub_declares_the_module_functions() -> None:
    tree = ast.parse((ROOT / "kraftlake/protocol/messages.pyi").read_text())
    declared = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    declared |= {
        n.target.id for n in tree.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    public = {
        k
        for k, v in vars(messages).items()
        if not k.startswith("_")
        and (callable(v) or isinstance(v, dict))
        and not isinstance(v, type)
        and getattr(v, "__module__", messages.__name__) == messages.__name__
    }
    assert public == declared


def test_an_unknown_rpc_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="FetchRequst"):
        _ = rpc_messages.FetchRequst  # type: ignore[attr-defined]


def test_mypy_rejects_a_misspelt_class_field_or_field_type(tmp_path: Path) -> None:
    source = tmp_path / "user.py"
    source.write_text(
        textwrap.dedent(
            """
            from kraftlake.protocol import messages as m
            from kraftlake.protocol import rpc_messages as r

            ok = m.PartitionRecord(partition_id=1, replicas=[1, 2], leader=1)
            ok.replicas[0] + 1
            ok._replace(leader=2).leader + 1
            m.RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", port=9092)
            r.FetchRequest(replica_id=1, topics=[r.FetchRequest.FetchTopic(topic_id="x")])
            m.PartitonRecord()  # wrong
            m.PartitionRecord(partiton_id=1)  # wrong
            m.PartitionRecord(leader="1")  # wrong
            ok.leader = 3  # wrong
            ok._replace(leadr=2)  # wrong
            m.PartitionChangeRecord().isr[0]  # wrong
            r.VoteRequst()  # wrong
            """
        )
    )
    out, _, status = mypy_api.run(
        ["--strict", "--no-incremental", "--follow-imports=silent", "--config-file=", str(source)]
    )
    errors = sorted({int(line.split(":")[1]) for line in out.splitlines() if ": error:" in line})
    wrong = [i for i, line in enumerate(source.read_text().splitlines(), 1) if line.endswith("# wrong")]
    assert status == 1, out
    assert len(wrong) == 7
    assert errors == wrong, out
