"""Fuzz target: Delta deletion vectors (``kraftlake.delta.deletion_vectors``), the portable Roaring format.

Seeds are vectors serialized here as Delta writes them (array, bitmap and run containers, several 32-bit keys);
mutants are their bytes changed, cut or grown. Right answers: a seed reads to the rows it was made of; a mutant
reads to row numbers or to a typed error, never another exception, and never to more values than its bytes hold.
"""

from __future__ import annotations

import struct
from pathlib import Path

from fuzz.fuzzing import run

from kraftlake.delta.deletion_vectors import _Z85, PORTABLE_MAGIC, deleted_rows, z85_decode


def z85_encode(data: bytes) -> str:
    padded = data + b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(padded), 4):
        value = int.from_bytes(padded[i : i + 4], "big")
        out.append("".join(_Z85[value // 85**k % 85] for k in range(4, -1, -1)))
    return "".join(out)


def roaring32(values: list[int], runs: bool) -> bytes:
    """A 32-bit Roaring bitmap in the portable serialization (containers: array, bitmap, or run when asked)."""
    keys = sorted({v >> 16 for v in values})
    lows = {k: sorted(v & 0xFFFF for v in values if v >> 16 == k) for k in keys}
    size = len(keys)
    out = bytearray()
    if runs:
        out += struct.pack("<I", 12347 | ((size - 1) << 16))
        out += bytes([0xFF] * ((size + 7) // 8))
    else:
        out += struct.pack("<II", 12346, size)
    for k in keys:
        out += struct.pack("<HH", k, len(lows[k]) - 1)
    bodies = []
    for k in keys:
        low = lows[k]
        if runs:
            pairs: list[list[int]] = []
            for v in low:
                if pairs and pairs[-1][0] + pairs[-1][1] + 1 == v:
                    pairs[-1][1] += 1
                else:
                    pairs.append([v, 0])
            bodies.append(
                struct.pack("<H", len(pairs)) + b"".join(struct.pack("<HH", s, n) for s, n in pairs)
            )
        elif len(low) <= 4096:
            bodies.append(b"".join(struct.pack("<H", v) for v in low))
        else:
            bits = bytearray(8192)
            for v in low:
                bits[v // 8] |= 1 << (v % 8)
            bodies.append(bytes(bits))
    if not runs or size >= 4:
        at = len(out) + 4 * size
        for body in bodies:
            out += struct.pack("<I", at)
            at += len(body)
    return bytes(out + b"".join(bodies))


def vector(values: list[int], runs: bool = False) -> bytes:
    highs = sorted({v >> 32 for v in values})
    out = struct.pack("<iq", PORTABLE_MAGIC, len(highs))
    for h in highs:
        out += struct.pack("<I", h) + roaring32([v & 0xFFFFFFFF for v in values if v >> 32 == h], runs)
    return out


SEEDS = {
    vector([1, 5, 70000, 70001]): [1, 5, 70000, 70001],
    vector(list(range(0, 20000, 3))): list(range(0, 20000, 3)),
    vector([*range(100, 200), *range(65536, 70000), 2**32 + 7], runs=True): [
        *range(100, 200),
        *range(65536, 70000),
        2**32 + 7,
    ],
    vector([*range(10), *range(131072, 131080), 200000, 300000, 400000], runs=True): [
        *range(10),
        *range(131072, 131080),
        200000,
        300000,
        400000,
    ],
}


def test_z85_round_trip() -> None:
    data = bytes(range(256))
    assert z85_decode(z85_encode(data), len(data)) == data


def test_deletion_vectors(tmp_path: Path) -> None:
    def check(data: bytes, original: bytes, how: str) -> None:
        rows = deleted_rows(
            tmp_path, {"storageType": "i", "pathOrInlineDv": z85_encode(data), "sizeInBytes": len(data)}
        )
        if how == "none":
            assert sorted(int(r) for r in rows) == SEEDS[data]
        # a container of n values takes at least 2 bytes each, except runs (4 bytes for up to 65536)
        assert len(rows) <= 65536 * len(data)

    run("deletion-vectors", list(SEEDS), check, iterations=3000)
