"""Which cluster a reader of a warehouse reads, and the refusals when that is not clear: one text for the Spark
readers and the reader without a JVM."""

from __future__ import annotations

from pathlib import Path


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
