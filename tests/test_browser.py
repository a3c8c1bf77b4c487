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


PAYLOADS = {
    "link": "[x](javascript:window.__pwned='link')",
    "script": "<script>window.__pwned='script'</script>",
    "img": "<img src=x onerror=\"window.__pwned='img'\">",
    "attr": "Ours [y](onmouseover=window.__pwned='md'//) \" onmouseover=\"window.__pwned='attr'",
    "comment": "<!--",
    "jinja": "{{ 7 * 7 }} {% raw %}",
}


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory):
    """The fixture data with hostile text in a CSV cell, a chart's legend and provenance fields (label, model,
    vLLM version as an attached server's /version would report it, date)."""
    import csv
    import json

    require(CHROMIUM is not None, "Debian's chromium", "apt-get install chromium (.ci/run does)")
    tmp = tmp_path_factory.mktemp("hostile")
    root = tmp / "data"
    shutil.copytree(REPO / "tests" / "fixtures" / "data", root)
    env = root / "fixture-cpu"
    with open(env / "pooling.embedding_throughput.csv", "a", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerow([PAYLOADS["link"] + " " + PAYLOADS["script"] + " " + PAYLOADS["comment"], "dummy", 2,
                                 PAYLOADS["img"], 130.0, 5000.0, 35.0, 3, 1, 0.2])
    prov = json.loads((env / "provenance.json").read_text())
    prov["label"] = {"zh": PAYLOADS["attr"], "en": PAYLOADS["attr"]}
    prov["software"]["vllm"] = PAYLOADS["img"] + PAYLOADS["jinja"]
    prov["date"] = PAYLOADS["comment"] + PAYLOADS["script"]
    prov["servers"]["pooling-embedding-fixture"]["model"] = PAYLOADS["link"]
    (env / "provenance.json").write_text(json.dumps(prov))
    site = tmp / "site"
    site.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    build_site(root, site, extra_env={"SITE_URL": url + "/"})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield url
    server.shutdown()


@pytest.mark.parametrize("path", ["/en/pooling/", "/pooling/"])
def test_hostile_data_renders_as_text_and_runs_no_script(hostile_site, path):
    from playwright.sync_api import sync_playwright

    dialogs = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 1600})
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(hostile_site + path)
        page.wait_for_selector(".claim-chart svg.main-svg", timeout=15000)
        for link in page.locator(".claim-src, .claim-value").all()[:40]:  # hovering fires any onmouseover let through
            link.hover()
        assert page.evaluate("window.__pwned") is None
        assert page.locator("a[href^='javascript:'], img[src='x']").count() == 0
        text = page.locator("article").inner_text()
        assert PAYLOADS["link"] in text and "<script>" in text  # shown as written
        # "<!--" swallowed nothing: the page's last section and the footer are still there
        assert page.locator("footer").count() == 1 and page.locator("article h2").count() >= 3
        # Material turned the titles into tooltips: they show the whole label as text
        tooltips = page.locator("[id^='__tooltip2_']").evaluate_all("els => els.map(e => e.textContent)")
        assert any(PAYLOADS["attr"] in t and PAYLOADS["img"] in t for t in tooltips), tooltips[:3]
        legend = " ".join(page.locator(".claim-chart .legendtext").all_text_contents())
        assert "\uff1cimg src=x" in legend  # Plotly shows look-alike brackets: no markup of its own either
        browser.close()
    assert dialogs == []
