"""``kraftlake.dist_bytecode``: the archive shipped with ``--py-files`` gets a ``.pyc`` beside each module, which
Python imports from the zip instead of compiling the source, and which another interpreter would ignore."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from kraftlake.dist_bytecode import add_bytecode


def _archive(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("pkg/__init__.py", "VALUE = 41\n")
        z.writestr("pkg/mod.py", "from pkg import VALUE\n\nANSWER = VALUE + 1\n")
        z.writestr("pkg/data.json", "{}")
    return path


def _import(archive: Path) -> str:
    code = f"import sys; sys.path.insert(0, {str(archive)!r}); import pkg.mod; print(pkg.mod.ANSWER, pkg.mod.__file__)"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_modules_are_imported_from_the_bytecode_added(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "k.zip")
    assert _import(archive).strip().endswith("pkg/mod.py")
    assert add_bytecode(archive) == 2
    with zipfile.ZipFile(archive) as z:
        assert sorted(z.namelist()) == sorted(
            ["pkg/__init__.py", "pkg/__init__.pyc", "pkg/mod.py", "pkg/mod.pyc", "pkg/data.json"]
        )
    answer, where = _import(archive).split()
    assert (answer, where.endswith("pkg/mod.pyc")) == ("42", True)
    assert add_bytecode(archive) == 0  # already there


def test_bytecode_another_interpreter_cannot_read_falls_back_to_the_source(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "k.zip")
    add_bytecode(archive)
    stale = tmp_path / "stale.zip"
    with zipfile.ZipFile(archive) as src, zipfile.ZipFile(stale, "w") as out:
        for info in src.infolist():
            data = src.read(info)
            out.writestr(info, b"\x00\x00\r\n" + data[4:] if info.filename.endswith(".pyc") else data)
    answer, where = _import(stale).split()
    assert (answer, where.endswith("pkg/mod.py")) == ("42", True)
