"""Fuzz target: Kafka's small text files (``quorum-state``, ``leader-epoch-checkpoint``, the offset checkpoints,
``partition.metadata``, ``meta.properties``).

Mutants of Kafka's own files and of files our writers wrote: bytes changed, lines cut or doubled, numbers
replaced with what Java's parsers refuse (2^31, ``1_0``, other scripts' digits, signs, spaces), bytes that are
not UTF-8, other line breaks.

Right answers: a seed reads to its known value; whatever a reader accepts, its writer writes back to a file
that reads to the same value (nothing accepted is lost or changed), and numbers are in their Java ranges.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from fuzz.fuzzing import Mutator, run
from shared_paths import KAFKA_LOGS

from kraftlake.logformat import (
    EpochEntry,
    MetaProperties,
    QuorumStateFile,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    read_quorum_state,
    write_leader_epoch_checkpoint,
    write_meta_properties,
    write_offset_checkpoint,
    write_partition_metadata,
    write_quorum_state,
)

FIXTURE = KAFKA_LOGS / "kafkademo-multi-epoch"
INT32 = range(-(2**31), 2**31)


def _write_quorum_state(p: Path, v: Any) -> None:
    write_quorum_state(p, v, fsync=False)


def _int32_fields(v: QuorumStateFile) -> list[int]:
    return [v.leader_id, v.leader_epoch, v.voted_id, *(v.current_voters or ())]


FILES: dict[str, tuple[Callable[[Path], Any], Callable[[Path, Any], None], Callable[[Any], bool]]] = {
    "quorum-state": (
        read_quorum_state,
        _write_quorum_state,
        lambda v: all(x in INT32 for x in _int32_fields(v)),
    ),
    "leader-epoch-checkpoint": (
        read_leader_epoch_checkpoint,
        lambda p, v: write_leader_epoch_checkpoint(p, v, fsync=False),
        lambda v: all(e.epoch in INT32 and -(2**63) <= e.start_offset < 2**63 for e in v),
    ),
    "recovery-point-offset-checkpoint": (
        read_offset_checkpoint,
        lambda p, v: write_offset_checkpoint(p, v, fsync=False),
        lambda v: all(part in INT32 for _, part in v),
    ),
    "partition.metadata": (
        read_partition_metadata,
        lambda p, v: write_partition_metadata(p, v[1], fsync=False),
        lambda v: v[0] == 0 and len(v[1]) in (22, 24),
    ),
    "meta.properties": (
        read_meta_properties,
        lambda p, v: write_meta_properties(p, v, fsync=False),
        lambda v: v.node_id is None or v.node_id in INT32,
    ),
}


@lru_cache(maxsize=1)
def scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="kraftlake-fuzz-"))


@lru_cache(maxsize=1)
def seeds() -> dict[str, list[bytes]]:
    """Per file name: Kafka's file from the fixture, and files our writers wrote."""
    d = scratch() / "seeds"
    d.mkdir(exist_ok=True)
    ours: dict[str, list[Any]] = {
        "quorum-state": [
            QuorumStateFile(leader_id=3, leader_epoch=9),
            QuorumStateFile(
                leader_id=-1,
                leader_epoch=2**31 - 1,
                voted_id=2,
                data_version=0,
                current_voters=(1, 2, 3),
                cluster_id="c\u00e9",
            ),
        ],
        "leader-epoch-checkpoint": [[EpochEntry(0, 0), EpochEntry(6, 712), EpochEntry(2**31 - 1, 2**63 - 1)]],
        "recovery-point-offset-checkpoint": [{("__cluster_metadata", 0): 3072, ("t", -1): -5}],
        "partition.metadata": [(0, "J8aAPcfLQt2bqs1JT_rMgQ")],
        "meta.properties": [
            MetaProperties(
                "hSCzevIQRUa-ojqTd_8C5w",
                1,
                directory_id="J8aAPcfLQt2bqs1JT_rMgQ",
                extra=(("odd key=", "v:\u00e9\\\n"),),
            )
        ],
    }
    out: dict[str, list[bytes]] = {}
    for name, values in ours.items():
        _, write, _ = FILES[name]
        out[name] = []
        for fixture in (FIXTURE / name, FIXTURE / "__cluster_metadata-0" / name):
            if fixture.is_file():
                out[name].append(fixture.read_bytes())
        for value in values:
            write(d / name, value)
            out[name].append((d / name).read_bytes())
    return out


class TextMutator(Mutator):
    """Byte mutations plus the textual ones Java's readers refuse."""

    WORDS = (
        "2147483648",
        "-2147483649",
        "9223372036854775808",
        "1_0",
        "\u0661\u0662",
        "\uff15",
        " 5",
        "+5",
        "0x10",
        "1e3",
        "\u00a0",
        "\r",
        "\r\n",
        "\x85",
        "\u2028",
        "\t",
        "\\u00",
        "\\",
        "=",
        ":",
        "#",
        "",
        "null",
        "true",
        "[",
        "{",
        "}",
        '"',
        "AAAAAAAAAAAAAAAAAAAAAA",
    )

    def __init__(self, rng: random.Random, seeds: Sequence[bytes]) -> None:
        super().__init__(rng, seeds)

    def mutate(self, data: bytes) -> tuple[bytes, str]:
        rng = self.rng
        if rng.random() < 0.5:
            return super().mutate(data)
        text = data.decode("utf-8", errors="surrogateescape")
        word = rng.choice(self.WORDS)
        digits = [i for i, c in enumerate(text) if c.isdigit()]
        if digits and rng.random() < 0.6:
            at = rng.choice(digits)
            end = at
            while end < len(text) and text[end].isdigit():
                end += 1
            text = text[:at] + word + text[end:]
        else:
            at = rng.randrange(len(text) + 1)
            text = text[:at] + word + text[at:]
        return text.encode("utf-8", errors="surrogateescape"), f"text:{word!r}"


def _check(name: str) -> Callable[[bytes, bytes, str], None]:
    read, write, in_range = FILES[name]

    def check(data: bytes, original: bytes, how: str) -> None:
        p = scratch() / name
        p.write_bytes(data)
        value = read(p)
        if name == "quorum-state" and value is None:
            raise AssertionError("an existing quorum-state read as missing")
        assert in_range(value), f"a number out of its Java range was accepted: {value!r}"
        # whatever is accepted survives its writer: written back, it reads the same
        again = scratch() / "again"
        again.mkdir(exist_ok=True)
        write(again / name, value)
        assert read(again / name) == value, f"{value!r} did not survive a write and a read"

    return check


@pytest.mark.parametrize("name", sorted(FILES))
def test_fuzz_text_files(name: str) -> None:
    assert run(f"text-{name}", seeds()[name], _check(name), iterations=600, mutator=TextMutator) > 0
