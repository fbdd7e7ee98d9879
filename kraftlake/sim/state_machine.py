"""The simulated application: a digest chain over every committed entry, snapshottable in a few bytes."""

from __future__ import annotations

import hashlib
import json
import struct

from kraftlake.raft.messages import Entry
from kraftlake.sim.errors import InvariantViolation


def chain(digest: bytes, entry: Entry) -> bytes:
    """The digest after applying `entry` to a state with `digest`."""
    header = struct.pack(">qi?", entry.offset, entry.epoch, entry.is_control)
    return hashlib.blake2b(digest + header + entry.value, digest_size=16).digest()


class DigestStateMachine:
    """Applies committed entries in order; its state is (next offset, digest of everything applied)."""

    def __init__(self) -> None:
        self.next_offset = 0
        self.digest = b""

    def apply(self, entry: Entry) -> bytes:
        """Apply one entry; it must be the next offset."""
        if entry.offset != self.next_offset:
            raise InvariantViolation(
                "contiguous-apply", f"applied offset {entry.offset}, expected {self.next_offset}"
            )
        self.digest = chain(self.digest, entry)
        self.next_offset += 1
        return self.digest

    def snapshot(self) -> bytes:
        """The state as snapshot bytes (padded so that it spans several FetchSnapshot chunks)."""
        body = {"end": self.next_offset, "digest": self.digest.hex(), "pad": "x" * 150}
        return json.dumps(body, sort_keys=True).encode()

    def load(self, data: bytes) -> None:
        """Replace the state by a snapshot's."""
        body = json.loads(data)
        self.next_offset = int(body["end"])
        self.digest = bytes.fromhex(body["digest"])
