"""Great Expectations' Data Docs opened offline in headless Chromium, before and after
``kraftlake.spark.data_docs.localize_site``: with the libraries copied in, the pages have Bootstrap's layout,
Font Awesome's icons and the tables bootstrap-table builds; as GX writes them, none of it.

The site is built by GX itself over a pandas frame (the same templates as the warehouse suites' Data Docs,
without starting Spark); ``validate_warehouse`` runs the same ``localize_sites`` after its build.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from browser import dump_dom

from kraftlake.spark.data_docs import (
    CDN_FILES,
    DataDocsError,
    LocalizedSite,
    localize_site,
    localize_sites,
    site_folder,
    web_root,
)

# appended to a copy of a page: what the browser made of it, as JSON in the DOM once the page has loaded
PROBE = """<script>
window.addEventListener('load', () => setTimeout(() => {
  const style = (sel, prop) => { const e = document.querySelector(sel); return e ? getComputedStyle(e)[prop] : null; };
  const logo = document.querySelector('nav.navbar img');
  const probe = {
    jquery: typeof window.jQuery,
    bootstrapTable: typeof (window.jQuery && window.jQuery.fn.bootstrapTable),
    vegaEmbed: typeof window.vegaEmbed,
    navbar: style('nav.navbar', 'display'),
    rows: document.querySelectorAll('table tbody tr').length,
    icons: style('.fas, .far, .fa', 'fontFamily'),
    fonts: [...document.fonts].filter(f => f.status === 'loaded').map(f => f.family),
    logo: logo ? logo.naturalWidth : null,
  };
  const out = document.createElement('pre');
  out.id = 'kraftlake-probe';
  out.textContent = JSON.stringify(probe);
  document.body.appendChild(out);
}, 300));
</script>
"""


def _probe(page: Path) -> dict[str, Any]:
    copy = page.with_name(f"probe-{page.name}")
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    try:
        dom = dump_dom(copy)
    finally:
        copy.unlink()
    found = re.search(r'<pre id="kraftlake-probe">(.*?)</pre>', dom, re.S)
    assert found is not None, dom[-2000:]
    result = json.loads(found.group(1).replace("&quot;", '"'))
    assert isinstance(result, dict)
    return result


@pytest.fixture(scope="module")
def gx_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Data Docs site as GX writes it: one suite, one validation (one expectation failing)."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    import pandas as pd

    context = gx.get_context(mode="file", project_root_dir=str(tmp_path_factory.mktemp("gx")))
    batch = (
        context.data_sources.add_pandas("frames")
        .add_dataframe_asset("offsets")
        .add_batch_definition_whole_dataframe("whole")
    )
    suite = context.suites.add(gx.ExpectationSuite(name="kraftlake.offsets"))
    suite.add_expectation(gx.expectations.ExpectColumnValuesToNotBeNull(column="offset"))
    suite.add_expectation(gx.expectations.ExpectColumnValuesToBeBetween(column="epoch", min_value=0))
    suite.add_expectation(gx.expectations.ExpectColumnValuesToBeUnique(column="offset"))
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name="kraftlake.offsets", data=batch, suite=suite)
    )
    definition.run(batch_parameters={"dataframe": pd.DataFrame({"offset": [0, 1, 1], "epoch": [1, 1, 2]})})
    context.build_data_docs()
    (site,) = context.get_docs_sites_urls()
    return site_folder(str(site["site_url"]))


def _pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if p.name == "index.html" or "validations" in p.parts)


def _localized(gx_site: Path, tmp_path: Path) -> tuple[Path, LocalizedSite]:
    site = tmp_path / "site"
    shutil.copytree(gx_site, site)
    try:
        return site, localize_site(site)
    except DataDocsError as exc:
        pytest.skip(f"Data Docs' libraries are not installed: {exc}")


@pytest.mark.browser
def test_localized_pages_have_their_styles_icons_and_tables_offline(gx_site: Path, tmp_path: Path) -> None:
    site, result = _localized(gx_site, tmp_path)
    assert result.remote == set()
    pages = _pages(site)
    assert pages[0].name == "index.html" and len(pages) == 2
    for page in pages:
        probe = _probe(page)
        assert probe["jquery"] == probe["bootstrapTable"] == probe["vegaEmbed"] == "function", (page, probe)
        assert probe["navbar"] == "flex", (page, probe)  # Bootstrap's navbar
        assert "Font Awesome 6 Free" in probe["icons"] and "Font Awesome 6 Free" in probe["fonts"], probe
        assert probe["logo"] > 0, probe  # GX's logo from the site's own static/images
        # the index's rows are bootstrap-table's (the suite and its validation); a validation page's, one
        # per expectation
        assert probe["rows"] >= (2 if page.name == "index.html" else 3), (page, probe)


@pytest.mark.browser
def test_pages_as_gx_writes_them_have_none_of_it_offline(gx_site: Path, tmp_path: Path) -> None:
    """The control for the test above: the same pages, not localized, opened the same way."""
    site = tmp_path / "site"
    shutil.copytree(gx_site, site)
    index = _probe(site / "index.html")
    assert index["jquery"] == index["bootstrapTable"] == "undefined"
    assert index["navbar"] == "block" and index["rows"] == 0 and index["fonts"] == []


def test_every_page_points_at_copies_in_the_site_and_a_second_run_changes_nothing(
    gx_site: Path, tmp_path: Path
) -> None:
    site, first = _localized(gx_site, tmp_path)
    assert first.pages == len(list(site.rglob("*.html")))
    assert first.references >= len(CDN_FILES)
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        assert not re.search(r'<(script|link)\b[^>]*(src|href)="https?://', html), page
        assert "integrity=" not in html and "crossorigin" not in html
        for ref in re.findall(r'(?:src|href)="(\.[^"]*static/[^"]*)"', html):
            assert (page.parent / ref).resolve().is_file(), (page, ref)
    before = {p: p.read_bytes() for p in site.rglob("*.html")}
    again = localize_site(site)
    assert again.references == 0 and {p: p.read_bytes() for p in site.rglob("*.html")} == before


def test_without_the_libraries_the_site_stays_as_gx_wrote_it(
    gx_site: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    shutil.copytree(gx_site, site)
    before = (site / "index.html").read_bytes()
    monkeypatch.setenv("KRAFTLAKE_WEB", str(tmp_path / "nowhere"))
    assert web_root() == tmp_path / "nowhere"
    with pytest.raises(DataDocsError, match=r"lacks .*bootstrap.*jquery.*run make setup"):
        localize_site(site)
    with caplog.at_level(logging.WARNING, logger="kraftlake.spark.data_docs"):
        assert localize_sites([(site / "index.html").as_uri()]) == []
    assert "left loading their libraries from CDNs" in caplog.text
    assert (site / "index.html").read_bytes() == before and not (site / "static" / "vendor").exists()
    with pytest.raises(DataDocsError, match="not a Data Docs site"):
        localize_site(tmp_path)
