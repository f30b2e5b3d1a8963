"""Lighthouse 12 (npm) on every page of the built site: mobile preset, simulated throttling, Debian's Chromium.

    python benchmarks/lighthouse.py [--check] [PAGE ...]      (make lighthouse / make test-lighthouse)

Serves _build/html on 127.0.0.1 with gzip for text assets, as GitHub Pages serves it, runs
_build/lighthouse/node_modules/.bin/lighthouse (installed by the Make target) on the intro and every chapter,
writes the scores to _build/lighthouse/scores.json and to the "Lighthouse" section of benchmarks/results.md
(only that section is replaced). With --check it exits 1 when a page is below a budget (see BUDGET).
The page has no network: the two CDN scripts of the saved widgets fail to load, as for an offline reader.
Lighthouse's simulated throttling scales the main-thread work it observes, so a busy machine lowers the
performance score; the load average is written next to the scores, with the scores before the pages were made
fast (benchmarks/lighthouse_before.json) and what each step of book/_ext/fast_pages.py gave (STEPS).
"""

import argparse
import gzip
import http.server
import io
import json
import os
import pathlib
import re
import subprocess
import sys
import threading
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
SITE = pathlib.Path(os.environ.get("LMBOOK_SITE", ROOT / "_build" / "html"))  # another built site to measure
OUT = ROOT / "_build" / "lighthouse"
LIGHTHOUSE = OUT / "node_modules" / ".bin" / "lighthouse"
CHROMIUM = os.environ.get("LMBOOK_CHROMIUM", "/usr/bin/chromium")
RESULTS = ROOT / "benchmarks" / "results.md"
SCORES = OUT / ("scores.json" if "LMBOOK_SITE" not in os.environ else f"scores-{SITE.name}.json")
SECTION = "## Lighthouse: mobile scores of every page"

# The budget the issue sets (performance >= 90, accessibility >= 95), and a weight budget per page. Weight:
# Lighthouse's mobile preset models a slow 4G link (1.6 Mbit/s down, 150 ms RTT), on which 1.5 MB takes about
# 8 s; a chapter is long and its figures sit below the fold, so the first screen can still paint in under
# 2 s if the render-blocking part (HTML, CSS, the first figures) is small. Above 1.5 MB a page costs a
# reader on a metered phone plan noticeably, and none of the book's chapters needs more (its figures are
# small line plots).
BUDGET = {"performance": 90, "accessibility": 95, "bytes": 1_500_000}
BEFORE = ROOT / "benchmarks" / "lighthouse_before.json"  # the scores before the pages were made fast
# What each step of book/_ext/fast_pages.py gave, measured on copies of the built site (`LMBOOK_SITE=dir python
# benchmarks/lighthouse.py PAGE ...`, one run each, load average 1.3 to 1.9): performance of chapters 7 and 12.
STEPS = [
    ("the site as built (MathJax in the browser, Font Awesome's script, blocking scripts)",
     "37 / 35 (the *before* run, load 10 to 13)"),
    ("math typeset at build time, icons inlined, scripts deferred, search index only on the search page",
     "69 / 73"),
    ("and sections below the fold laid out only near the screen (content-visibility)", "86 / 80"),
    ("and the stylesheets in one file", "88 / 68"),
    ("and the theme's tab-stop check run per element as it nears the screen, not on the whole page at load",
     "93 / 96"),
    ("and the math fonts swapped in when they arrive (font-display: swap) instead of hiding the text until then",
     "chapter 12: 96 / 95, chapter 14: 91 / 96 (without / with, load 0.5 to 1)"),
    ("and the admonition icons drawn as inline SVG, so that no chapter downloads Font Awesome's web font (157 KB)",
     "chapter 3: 91 / 99, chapter 14: 90 / 98 (the slowest run with the font in `make test` / the first without); "
     "a page whose first screen requested the font lost about 0.8 s of first contentful paint in some runs"),
]
TEXT_TYPES = ("text/", "application/javascript", "application/json", "image/svg+xml")


class GzipHandler(http.server.SimpleHTTPRequestHandler):
    """Static files, gzip-compressed for text types when the client accepts it (as GitHub Pages does)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=str(SITE), **kwargs)

    def log_message(self, *args):
        pass

    def send_head(self):
        path = pathlib.Path(self.translate_path(self.path))
        if path.is_dir():
            path = path / "index.html"
        ctype = self.guess_type(str(path))
        if not path.is_file() or "gzip" not in self.headers.get("Accept-Encoding", "") \
                or not ctype.startswith(TEXT_TYPES):
            return super().send_head()
        body = gzip.compress(path.read_bytes(), 6)
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


def pages() -> list[str]:
    """The intro and every chapter of _toc.yml, in its order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    return [f"{toc['root']}.html"] + [f"{f}.html" for f in files if f.startswith("notebooks/")]


def measure(url: str, report: pathlib.Path) -> dict:
    flags = "--headless=new --no-sandbox --disable-gpu --no-first-run --disable-background-networking"
    subprocess.run([str(LIGHTHOUSE), url, f"--chrome-path={CHROMIUM}", f"--chrome-flags={flags}",
                    "--only-categories=performance,accessibility", "--output=json",
                    f"--output-path={report}", "--quiet", "--max-wait-for-load=90000"],
                   check=True, timeout=600)
    data = json.loads(report.read_text())
    audits = data["audits"]
    return {
        "performance": round(100 * (data["categories"]["performance"]["score"] or 0)),
        "accessibility": round(100 * (data["categories"]["accessibility"]["score"] or 0)),
        "bytes": int(audits["total-byte-weight"]["numericValue"]),
        "fcp_s": round(audits["first-contentful-paint"]["numericValue"] / 1000, 1),
        "lcp_s": round(audits["largest-contentful-paint"]["numericValue"] / 1000, 1),
        "tbt_ms": round(audits["total-blocking-time"]["numericValue"]),
        "cls": round(audits["cumulative-layout-shift"]["numericValue"], 3),
    }


