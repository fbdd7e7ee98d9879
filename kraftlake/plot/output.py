"""Writing a figure: a self-contained HTML page, PNG or SVG, all three through ``vl-convert-python``.

The page carries Vega, Vega-Lite and vega-embed inline (:func:`vega_script`, the bundle ``vl-convert`` ships for
the Vega-Lite version altair writes), the chart's spec and its data, so it draws wherever it is opened, with no
network. A page is built from pieces a larger page can reuse: the script once in its head, then one
:func:`figure_html` per figure. Charts draw with Vega's SVG renderer (the marks are elements of the page, the
text selectable); the action menu offers the PNG and SVG exports, without "Open in Vega Editor", which needs
the network.

PNG and SVG are rendered by ``vl-convert`` itself (Vega in an embedded JavaScript runtime), with no browser.
"""

from __future__ import annotations

import html
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from kraftlake.plot.options import PlotError

FORMATS = (".html", ".png", ".svg")

EMBED_OPTIONS: dict[str, Any] = {
    "renderer": "svg",
    "actions": {"export": True, "source": False, "compiled": False, "editor": False},
}

#: PNG pixels per CSS pixel of the chart (sharp on a high-density screen)
PNG_SCALE = 2


def check_output(path: str | Path) -> Path:
    """Refuse an output this machine cannot write, before any work: returns the path."""
    out = Path(path)
    if out.suffix.lower() not in FORMATS:
        raise PlotError(f"--out {out}: write {', '.join(FORMATS[:-1])} or {FORMATS[-1]}")
    if out.parent.exists() and not out.parent.is_dir():
        raise PlotError(f"--out {out}: {out.parent} is not a directory")
    return out


def _vl_version() -> str:
    # vl-convert names a Vega-Lite version as v6_4 where altair's schema says v6.4.1
    from altair.vegalite import SCHEMA_VERSION

    return "_".join(SCHEMA_VERSION.split(".")[:2])


#: Where a bundle made once is kept: ``$KRAFTLAKE_WEB`` (the web files ``make setup`` installs) or
#: ``<repo>/.cache/web``, under ``vega/``.
WEB_ENV = "KRAFTLAKE_WEB"


def _bundle_file(vl_version: str, converter: str) -> Path:
    root = Path(os.environ.get(WEB_ENV) or Path(__file__).resolve().parents[2] / ".cache" / "web")
    return root / "vega" / f"vl-convert-{converter}-vega-lite-{vl_version}.js"


@cache
def vega_script() -> str:
    """Vega, Vega-Lite and vega-embed as one classic script defining ``vegaEmbed`` (about 900 kB).

    ``vl-convert`` bundles it in seconds: the bundle of a ``vl-convert`` release and Vega-Lite version is kept
    in a file (:func:`_bundle_file`) and read from there afterwards; where that file cannot be written the
    bundle is made each time."""
    import vl_convert as vlc

    vl_version = _vl_version()
    kept = _bundle_file(vl_version, str(getattr(vlc, "__version__", "unknown")))
    try:
        return kept.read_text(encoding="utf-8")
    except OSError:
        pass
    # the snippet is optional (its default assigns the globals), though vl-convert's stub requires it
    script = str(vlc.javascript_bundle(vl_version=vl_version))  # type: ignore[call-arg]
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        part = kept.with_name(f"{kept.name}.{os.getpid()}.part")
        part.write_text(script, encoding="utf-8")
        part.replace(kept)
    except OSError:
        pass
    return script


def spec(chart: Any) -> dict[str, Any]:
    """The chart's Vega-Lite spec, its data inlined under ``datasets``."""
    import altair as alt

    # altair's 5,000-row guard is for notebooks, which send the data to a browser at each display; a file of
    # a long history is the point here
    with alt.data_transformers.disable_max_rows():
        out: dict[str, Any] = chart.to_dict()
    return out


def figure_html(chart: Any, element_id: str = "figure") -> str:
    """A ``<div>`` drawing ``chart`` in a page whose head holds :func:`vega_script`. The spec sits in a JSON
    ``<script>`` beside the div (``id`` ``<element_id>-spec``); a failure to draw is written into the div."""
    ident = html.escape(element_id, quote=True)
    data = json.dumps(spec(chart)).replace("</", "<\\/")
    return (
        f'<div class="kraftlake-figure" id="{ident}"></div>\n'
        f'<script type="application/json" id="{ident}-spec">{data}</script>\n'
        "<script>\n"
        f"vegaEmbed('#{ident}', JSON.parse(document.getElementById('{ident}-spec').textContent), "
        f"{json.dumps(EMBED_OPTIONS)})\n"
        f"  .catch((e) => {{ document.getElementById('{ident}').textContent = 'figure not drawn: ' + e; }});\n"
        "</script>\n"
    )


def page_html(chart: Any, title: str = "kraftlake") -> str:
    """A whole page holding ``chart`` and everything it needs to draw."""
    return (
        '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n"
        f"<script>\n{vega_script()}\n</script>\n"
        "</head>\n<body>\n"
        f"{figure_html(chart)}"
        "</body>\n</html>\n"
    )


def save(chart: Any, path: str | Path, title: str = "kraftlake") -> Path:
    """Write ``chart`` (an altair chart) to ``path``: .html (:func:`page_html`), .png or .svg; returns it."""
    import vl_convert as vlc

    out = check_output(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    suffix = out.suffix.lower()
    if suffix == ".html":
        out.write_text(page_html(chart, title), encoding="utf-8")
    elif suffix == ".svg":
        out.write_text(vlc.vegalite_to_svg(spec(chart), vl_version=_vl_version()), encoding="utf-8")
    else:
        out.write_bytes(vlc.vegalite_to_png(spec(chart), vl_version=_vl_version(), scale=PNG_SCALE))
    return out
