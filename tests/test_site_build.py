"""Strict builds of the real site against fixture data roots."""

import json
import re
import shutil
import sys
from importlib import metadata

import pytest
from conftest import REPO, build_site
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

SITE_URL = "https://example.org/notes/"  # a project site on GitHub Pages is published under a path like this


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("build")
    root = tmp / "data"
    shutil.copytree(REPO / "tests" / "fixtures" / "data", root)
    site = tmp / "site"
    result = build_site(root, site, extra_env={"SITE_URL": SITE_URL})
    (tmp / "build.log").write_text(result.stdout + result.stderr)
    return root, site


@pytest.mark.site
def test_both_languages_build_and_no_raw_jinja_survives(built):
    _, site = built
    pages = list(site.rglob("*.html"))
    assert (site / "pooling" / "index.html").is_file() and (site / "en" / "pooling" / "index.html").is_file()
    for page in pages:
        # Code samples may show macro syntax on purpose (the contributing page does); prose may not.
        text = re.sub(r"<pre.*?</pre>|<code.*?</code>", "", page.read_text(), flags=re.S)
        assert "{{" not in text and "{%" not in text, page


@pytest.mark.site
def test_measured_number_with_provenance_appears(built):
    _, site = built
    html = (site / "en" / "pooling" / "index.html").read_text()
    assert "12,346" in html  # fixture: batch 4, float, tokens_per_s 12345.6, rendered with 0 digits
    assert 'href="../../data/fixture-cpu/pooling.embedding_throughput.csv"' in html
    assert (site / "data" / "fixture-cpu" / "pooling.embedding_throughput.csv").is_file()
    assert (site / "assets" / "javascripts" / "plotly.min.js").is_file()


@pytest.mark.site
def test_a_reproduce_box_prints_each_experiments_setup_before_measuring(built):
    _, site = built
    box = re.search(r'<div class="admonition tip reproduce">.*?</div>', (site / "en" / "multimodal" / "index.html")
                    .read_text(), flags=re.S).group(0)
    setup, measure = box.index("nox -s vllm_versions"), box.index("nox -s measure -- ")
    assert setup < measure and "security_versions" in box[measure:]


@pytest.mark.site
def test_cited_figures_render_as_cited(built):
    _, site = built
    for page, tokens in (("pooling", "个 token"), ("en/pooling", "tokens")):  # the count's unit in each language
        html = (site / page / "index.html").read_text()
        assert re.search(r'claim-value claim-cited[^>]*>127\u00a0' + tokens + "<", html), page


@pytest.mark.site
def test_removed_dataset_turns_into_not_measured(built, tmp_path):
    root, _ = built
    stripped = tmp_path / "data"
    shutil.copytree(root, stripped)
    (stripped / "fixture-cpu" / "pooling.embedding_throughput.csv").unlink()
    site = tmp_path / "site"
    build_site(stripped, site)
    html = (site / "en" / "pooling" / "index.html").read_text()
    assert "12,346" not in html
    assert "claim-not-measured" in html and "Not measured" in html


