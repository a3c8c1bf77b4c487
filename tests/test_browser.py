"""A real headless Chromium reads the built site as a reader does: navigation to a chart, the language switch,
search in both languages, every page without errors and within 1280 px; hostile data runs no script."""

import contextlib
import functools
import http.server
import os
import re
import shutil
import threading
from pathlib import Path

import pytest
from conftest import REPO, build_site, require

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.browser


ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


@contextlib.contextmanager
def serve(tmp: Path, data_root: Path, **build):
    """Build the site from ``data_root`` into ``tmp/site`` and serve it over HTTP: yields (URL, folder)."""
    require(CHROMIUM is not None, "Debian's chromium", "apt-get install chromium (.ci/run does)")
    site = tmp / "site"
    site.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    build_site(data_root, site, **build)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", site
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def served_site(tmp_path_factory):
    """(URL, folder) of the site built on the fixture data, served over HTTP as a reader's browser gets it."""
    # site_url as published: canonical links and sitemap.xml name it; pages must work served anywhere else too.
    with serve(tmp_path_factory.mktemp("browser"), REPO / "tests" / "fixtures" / "data",
               extra_env={"SITE_URL": "https://example.org/notes/"}) as served:
        yield served


@pytest.fixture(scope="module")
def published_site(tmp_path_factory):
    """(URL, folder) of the site built on the committed data/: the pages readers get, with every real table."""
    with serve(tmp_path_factory.mktemp("published"), REPO / "data", partial=False) as served:
        yield served


