"""MkDocs hooks: ship plotly.js and the data files with the site, so it works offline and every
number links to the CSV it came from; keep pages light and report what each one weighs."""

from __future__ import annotations

import gzip
import json
import logging
import posixpath
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.utils import get_relative_url

from measure.schema import SchemaError, UnknownName
from measure.store import PROVENANCE_FILE

# plotly.js's basic bundle (scatter, bar: all the claim macros draw), a quarter of the full one; see vendor/README.md.
PLOTLY_JS = Path(__file__).parent / "vendor" / "plotly-basic-4.1.1.min.js"
PLOTLY_TARGET = "assets/javascripts/plotly.min.js"
log = logging.getLogger("mkdocs.hooks.claims")  # warnings here fail `mkdocs build --strict`


def on_page_markdown(markdown, page, **kwargs):
    from measure.experiment import all_schemas
    from measure.site.lint import doubled_units, typed_numbers
    from measure.site.scan import page_lang

    # The source as written: by now the macros have already put measured numbers into `markdown`.
    source, src = Path(page.file.abs_src_path).read_text(encoding="utf-8"), page.file.src_uri
    for finding in typed_numbers(source, src) + doubled_units(source, src, all_schemas(), page_lang(src)):
        log.warning(str(finding))
    return markdown


# Chinese puts no space between its characters, nor around its full-width punctuation, which carries its own room.
# A line break inside a paragraph renders as a space, and so does a space typed beside a fact (written when it showed
# "1.2 ×", now "1.2 倍"). In a zh page's HTML (facts restored) such spaces go: a break or a space between two Chinese
# characters, one after full-width punctuation and one before it; inline tags and a figure's source link are looked
# through. A space between a Chinese character and a Latin word or a number stays, as Chinese text has it. Code, chart
# data and styles are left as written. Chinese quotes with curly quotes and uses the em dash and ellipsis of general
# punctuation: these count as its characters too.
_CJK = "\u2014\u2018\u2019\u201c\u201d\u2026\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef"
_PUNCT = "，。；：、！？（）《》〈〉「」『』【】“”‘’—…"
_MARK = r'(?:<a class="claim-src[^"]*"[^>]*>[^<]*</a>|</?(?:span|a|strong|em|abbr|sup|sub|b|i)\b[^>]*>)'
_GAP = r"(?:[ \t]*\n[ \t]*|[ \t]+)"  # one line break or spaces: a blank line between blocks is not a gap
_SPACE_IN_CJK = re.compile(rf"(?<=[{_CJK}])((?:{_MARK})*){_GAP}(?=(?:{_MARK})*[{_CJK}])")
_SPACE_AFTER_PUNCT = re.compile(rf"(?<=[{_PUNCT}])((?:{_MARK})*){_GAP}(?=[^\s<]|{_MARK})")
_SPACE_BEFORE_PUNCT = re.compile(rf"(?<=[\w{_CJK})\]>%])[ \t]+(?=(?:{_MARK})*[{_PUNCT}])")
_LEFT_AS_WRITTEN = re.compile(r"(<(pre|code|script|style)\b.*?</\2>|<!--.*?-->)", re.DOTALL | re.IGNORECASE)
_SET_ASIDE = re.compile("\0(\\d+)\0")  # tighten_zh's placeholder for what is left as written


def tighten_zh(html: str) -> str:
    """A zh page's HTML without the spaces Chinese does not put (see above). What is left as written stands aside
    as a placeholder word meanwhile: a space beside code stays, as beside any Latin word, but not after punctuation."""
    kept: list[str] = []

    def aside(match: re.Match) -> str:
        kept.append(match.group(0))
        return f"\0{len(kept) - 1}\0"

    text = _LEFT_AS_WRITTEN.sub(aside, html)
    text = _SPACE_IN_CJK.sub(r"\1", text)
    text = _SPACE_AFTER_PUNCT.sub(r"\1", text)
    text = _SPACE_BEFORE_PUNCT.sub("", text)
    return _SET_ASIDE.sub(lambda m: kept[int(m.group(1))], text)


