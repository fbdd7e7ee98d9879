"""``TopicIdMinter``: the ids an active controller draws for new topics, never one the log has held.

Kafka draws a topic id with ``Uuid.randomUuid`` (122 random bits): a log never holds two topics under one id.
A seeded generator alone does not give that: a controller rebuilt from its data directory (restart, snapshot
load) starts its generator again, and the draws of an earlier term come back for other topics. So:

- with a seed (reproducible simulations), each term draws from its own stream, derived from the seed, the
  node, the epoch and the log end offset at activation: no two terms (of any voter) share a stream, and an
  activation at the same point of the same log draws the same ids;
- without one, draws come from the operating system's generator, as Kafka's do;
- either way, a draw equal to a topic id the controller has seen (live in its image, or replayed since its
  image was loaded: the deleted topics of the retained history) is drawn again.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Iterable

from kraftlake.image import MetadataImage
from kraftlake.protocol import messages as m

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # Kafka's Uuid.METADATA_TOPIC_ID (0, 1)

_TOPIC_RECORD = m.TopicRecord


def random_uuid(rng: random.Random) -> str:
    """Kafka's ``Uuid.randomUuid`` from ``rng``: never zero, the metadata topic id or '-'-led."""
    while True:
        u = base64.urlsafe_b64encode(rng.getrandbits(128).to_bytes(16, "big")).decode().rstrip("=")
        if u not in (ZERO_UUID, METADATA_TOPIC_ID) and not u.startswith("-"):
            return u


class TopicIdMinter:
    """New topic ids for one controller.

    Parameters
    ----------
    seed : int or None
        None: the operating system's generator. An int: one seeded stream per term (``start_term``).
    node_id : int
        The controller's node id, mixed into each term's stream.
    image : MetadataImage
        The image the controller starts from: its topic ids are taken.
    """

    def __init__(self, seed: int | None, node_id: int, image: MetadataImage) -> None:
        self.seed = seed
        self.node_id = node_id
        self._rng: random.Random = random.SystemRandom() if seed is None else random.Random(seed)
        self._taken: set[str] = set(image.topics_by_id)

    def start_term(self, epoch: int, end_offset: int) -> None:
        """This controller becomes active at ``epoch`` with its log ending at ``end_offset``."""
        if self.seed is not None:
            self._rng = random.Random(f"kraftlake-topic-ids/{self.seed}/{self.node_id}/{epoch}/{end_offset}")

    def observe_all(self, records: Iterable[object]) -> None:
        """Records being replayed (committed ones, or the active controller's own): their topic ids are taken."""
        taken = self._taken
        for r in records:
            if type(r) is _TOPIC_RECORD:
                taken.add(r.topic_id)

    def taken(self, topic_id: str) -> bool:
        """Whether ``topic_id`` is one this controller has seen a topic under."""
        return topic_id in self._taken

    def mint(self, image: MetadataImage) -> str:
        """A topic id not live in ``image`` and not seen before; taken from now on."""
        live = image.topics_by_id
        while True:
            topic_id = random_uuid(self._rng)
            if topic_id not in self._taken and topic_id not in live:
                self._taken.add(topic_id)
                return topic_id
