"""Great Expectations' Data Docs made to open without a network: their scripts and stylesheets copied in.

GX writes pages whose ``<head>`` loads Bootstrap 4, jQuery, Popper, bootstrap-table (which builds every table
of the pages from the JSON inlined in them), bootstrap-datepicker, Font Awesome, a dark theme and Vega from
public CDNs, and whose navigation bar loads GX's logo from GX's own web host. GX's package ships its own
stylesheet (inlined into the pages), fonts and images (copied into the site's ``static/``), not those
libraries. Offline, a page is then unstyled text and its tables are empty.

The libraries are the npm packages those CDN addresses serve, at the versions the addresses name: ``make
setup`` installs them (``conf/web/package.json`` and its lock) into ``$KRAFTLAKE_WEB`` (default
``<repo>/.cache/web``). :func:`localize_site` copies the files the pages use into the site's
``static/vendor/<package>/`` and points each page's ``<script>``, ``<link>`` and logo ``<img>`` at them by a path
relative to the page (so the site can be moved or zipped whole), dropping the ``integrity`` and
``crossorigin`` attributes, which a browser refuses to honour for a ``file://`` script. The page's links to
the site's own ``static/`` files get the same treatment (GX's favicon link on a validation page counts one
folder too few).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from os.path import relpath
from pathlib import Path
from urllib.parse import unquote, urlparse

from kraftlake.errors import KraftlakeError

log = logging.getLogger(__name__)

WEB_ENV = "KRAFTLAKE_WEB"
_REPO_ROOT = Path(__file__).resolve().parents[2]

#: CDN address in GX's templates -> (npm package, file in it). The filter-control stylesheet is named at
#: 1.19.0 by GX and at 1.19.1 for its script: the 1.19.1 package serves both.
CDN_FILES: dict[str, tuple[str, str]] = {
    "https://cdn.jsdelivr.net/npm/vega@5": ("vega", "build/vega.min.js"),
    "https://cdn.jsdelivr.net/npm/vega-lite@5": ("vega-lite", "build/vega-lite.min.js"),
    "https://cdn.jsdelivr.net/npm/vega-embed@6": ("vega-embed", "build/vega-embed.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css": (
        "@fortawesome/fontawesome-free",
        "css/all.min.css",
    ),
    "https://code.jquery.com/jquery-3.7.1.min.js": ("jquery", "dist/jquery.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js": (
        "popper.js",
        "dist/umd/popper.min.js",
    ),
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js": (
        "bootstrap",
        "dist/js/bootstrap.min.js",
    ),
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css": (
        "bootstrap",
        "dist/css/bootstrap.min.css",
    ),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js": (
        "bootstrap-table",
        "dist/bootstrap-table.min.js",
    ),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css": (
        "bootstrap-table",
        "dist/bootstrap-table.min.css",
    ),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/bootstrap-table-filter-control.min.js": (
        "bootstrap-table",
        "dist/extensions/filter-control/bootstrap-table-filter-control.min.js",
    ),
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.css": (
        "bootstrap-table",
        "dist/extensions/filter-control/bootstrap-table-filter-control.css",
    ),
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.min.css": (
        "bootstrap-table",
        "dist/extensions/filter-control/bootstrap-table-filter-control.min.css",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js": (
        "bootstrap-datepicker",
        "dist/js/bootstrap-datepicker.min.js",
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css": (
        "bootstrap-datepicker",
        "dist/css/bootstrap-datepicker.min.css",
    ),
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/bootstrap-prefers-dark.css": (
        "@forevolve/bootstrap-dark",
        "dist/css/bootstrap-prefers-dark.css",
    ),
}

#: Folders a copied file reaches by a relative ``url(...)``: Font Awesome's stylesheet loads ``../webfonts``.
_COMPANIONS: dict[str, tuple[str, ...]] = {"@fortawesome/fontawesome-free": ("webfonts",)}

#: GX's navigation bar takes its logo from here (plus a ``?d=<data context id>`` query); the site's own
#: ``static/images`` holds the same files.
GX_IMAGES = "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/"

VENDOR = "static/vendor"

_SITE_STATIC = re.compile(r"^(?:\./|(?:\.\./)+)static/(.+)$")
_TAG = re.compile(r"<(?:script|link|img)\b[^>]*>", re.IGNORECASE)
_URL_ATTR = re.compile(r'\b(src|href)="([^"]*)"')
_SRI_ATTRS = re.compile(r'\s+(?:integrity|crossorigin)(?:="[^"]*")?')


class DataDocsError(KraftlakeError):
    """Raised when a Data Docs site cannot be made to open offline: the npm packages ``make setup`` installs
    are not where ``$KRAFTLAKE_WEB`` says, or the site is not there."""


@dataclass
class LocalizedSite:
    """What :func:`localize_site` did to one site."""

    site: Path
    pages: int = 0
    references: int = 0
    #: addresses still pointing off the machine (a GX release that loads something not in :data:`CDN_FILES`)
    remote: set[str] = field(default_factory=set)


def web_root() -> Path:
    """The npm prefix ``make setup`` installs into: ``$KRAFTLAKE_WEB`` or ``<repo>/.cache/web``."""
    return Path(os.environ.get(WEB_ENV, _REPO_ROOT / ".cache" / "web"))


def _modules(root: Path) -> Path:
    modules = root / "node_modules"
    missing = sorted({pkg for pkg, path in CDN_FILES.values() if not (modules / pkg / path).is_file()})
    if missing:
        raise DataDocsError(
            f"{modules} lacks {', '.join(missing)}: run make setup (npm ci of conf/web), or point "
            f"${WEB_ENV} at such an install"
        )
    return modules


def _copy_vendor(modules: Path, site: Path) -> None:
    for pkg, path in set(CDN_FILES.values()):
        target = site / VENDOR / pkg / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(modules / pkg / path, target)
    for pkg, folders in _COMPANIONS.items():
        for folder in folders:
            shutil.copytree(modules / pkg / folder, site / VENDOR / pkg / folder, dirs_exist_ok=True)


def _local(url: str, page_dir: Path, site: Path) -> str | None:
    """The page-relative path standing for ``url``, None for an address left as it is."""
    if url in CDN_FILES:
        pkg, path = CDN_FILES[url]
        return relpath(site / VENDOR / pkg / path, page_dir)
    if url.startswith(GX_IMAGES):
        name = url[len(GX_IMAGES) :].split("?", 1)[0]
        if (site / "static" / "images" / name).is_file():
            return relpath(site / "static" / "images" / name, page_dir)
        return None
    static = _SITE_STATIC.match(url)
    if static is not None:
        # GX counts the folders up to the site's root from the suite name's dots, one short for a
        # validation page (its favicon link misses): the path from where the page really is
        local = relpath(site / "static" / static.group(1), page_dir)
        return local if local != url else None
    return None


def _rewrite(html: str, page_dir: Path, site: Path, result: LocalizedSite) -> str:
    def tag(match: re.Match[str]) -> str:
        text = match.group(0)
        attr = _URL_ATTR.search(text)
        if attr is None:
            return text
        local = _local(attr.group(2), page_dir, site)
        if local is None:
            if attr.group(2).startswith(("http://", "https://")):
                result.remote.add(attr.group(2))
            return text
        result.references += 1
        text = text[: attr.start(2)] + local + text[attr.end(2) :]
        return _SRI_ATTRS.sub("", text)

    return _TAG.sub(tag, html)


def localize_site(site: str | Path, root: Path | None = None) -> LocalizedSite:
    """Copy the libraries into ``site`` (a Data Docs site folder, the one holding ``index.html``) and point
    every page there at them. Idempotent: a page already pointing at local copies is left as it is, so it
    runs after each ``build_data_docs``, which rewrites only the pages it renders anew."""
    folder = Path(site)
    if not (folder / "index.html").is_file():
        raise DataDocsError(f"{folder} is not a Data Docs site (no index.html)")
    modules = _modules(root if root is not None else web_root())
    _copy_vendor(modules, folder)
    result = LocalizedSite(folder)
    for page in sorted(folder.rglob("*.html")):
        html = page.read_text(encoding="utf-8")
        new = _rewrite(html, page.parent, folder, result)
        result.pages += 1
        if new != html:
            page.write_text(new, encoding="utf-8")
    if result.remote:
        log.warning("Data Docs in %s still load %s", folder, ", ".join(sorted(result.remote)))
    return result


def site_folder(url: str) -> Path:
    """The folder of a Data Docs site from the ``file://`` address of its index GX reports."""
    parts = urlparse(url)
    if parts.scheme != "file":
        raise DataDocsError(f"{url}: only a site on the local file system can be localized")
    return Path(unquote(parts.path)).parent


def localize_sites(urls: Iterable[str]) -> list[LocalizedSite]:
    """:func:`localize_site` for each site GX built (the addresses of their index pages). Without the npm
    packages the sites stay as GX wrote them (opening them needs a network) and a warning says why: Data Docs
    are a view of the validation, whose results stand either way."""
    try:
        return [localize_site(site_folder(url)) for url in urls]
    except DataDocsError as exc:
        log.warning("Data Docs left loading their libraries from CDNs: %s", exc)
        return []