_site_dir: Path | None = None


def on_config(config, **kwargs):
    global _site_dir
    _site_dir = Path(config["site_dir"])
    return config


def on_build_error(error, **kwargs):
    # A failed build must not leave the previous, complete-looking site behind: a reader (or a deploy step)
    # would take it for this build's.
    if _site_dir is not None and (_site_dir / "index.html").is_file():
        shutil.rmtree(_site_dir, ignore_errors=True)
        log.error(f"build failed: removed {_site_dir} so that no stale site is taken for this build")


ANSWER_FIGURE = re.compile(r'data-answer-figure="([^"]*)"')


def on_page_content(html, page, **kwargs):
    from measure.site import stash
    from measure.site.scan import page_lang

    html = one_full_stop(stash.restore(html))
    if page_lang(page.file.src_uri) == "zh":
        html = tighten_zh(html)
    for token in stash.leftovers(html):
        log.warning(f"{page.file.src_uri}: a macro's output was lost in Markdown ({token}); put the macro on a line "
                    "or in a sentence of its own")
    for anchor in ANSWER_FIGURE.findall(html):  # each answer links to the figure that shows it
        if f'id="{anchor}"' not in html:
            log.warning(f"{page.file.src_uri}: an answer links to #{anchor}, which no heading of the page has; "
                        f"give the figure's heading {{ #{anchor} }} (the same id in both languages)")
    return html


# An Unconfirmed mark's reason closes its own sentence; a full stop the page types after the mark would double it.
REASON_THEN_STOP = re.compile(r'(<span class="claim-reason">[^<]*[.。])</span>\s?([.。])')


def one_full_stop(html: str) -> str:
    """The page's HTML with a typed full stop after a mark's closed reason dropped ("…waited for room.." read twice)."""
    return REASON_THEN_STOP.sub(r"\1</span>", html)


PLOTLY_SCRIPT = re.compile(r'<script src="[^"]*' + re.escape(PLOTLY_TARGET) + r'"></script>')
# Material's <head> links to each language's version of the page. Its language selector fetches sitemap.xml
# *under every such link* (it expects them to be the languages' roots), but mkdocs-static-i18n points them at the
# page's translations, so every page asked for <page>/sitemap.xml and <page in the other language>/sitemap.xml and got
# two 404s (and console errors). The selector's own links already lead to the translation, and sitemap.xml lists each
# page's hreflang alternates for search engines, so the <head> links go.
HREFLANG_LINK = re.compile(r'\s*<link rel="alternate" href="[^"]*" hreflang="[^"]*">')
SELECTOR_LINK = re.compile(r'(<a href=")([^"]*)(" hreflang="([^"]+)" class="md-select__link">)')
# docs/assets/javascripts/search-language.js points each page at its language's search index and cuts Chinese
# queries into the index's words. It wraps what Material's bundle uses as it runs (XMLHttpRequest, Worker), so it goes
# right before the bundle (extra_javascript comes after it: too late).
MATERIAL_BUNDLE = re.compile(r'<script src="([^"]*)bundle\.[0-9a-f]+\.min\.js"></script>')
SEARCH_LANGUAGE_JS = "search-language.js"


def _before_bundle(output: str) -> str:
    return MATERIAL_BUNDLE.sub(lambda m: f'<script src="{m.group(1)}{SEARCH_LANGUAGE_JS}"></script>' + m.group(0),
                               output, count=1)


def _site_path(config) -> str:
    path = urlsplit(config.get("site_url") or "/").path or "/"
    return path if path.endswith("/") else path + "/"


def on_post_page(output, page, config, **kwargs):
    # plotly.js is most of a page's weight (1.2 MB, 0.4 MB gzip'd): only pages that draw a chart load it.
    if 'class="claim-chart"' not in output:
        output = PLOTLY_SCRIPT.sub("", output)
    output = _before_bundle(HREFLANG_LINK.sub("", output))
    # mkdocs-static-i18n gives the home pages' selector absolute links (/ and /en/, under site_url's path): make
    # them relative like every other link, so the switch works wherever the build is opened.
    site_path = _site_path(config)

    def relative(m):
        href = m.group(2)
        if not href.startswith(site_path):
            return m.group(0)
        url = get_relative_url(href[len(site_path):] or ".", page.url or ".")
        return m.group(1) + (url + "/" if href.endswith("/") and not url.endswith("/") else url) + m.group(3)

    return SELECTOR_LINK.sub(relative, output)


