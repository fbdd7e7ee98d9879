"""A log directory with a hole (a follower's mirror that installed a snapshot past its end): the history
builder crosses it from the snapshot, the states outside the hole equal the whole log's, and a record about an
entity born inside the hole is a typed error naming its offset when nothing crosses it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kraftlake.history import ENTITIES, HistoryBuilder, HistoryReplayError
from kraftlake.image import image_at
from kraftlake.image.gaps import gap_at, gap_resolver, log_gaps
from kraftlake.image.snapshot import write_snapshot
from kraftlake.image.source import log_records, segments
from kraftlake.logformat.reader import iter_file_batches
from kraftlake.logformat.segment import segment_filename
from kraftlake.sim.workloads.entities import write_synthetic_log
from tests.history.test_builder import apply_table, at, expected


def gapped_log(tmp_path: Path) -> tuple[Path, Path, int, int]:
    """(whole log, gapped log, first missing offset, next present offset), a topic created inside the hole and
    touched after it: the gapped directory holds the batches before the hole, the snapshot at the
    offset after it and the batches from there, as `kraftlake.follow.mirror` leaves them."""
    whole = write_synthetic_log(tmp_path / "whole", seed=11, steps=400)
    batches = [b for _, seg in segments(whole) for b in iter_file_batches(seg)]
    recs = list(log_records(whole))
    created = {r.record.topic_id: r.offset for r in recs if r.type == "TopicRecord"}
    batch_of = {o: i for i, b in enumerate(batches) for o in range(b.base_offset, b.last_offset + 1)}
    for r in recs:
        # a later record about a topic created three batches or more before it, neither end of the hole inside a
        # metadata transaction
        if r.type in ("RemoveTopicRecord", "PartitionChangeRecord") and r.record.topic_id in created:
            i, j = batch_of[created[r.record.topic_id]], batch_of[r.offset]
            if j - i < 3 or i < 5:
                continue
            first_missing, nxt = batches[i].base_offset, batches[j - 1].base_offset
            image = image_at(whole, nxt - 1)
            if not image.in_transaction and not image_at(whole, first_missing - 1).in_transaction:
                break
    else:
        pytest.fail("the synthetic log has no topic created and touched three batches later")
    gapped = tmp_path / "gapped" / "__cluster_metadata-0"
    gapped.mkdir(parents=True)
    (gapped / segment_filename(0)).write_bytes(b"".join(b.raw for b in batches[:i]))
    (gapped / segment_filename(nxt)).write_bytes(b"".join(b.raw for b in batches[j - 1 :]))
    write_snapshot(image, gapped)
    return whole, gapped, first_missing, nxt


def test_log_gaps_names_the_hole_and_its_snapshot(tmp_path: Path) -> None:
    _, gapped, first_missing, nxt = gapped_log(tmp_path)
    (gap,) = log_gaps(gapped)
    assert (gap.first_missing, gap.next_present) == (first_missing, nxt)
    assert gap.snapshot is not None and gap.snapshot.end_offset == nxt
    assert gap.unknown == (first_missing, nxt - 2)
    assert f"offsets {first_missing}..{nxt - 1} missing" in gap.describe()
    assert gap_at([gap], nxt - 2) is gap and gap_at([gap], nxt - 1) is None
    assert gap_at([gap], first_missing - 1) is None


def test_builder_without_a_resolver_names_the_offset(tmp_path: Path) -> None:
    _, gapped, _, nxt = gapped_log(tmp_path)
    with pytest.raises(HistoryReplayError) as info:
        HistoryBuilder().feed(list(log_records(gapped)))
    assert info.value.offset is not None and info.value.offset >= nxt
    assert f"offset {info.value.offset}" in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize("size", [7, 1000])
def test_builder_crosses_the_hole_from_its_snapshot(tmp_path: Path, size: int) -> None:
    """Slow (about 5 s each): every offset of the gapped log's history compared with the image there."""
    whole, gapped, first_missing, nxt = gapped_log(tmp_path)
    recs = list(log_records(gapped))
    builder = HistoryBuilder(on_gap=gap_resolver(gapped))
    tables: dict[str, list[dict[str, Any]]] = {t: [] for t in ENTITIES}
    jumps = []
    for k in range(0, len(recs), size):
        batch = builder.feed(recs[k : k + size])
        jumps += [(first, image.offset) for first, image in batch.jumps]
        for table in batch.tables():
            apply_table(tables, batch, table)
    assert jumps == [(first_missing, nxt - 1)]
    last = recs[-1].offset
    for n in [*range(0, first_missing), *range(nxt - 1, last + 1)]:
        exp = expected(whole, n)
        for table in ENTITIES:
            assert at(tables, table, n) == exp[table], (n, table)


def test_removing_a_topic_never_seen_is_a_typed_error_naming_its_offset() -> None:
    """The mirror's crash of issue 29: ``AttributeError: 'RemoveTopicRecord' object has no attribute 'name'``."""
    from kraftlake.protocol import messages
    from kraftlake.records.reader import MetadataRecord

    rec = messages.RemoveTopicRecord(topic_id="k-becE_bkFdYluCM3vzhaw")
    mr = MetadataRecord(812, 3, 1_700_000_000_000, 812, False, "RemoveTopicRecord", 9, 0, rec, b"")
    builder = HistoryBuilder()
    with pytest.raises(HistoryReplayError, match=r"offset 812 \(RemoveTopicRecord\).*no such topic"):
        builder.feed([mr])
    assert builder.image.offset == -1  # the image stays as it was


def test_decode_summary_and_image_name_the_hole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from kraftlake.cli import main

    _, gapped, first_missing, nxt = gapped_log(tmp_path)
    snapshot = f"{nxt:020d}-"
    assert main(["decode", "--summary", str(gapped)]) == 0
    out, err = capsys.readouterr()
    (gap,) = json.loads(out)["gaps"]
    assert gap["first_missing"] == first_missing and gap["next_present"] == nxt
    assert gap["snapshot"].startswith(snapshot) and gap["no_state"] == [first_missing, nxt - 2]
    assert f"offsets {first_missing}..{nxt - 1} missing from the log" in err and snapshot in err
    # the state inside the hole is known nowhere: refused in one line; at the snapshot's offset it is known
    assert main(["image", str(gapped), "--offset", str(first_missing + 1)]) == 2
    out, err = capsys.readouterr()
    assert not out and len(err.strip().splitlines()) == 1
    assert f"no state is known at offset {first_missing + 1}" in err and snapshot in err
    assert main(["image", str(gapped), "--offset", str(nxt - 1)]) == 0
    assert json.loads(capsys.readouterr().out)
