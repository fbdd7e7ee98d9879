"""Bad text files and snapshots: typed errors naming the file and line, as Kafka's readers refuse them.

Kafka reads ``quorum-state``, ``leader-epoch-checkpoint``, the offset checkpoints and ``partition.metadata`` as
UTF-8 and parses their numbers with ``Integer.parseInt`` / ``Long.parseLong``; a ``.checkpoint`` must start with
a SnapshotHeader control batch and end with a SnapshotFooter.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from shared_paths import KAFKA_LOGS

from kraftlake.errors import KraftlakeError
from kraftlake.logformat import (
    FileAccessError,
    MalformedFileError,
    SnapshotFormatError,
    build_control_batch,
    build_data_batch,
    iter_valid_snapshot,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    read_quorum_state,
)
from kraftlake.logformat.batch import ControlRecordType
from kraftlake.logformat.text import parse_java_int

FIXTURE = KAFKA_LOGS / "kafkademo-multi-epoch"
QS_V0 = (
    '{"clusterId":"","leaderId":1,"leaderEpoch":%s,"votedId":-1,"appliedOffset":0,'
    '"currentVoters":[{"voterId":1}],"data_version":0}'
)

READERS: dict[str, tuple[Callable[[Path], Any], str]] = {
    "quorum-state": (read_quorum_state, QS_V0 % "2"),
    "leader-epoch-checkpoint": (read_leader_epoch_checkpoint, "0\n2\n0 0\n6 712\n"),
    "recovery-point-offset-checkpoint": (read_offset_checkpoint, "0\n1\n__cluster_metadata 0 3072\n"),
    "partition.metadata": (read_partition_metadata, "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"),
    "meta.properties": (read_meta_properties, "#\nnode.id=1\nversion=1\ncluster.id=c\n"),
}


@pytest.mark.parametrize("name", sorted(READERS))
def test_every_text_file_reads_its_good_form(tmp_path: Path, name: str) -> None:
    reader, text = READERS[name]
    p = tmp_path / name
    p.write_text(text)
    assert reader(p)


@pytest.mark.parametrize("name", [n for n in sorted(READERS) if n != "meta.properties"])
def test_non_utf8_is_a_typed_error_naming_the_line(tmp_path: Path, name: str) -> None:
    reader, text = READERS[name]
    lines = text.split("\n")
    lines[-1 if lines[-1] else -2] += "\xff"  # the last line gets a byte that is not UTF-8
    bad_line = len([x for x in lines if x]) if name != "quorum-state" else 1
    p = tmp_path / name
    p.write_bytes("\n".join(lines).encode("latin-1"))
    with pytest.raises(MalformedFileError) as info:
        reader(p)
    assert info.value.source == str(p) and info.value.line == bad_line
    assert f"{p} line {bad_line}: not UTF-8" in str(info.value)


def test_meta_properties_is_latin1_as_java_reads_it(tmp_path: Path) -> None:
    p = tmp_path / "meta.properties"
    p.write_bytes(b"node.id=1\nversion=1\ncluster.id=caf\xe9\n")
    assert read_meta_properties(p).cluster_id == "caf\u00e9"
    p.write_bytes(b"node.id=1\nversion=1\ncluster.id=\\uZZZZ\n")
    with pytest.raises(MalformedFileError, match="uxxxx"):
        read_meta_properties(p)


@pytest.mark.parametrize(
    "value", ["2147483648", "-2147483649", "1_0", "\u0661\u0662", " 5", "5 ", "0x5", "", "+"]
)
def test_java_int_refuses_what_parseint_refuses(value: str) -> None:
    assert parse_java_int(value) is None


def test_java_int_reads_what_parseint_reads() -> None:
    assert [parse_java_int(v) for v in ("0", "-1", "+7", "2147483647", "-2147483648", "007")] == [
        0,
        -1,
        7,
        2**31 - 1,
        -(2**31),
        7,
    ]


@pytest.mark.parametrize("epoch", ["2147483648", "1_0", "\u0661\u0662"])
def test_leader_epoch_checkpoint_refuses_bad_numbers(tmp_path: Path, epoch: str) -> None:
    p = tmp_path / "leader-epoch-checkpoint"
    p.write_text(f"0\n2\n0 0\n{epoch} 712\n", encoding="utf-8")
    with pytest.raises(MalformedFileError) as info:
        read_leader_epoch_checkpoint(p)
    assert info.value.line == 4 and "epoch" in str(info.value)


@pytest.mark.parametrize(
    "text",
    ["0\n1\nt 0 1_0\n", "0\n1\nt 2147483648 5\n", "0\n1\n t 0 5\n", "0\n1\u00a0\n", "0\n1\nt\u00a00 5\n"],
)
def test_offset_checkpoint_refuses_bad_numbers_and_fields(tmp_path: Path, text: str) -> None:
    p = tmp_path / "recovery-point-offset-checkpoint"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(MalformedFileError):
        read_offset_checkpoint(p)


@pytest.mark.parametrize("epoch", ["2147483648", "-2147483649", "1e3", "true", '"5"'])
def test_quorum_state_refuses_out_of_range_epochs(tmp_path: Path, epoch: str) -> None:
    p = tmp_path / "quorum-state"
    p.write_text(QS_V0 % epoch)
    with pytest.raises(MalformedFileError, match="leaderEpoch"):
        read_quorum_state(p)
    p.write_text(QS_V0 % "2147483647")
    state = read_quorum_state(p)
    assert state is not None and state.leader_epoch == 2**31 - 1


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        '{"data_version":1,"leaderId":1,"leaderEpoch":1,"votedId":1,"votedDirectoryId":"not a uuid"}',
        QS_V0.replace('"voterId":1', '"voterId":2147483648') % "1",
    ],
)
def test_quorum_state_malformed_json(tmp_path: Path, text: str) -> None:
    p = tmp_path / "quorum-state"
    p.write_text(text)
    with pytest.raises(MalformedFileError):
        read_quorum_state(p)


@pytest.mark.parametrize(
    "text",
    [
        "version: 1_0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ",
        "version: 0\ntopic_id: xyz",
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA",
        "version: 0\n",
        "version: \u0660\n",
    ],
)
def test_partition_metadata_refuses_bad_values(tmp_path: Path, text: str) -> None:
    p = tmp_path / "partition.metadata"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(MalformedFileError):
        read_partition_metadata(p)


@pytest.mark.parametrize(
    "props",
    [
        "node.id=1_0\nversion=1\n",
        "node.id=2147483648\nversion=1\n",
        "node.id=1\nversion=\u0661\n",
        "node.id=1\nversion=1\ndirectory.id=x\n",
    ],
)
def test_meta_properties_refuses_bad_values(tmp_path: Path, props: str) -> None:
    p = tmp_path / "meta.properties"
    p.write_text(props, encoding="latin-1", errors="replace") if props.isascii() else p.write_bytes(
        props.encode("utf-8")
    )
    with pytest.raises(MalformedFileError):
        read_meta_properties(p)


@pytest.mark.parametrize("name", sorted(READERS))
def test_a_directory_in_place_of_a_file_is_a_typed_error(tmp_path: Path, name: str) -> None:
    reader, _ = READERS[name]
    (tmp_path / name).mkdir()
    with pytest.raises(FileAccessError, match=name):
        reader(tmp_path / name)


def test_lines_end_only_where_java_ends_them(tmp_path: Path) -> None:
    # Python's splitlines also cuts at \x1c, \x85, \u2028...: Java's readLine does not, so neither do we
    p = tmp_path / "leader-epoch-checkpoint"
    p.write_text("0\n1\n5\u2028 7\n", encoding="utf-8")
    with pytest.raises(MalformedFileError):
        read_leader_epoch_checkpoint(p)
    p.write_text("0\r\n1\r6 712\r\n", encoding="utf-8")
    assert [(e.epoch, e.start_offset) for e in read_leader_epoch_checkpoint(p)] == [(6, 712)]


# ------------------------------------------------------------------------------------------------ snapshots
def _header() -> bytes:
    return build_control_batch(
        0, 1, 5, [(ControlRecordType.SNAPSHOT_HEADER, b"\x00\x00" + b"\x00" * 8 + b"\x00")]
    )


def _footer(offset: int) -> bytes:
    return build_control_batch(offset, 1, 5, [(ControlRecordType.SNAPSHOT_FOOTER, b"\x00\x00\x00")])


GOOD = _header() + build_data_batch(1, 1, 5, [b"\x01\x0c\x00"]) + _footer(2)
BAD_SNAPSHOTS = {
    "empty": b"",
    "header only": _header(),
    "no header": build_data_batch(1, 1, 5, [b"\x01\x0c\x00"]) + _footer(2),
    "footer first": _footer(0) + _footer(1),
    "no footer": _header() + build_data_batch(1, 1, 5, [b"\x01\x0c\x00"]),
    "leader change first": build_control_batch(0, 1, 5, [(ControlRecordType.LEADER_CHANGE, b"\x00" * 14)])
    + _footer(1),
}


def test_a_whole_snapshot_passes() -> None:
    for path in (FIXTURE / "bootstrap.checkpoint", KAFKA_LOGS / "minimal" / "bootstrap.checkpoint"):
        assert len(list(iter_valid_snapshot(path))) == 3


@pytest.mark.parametrize("name", sorted(BAD_SNAPSHOTS))
def test_snapshots_kafka_would_not_load_are_refused(tmp_path: Path, name: str) -> None:
    p = tmp_path / "00000000000000000003-0000000001.checkpoint"
    p.write_bytes(GOOD)
    assert len(list(iter_valid_snapshot(p))) == 3
    p.write_bytes(BAD_SNAPSHOTS[name])
    with pytest.raises(SnapshotFormatError) as info:
        list(iter_valid_snapshot(p))
    assert info.value.source == str(p) and isinstance(info.value, KraftlakeError)


def test_a_missing_snapshot_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(FileAccessError, match=r"nope\.checkpoint"):
        list(iter_valid_snapshot(tmp_path / "nope.checkpoint"))