def on_post_template(output, template_name, config, **kwargs):
    # 404.html is no page (on_post_page never sees it): it loaded plotly.js, and its language selector led to
    # whichever page was rendered last. Its links are absolute (it is served at any depth): send each language
    # to its home page.
    if template_name != "404.html":
        return output
    output = _before_bundle(HREFLANG_LINK.sub("", PLOTLY_SCRIPT.sub("", output)))
    i18n = config["plugins"].get("i18n")
    homes = {lang.locale: _site_path(config) + lang.link.lstrip("/") for lang in i18n.config.languages} if i18n else {}
    return SELECTOR_LINK.sub(lambda m: m.group(1) + homes.get(m.group(4), m.group(2)) + m.group(3), output)


_LOGGED: set[str] = set()


def on_pre_build(config, **kwargs):
    from measure.site.cards import cross_cards_for
    from measure.site.consistency import consistency_for
    from measure.site.lint import claim_set_mismatches, unused_datasets
    from measure.site.scan import keys_by_page_pair, scan_pages, site_store

    store = site_store()
    try:
        # every file the build publishes is checked, not only those a page reads (copy_assets_and_data copies these)
        store.validate_all()
        claims = scan_pages(Path(config["docs_dir"]), store=store)
    except (SchemaError, UnknownName) as exc:  # a bad data file or a typo: its message (file:line:column), no traceback
        raise PluginError(str(exc)) from exc
    for finding in claim_set_mismatches(keys_by_page_pair(claims)) + unused_datasets(claims, store.schemas):
        log.warning(str(finding))
    # What the consistency check found (a disagreement is no build error: its figures render 未确认).
    lines = [f"consistency: {v.describe()}" for v in consistency_for(store).verdicts]
    # ... and across cards: a weaker card faster beyond the spread (its figures render 未确认 on both cards)
    cross = cross_cards_for(store)
    lines += [f"across cards: {v.describe()}" for v in cross.verdicts]
    if len(cross.strengths) > 1 and not cross.verdicts:
        lines.append("across cards: " + ", ".join(f"{e} {bw:,.0f} GB/s, {fl:,.0f} TFLOP/s"
                                                   for e, (bw, fl) in sorted(cross.strengths.items()))
                     + ": no weaker card did better beyond the spread")
    for line in lines:
        if line not in _LOGGED:  # on_pre_build runs once per language
            _LOGGED.add(line)
            log.info(line)


def copy_assets_and_data(config) -> None:
    """plotly.js and the data files the build checked (each environment's provenance and its declared datasets,
    read by the same strict readers as the pages), into the built site; nothing else under data/ is published."""
    from measure.site.scan import site_store

    site = Path(config["site_dir"])
    target = site / PLOTLY_TARGET
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PLOTLY_JS, target)
    out = site / "data"
    if out.exists():
        shutil.rmtree(out)
    store = site_store()
    for env in store.environments:
        for f in [env.path / PROVENANCE_FILE, *store.published_files(env)]:
            dest = out / env.name / f.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dest)


# Page weight: what a reader's browser fetches to show a page (HTML, CSS, scripts, fonts, images, and the search
# index with its worker, which Material loads on every page that has a search box). Targets are on the bytes
# transferred, gzip'd as web servers (GitHub Pages included) send text; the uncompressed sizes are printed too.
WEIGHT_TARGET_KB = {"page": 1000, "chart page": 2500}


# The tags _PageAssets reads: parsing only these, not every table cell of a page, keeps the report cheap.
ASSET_TAGS = re.compile(r"<(?:link|img|form)\b[^>]*>|<script\b[^>]*>.*?</script>", re.S)


