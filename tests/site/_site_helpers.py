"""Paths and helpers shared by the site tests."""

import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
SITE = ROOT / "_build" / "html"
CHROMIUM = os.environ.get("LMBOOK_CHROMIUM", "/usr/bin/chromium")
# Flags for a headless Chromium on a machine without network access or a display.
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


VENDOR = ROOT / "_build" / "vendor"  # npm copies of the widget libraries (make test-site)
CDN_COPIES = {  # what the site loads from a CDN -> the local copy the offline test browser gets instead
    "https://cdn.jsdelivr.net/npm/requirejs@2.3.4/require.js": VENDOR / "requirejs/package/require.js",
    "https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager@1.0.6/dist/": VENDOR / "html-manager/package/dist/",
}


def site_pages():
    """Every content page of the built site (not the search page, the index or the static assets)."""
    if not SITE.exists():
        return []
    skip = {"search.html", "genindex.html", "index.html"}  # index.html only redirects to the intro
    return sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html")
                  if not p.relative_to(SITE).parts[0].startswith("_") and p.name not in skip)
