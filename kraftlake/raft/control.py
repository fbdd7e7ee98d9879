"""The bodies of the control entries the raft layer writes itself: LeaderChange at the start of an epoch.

The encoding is Kafka's LeaderChangeMessage (version 0 body, as Kafka writes and reads control bodies), from
the one message codec in `kraftlake.protocol`; raft never sees metadata records.
"""

from __future__ import annotations

from collections.abc import Iterable

from kraftlake.protocol.control import ControlRecordType, decode_control_body, encode_control_body
from kraftlake.protocol.errors import ProtocolError
from kraftlake.protocol.messages import LeaderChangeMessage
from kraftlake.raft.errors import RaftError

LEADER_CHANGE_CONTROL_TYPE = int(ControlRecordType.LEADER_CHANGE)
"""Kafka's `ControlRecordType.LEADER_CHANGE`; the control record key is (version 0, type)."""


def _voters(ids: Iterable[int]) -> tuple[LeaderChangeMessage.Voter, ...]:
    return tuple(LeaderChangeMessage.Voter(voter_id=v) for v in sorted(ids))


def encode_leader_change(leader_id: int, voters: Iterable[int], granting_voters: Iterable[int]) -> bytes:
    """The value bytes of a LeaderChange control record (LeaderChangeMessage, version 0 body)."""
    message = LeaderChangeMessage(
        version=0, leader_id=leader_id, voters=_voters(voters), granting_voters=_voters(granting_voters)
    )
    return encode_control_body(message)


def decode_leader_change(data: bytes) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(leader id, voters, granting voters) of a LeaderChange body."""
    try:
        message = decode_control_body(LEADER_CHANGE_CONTROL_TYPE, data)
    except ProtocolError as exc:
        raise RaftError(f"malformed LeaderChange body: {exc}") from exc
    assert isinstance(message, LeaderChangeMessage)
    return (
        message.leader_id,
        tuple(v.voter_id for v in message.voters),
        tuple(v.voter_id for v in message.granting_voters),
    )