class _PageAssets(HTMLParser):
    """The URLs a built page loads as it opens."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.urls: list[tuple[str, str]] = []  # (kind, url)
        self.search = False
        self.config: dict = {}
        self._config_text: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        rel = set((a.get("rel") or "").split())
        if tag == "script" and a.get("src"):
            self.urls.append(("js", a["src"]))
        elif tag == "script" and a.get("id") == "__config":
            self._config_text = []
        elif tag == "link" and a.get("href") and rel & {"stylesheet", "icon"}:
            self.urls.append(("css" if "stylesheet" in rel else "img", a["href"]))
        elif tag == "img" and a.get("src"):
            self.urls.append(("img", a["src"]))
        elif tag == "form" and a.get("name") == "search":
            self.search = True

    def handle_data(self, data):
        if self._config_text is not None:
            self._config_text.append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._config_text is not None:
            self.config = json.loads("".join(self._config_text) or "{}")
            self._config_text = None


def lunr_scripts(search_config: dict) -> list[str]:
    """What Material's search worker loads besides itself for an index's languages (its setupSearchLanguages), as
    paths under assets/javascripts/lunr/."""
    scripts = []
    langs = search_config.get("lang") or ["en"]
    for lang in langs:
        scripts += {"ja": ["tinyseg.js"], "hi": ["wordcut.js"], "th": ["wordcut.js"]}.get(lang, [])
        if lang != "en":
            scripts.append(f"min/lunr.{lang}.min.js")
    if len(langs) > 1:
        scripts.append("min/lunr.multi.min.js")
    if scripts:
        scripts.insert(0, "min/lunr.stemmer.support.min.js")
    return scripts


def _search_assets(worker: str, search_config: dict) -> list[tuple[str, str]]:
    """The worker and what it loads, as URLs relative to the page that names the worker."""
    folder = posixpath.dirname(worker)
    return [("js", worker)] + [("js", posixpath.normpath(posixpath.join(folder, "../lunr", s)))
                               for s in lunr_scripts(search_config)]


SEARCH_INDEX = "search/search_index.json"


def language_index(site: Path, rel: str) -> str:
    """The search index a built page (its path under the site) loads: its language folder's, else the default
    language's (docs/assets/javascripts/search-language.js makes the browser do the same)."""
    folder = rel.split("/", 1)[0]
    return f"{folder}/{SEARCH_INDEX}" if "/" in rel and (site / folder / SEARCH_INDEX).is_file() else SEARCH_INDEX


def page_weights(site: Path, site_path: str = "/") -> tuple[list[dict], list[str]]:
    """Per built page: bytes (raw, gzip) by kind of asset; and the problems met (missing or off-site assets)."""
    sizes: dict[Path, tuple[int, int]] = {}

    def size(path: Path) -> tuple[int, int]:
        if path not in sizes:
            data = path.read_bytes()
            sizes[path] = (len(data), len(gzip.compress(data, 6)))
        return sizes[path]

    configs: dict[str, dict] = {}

    def search_config(index: str) -> dict:
        if index not in configs:
            path = site / index
            configs[index] = json.loads(path.read_text(encoding="utf-8")).get("config", {}) if path.is_file() else {}
        return configs[index]

    problems: list[str] = []
    pages = []
    for html in sorted(site.rglob("*.html")):
        rel = html.relative_to(site).as_posix()
        if rel.startswith("data/"):
            continue
        parser = _PageAssets()
        parser.feed("".join(ASSET_TAGS.findall(html.read_text(encoding="utf-8"))))
        urls = list(parser.urls)
        base = parser.config.get("base", ".")
        if parser.search and parser.config.get("search"):
            index = language_index(site, rel)
            urls += _search_assets(parser.config["search"], search_config(index))
            urls.append(("index", posixpath.join(base, index)))
        kinds = {"html": size(html)}
        chart = False
        seen: set[Path] = set()
        todo = [(kind, url, html.parent) for kind, url in urls]
        while todo:
            kind, url, folder = todo.pop(0)
            parts = urlsplit(url)
            if parts.scheme or url.startswith("//"):
                problems.append(f"{rel} loads {url} from another host: the site is meant to work offline")
                continue
            path = unquote(parts.path)
            if path.startswith("/"):  # 404.html: absolute, under site_url's path
                target = site / path[len(site_path):] if path.startswith(site_path) else site / path.lstrip("/")
            else:
                target = folder / path
            target = Path(posixpath.normpath(target.as_posix()))
            if target in seen:
                continue
            seen.add(target)
            if not target.is_file():
                problems.append(f"{rel} loads {url}, which the build does not have")
                continue
            chart = chart or target.name == Path(PLOTLY_TARGET).name
            raw, packed = size(target)
            old = kinds.get(kind, (0, 0))
            kinds[kind] = (old[0] + raw, old[1] + packed)
            if kind == "css":  # fonts a stylesheet pulls in
                for font in re.findall(r"url\(\s*['\"]?([^'\")]+\.(?:woff2?|ttf|otf|eot))", target.read_text("utf-8", "replace")):
                    todo.append(("font", font, target.parent))
        raw = sum(v[0] for v in kinds.values())
        packed = sum(v[1] for v in kinds.values())
        pages.append({"page": rel, "chart": chart, "kinds": kinds, "raw": raw, "gzip": packed})
    return pages, problems


