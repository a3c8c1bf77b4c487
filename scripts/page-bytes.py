"""What a reader's first view of a page downloads, measured in headless Chromium: the page, its CSS and scripts,
the search index and the search worker's scripts (Material loads both as the page opens), plus whatever a first
search fetches. Bytes as served (this serves the folder uncompressed) and gzip'd (as GitHub Pages sends text).

usage: python scripts/page-bytes.py SITE_DIR [PATH ...] [--query PATH=TEXT ...]
       (default paths: / /en/ /pooling/ /en/pooling/; a first search types 吞吐 on zh pages, memory on en ones)
Needs the browser extra (playwright) and Debian's chromium."""

from __future__ import annotations

import functools
import gzip
import http.server
import shutil
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

KINDS = ("html", "css", "js", "index", "other")


def kind_of(path: str, content_type: str) -> str:
    if path.endswith("search_index.json"):
        return "index"
    if "html" in content_type:
        return "html"
    if path.endswith(".css"):
        return "css"
    if path.endswith(".js"):
        return "js"
    return "other"


def measure(url: str, path: str, query: str, chromium: str) -> dict[str, list[int]]:
    from playwright.sync_api import sync_playwright

    totals = {k: [0, 0] for k in KINDS}
    seen: set[str] = set()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()  # a fresh context: an empty cache
        bodies = []
        page.on("response", lambda r: bodies.append(r))
        page.goto(url + path, wait_until="networkidle")
        box = page.locator("input.md-search__input")
        box.click()
        box.fill(query)
        page.keyboard.press("End")  # Material reads the box on keyup
        page.wait_for_function("document.querySelectorAll('.md-search-result__item').length > 0", timeout=20000)
        page.wait_for_load_state("networkidle")
        for response in bodies:
            if response.url in seen or not response.url.startswith(url):
                continue
            seen.add(response.url)
            body = response.body()
            kind = kind_of(urlsplit(response.url).path, response.headers.get("content-type", ""))
            totals[kind][0] += len(body)
            totals[kind][1] += len(gzip.compress(body, 6))
        browser.close()
    return totals


def main(argv: list[str]) -> None:
    if not argv or argv[0].startswith("-"):
        sys.exit(__doc__)
    site, rest = Path(argv[0]), argv[1:]
    queries = dict(a.split("=", 1) for a in rest[rest.index("--query") + 1:]) if "--query" in rest else {}
    paths = [a for a in (rest[:rest.index("--query")] if "--query" in rest else rest)] or [
        "/", "/en/", "/pooling/", "/en/pooling/"]
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        sys.exit("chromium not found: apt-get install chromium")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    kb = lambda n: f"{n / 1024:,.0f}"  # noqa: E731
    print(f"first view + first search, KB as served / gzip'd: {site}")
    print(f"  {'page':<16}" + "".join(f"{k:>14}" for k in KINDS) + f"{'total':>16}")
    for path in paths:
        query = queries.get(path, "memory" if path.startswith("/en/") else "吞吐")
        t = measure(url, path, query, chromium)
        cells = "".join(f"{kb(t[k][0]) + '/' + kb(t[k][1]):>14}" for k in KINDS)
        total = f"{kb(sum(v[0] for v in t.values()))}/{kb(sum(v[1] for v in t.values()))}"
        print(f"  {path:<16}{cells}{total:>16}")
    server.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
