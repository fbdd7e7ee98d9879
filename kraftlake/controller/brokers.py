"""What the control managers ask of the image's brokers: is one registered at this epoch, may it hold a
replica, which log directory does a new replica on it get.

These read the image only, so the cluster, replication and producer id managers share them without
depending on each other.
"""

from __future__ import annotations

from collections.abc import Callable

from kraftlake.controller.result import ApiError, Errors
from kraftlake.image import MetadataImage
from kraftlake.image.model import MIGRATING_DIR

UNASSIGNED_DIR = "AAAAAAAAAAAAAAAAAAAAAA"
"""Kafka's ``DirectoryId.UNASSIGNED``: a replica on a broker with several log directories, not yet placed."""


def check_broker_epoch(img: MetadataImage, broker_id: int, epoch: int) -> ApiError | None:
    """None if ``broker_id`` is registered with ``epoch``, else the error a broker request gets."""
    reg = img.brokers.get(broker_id)
    if reg is None:
        return ApiError(Errors.BROKER_ID_NOT_REGISTERED, f"Broker {broker_id} is not registered")
    if reg.epoch != epoch:
        return ApiError(
            Errors.STALE_BROKER_EPOCH, f"Expected broker epoch {reg.epoch}, but got broker epoch {epoch}"
        )
    return None


def acceptable(img: MetadataImage, exclude: frozenset[int] = frozenset()) -> Callable[[int], bool]:
    """Whether a broker may be in an ISR or lead: registered, unfenced, not shutting down, not excluded."""
    brokers = img.brokers

    def ok(b: int) -> bool:
        reg = brokers.get(b)
        return reg is not None and not reg.fenced and not reg.in_controlled_shutdown and b not in exclude

    return ok


def default_dir(img: MetadataImage) -> Callable[[int], str]:
    """The directory a new replica on a broker gets: its only one, unassigned among several, or migrating."""

    def d(b: int) -> str:
        reg = img.brokers.get(b)
        if reg is None or not reg.directories:
            return MIGRATING_DIR
        return reg.directories[0] if len(reg.directories) == 1 else UNASSIGNED_DIR

    return d


def usable_brokers(img: MetadataImage) -> list[int]:
    """The brokers new replicas are placed on: unfenced and not in controlled shutdown."""
    return [b for b, r in img.brokers.items() if not r.fenced and not r.in_controlled_shutdown]
