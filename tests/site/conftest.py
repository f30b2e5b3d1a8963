"""Fixtures for the site tests: the built site (make book), served on 127.0.0.1, and Debian's Chromium
driven by Playwright. Without Chromium the browser tests are skipped with a hint, unless
LMBOOK_REQUIRE_BROWSER=1 (set by CI), which makes them fail instead."""

import functools
import http.server
import os
import pathlib
import threading

import pytest
from _site_helpers import CDN_COPIES, CHROMIUM, CHROMIUM_ARGS, SITE


@pytest.fixture(scope="session")
def site():
    if not (SITE / "index.html").exists():
        pytest.fail("the site is not built: run `make book` (make test-site does it for you)")
    return SITE


@pytest.fixture(scope="session")
def server(site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="session")
def browser():
    if not pathlib.Path(CHROMIUM).exists():
        message = (f"Chromium not found at {CHROMIUM}: install Debian's chromium (apt-get install chromium) "
                   "or set LMBOOK_CHROMIUM to run the browser tests")
        if os.environ.get("LMBOOK_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    pg.console_errors = []
    pg.on("console", lambda m: pg.console_errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.console_errors.append(str(e)))

    def from_local_copy(route):
        url = route.request.url.split("?")[0]
        for prefix, local in CDN_COPIES.items():
            path = local / url[len(prefix):] if prefix.endswith("/") else local
            if url.startswith(prefix) and path.is_file():
                return route.fulfill(path=str(path), content_type="application/javascript")
        return route.abort()  # the test browser has no network: anything else external is an error

    context.route(lambda url: not url.startswith(("http://127.0.0.1", "file:")), from_local_copy)
    yield pg
    context.close()
