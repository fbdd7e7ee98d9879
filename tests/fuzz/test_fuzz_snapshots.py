"""Fuzz target: ``.checkpoint`` snapshots, read by ``load_snapshot`` and by ``image_at`` beside a log.

Seeds: snapshots of a real Kafka log's image (the newest snapshot of a copy of that log directory, an older
good one beside it), of a synthetic image with every entity kind, the same with compressed data batches, and
Kafka's own ``bootstrap.checkpoint``. Mutants are written over the newest snapshot.

Right answers: a snapshot whose changed bytes the CRC covers is refused, and ``image_at`` then answers from the
older snapshot plus the log exactly as from the log alone; one changed only where no CRC looks (base offsets,
leader epochs) holds the same state; a cut one is refused (no SnapshotFooter).
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from functools import lru_cache
from pathlib import Path

from fuzz.fuzzing import run
from shared_paths import KAFKA_LOGS

from kraftlake.errors import KraftlakeError
from kraftlake.image import MetadataImage, image_at, load_records, load_snapshot, write_snapshot
from kraftlake.image.snapshot import snapshot_bytes
from kraftlake.logformat import BatchReader, Compression, build_data_batch
from kraftlake.records import iter_records
from kraftlake.sim.workloads.entities import synthetic_records
from tests.image.conftest import envelopes

MULTI_EPOCH = KAFKA_LOGS / "kafkademo-multi-epoch" / "__cluster_metadata-0"
NEWEST = 1501  # end offset of the snapshot the mutants replace
ASKED = (1500, 1700)  # offsets image_at answers for


@lru_cache(maxsize=1)
def setup() -> tuple[Path, list[bytes], dict[bytes, MetadataImage], dict[int, MetadataImage]]:
    """(the log dir copy, seeds, each seed's image, the log-only truth at the ASKED offsets)."""
    d = Path(tempfile.mkdtemp(prefix="kraftlake-fuzz-")) / "__cluster_metadata-0"
    shutil.copytree(MULTI_EPOCH, d)
    for p in d.iterdir():
        p.chmod(0o644)
    truth = {n: image_at(d, n) for n in ASKED}
    write_snapshot(image_at(d, 999), d)  # the older, good snapshot
    kafka = snapshot_bytes(image_at(d, NEWEST - 1))
    synthetic = snapshot_bytes(load_records(envelopes(synthetic_records(5, 60))), records_per_batch=7)
    seeds = [kafka, synthetic, (KAFKA_LOGS / "kafkademo-multi-epoch" / "bootstrap.checkpoint").read_bytes()]
    for codec in (Compression.ZSTD, Compression.GZIP, Compression.LZ4, Compression.SNAPPY):
        seeds.append(
            b"".join(
                b.raw
                if b.is_control
                else build_data_batch(
                    b.base_offset,
                    b.partition_leader_epoch,
                    b.base_timestamp,
                    [r.value or b"" for r in b.records],
                    compression=codec,
                )
                for b in BatchReader(synthetic)
            )
        )
    images = {}
    for seed in seeds:
        path = d.parent / "seed.checkpoint"
        path.write_bytes(seed)
        images[seed] = load_snapshot(path)
    return d, seeds, images, truth


def _uncovered(original: bytes) -> set[int]:
    """Byte positions no CRC covers: each batch's base offset, length, leader epoch and magic."""
    out: set[int] = set()
    for b in BatchReader(original, "seed"):
        out.update(range(b.position, b.position + 17))
    return out


def check(data: bytes, original: bytes, how: str) -> None:
    d, _, images, truth = setup()
    newest = d / f"{NEWEST:020d}-{6:010d}.checkpoint"
    newest.write_bytes(data)
    changed = {i for i in range(len(data)) if data[i] != original[i]} if len(data) == len(original) else None
    try:
        image = load_snapshot(newest)
    except KraftlakeError as exc:
        assert data != original, f"a seed is refused: {exc}"
        assert str(newest) in str(exc), f"the error names the file: {exc}"
        if original is setup()[1][0]:
            # refused: image_at answers from the older snapshot plus the log, as from the log alone
            skipped: list[Path] = []
            for n, want in truth.items():
                got = image_at(d, n, on_skip=lambda p, e: skipped.append(p))
                assert got.state_equals(want) and got.offset == n, f"a wrong answer at {n} after {how}"
            assert skipped == [newest, newest]
        raise
    if data == original or (changed is not None and changed <= _uncovered(original)):
        assert image.state_equals(images[original]), (
            f"a change the CRC does not cover changed the state ({how})"
        )
    if changed is not None and changed - _uncovered(original):
        # a change the CRC covers got through only if the CRCs were fixed
        assert "crc" in how, f"a CRC-covered change was accepted ({how})"
    assert image.offset == NEWEST - 1
    # what was loaded holds a whole snapshot: header first, footer last
    records = list(iter_records(BatchReader(data, "fuzz")))
    assert records[0].type == "SnapshotHeaderRecord" and records[-1].type == "SnapshotFooterRecord"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        image_at(d, ASKED[-1])  # a loadable snapshot plus the tail: typed error or an image


def test_fuzz_snapshots() -> None:
    _, seeds, _, _ = setup()
    assert run("snapshots", seeds, check, iterations=200) > 0
