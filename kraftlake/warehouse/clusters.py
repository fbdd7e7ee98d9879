"""What may name a cluster, and which cluster a reader of a warehouse reads with the refusals when that is not
clear: one text for the Spark readers and the reader without a JVM."""

from __future__ import annotations

import re
from pathlib import Path

#: What a cluster's name may hold: it goes into SQL literals, Delta transaction ids, lock files and messages as
#: it is.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def name_refusal(name: str) -> str | None:
    """Why ``name`` cannot name a cluster (:data:`NAME_PATTERN`), None when it can."""
    if NAME_PATTERN.fullmatch(name):
        return None
    return f"cluster name {name!r}: use letters, digits, '.', '_' or '-' (up to 100, a letter or digit first)"


def choose(held: list[str], warehouse: str | Path, name: str | None) -> str:
    """``name``, which the warehouse must hold, or the one cluster it holds; otherwise :class:`ValueError`
    with the refusal, which names the clusters held."""
    if name is not None:
        if name not in held:
            listed = f" ({', '.join(held)})" if held else ""
            raise ValueError(f"{warehouse}: no cluster {name!r} in the warehouse{listed}")
        return name
    if len(held) == 1:
        return held[0]
    if not held:
        raise ValueError(f"{warehouse}: the warehouse holds no cluster: ingest one first")
    raise ValueError(
        f"{warehouse}: the warehouse holds {len(held)} clusters ({', '.join(held)}): name one with --cluster"
    )