def weight_report(pages: list[dict]) -> tuple[list[str], list[str]]:
    """The report's lines, and one line per page over its target (gzip'd)."""
    kb = lambda n: f"{n / 1024:,.0f}"  # noqa: E731
    order = ["html", "css", "js", "font", "img", "index"]
    width = max([len(p["page"]) for p in pages] + [4])
    lines = [f"page weight, KB uncompressed / gzip'd; targets (gzip'd): page {WEIGHT_TARGET_KB['page']:,}, "
             f"chart page {WEIGHT_TARGET_KB['chart page']:,}",
             f"  {'page':<{width}}  {'':5}  " + "  ".join(f"{k:>11}" for k in order) + f"  {'total':>13}"]
    over = []
    for p in pages:
        cells = "  ".join(f"{kb(p['kinds'][k][0]) + '/' + kb(p['kinds'][k][1]) if k in p['kinds'] else '-':>11}"
                          for k in order)
        target = WEIGHT_TARGET_KB["chart page" if p["chart"] else "page"] * 1024
        note = ""
        if p["gzip"] > target:
            note = "  OVER TARGET"
            over.append(f"{p['page']}: {kb(p['gzip'])} KB gzip'd ({kb(p['raw'])} KB uncompressed), over the "
                        f"{'chart page' if p['chart'] else 'page'} target of {kb(target)} KB")
        elif p["raw"] > target:
            note = "  (over target uncompressed)"
        lines.append(f"  {p['page']:<{width}}  {'chart' if p['chart'] else '':5}  {cells}  "
                     f"{kb(p['raw']) + '/' + kb(p['gzip']):>13}{note}")
    charts = sum(p["chart"] for p in pages)
    lines.append(f"  {charts} page(s) load plotly.js (they draw a chart), {len(pages) - charts} do not")
    return lines, over


def split_search_index(site: Path, locales: list[str]) -> dict[str, int]:
    """mkdocs-static-i18n merges every language's pages into one search/search_index.json, which every page loaded
    whole. Each language gets its own: the default language's stays where Material's bundle asks for it, another's
    goes under its folder (search-language.js sends that language's pages there). Each index names its own lunr
    language plus English (the pages quote English flags and model names). The JSON is written as UTF-8, not with
    Material's \\uXXXX escapes (6 bytes for each Chinese character and each U+200B jieba put between words).
    Returns the documents per index."""
    path = site / SEARCH_INDEX
    merged = json.loads(path.read_text(encoding="utf-8"))
    docs: dict[str, list] = {"": [], **{locale: [] for locale in locales}}
    for doc in merged["docs"]:
        first = doc["location"].split("/", 1)[0]
        docs[first if first in locales else ""].append(doc)
    counts = {}
    for entry in merged["docs"]:
        operators = operator_terms(entry.get("text", ""))
        if operators:
            entry["operators"] = " ".join(operators)
    for locale, entries in docs.items():
        config = dict(merged["config"])
        config["fields"] = dict(config.get("fields") or {}) | {"operators": {"boost": OPERATOR_BOOST}}
        if locale:
            config["lang"] = list(dict.fromkeys([locale, "en"]))
        target = site / locale / SEARCH_INDEX
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({"config": config, "docs": entries}, ensure_ascii=False, separators=(",", ":")),
                          encoding="utf-8")
        counts[locale or "default"] = len(entries)
    return counts