def measure_page(url: str, report: pathlib.Path) -> dict:
    """One run; a page that misses the budget is measured twice more and its median run (by performance)
    counts, as Lighthouse's documentation advises against the variance of single runs."""
    first = measure(url, report)
    if not failures({url: first}):
        return first
    runs = sorted([first] + [measure(url, report.with_suffix(f".run{i}.json")) for i in (2, 3)],
                  key=lambda r: r["performance"])
    return {**runs[1], "runs": [r["performance"] for r in runs]}


def failures(scores: dict) -> list[str]:
    bad = []
    for page, s in scores.items():
        if s["performance"] < BUDGET["performance"]:
            bad.append(f"{page}: performance {s['performance']} < {BUDGET['performance']}")
        if s["accessibility"] < BUDGET["accessibility"]:
            bad.append(f"{page}: accessibility {s['accessibility']} < {BUDGET['accessibility']}")
        if s["bytes"] > BUDGET["bytes"]:
            bad.append(f"{page}: {s['bytes']:,} bytes > {BUDGET['bytes']:,}")
    return bad


def write_section(scores: dict, load: str, version: str) -> None:
    before = json.loads(BEFORE.read_text())["scores"] if BEFORE.exists() else {}

    def was(page, key):
        if page not in before:
            return "–"
        value = before[page][key]
        return f"{value / 1e3:,.0f}" if key == "bytes" else str(value)

    def runs(s):
        return f" (median of 3 runs: {', '.join(map(str, s['runs']))})" if "runs" in s else ""

    rows = [f"| {page} | {was(page, 'performance')} | **{s['performance']}**{runs(s)} | {s['accessibility']} | "
            f"{was(page, 'bytes')} | {s['bytes'] / 1e3:,.0f} | {was(page, 'fcp_s')} | {s['fcp_s']} | "
            f"{was(page, 'lcp_s')} | {s['lcp_s']} | {was(page, 'tbt_ms')} | {s['tbt_ms']} | {s['cls']} |"
            for page, s in scores.items()]
    section = "\n".join([
        SECTION, "",
        f"Written by `make lighthouse` (benchmarks/lighthouse.py) on {time.strftime('%Y-%m-%d')}: Lighthouse "
        f"{version}, mobile preset with simulated throttling, Debian's Chromium, the built site served locally "
        f"with gzip (as GitHub Pages serves it); load average {load} on {os.cpu_count()} CPUs during the run "
        "(simulated throttling scales the main-thread work observed, so a busy machine lowers performance). "
        f"Budget: performance >= {BUDGET['performance']}, accessibility >= {BUDGET['accessibility']}, at most "
        f"{BUDGET['bytes'] / 1e6:.1f} MB transferred per page (`make test-site` checks it). "
        "A page that misses the budget in its first run is measured twice more, and its median run counts. "
        "*Before*: the same measurement on the site before book/_ext/fast_pages.py (load average 10 to 13).", "",
        "| page | performance before | **performance** | accessibility | KB before | KB | FCP s before | FCP s | "
        "LCP s before | LCP s | TBT ms before | TBT ms | CLS |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|", *rows, "",
        "Accessibility is 96 on the chapters (100 before) for one audit, colour contrast: in a section the browser "
        "has not laid out yet (`content-visibility: auto`), axe reads the background behind the links at the end "
        "of the page as #ecf3ff (4.29:1 with the theme's link colour); the colours themselves are unchanged and "
        "pass on the page as drawn.", "",
        "What each step gave (book/_ext/fast_pages.py, measured on copies of the built site; performance of "
        "chapters 7 and 12):", "",
        "| site | performance, ch. 7 / ch. 12 |", "|---|---|", *(f"| {step} | {value} |" for step, value in STEPS)])
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(SECTION) + r".*?(?=\n## |\Z)", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda m: section + "\n", text)
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    RESULTS.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a page misses the budget")
    parser.add_argument("--write-only", action="store_true",
                        help="measure nothing: write results.md from the last run's _build/lighthouse/scores.json")
    parser.add_argument("--load", help="with --write-only: the load average during the run, as text")
    parser.add_argument("pages", nargs="*", help="pages to measure (default: the intro and every chapter)")
    args = parser.parse_args()
    version = subprocess.run([str(LIGHTHOUSE), "--version"], capture_output=True, text=True).stdout.strip()
    if args.write_only:
        write_section(json.loads(SCORES.read_text()), args.load or "{:.1f}".format(os.getloadavg()[0]), version)
        return 0
    if not (SITE / "index.html").exists():
        sys.exit("the site is not built: run `make book`")
    if not LIGHTHOUSE.exists():
        sys.exit(f"{LIGHTHOUSE} is missing: run `make lighthouse`, which installs it from npm")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), GzipHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    scores = {}
    try:
        for page in args.pages or pages():
            report = OUT / "reports" / SITE.name / (page.replace("/", "_").removesuffix(".html") + ".json")
            report.parent.mkdir(parents=True, exist_ok=True)
            scores[page] = measure_page(f"http://127.0.0.1:{httpd.server_address[1]}/{page}", report)
            print(page, scores[page], flush=True)
            SCORES.write_text(json.dumps(scores, indent=1) + "\n")  # so far
    finally:
        httpd.shutdown()
    load = "{:.1f}".format(os.getloadavg()[0])
    if not args.pages and not args.check:  # only `make lighthouse` over every page writes results.md
        write_section(scores, load, version)
    bad = failures(scores)
    for line in bad:
        print("over budget:", line)
    return 1 if args.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
