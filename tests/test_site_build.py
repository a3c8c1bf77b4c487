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


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("build")
    root = tmp / "data"
    shutil.copytree(REPO / "tests" / "fixtures" / "data", root)
    site = tmp / "site"
    build_site(root, site)
    return root, site


def test_both_languages_build_and_no_raw_jinja_survives(built):
    _, site = built
    pages = list(site.rglob("*.html"))
    assert (site / "pooling" / "index.html").is_file() and (site / "en" / "pooling" / "index.html").is_file()
    for page in pages:
        # Code samples may show macro syntax on purpose (the contributing page does); prose may not.
        text = re.sub(r"<pre.*?</pre>|<code.*?</code>", "", page.read_text(), flags=re.S)
        assert "{{" not in text and "{%" not in text, page


def test_measured_number_with_provenance_appears(built):
    _, site = built
    html = (site / "en" / "pooling" / "index.html").read_text()
    assert "12,346" in html  # fixture: batch 4, float, tokens_per_s 12345.6, rendered with 0 digits
    assert 'href="../../data/fixture-cpu/pooling.embedding_throughput.csv"' in html
    assert (site / "data" / "fixture-cpu" / "pooling.embedding_throughput.csv").is_file()
    assert (site / "assets" / "javascripts" / "plotly.min.js").is_file()


def test_cited_figures_render_as_cited(built):
    _, site = built
    html = (site / "pooling" / "index.html").read_text()
    assert re.search(r'claim-value claim-cited[^>]*>127 tokens<', html)


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


def test_typo_fails_the_build(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    page = docs / "pooling.en.md"
    page.write_text(page.read_text() + '\n{{ value("pooling.embedding_throughput", "tokens_per_sec") }}\n')
    result = build_site(REPO / "tests" / "fixtures" / "data", tmp_path / "site", docs_dir=docs, check=False)
    assert result.returncode != 0
    assert "no column 'tokens_per_sec'" in result.stdout + result.stderr


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


def test_plotly_loads_only_where_a_chart_is_drawn(built):
    """plotly.js (4.8 MB) once loaded on every page, most of which draw no chart."""
    _, built = built
    pooling = (built / "en" / "pooling" / "index.html").read_text()
    home = (built / "en" / "index.html").read_text()
    assert 'class="claim-chart"' in pooling and "plotly.min.js" in pooling
    assert 'class="claim-chart"' not in home and "plotly.min.js" not in home
    assert "zqclaim" not in pooling + home  # every macro's stashed output was put back
