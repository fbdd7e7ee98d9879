"""The warehouse's answers against the image: ``<entity>_at(N)`` rows next to ``entity_rows`` of the image at N,
shared by the Spark tests and the compatibility matrix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kraftlake.history import ENTITIES, entity_rows
from kraftlake.image import MetadataImage, image_at


def canon(rows: list[dict[str, Any]]) -> list[str]:
    """Rows as sorted JSON texts: equal lists of rows in any order compare equal."""
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def plain(v: Any) -> Any:
    """A Spark value (rows and lists of rows nested) as plain dicts and lists."""
    if hasattr(v, "asDict"):
        return {k: plain(x) for k, x in v.asDict().items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def query_at(
    spark: Any, table: str, offsets: list[int], cluster: str | None = None
) -> dict[int, list[dict[str, Any]]]:
    """``<table>_at(n)`` (of ``cluster`` when named) for every n in one Spark action, without ``from_offset``."""
    values = ", ".join(f"({n})" for n in offsets)
    named = "" if cluster is None else f", '{cluster}'"
    df = spark.sql(f"SELECT o.n AS _n, f.* FROM VALUES {values} AS o(n), LATERAL {table}_at(o.n{named}) f")
    out: dict[int, list[dict[str, Any]]] = {n: [] for n in offsets}
    for row in df.collect():
        d = {k: plain(v) for k, v in row.asDict().items()}
        n = d.pop("_n")
        d.pop("from_offset")
        out[n].append(d)
    return out


def assert_entities_match(
    spark: Any, log_dir: Path, offsets: list[int], cluster: str | None = None
) -> dict[int, MetadataImage]:
    """Every entity table (of ``cluster`` when named) at each offset equals the image of `log_dir` replayed to
    it; returns those images."""
    images = {n: image_at(log_dir, n) for n in offsets}
    for table in ENTITIES:
        got = query_at(spark, table, offsets, cluster)
        for n in offsets:
            assert canon(got[n]) == canon(entity_rows(images[n])[table]), (table, n)
    return images