@pytest.mark.site
def test_typo_fails_the_build(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    page = docs / "pooling.en.md"
    page.write_text(page.read_text() + '\n{{ value("pooling.embedding_throughput", "tokens_per_sec") }}\n')
    result = build_site(REPO / "tests" / "fixtures" / "data", tmp_path / "site", docs_dir=docs, check=False)
    assert result.returncode != 0
    assert "no column 'tokens_per_sec'" in result.stdout + result.stderr


@pytest.mark.site
@pytest.mark.parametrize("claim, why", [
    ('value("multimodal.size_hint_gain", "kv_ratio", memory_condition="whole devise", max_model_len="4096")',
     "memory_condition='whole devise' occurs in no environment's multimodal.size_hint_gain"),
    ('value("multimodal.size_hint_gain", "kv_ratio", env="gpu-1x-nvidia-h20", memory_condition="whole device", '
     'max_model_len="4096")', "env 'gpu-1x-nvidia-h20': no such environment"),
])
def test_a_misspelt_selector_or_environment_fails_the_build_against_the_committed_data(tmp_path, claim, why):
    """The same typo in both languages used to render 未实测 quietly."""
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    for lang in ("zh", "en"):
        page = docs / f"multimodal-measured.{lang}.md"
        page.write_text(page.read_text() + "\n{{ " + claim + " }}\n")
    result = build_site(REPO / "data", tmp_path / "site", docs_dir=docs, check=False, partial=False)
    assert result.returncode != 0
    assert why in result.stdout + result.stderr


@pytest.mark.site
def test_csv_text_is_html_escaped(tmp_path):
    root = tmp_path / "data"
    shutil.copytree(REPO / "tests" / "fixtures" / "data", root)
    csv = root / "fixture-cpu" / "pooling.embedding_throughput.csv"
    csv.write_text(csv.read_text().replace("tiny-Qwen3-Embedding-0.6B,dummy,1,float", "<img src=x onerror=alert(1)>,dummy,1,float", 1))
    build_site(root, tmp_path / "site")
    html = (tmp_path / "site" / "en" / "pooling" / "index.html").read_text()
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def installed_by(dist: str, extra: str) -> set[str]:
    """The distributions ``pip install DIST[EXTRA]`` pulls in (following extras, self-references too)."""
    found: set[str] = set()
    todo, seen = [(dist, extra)], set()
    while todo:
        name, wanted = todo.pop()
        if (canonicalize_name(name), wanted) in seen:
            continue
        seen.add((canonicalize_name(name), wanted))
        found.add(canonicalize_name(name))
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # a conditional requirement for another platform
        for text in requires:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": wanted or ""}):
                todo += [(req.name, e) for e in req.extras or {None}]
    return found


# Runs mkdocs with the given top-level modules unimportable, as if they were not installed.
WITHOUT_MODULES = """
import importlib.abc, runpy, sys
blocked = set(sys.argv.pop(1).split(","))
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (outside the site extra)", name=name)
sys.meta_path.insert(0, NotInstalled())
flag, module, *rest = sys.argv[1:]  # -m MODULE ARGS…
sys.argv = [module, *rest]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


@pytest.mark.site
def test_the_site_builds_with_only_what_the_site_extra_installs(tmp_path):
    """`nox -s build` (and the Pages workflow) install `.[site]` alone: the build must not need vLLM, peft or any
    package that only another extra brings (it once did, through the experiment modules' openai import)."""
    allowed = installed_by("vllm-field-notes", "site") | {"pip", "setuptools", "wheel"}
    blocked = sorted(module for module, dists in metadata.packages_distributions().items()
                     if not module.startswith("_") and not {canonicalize_name(d) for d in dists} & allowed)
    assert {"vllm", "torch", "peft", "pytest"} & set(blocked), "the test venv should hold packages beyond the site's"
    shim = tmp_path / "without_modules.py"
    shim.write_text(WITHOUT_MODULES)
    # `python shim.py MODULES -m mkdocs …`: the shim drops MODULES, then runs the module named after -m.
    result = build_site(REPO / "tests" / "fixtures" / "data", tmp_path / "site", check=False,
                        python=(sys.executable, str(shim), ",".join(blocked)))
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert (tmp_path / "site" / "en" / "pooling" / "index.html").is_file(), json.dumps(blocked)


@pytest.mark.site
def test_plotly_loads_only_where_a_chart_is_drawn(built):
    """plotly.js once loaded on every page, most of which draw no chart (and on the 404 page). The site ships
    plotly.js's basic bundle, which draws scatter and bar traces only: every chart must be made of those."""
    _, built = built
    pooling = (built / "en" / "pooling" / "index.html").read_text()
    home = (built / "en" / "index.html").read_text()
    assert 'class="claim-chart"' in pooling and "plotly.min.js" in pooling
    assert 'class="claim-chart"' not in home and "plotly.min.js" not in home
    assert "zqclaim" not in pooling + home  # every macro's stashed output was put back
    loads = {p.relative_to(built).as_posix(): ("plotly.min.js" in p.read_text(), 'class="claim-chart"' in p.read_text())
             for p in built.rglob("*.html") if p.parts[len(built.parts)] != "data"}
    assert {page for page, (script, chart) in loads.items() if script != chart} == set()
    assert 2 <= sum(chart for _, chart in loads.values()) < len(loads) - 4
    assert loads["404.html"] == (False, False)
    import json

    kinds = {trace["type"] for p in built.rglob("*.html")
             for payload in re.findall(r'<script type="application/json" data-chart-for="[^"]+">(.*?)</script>', p.read_text())
             for trace in json.loads(payload)["data"]}
    assert kinds and kinds <= {"scatter", "bar"}, kinds


@pytest.mark.site
def test_build_log_reports_every_page_weight_within_target(built):
    """The build prints what each page makes a reader download; a page over its target would have failed the strict
    build (the hook warns)."""
    _, site = built
    log = (site.parent / "build.log").read_text()
    report = log[log.index("page weight, KB"):]
    for page in ("index.html", "pooling/index.html", "en/pooling/index.html", "404.html"):
        assert re.search(rf"^\s+{re.escape(page)}\s", report, flags=re.M), page
    line = re.search(r"^\s+en/pooling/index\.html\s+chart\s.*$", report, flags=re.M).group(0)
    assert "OVER TARGET" not in report and "over the" not in log
    total = re.search(r"([\d,]+)/([\d,]+)(\s+\(over target uncompressed\))?$", line)
    total_raw, total_gzip = (float(n.replace(",", "")) for n in total.group(1, 2))
    assert total_gzip < total_raw < 2500  # plotly.js's basic bundle: under the chart-page target even uncompressed
    assert re.search(r"\d+ page\(s\) load plotly\.js \(they draw a chart\), \d+ do not", report)


def test_weight_report_flags_a_page_over_its_target():
    from measure.site.hooks import weight_report

    kb = 1024
    pages = [{"page": "a/index.html", "chart": False, "kinds": {"html": (1200 * kb, 1100 * kb)}, "raw": 1200 * kb,
              "gzip": 1100 * kb},
             {"page": "b/index.html", "chart": True, "kinds": {"js": (4000 * kb, 1500 * kb)}, "raw": 4000 * kb,
              "gzip": 1500 * kb}]
    lines, over = weight_report(pages)
    assert len(over) == 1 and over[0].startswith("a/index.html: 1,100 KB gzip'd")
    assert any("b/index.html" in line and "over target uncompressed" in line for line in lines)


@pytest.mark.site
def test_published_urls_follow_site_url_and_pages_link_relatively(built):
    """Canonical links and sitemap.xml name the published address; the 404 page (served at any depth) links under
    its path; pages link relatively and name no sitemap Material would fetch under them (<page>/sitemap.xml, a 404)."""
    _, site = built
    pooling = (site / "pooling" / "index.html").read_text()
    assert f'<link rel="canonical" href="{SITE_URL}pooling/">' in pooling
    assert f'<link rel="canonical" href="{SITE_URL}en/pooling/">' in (site / "en" / "pooling" / "index.html").read_text()
    for page in site.rglob("*.html"):
        assert not re.search(r'<link rel="alternate" href="[^"]*" hreflang=', page.read_text()), page
    sitemap = (site / "sitemap.xml").read_text()
    assert f"<loc>{SITE_URL}pooling/</loc>" in sitemap
    assert f'hreflang="en" href="{SITE_URL}en/pooling/"' in sitemap
    selector = r'<a href="([^"]*)" hreflang="(\w+)" class="md-select__link">'
    assert re.findall(selector, (site / "index.html").read_text()) == [("./", "zh"), ("en/", "en")]
    assert re.findall(selector, (site / "en" / "index.html").read_text()) == [("../", "zh"), ("./", "en")]
    assert re.findall(selector, pooling) == [("./", "zh"), ("../en/pooling/", "en")]
    not_found = (site / "404.html").read_text()
    assert re.findall(selector, not_found) == [("/notes/", "zh"), ("/notes/en/", "en")]
    assert '<script src="/notes/assets/javascripts/bundle.' in not_found


@pytest.mark.site
def test_each_language_has_its_own_search_index(built):
    """One merged index made every page load both languages' text. Chinese is cut into words (jieba: U+200B between
    them); no stemmer, whose "memori" no prefix query finds; the JSON is UTF-8, not \\u escapes."""
    _, site = built
    zh_path, en_path = site / "search" / "search_index.json", site / "en" / "search" / "search_index.json"
    zh, en = json.loads(zh_path.read_text()), json.loads(en_path.read_text())
    assert zh["docs"] and en["docs"]
    assert not any(d["location"].startswith("en/") for d in zh["docs"])
    assert all(d["location"].startswith("en/") for d in en["docs"])
    assert zh["config"]["lang"] == ["zh", "en"] and en["config"]["lang"] == ["en"]
    for index in (zh, en):
        assert "stemmer" not in index["config"]["pipeline"] and "\\u200b" in index["config"]["separator"]
    assert any("\u200b" in d["text"] for d in zh["docs"]) and not any("\u200b" in d["title"] for d in en["docs"])
    raw = zh_path.read_text(encoding="utf-8")
    assert "显存" in raw and "\\u663e" not in raw  # 显存 as its 6 bytes, not as 12 of \u663e\u5b58
    # the script that sends each page to its language's index rides in front of Material's bundle on every page
    html = (site / "en" / "pooling" / "index.html").read_text()
    assert html.index("assets/javascripts/search-language.js") < html.index("assets/javascripts/bundle.")


def test_no_source_maps_or_unused_lunr_languages_ship(built):
    """Material ships 1.2 MB of source maps and every lunr-languages file (Thai's word splitter alone is 677 KB);
    the site loads the zh index's three."""
    _, site = built
    assert not list(site.rglob("*.map"))
    for path in [*site.glob("assets/**/*.js"), *site.glob("assets/**/*.css")]:
        assert "sourceMappingURL" not in path.read_text(encoding="utf-8"), path
    lunr = site / "assets" / "javascripts" / "lunr"
    assert sorted(p.relative_to(lunr).as_posix() for p in lunr.rglob("*") if p.is_file()) == [
        "min/lunr.multi.min.js", "min/lunr.stemmer.support.min.js", "min/lunr.zh.min.js"]
    assert list((site / "assets" / "javascripts" / "workers").glob("search.*.min.js"))
