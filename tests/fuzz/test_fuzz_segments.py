"""Fuzz target: segments and batches, read as ``decode`` and ``image`` read them.

Windows of a real Kafka segment (and batches re-encoded with every codec, control batches) are mutated: bit
flips, interesting values, header fields (codec ids 5-7 included), cuts, insertions, splices, with the CRCs
fixed half of the time so that the mutants reach the record and value decoders and the image replay.

Right answers: a seed reads to its known records; a cut of a seed recovers exactly the whole batches before
the cut (Kafka's log recovery); whatever else is read holds what the batch headers promise.
"""

from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path

from fuzz.fuzzing import Mutator, run
from shared_paths import KAFKA_LOGS

from kraftlake.image import EMPTY, ImageLoader, MetadataImage, load_log
from kraftlake.image.errors import ImageError
from kraftlake.logformat import (
    BatchReader,
    Compression,
    LogFormatError,
    build_data_batch,
    read_file_batches,
    recover_batches,
)
from kraftlake.records import iter_records

SEGMENT = KAFKA_LOGS / "kafkademo-multi-epoch" / "__cluster_metadata-0" / "00000000000000000000.log"
LIMIT = 1 << 20  # decompressed bytes per batch
WINDOWS = ((0, 6), (40, 8), (300, 5), (705, 10), (1500, 6), (3000, 8))


@lru_cache(maxsize=1)
def corpus() -> tuple[list[bytes], dict[bytes, tuple[MetadataImage, list[tuple[int, str]]]]]:
    """Seed inputs, and for each its starting image and expected (offset, type) of every record."""
    batches = read_file_batches(SEGMENT)
    loader = ImageLoader(EMPTY)
    images: dict[int, MetadataImage] = {}
    starts = {batches[i].base_offset for i, _ in WINDOWS}
    for b in batches:
        if b.base_offset in starts:
            images[b.base_offset] = loader.image()
        for mr in iter_records([b]):
            loader.feed(mr)
    seeds: list[bytes] = []
    expected: dict[bytes, tuple[MetadataImage, list[tuple[int, str]]]] = {}
    for i, n in WINDOWS:
        window = batches[i : i + n]
        image = images[window[0].base_offset]
        records = [(mr.offset, mr.type) for mr in iter_records(window)]
        raw = b"".join(b.raw for b in window)
        seeds.append(raw)
        expected[raw] = (image, records)
        data = [b for b in window if not b.is_control]
        for codec in Compression:
            if codec == Compression.NONE or not data:
                continue
            # the same records, batched again with a codec (the values only: KRaft batches have nothing else)
            again = b"".join(
                build_data_batch(
                    b.base_offset,
                    b.partition_leader_epoch,
                    b.base_timestamp,
                    [r.value or b"" for r in b.records],
                    compression=codec,
                )
                for b in data
            )
            seeds.append(again)
            expected[again] = (image, [(mr.offset, mr.type) for mr in iter_records(data)])
    return seeds, expected


@lru_cache(maxsize=1)
def _scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="kraftlake-fuzz-"))


def _read(data: bytes, image: MetadataImage) -> list[tuple[int, str]]:
    """What ``image``/``decode`` do with a segment: every batch, every record decoded and replayed."""
    loader = ImageLoader(image)
    out = []
    for batch in BatchReader(data, "fuzz.log", max_decompressed_bytes=LIMIT):
        assert batch.record_count >= 0 and batch.size >= 61
        batch.compression  # noqa: B018 - decode counts it: a typed error or a known codec
        records = list(iter_records([batch]))
        assert [mr.offset for mr in records] == [r.offset for r in batch.records]
        for mr in records:
            assert mr.batch_offset == batch.base_offset and mr.epoch == batch.partition_leader_epoch
            loader.feed(mr)
            out.append((mr.offset, mr.type))
    loader.image()
    return out


def check(data: bytes, original: bytes, how: str) -> None:
    _, expected = corpus()
    image, records = expected[original]
    if data == original:
        assert _read(data, image) == records, "a seed reads to its records"
    elif original.startswith(data):
        # a cut: recovery keeps exactly the whole batches before it, and they read to their records
        kept, report = recover_batches(data, "fuzz.log", max_decompressed_bytes=LIMIT)
        whole, pos = [], 0
        for b in BatchReader(original, "seed"):
            if pos + b.size > len(data):
                break
            whole.append(b.raw)
            pos += b.size
        assert [b.raw for b in kept] == whole and report.valid_bytes == pos
        assert report.truncated_bytes == len(data) - pos
        assert _read(data[:pos], image) == [
            r for r in records if r[0] <= (kept[-1].last_offset if kept else -1)
        ]
    try:
        _read(data, image)
    except LogFormatError as exc:
        assert (
            exc.source == "fuzz.log" and exc.position is not None and "fuzz.log at byte position " in str(exc)
        )
    except ImageError:
        # the same records through the image layer's file reader: the replay error names the file and offset
        path = _scratch() / "00000000000000000000.log"
        path.write_bytes(data)
        try:
            load_log(path, image=image)
        except ImageError as exc:
            assert exc.source == str(path) and str(exc).startswith(str(path)), exc
        except LogFormatError:
            pass
        else:
            raise AssertionError("the records replayed in memory but not from the file") from None
    # recovery never raises, and accounts for every byte
    _, report = recover_batches(data, "fuzz.log", max_decompressed_bytes=LIMIT)
    assert report.valid_bytes + report.truncated_bytes == len(data)


class ValueMutator(Mutator):
    """Also mutates record values inside well-framed batches (re-encoded with valid CRCs), so that mutants reach
    the metadata record decoders and the image replay: a value's bytes changed, or a value of another window
    put in its place (a record about a topic, broker or producer the image does not know)."""

    def mutate(self, data: bytes) -> tuple[bytes, str]:
        if self.rng.random() < 0.5:
            return super().mutate(data)
        try:
            batches = [b for b in BatchReader(data, "seed") if not b.is_control]
            values = [[r.value or b"" for r in b.records] for b in batches]
        except LogFormatError:
            return super().mutate(data)
        if not batches:
            return super().mutate(data)
        rng = self.rng
        i = rng.randrange(len(batches))
        j = rng.randrange(len(values[i]))
        value = bytearray(values[i][j])
        if rng.random() < 0.3:
            donor = [
                r.value or b""
                for b in BatchReader(rng.choice(self.seeds), "seed")
                if not b.is_control
                for r in b.records
            ]
            value = bytearray(rng.choice(donor)) if donor else value
            how = "value-swap"
        else:
            mutant, how = super().mutate(bytes(value))
            value = bytearray(mutant)
            how = f"value-{how}"
        values[i][j] = bytes(value)
        out = b"".join(
            build_data_batch(
                b.base_offset,
                b.partition_leader_epoch,
                b.base_timestamp,
                v,
                compression=rng.choice((b.compression, Compression.NONE)),
            )
            for b, v in zip(batches, values, strict=True)
        )
        return out, how


def test_fuzz_segments() -> None:
    seeds, _ = corpus()
    assert run("segments", seeds, check, iterations=1500, mutator=ValueMutator) > 0
