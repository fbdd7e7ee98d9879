"""The bodies of the control entries the raft layer writes itself.

Only LeaderChange (control type 2) for now. The encoding is kept behind `encode_leader_change` /
`decode_leader_change` so that it can be swapped for `kraftlake.protocol.control` once that lands: it writes
LeaderChangeMessage v0 in Kafka's flexible encoding (Version i16, LeaderId i32, Voters and GrantingVoters as
compact arrays of {VoterId i32, tagged fields}, tagged fields).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from kraftlake.raft.errors import RaftError

LEADER_CHANGE_CONTROL_TYPE = 2
"""Kafka's `ControlRecordType.LEADER_CHANGE`; the control record key is (version 0, type)."""


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise RaftError(f"truncated varint at byte {pos}")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _voters(ids: Iterable[int]) -> bytes:
    ids = sorted(ids)
    return _uvarint(len(ids) + 1) + b"".join(struct.pack(">i", v) + b"\x00" for v in ids)


def encode_leader_change(leader_id: int, voters: Iterable[int], granting_voters: Iterable[int]) -> bytes:
    """The value bytes of a LeaderChange control record (LeaderChangeMessage v0)."""
    return struct.pack(">hi", 0, leader_id) + _voters(voters) + _voters(granting_voters) + b"\x00"


def decode_leader_change(data: bytes) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(leader id, voters, granting voters) of a LeaderChange body written by `encode_leader_change`."""
    if len(data) < 6:
        raise RaftError("LeaderChange body shorter than 6 bytes")
    _, leader = struct.unpack_from(">hi", data, 0)
    pos = 6
    lists: list[tuple[int, ...]] = []
    for _ in range(2):
        count, pos = _read_uvarint(data, pos)
        ids = []
        for _ in range(count - 1):
            ids.append(struct.unpack_from(">i", data, pos)[0])
            pos += 4
            tags, pos = _read_uvarint(data, pos)
            if tags:
                raise RaftError(f"unexpected tagged fields at byte {pos}")
        lists.append(tuple(ids))
    return leader, lists[0], lists[1]
