"""Writing a figure: standalone HTML (always), PNG only where ``vl-convert-python`` is importable.

Why the HTML loads Vega from a CDN: altair writes the Vega, Vega-Lite and vega-embed scripts into the page
(``inline=True``) only through ``vl-convert-python``, which is not among kraftlake's dependencies, and no other
installed package carries those scripts. So the page holds the chart's whole spec and data, and its
``<script src=...>`` lines fetch the three libraries from jsDelivr when it is opened; where ``vl_convert`` is
importable the page is written self-contained instead.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from kraftlake.plot.options import PlotError

FORMATS = (".html", ".png")


def _has_vl_convert() -> bool:
    return importlib.util.find_spec("vl_convert") is not None


def check_output(path: str | Path) -> Path:
    """Refuse an output this machine cannot write, before any work: returns the path."""
    out = Path(path)
    suffix = out.suffix.lower()
    if suffix not in FORMATS:
        raise PlotError(f"--out {out}: write .html (or .png with vl-convert-python installed)")
    if suffix == ".png" and not _has_vl_convert():
        raise PlotError(
            f"--out {out}: PNG needs the vl-convert-python package, which is not installed "
            "(pip install vl-convert-python), or write .html"
        )
    if out.parent.exists() and not out.parent.is_dir():
        raise PlotError(f"--out {out}: {out.parent} is not a directory")
    return out


def save(chart: Any, path: str | Path) -> Path:
    """Write ``chart`` (an altair chart) to ``path`` (.html or .png, see :func:`check_output`); returns it."""
    import altair as alt

    out = check_output(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    # the data is embedded in the file: altair's 5,000-row guard is for notebooks, where it is sent to a
    # browser each time; a file of a long history is the point here
    with alt.data_transformers.disable_max_rows():
        if out.suffix.lower() == ".png":
            chart.save(str(out), scale_factor=2)
        else:
            chart.save(str(out), inline=_has_vl_convert())
    return out
