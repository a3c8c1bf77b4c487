"""A real headless Chromium opens a built page, sees the chart drawn and switches language."""

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest
from conftest import REPO, build_site, require

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def served_site(tmp_path_factory):
    require(CHROMIUM is not None, "Debian's chromium", "apt-get install chromium (.ci/run does)")
    tmp = tmp_path_factory.mktemp("browser")
    site = tmp / "site"
    site.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    # The language selector reads sitemap.xml under site_url, so build for the address we serve on.
    build_site(REPO / "tests" / "fixtures" / "data", site, extra_env={"SITE_URL": url + "/"})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield url
    server.shutdown()


def test_chart_draws_and_language_switches(served_site, tmp_path):
    from playwright.sync_api import sync_playwright

    errors = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 1600})
        # Resource failures are checked by URL below; Material's language selector probes
        # <page>/sitemap.xml under mkdocs-static-i18n's per-page alternate links, which 404s harmlessly.
        page.on("console", lambda m: errors.append(m.text)
                if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("response", lambda r: errors.append(f"{r.status} {r.url}")
                if r.status >= 400 and not r.url.endswith("/sitemap.xml") else None)
        page.on("requestfailed", lambda r: errors.append(f"failed {r.url}"))
        page.goto(served_site + "/pooling/")
        page.wait_for_selector(".claim-chart svg.main-svg", timeout=15000)
        assert page.locator(".claim-chart svg.main-svg").count() >= 1
        assert page.locator(".claim-badge.claim-not-measured").first.inner_text() == "未实测"
        page.screenshot(path=str(Path(os.environ.get("SCREENSHOT_DIR", tmp_path)) / "pooling-zh.png"), full_page=True)
        # Material's language selector: open it, pick English.
        page.locator(".md-header__option .md-select").first.hover()
        page.get_by_role("link", name="English").first.click()
        page.wait_for_url("**/en/pooling/")
        assert "Pooling: embeddings and rerank" in page.locator("h1").inner_text()
        page.wait_for_selector(".claim-chart svg.main-svg", timeout=15000)
        browser.close()
    assert errors == []
