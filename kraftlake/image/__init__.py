"""The metadata image: the state of the cluster metadata at an offset (the oracle).

Public API: :class:`MetadataImage`, :data:`EMPTY`, :class:`MetadataDelta`, :func:`replay`,
:func:`replay_all`, :class:`ImageLoader`, :func:`load_records`, :func:`load_snapshot`, :func:`load_log`,
:func:`image_at`, :func:`write_snapshot`, :func:`snapshot_records`, :func:`image_json`, :func:`shell_tree`.
"""

from __future__ import annotations

from kraftlake.image.delta import MetadataDelta
from kraftlake.image.image import EMPTY, MetadataImage
from kraftlake.image.loader import ImageLoader, load_records, replay, replay_all
from kraftlake.image.model import OpenTransaction, Provenance
from kraftlake.image.render import image_json, shell_tree
from kraftlake.image.snapshot import snapshot_bytes, snapshot_records, write_snapshot
from kraftlake.image.source import image_at, load_log, load_path, load_snapshot

__all__ = [
    "EMPTY",
    "ImageLoader",
    "MetadataDelta",
    "MetadataImage",
    "OpenTransaction",
    "Provenance",
    "image_at",
    "image_json",
    "load_log",
    "load_path",
    "load_records",
    "load_snapshot",
    "replay",
    "replay_all",
    "shell_tree",
    "snapshot_bytes",
    "snapshot_records",
    "write_snapshot",
]