def watch(page, origin: str) -> list[str]:
    """Every console error, script error, failed or 4xx/5xx request, and request to another host the page makes."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"script: {e}"))
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    # A request cut short because the reader moved on (the search worker still fetching) is no failure.
    page.on("requestfailed", lambda r: errors.append(f"failed {r.url} ({r.failure})")
            if r.failure != "net::ERR_ABORTED" else None)
    # The site works offline: nothing comes from another host.
    page.on("request", lambda r: errors.append(f"off-site {r.url}")
            if not r.url.startswith((origin + "/", "data:", "blob:")) else None)
    return errors


def test_chart_page_by_navigation_and_language_switch(served_site, tmp_path):
    from playwright.sync_api import sync_playwright

    url, _ = served_site
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1600})
        errors = watch(page, url)
        page.goto(url + "/")
        # A reader arrives on the home page and follows the navigation to a chart page.
        page.locator("nav.md-nav--primary a.md-nav__link", has_text="池化").first.click()
        page.wait_for_url("**/pooling/")
        page.wait_for_selector(".claim-chart svg.main-svg", timeout=15000)
        assert page.locator(".claim-chart svg.main-svg").count() >= 1
        assert page.locator(".claim-badge.claim-not-measured").first.inner_text() == "未实测"
        page.screenshot(path=str(Path(os.environ.get("SCREENSHOT_DIR", tmp_path)) / "pooling-zh.png"), full_page=True)
        # Material's language selector: open it, pick English: the same page in English.
        page.locator(".md-header__option .md-select").first.hover()
        page.get_by_role("link", name="English").first.click()
        page.wait_for_url("**/en/pooling/")
        assert "Pooling: embeddings and rerank" in page.locator("h1").inner_text()
        page.wait_for_selector(".claim-chart svg.main-svg", timeout=15000)
        # ... and back, from the English home page (whose selector links were absolute once).
        page.goto(url + "/en/")
        page.locator(".md-header__option .md-select").first.hover()
        page.get_by_role("link", name="中文").first.click()
        page.wait_for_url(url + "/")
        assert page.locator("html").get_attribute("lang") == "zh"
        browser.close()
    assert errors == []


def search(page, query: str) -> list[tuple[str, str]]:
    """Type QUERY into Material's search box; the results' (href, text), once there are some."""
    page.locator("input.md-search__input").click()
    page.locator("input.md-search__input").fill(query)
    page.keyboard.press("End")  # Material reads the box on keyup (fill sends none)
    page.wait_for_function("document.querySelectorAll('.md-search-result__item').length > 0", timeout=20000)
    page.wait_for_timeout(300)
    links = page.locator(".md-search-result a.md-search-result__link")
    # Chinese is indexed cut into words by jieba, joined by zero-width spaces: the reader sees none of them.
    return [(a.get_attribute("href"), a.inner_text().replace("\u200b", "")) for a in links.all()]


@pytest.mark.parametrize("path, query, first", [
    ("/en/", "memory", None), ("/en/pooling/", "cache", None), ("/", "显存", None), ("/pooling/", "缓存", None),
    # Typed in the box, a Chinese query once went through Material's own cut, which dropped its tail (重定向 searched
    # 重* 定*: any page with 重要 or 确定) and found nothing for words jieba had cut otherwise.
    ("/", "吞吐", None), ("/", "重定向", "multimodal/"), ("/eager/", "前缀缓存", None)])
def test_search_finds_pages_of_the_page_language(served_site, path, query, first):
    """Each language has its own index, and a page loads only its own language's: the results are the reader's
    language's. English words are found at all (lunr's stemmer once indexed "memory" as "memori", found by no query);
    Chinese queries find the pages that hold the words (重定向: the multimodal page, which says most about redirects,
    comes first)."""
    from playwright.sync_api import sync_playwright

    url, site = served_site
    lang = "en" if path.startswith("/en/") else "zh"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        errors = watch(page, url)
        indexes: list[str] = []
        page.on("request", lambda r: indexes.append(r.url[len(url):]) if r.url.endswith("search_index.json") else None)
        page.goto(url + path)
        results = search(page, query)
        browser.close()
    assert results and errors == []
    assert indexes == (["/en/search/search_index.json"] if lang == "en" else ["/search/search_index.json"])
    hrefs = [href for href, _ in results]
    in_en = [href.startswith(url + "/en/") for href in hrefs]
    assert all(in_en) if lang == "en" else not any(in_en), hrefs
    # Snippets show the query, highlighted, as readable text.
    assert any(query.lower() in text.lower() for _, text in results), results[:3]
    if first:
        assert hrefs[0].startswith(f"{url}/{first}"), hrefs[:3]
    # Every page listed holds each word of the query (前缀缓存: jieba's 前缀 and 缓存), not just one of its characters.
    words = {"前缀缓存": ("前缀", "缓存")}.get(query, (query,))
    for page_path in {href[len(url):].split("?")[0] for href in hrefs}:
        text = (site / page_path.strip("/") / "index.html").read_text(encoding="utf-8").lower()
        assert all(word in text for word in words), (page_path, query)


@pytest.mark.parametrize("path, query, first", [
    ("/", "--max-num-batched-tokens", "capacity/"), ("/en/", "max-num-batched-tokens", "en/capacity/"),
    ("/", "--api-server-count", "capacity/"), ("/en/", "--api-server-count", "en/capacity/"),
    ("/pooling/", "/metrics", "multimodal/"), ("/en/", "/metrics", "en/multimodal/"),
    ("/en/", "--max-model-len", None), ("/", "前缀缓存", "prefill/"), ("/", "重定向", "multimodal/")])
def test_search_finds_operator_words_typed_key_by_key(served_site, path, query, first):
    """A flag or a route typed into the box, key by key as a reader types it (lunr once read the leading "-" as
    "without", and the separator cut the rest into words every page has), or a Chinese word committed by an input
    method: the page that measures it comes first, in either language."""
    from playwright.sync_api import sync_playwright

    url, _ = served_site
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        errors = watch(page, url)
        page.goto(url + path)
        page.locator("input.md-search__input").click()
        if query.isascii():
            page.keyboard.type(query, delay=15)
        else:  # an input method commits the whole word at once, then the reader presses a key
            page.keyboard.insert_text(query)
            page.keyboard.press("End")
        page.wait_for_function("document.querySelectorAll('.md-search-result__item').length > 0", timeout=20000)
        page.wait_for_timeout(300)
        hrefs = [a.get_attribute("href") for a in page.locator(".md-search-result a.md-search-result__link").all()]
        browser.close()
    assert hrefs and errors == []
    assert all(h.startswith(url + "/en/") == path.startswith("/en/") for h in hrefs), hrefs[:3]
    if first:
        assert hrefs[0].startswith(f"{url}/{first}"), hrefs[:3]


def test_every_page_loads_cleanly_and_fits_1280_and_390(served_site):
    """No page logs an error or fails a request. At 1280 px no page scrolls sideways, no chart sticks out of the
    content column and no table shown is wider than the article; at 390 px (a phone) a wide table scrolls inside its
    own box (Material's .md-typeset__scrollwrap), never the page. At either width no chart's legend entry runs past
    the chart's edge (Plotly cuts it there)."""
    assert_every_page_fits(*served_site)


def test_the_published_pages_fit_1280_and_390(published_site):
    """The same on the site built from the committed data: its tables have the real rows (long server names, ten
    columns and more), which the fixture data do not."""
    assert_every_page_fits(*published_site)


def assert_every_page_fits(url: str, site) -> None:
    from playwright.sync_api import sync_playwright

    pages = sorted(p.relative_to(site).parent.as_posix() for p in site.rglob("index.html"))
    assert "pooling" in pages and "en/pooling" in pages
    fits = """(strict) => {
        const column = document.querySelector('.md-content').getBoundingClientRect();
        const shown = el => el.offsetParent !== null && !el.closest('details:not([open])');
        const out = [...document.querySelectorAll('article table, article .claim-chart')].filter(shown).map(el => {
            const box = (el.closest('.md-typeset__scrollwrap') || el).getBoundingClientRect();
            const wrap = el.closest('.md-typeset__scrollwrap') || el.parentElement;
            const wider = el.tagName === 'TABLE' && strict && el.scrollWidth > wrap.clientWidth + 1;
            return box.left < column.left - 1 || box.right > column.right + 1 || wider
                ? `${el.tagName} ${Math.round(el.scrollWidth)}px in ${Math.round(wrap.clientWidth)}px` : null;
        }).filter(Boolean);
        // a legend entry Plotly cut at the chart's edge (it does not wrap one)
        for (const chart of [...document.querySelectorAll('article .claim-chart')].filter(shown)) {
            const edge = chart.querySelector('svg.main-svg').getBoundingClientRect().right;
            for (const text of chart.querySelectorAll('.legend text.legendtext')) {
                if (text.getBoundingClientRect().right > edge + 1) out.push(`legend "${text.textContent}" cut`);
            }
        }
        return {sideways: document.documentElement.scrollWidth - document.documentElement.clientWidth, out};
    }"""
    problems = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for width in (1280, 390):
            page = browser.new_page(viewport={"width": width, "height": 900})
            errors = watch(page, url)
            for rel in pages:
                page.goto(f"{url}/{rel}/" if rel != "." else url + "/")
                if page.locator(".claim-chart").count():
                    page.wait_for_selector(".claim-chart svg.main-svg", timeout=15000)
                    page.wait_for_function("[...document.querySelectorAll('.claim-chart svg.main-svg')]"
                                           ".every(svg => svg.closest('.claim-chart').dataset.legendFitted)",
                                           timeout=15000)
                page.wait_for_timeout(200)  # the language selector and search start after load
                found = page.evaluate(fits, width >= 1280)
                if found["sideways"] > 0 or found["out"] or errors:
                    problems[f"{rel} at {width} px"] = {**found, "errors": list(errors)}
                errors.clear()
            page.close()
        browser.close()
    assert problems == {}


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
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")  # full tables too
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


# The English a zh page may keep: product and tool names, API vocabulary that vLLM's own docs use untranslated, and
# names of modes and experiments. Code, flags, model names, environment ids, quoted server answers ([translate=no]),
# links to English sources and the references page are skipped; acronyms (TTFT, HTTP) and hyphenated or numbered
# names (flags, models) pass as they are.
ZH_KEEPS_ENGLISH = frozenset("""
    vLLM Qwen GuideLLM AIPerf OpenAI PyPI PyTorch Python Triton FlashInfer Inductor Dynamo Pillow Ghostscript
    PostScript Prometheus Transformer DeepSeek RMSNorm NVLink LoRA MoE GiB MiB Ada Toss Infra Shoeybi Reranker
    token tokens tok prefill eager dummy float base chat auto rerank localhost bench serve vllm torch torchvision
    yarl urllib aiohttp uvloop transformers datasets dash optuna textual pyzmq wheel metrics health invocations
    tokenize models completions version choices assistant usage adapter lora ngram graph compile profiling kernel
    multicast custom placeable hostname parsers secret redirect url file image video prompt encoding format
    rank cpu hidden head dim req data requests streamed flat out paced worker load internal mode speculative
    decoding fidelity loadgens digits yes etc false parse PCIe GbE oneDNN
""".split())


def latin_words_outside_the_allow_list(texts: list[str]) -> set[str]:
    words = set()
    for text in texts:
        for word in re.findall(r"[A-Za-z][A-Za-z0-9'-]*", text):
            word = word.strip("'-")
            if len(word) < 3 or word in ZH_KEEPS_ENGLISH or re.search(r"[-0-9]", word) or word.isupper():
                continue
            words.add(word)
    return words


def test_zh_pages_are_chinese_apart_from_the_names_a_reader_keeps(served_site):
    """Every visible text node of every zh page: no English word outside the allow-list (tables, captions, badges,
    answers, the open-claims page included)."""
    from playwright.sync_api import sync_playwright

    url, site = served_site
    pages = sorted(p.relative_to(site).parent.as_posix() for p in site.rglob("index.html")
                   if not p.relative_to(site).as_posix().startswith(("en/", "assets/", "references/")))
    walk = """() => {
        const texts = [], walker = document.createTreeWalker(document.querySelector('article'), NodeFilter.SHOW_TEXT);
        while (walker.nextNode()) {
            const el = walker.currentNode.parentElement;
            if (el.closest('code, pre, kbd, script, style, .claim-chart, .claim-src, [translate=no], a[href^="http"]'))
                continue;
            texts.push(walker.currentNode.textContent);
        }
        return texts;
    }"""
    found = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        for rel in pages:
            page.goto(f"{url}/{rel}/" if rel != "." else url + "/")
            english = latin_words_outside_the_allow_list(page.evaluate(walk))
            if english:
                found[rel] = sorted(english)
        browser.close()
    assert "pooling" in pages and "unconfirmed" in pages
    assert found == {}, found


def test_every_topic_page_opens_with_its_answers_and_shows_no_entity_and_no_mixed_chart(served_site):
    """Both languages: each topic page's first block is "本页回答 / This page answers"; no text or tooltip shows a
    literal HTML entity; no chart draws a CPU stand-in (tiny model) beside a full-size one."""
    from playwright.sync_api import sync_playwright

    from measure.site.facts import topics

    url, _ = served_site
    names = [t.name.replace("_", "-") for t in topics().values() if t.has_page]
    assert len(names) >= 8
    look = """() => {
        const first = document.querySelector('article h1 + *');
        const texts = [...document.querySelectorAll('article *')].flatMap(e =>
            [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent));
        // Material's tooltips insert a title as HTML: what the reader sees is the title parsed once
        const tips = [...document.querySelectorAll('article [title]')].map(e => {
            const d = document.createElement('div'); d.innerHTML = e.getAttribute('title'); return d.textContent; });
        const charts = [...document.querySelectorAll('script[data-chart-for]')].map(s =>
            JSON.parse(s.textContent).data.map(t => /tiny |缩小版/.test(t.name)));
        return {answersFirst: !!first && first.classList.contains('page-answers'),
                entities: [...texts, ...tips].filter(t => /&(#x?[0-9a-f]+|amp|lt|gt|quot);/i.test(t)).slice(0, 3),
                mixed: charts.filter(flags => flags.some(Boolean) && !flags.every(Boolean)).length};
    }"""
    problems = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        for lang_prefix in ("", "en/"):
            for name in names:
                page.goto(f"{url}/{lang_prefix}{name}/")
                found = page.evaluate(look)
                if not found["answersFirst"] or found["entities"] or found["mixed"]:
                    problems[lang_prefix + name] = found
        browser.close()
    assert problems == {}, problems
