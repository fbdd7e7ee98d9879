"""The history tables' contents, pure (no Spark): entity versions over offsets, computed by replaying records
through the image (the oracle).

Public API: :data:`ENTITIES` (the tables, their keys and columns), :class:`HistoryBuilder` (records -> versions
and closes per slice), :class:`HistoryBatch`, :func:`changes` (entity changes between two images),
:func:`entity_rows` (an image as rows), :func:`quota_entity_key`, :func:`without_written` (a slice less what a killed run wrote).
The data-at-risk windows: :mod:`kraftlake.history.risk` (the oracle, replaying a log) and
:mod:`kraftlake.history.risk_intervals` (from the history tables' rows).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kraftlake.history.entities import ENTITIES, Entity

if TYPE_CHECKING:
    from kraftlake.history.builder import HistoryBatch, HistoryBuilder, HistoryReplayError, without_written
    from kraftlake.history.changes import Change, changes
    from kraftlake.history.rows import entity_rows, quota_entity_key

# the builder imports the image and the record codecs (half a second of a cold command): a reader that needs
# only ENTITIES (``kraftlake state`` without a JVM) does not load them
_LAZY = {
    "HistoryBatch": "builder",
    "HistoryBuilder": "builder",
    "HistoryReplayError": "builder",
    "without_written": "builder",
    "Change": "changes",
    "changes": "changes",
    "entity_rows": "rows",
    "quota_entity_key": "rows",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "ENTITIES",
    "Change",
    "Entity",
    "HistoryBatch",
    "HistoryBuilder",
    "HistoryReplayError",
    "changes",
    "entity_rows",
    "quota_entity_key",
    "without_written",
]