# What operators type into search: flags (--max-num-batched-tokens), routes (/metrics, /v1/embeddings) and names with
# underscores (max_pixels, VLLM_MEDIA_URL_ALLOW_REDIRECTS). The search separator cuts them at "-" and "_" into words
# every page has ("max", "num", "tokens"), and lunr reads a leading "-" as "without": each document therefore gets a
# field of its own holding each such term joined into one token ("op" + its letters and digits), once per
# occurrence, and search-language.js turns a term typed in the box into the same token.
OPERATOR = re.compile(r"(?<![\w/.:-])(--[a-z0-9][a-z0-9-]*[a-z0-9]|/[a-z][a-z0-9_]*(?:/[a-z0-9_]+)*"
                      r"|[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9])(?![\w/])")
OPERATOR_BOOST = 10


def operator_term(word: str) -> str:
    return "op" + re.sub(r"[^a-z0-9]", "", word.lower())


def operator_terms(text: str) -> list[str]:
    """The operator terms of a search document's text (its HTML tags left out), each as its joined token."""
    return [operator_term(word) for word in OPERATOR.findall(re.sub(r"<[^>]+>", " ", text))]


SOURCE_MAP_COMMENT = re.compile(r"\n?(?://# sourceMappingURL=[^\n]*|/\*# sourceMappingURL=[^*]*\*/)\s*$")


def prune_assets(site: Path) -> list[str]:
    """Drop what no reader loads: source maps (and the comments naming them), and lunr-languages' files for
    languages none of the site's search indexes uses (Thai's word splitter alone is 677 KB). Returns what went."""
    gone = []
    assets = site / "assets"
    for path in sorted(assets.rglob("*.map")):
        path.unlink()
        gone.append(path.relative_to(site).as_posix())
    for path in sorted([*assets.rglob("*.js"), *assets.rglob("*.css")]):
        text = path.read_text(encoding="utf-8")
        stripped = SOURCE_MAP_COMMENT.sub("", text)
        if stripped != text:
            path.write_text(stripped, encoding="utf-8")
    lunr = assets / "javascripts" / "lunr"
    used = {name for index in site.glob(f"**/{SEARCH_INDEX}")
            for name in lunr_scripts(json.loads(index.read_text(encoding="utf-8")).get("config", {}))}
    for path in sorted(p for p in lunr.rglob("*.js") if p.relative_to(lunr).as_posix() not in used):
        path.unlink()
        gone.append(path.relative_to(site).as_posix())
    return gone


@event_priority(-200)  # after mkdocs-static-i18n (-100) has built the other languages and merged the search index
def on_post_build(config, **kwargs):
    copy_assets_and_data(config)
    i18n = config["plugins"].get("i18n")
    if i18n is not None and getattr(i18n, "building", False):
        return  # a language built inside the main build: split, prune and report once, on the whole site
    site = Path(config["site_dir"])
    if (site / SEARCH_INDEX).is_file():
        locales = [lang.link.strip("/") for lang in i18n.config.languages if not lang.default] if i18n else []
        counts = split_search_index(site, locales)
        log.info("search index per language (documents): " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    gone = prune_assets(site)
    log.info(f"removed {len(gone)} file(s) no page loads (source maps, unused lunr languages)")
    pages, problems = page_weights(site, _site_path(config))
    lines, over = weight_report(pages)
    log.info("\n".join(lines))
    for line in problems + over:
        log.warning(line)
