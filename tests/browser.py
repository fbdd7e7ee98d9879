"""Opening pages in a real headless Chromium (Debian's ``chromium``, which ``make setup`` installs when it can)
with every host name unresolvable, so a page draws from what it carries or not at all; and reading PNGs.

``tests/`` is on ``sys.path`` (it has no ``__init__``), so this is the module ``browser``.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest

#: how long a page may run its scripts (virtual time: Chromium stops waiting once the page is idle)
BUDGET_MS = 20_000


def chromium() -> str:
    """The Chromium binary, or the test skips saying what is missing."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(
        "no chromium on PATH: make setup installs Debian's chromium package when it runs as root with "
        "apt-get; elsewhere install chromium to run the browser tests"
    )


def _run(page: Path, *flags: str) -> subprocess.CompletedProcess[bytes]:
    with tempfile.TemporaryDirectory(prefix="kraftlake-chromium-") as profile:
        return subprocess.run(
            [
                chromium(),
                "--headless",
                "--no-sandbox",  # root in a container: Chromium's sandbox cannot start
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                f"--user-data-dir={profile}",
                # no name resolves: a page reaching for a CDN gets nothing
                "--host-resolver-rules=MAP * ~NOTFOUND",
                f"--virtual-time-budget={BUDGET_MS}",
                *flags,
                page.resolve().as_uri(),
            ],
            capture_output=True,
            timeout=120,
            check=True,
            env={**os.environ, "HOME": profile},
        )


def dump_dom(page: Path) -> str:
    """The page's DOM once its scripts ran, as HTML."""
    return _run(page, "--dump-dom").stdout.decode("utf-8")


def screenshot(page: Path, out: Path, width: int = 1200, height: int = 900) -> bytes:
    """A PNG of the page's first ``width`` x ``height`` pixels once its scripts ran."""
    _run(page, f"--screenshot={out}", f"--window-size={width},{height}", "--hide-scrollbars")
    return out.read_bytes()


@dataclass(frozen=True)
class Pixels:
    width: int
    height: int
    colours: int  # distinct RGBA values
    variance: float  # of the grey level (0..255) over all pixels


def _unfilter(raw: bytes, width: int, height: int, bpp: int) -> bytes:
    stride = width * bpp
    out = bytearray()
    prev = bytearray(stride)
    pos = 0
    for _ in range(height):
        kind, line = raw[pos], bytearray(raw[pos + 1 : pos + 1 + stride])
        pos += 1 + stride
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        out += line
        prev = line
    return bytes(out)


def png_pixels(data: bytes) -> Pixels:
    """Size, distinct colours and grey-level variance of an 8-bit RGB or RGBA, non-interlaced PNG (what
    Chromium and vl-convert write); raises AssertionError for anything that is not such a PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        assert zlib.crc32(kind + body) == struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])[0]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert header is not None, "no IHDR"
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 4 if colour == 6 else 3
    pixels = _unfilter(zlib.decompress(idat), width, height, bpp)
    greys = [sum(pixels[i : i + 3]) / 3 for i in range(0, len(pixels), bpp)]
    mean = sum(greys) / len(greys)
    variance = sum((g - mean) ** 2 for g in greys) / len(greys)
    colours = len({pixels[i : i + bpp] for i in range(0, len(pixels), bpp)})
    return Pixels(width, height, colours, variance)
