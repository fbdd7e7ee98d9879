"""A seeded mutation loop for the fuzz targets: typed error or right answer, never another exception.

Each target gives seed inputs, and a check that reads one (mutated) input and raises ``AssertionError`` on a
wrong answer; any exception that is not a ``KraftlakeError`` (kraftlake's typed errors) is a finding too. The
loop is deterministic: input ``i`` of a run depends only on the seed and ``i``.

- In ``make test`` each target runs a fixed number of iterations (a few seconds) from ``DEFAULT_SEED``.
- ``make fuzz`` sets ``KRAFTLAKE_FUZZ_SECONDS`` (the time each target runs instead) and may set
  ``KRAFTLAKE_FUZZ_SEED`` (default: a new seed per run, printed, so a finding can be replayed with it).

A finding fails the test with the seed, the iteration and the input, which is also written to
``KRAFTLAKE_FUZZ_FINDINGS`` (default ``tests/fuzz/findings/``) as ``<target>-<seed>-<iteration>.bin``.
"""

from __future__ import annotations

import os
import random
import struct
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

import crc32c

from kraftlake.errors import KraftlakeError

DEFAULT_SEED = 16
FINDINGS = Path(os.environ.get("KRAFTLAKE_FUZZ_FINDINGS", Path(__file__).parent / "findings"))

_INTERESTING_8 = (0, 1, 0x7F, 0x80, 0xFF)
_INTERESTING_32 = (0, 1, -1, 2**31 - 1, -(2**31), 2**16, 61 - 12, 0x7FFF)


class Mutator:
    """Byte-level mutations, with some knowledge of record batch v2 (fields at fixed offsets, CRC fixing)."""

    def __init__(self, rng: random.Random, seeds: Sequence[bytes]) -> None:
        self.rng = rng
        self.seeds = seeds

    def mutate(self, data: bytes) -> tuple[bytes, str]:
        """A mutant of ``data`` and a short description of what was done."""
        rng = self.rng
        out = bytearray(data)
        done = []
        for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):
            kind = rng.choice(
                ("flip", "byte", "int32", "cut", "insert", "delete", "duplicate", "splice", "field")
            )
            if not out and kind not in ("insert", "splice"):
                kind = "insert"
            pos = rng.randrange(len(out)) if out else 0
            if kind == "flip":
                out[pos] ^= 1 << rng.randrange(8)
            elif kind == "byte":
                out[pos] = rng.choice((*_INTERESTING_8, rng.randrange(256)))
            elif kind == "int32" and len(out) >= 4:
                pos = min(pos, len(out) - 4)
                struct.pack_into(">i", out, pos, rng.choice(_INTERESTING_32))
            elif kind == "cut":
                del out[rng.randrange(len(out) + 1) :]
            elif kind == "insert":
                out[pos:pos] = rng.randbytes(rng.choice((1, 2, 4, 17)))
            elif kind == "delete":
                del out[pos : pos + rng.choice((1, 2, 4, 16))]
            elif kind == "duplicate":
                n = rng.choice((1, 8, 61, 200))
                out[pos:pos] = out[pos : pos + n]
            elif kind == "splice":
                other = rng.choice(self.seeds)
                if other:
                    a = rng.randrange(len(other))
                    out[pos:pos] = other[a : a + rng.choice((8, 61, 300))]
            elif kind == "field":
                self._batch_field(out)
            done.append(kind)
        if rng.random() < 0.5 and self._fix_crcs(out):
            done.append("crc")
        return bytes(out), "+".join(done)

    def _batch_starts(self, data: bytearray) -> list[int]:
        starts = []
        pos = 0
        while pos + 61 <= len(data):
            starts.append(pos)
            (length,) = struct.unpack_from(">i", data, pos + 8)
            if length < 49:
                break
            pos += 12 + length
        return starts

    def _batch_field(self, data: bytearray) -> None:
        """Overwrite a header field of one batch (length, epoch, magic, attributes, deltas, count...)."""
        starts = self._batch_starts(data)
        if not starts:
            return
        at = self.rng.choice(starts)
        field, fmt = self.rng.choice(
            (
                (8, ">i"),
                (12, ">i"),
                (16, ">b"),
                (21, ">h"),
                (23, ">i"),
                (57, ">i"),
                (21, "codec"),
                (21, "control"),
                (0, ">q"),
            )
        )
        if fmt == "codec":  # an unknown compression codec, or another known one
            attrs = struct.unpack_from(">h", data, at + 21)[0]
            struct.pack_into(">h", data, at + 21, (attrs & ~7) | self.rng.randrange(8))
        elif fmt == "control":
            attrs = struct.unpack_from(">h", data, at + 21)[0]
            struct.pack_into(">h", data, at + 21, attrs ^ 0x20)
        elif fmt == ">b":
            data[at + field] = self.rng.choice((0, 1, 2, 3, 0xFF))
        elif fmt == ">q":
            struct.pack_into(fmt, data, at, self.rng.choice((0, 1, -1, 2**62, 712)))
        else:
            value = self.rng.choice((*_INTERESTING_32, self.rng.randrange(-9, 99)))
            if fmt == ">h":
                value = (value + 2**15) % 2**16 - 2**15
            struct.pack_into(fmt, data, at + field, value)

    def _fix_crcs(self, data: bytearray) -> bool:
        fixed = False
        for at in self._batch_starts(data):
            end = at + 12 + struct.unpack_from(">i", data, at + 8)[0]
            if end <= len(data):
                struct.pack_into(">I", data, at + 17, crc32c.crc32c(bytes(data[at + 21 : end])))
                fixed = True
        return fixed


