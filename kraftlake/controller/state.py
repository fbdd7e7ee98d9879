"""``ControllerState``: what the control managers read of the quorum controller they serve.

A manager turns a command into records and a response from the controller's state; it never changes that
state (only the controller's replay does). Each manager sees the controller through this Protocol rather than
the ``QuorumController`` class, so that no manager module imports the controller's module and a manager can
be driven by any object with these members.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from kraftlake.controller.config import ControllerConfig
from kraftlake.controller.ids import TopicIdMinter
from kraftlake.image import MetadataImage
from kraftlake.image.model import PartitionRegistration, TopicImage


class ControllerState(Protocol):
    """The controller's state as its managers read it."""

    @property
    def config(self) -> ControllerConfig:
        """The controller's settings."""
        ...

    @property
    def image(self) -> MetadataImage:
        """The image commands are served against: committed plus this controller's own appends."""
        ...

    @property
    def next_offset(self) -> int:
        """The offset the next appended record gets."""
        ...

    @property
    def topic_ids(self) -> TopicIdMinter:
        """Where new topic ids come from."""
        ...

    def records_len(self, n: int) -> int:
        """How many offsets ``n`` records take when executed (a metadata transaction adds two)."""
        ...

    def partitions_of(
        self, broker_id: int, img: MetadataImage
    ) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
        """The partitions of ``img`` that ``broker_id`` is a replica of (the broker -> partitions index)."""
        ...
