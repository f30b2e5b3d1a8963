"""No broken internal link or anchor in the built site. External links are collected into
_build/external-links.txt, not fetched."""

import html.parser
import pathlib
import urllib.parse

from _site_helpers import SITE


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])
        if tag in ("img", "script") and attrs.get("src"):
            self.hrefs.append(attrs["src"])
        if tag == "link" and attrs.get("href"):
            self.hrefs.append(attrs["href"])


def parse(path: pathlib.Path) -> Links:
    links = Links()
    links.feed(path.read_text(encoding="utf-8"))
    return links


def test_internal_links_and_anchors_resolve(site):
    pages = {p: parse(p) for p in site.rglob("*.html") if not p.relative_to(site).parts[0].startswith("_")}
    broken, external = [], set()
    for page, links in pages.items():
        for href in links.hrefs:
            url = urllib.parse.urlsplit(href)
            if url.scheme in ("http", "https", "mailto", "data", "javascript"):
                if url.scheme in ("http", "https"):
                    external.add(href)
                continue
            target = (page.parent / urllib.parse.unquote(url.path)).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)} -> {href}")
            elif url.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else parse(target).ids
                if url.fragment not in ids:
                    broken.append(f"{page.relative_to(site)} -> {href} (no such anchor)")
    (SITE.parent / "external-links.txt").write_text("\n".join(sorted(external)) + "\n")
    assert not broken, f"{len(broken)} broken links, e.g. {broken[:5]}"