def run(
    target: str,
    seeds: Sequence[bytes],
    check: Callable[[bytes, bytes, str], None],
    *,
    iterations: int,
    mutator: Callable[[random.Random, Sequence[bytes]], Mutator] = Mutator,
) -> int:
    """Mutate ``seeds`` and ``check(mutant, original, how)`` each mutant; return the inputs checked.

    ``iterations`` bounds the run unless ``KRAFTLAKE_FUZZ_SECONDS`` is set (then it runs that long). The seed
    inputs themselves are checked first, unmutated: for them a typed error is a finding too.
    """
    seconds = float(os.environ.get("KRAFTLAKE_FUZZ_SECONDS", "0"))
    seed = int(
        os.environ.get("KRAFTLAKE_FUZZ_SEED", DEFAULT_SEED if not seconds else random.randrange(2**32))
    )
    if seconds:
        print(f"fuzz {target}: seed {seed}, {seconds:g} s")
    rng = random.Random(seed)
    mut = mutator(rng, seeds)
    deadline = time.monotonic() + seconds
    i = 0
    for original in seeds:
        _one(target, seed, -1, original, original, "none", check)
    while (time.monotonic() < deadline) if seconds else (i < iterations):
        original = rng.choice(seeds)
        mutant, how = mut.mutate(original)
        _one(target, seed, i, mutant, original, how, check)
        i += 1
    if seconds:
        print(f"fuzz {target}: {i} inputs, no finding")
    return i


def _one(
    target: str,
    seed: int,
    i: int,
    data: bytes,
    original: bytes,
    how: str,
    check: Callable[[bytes, bytes, str], None],
) -> None:
    try:
        check(data, original, how)
    except KraftlakeError as exc:
        if i >= 0:
            return
        raise AssertionError(f"fuzz {target}: a seed input is refused: {exc}") from exc
    except Exception as exc:
        FINDINGS.mkdir(parents=True, exist_ok=True)
        path = FINDINGS / f"{target}-{seed}-{i}.bin"
        path.write_bytes(data)
        raise AssertionError(
            f"fuzz {target}: seed {seed} input {i} ({how}, {len(data)} bytes, saved to {path}) raised "
            f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        ) from exc
