"""Bytecode beside the sources of the ``--py-files`` archive: ``python -m kraftlake.dist_bytecode ZIP``.

Python imports modules from a zip archive without writing their bytecode anywhere, so each Python worker an
executor starts compiles every module it imports, every time. An archive holding ``module.pyc`` beside
``module.py`` is imported from the ``.pyc`` by ``zipimport`` instead. The files are compiled by the running
interpreter as "unchecked hash" pycs (valid whatever the archive's timestamps); an interpreter of another
version finds a magic number it does not know and compiles the source as before.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import py_compile
import tempfile
import zipfile
from pathlib import Path


def add_bytecode(archive: str | Path) -> int:
    """Rewrite the zip ``archive`` with a ``.pyc`` beside each ``.py`` it holds; returns how many were added."""
    archive = Path(archive)
    added = 0
    # beside the archive: the rebuilt one is renamed over it, within one filesystem
    with tempfile.TemporaryDirectory(dir=archive.parent) as tmp:
        rebuilt = Path(tmp) / archive.name
        with zipfile.ZipFile(archive) as src, zipfile.ZipFile(rebuilt, "w", zipfile.ZIP_DEFLATED) as out:
            names = set(src.namelist())
            for info in src.infolist():
                data = src.read(info)
                out.writestr(info, data)
                pyc = info.filename[:-3] + ".pyc"
                if not info.filename.endswith(".py") or pyc in names:
                    continue
                source = Path(tmp) / "module.py"
                source.write_bytes(data)
                compiled = Path(tmp) / "module.pyc"
                py_compile.compile(
                    str(source),
                    cfile=str(compiled),
                    dfile=info.filename,
                    doraise=True,
                    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
                )
                out.writestr(zipfile.ZipInfo(pyc, date_time=info.date_time), compiled.read_bytes())
                added += 1
        os.replace(rebuilt, archive)
    return added


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("archive", nargs="+", help="zip archives to add bytecode to")
    args = parser.parse_args(argv)
    tag = importlib.util.MAGIC_NUMBER.hex()
    for archive in args.archive:
        print(f"{archive}: {add_bytecode(archive)} modules compiled (bytecode magic {tag})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
