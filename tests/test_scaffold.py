"""`nox -s chapter`: the chapter it writes is wired into both languages' nav and measures as written."""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, VLLM_HOW, python_imports, require, smaller

from measure.scaffold import ask_titles, scaffold

NAME = "sampling_demo"


def skeleton(tmp_path: Path) -> Path:
    """A copy of what a chapter touches: docs/, mkdocs.yml, the measure package, tests/conftest.py."""
    clone = tmp_path / "repo"
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for folder in ("docs", "measure"):
        shutil.copytree(REPO / folder, clone / folder, ignore=skip)
    (clone / "tests").mkdir()
    for name in ("mkdocs.yml", "pyproject.toml", "tests/conftest.py"):
        shutil.copy(REPO / name, clone / name)
    return clone


def in_clone(clone: Path, code: str, **env) -> subprocess.CompletedProcess:
    """``code`` run by a Python that imports the clone's measure package (with the new experiment)."""
    return subprocess.run([sys.executable, "-c", code], cwd=clone, capture_output=True, text=True,
                          env=os.environ | {"PYTHONPATH": str(clone)} | env)


class EnvTag(yaml.SafeLoader):
    """mkdocs.yml's !ENV tags read as their default."""


EnvTag.add_constructor("!ENV", lambda loader, node: loader.construct_sequence(node)[-1])


def test_the_scaffold_writes_a_measuring_experiment_and_nav_in_both_languages(tmp_path):
    clone = skeleton(tmp_path)
    written = scaffold(NAME, "采样：n 与温度", "Sampling: n and temperature", clone)
    assert {p.relative_to(clone).as_posix() for p in written} == {
        f"docs/{NAME}.zh.md", f"docs/{NAME}.en.md", f"measure/experiments/{NAME}.py", f"measure/site/facts/{NAME}.py",
        f"tests/test_chapter_{NAME}.py", "mkdocs.yml"}
    config = yaml.load((clone / "mkdocs.yml").read_text(encoding="utf-8"), Loader=EnvTag)
    nav = [next(iter(entry.items())) for entry in config["nav"]]
    assert nav[[p for _, p in nav].index("unconfirmed.md") - 1] == ("采样：n 与温度", f"{NAME}.md")
    i18n = next(p["i18n"] for p in config["plugins"] if isinstance(p, dict) and "i18n" in p)
    en = next(lang for lang in i18n["languages"] if lang["locale"] == "en")
    assert en["nav_translations"]["采样：n 与温度"] == "Sampling: n and temperature"
    zh_page = (clone / "docs" / f"{NAME}.zh.md").read_text(encoding="utf-8")
    en_page = (clone / "docs" / f"{NAME}.en.md").read_text(encoding="utf-8")
    assert zh_page.startswith(f"# 采样：n 与温度\n\n{{{{ answers(\"{NAME}\") }}}}")
    assert en_page.startswith(f"# Sampling: n and temperature\n\n{{{{ answers(\"{NAME}\") }}}}")
    # what the site's own lints ask of a page (test_page_lints.py), so a new chapter passes `nox -s quick` as written:
    # its table cited by name from the facts module, the "Also in the data" list, the glossary
    for page, lang in ((zh_page, "zh"), (en_page, "en")):
        assert not re.search(r"\{\{\s*(table|chart|matrix)\(", page) and f'fact("{NAME}.decode_table")' in page
        assert "{{ also_in_data() }}" in page and page.rstrip().endswith(f'--8<-- "glossary.{lang}.md"')
    # The experiment imports, runs (not pending), plans one step on the chat model, and its pages make the same
    # claims in both languages; its test file collects.
    out = in_clone(clone, f"""
import json
from measure.experiment import get
from measure.harness.profiles import CPU
from measure.site.scan import keys_by_page_pair, make_store, scan_pages
exp = get({NAME!r})
steps = exp().plan(CPU)
keys = keys_by_page_pair(scan_pages(store=make_store(partial=True)))[{NAME!r}]
print(json.dumps({{"pending": exp.pending, "roles": [s.server.model_role for s in steps],
                   "requests": [s.requests for s in steps], "title": exp.title, "same": keys["zh"] == keys["en"],
                   "keys": sorted(keys["en"]), "file": __import__("measure").__file__}}))
""", MEASURE_DATA_ROOT=str(REPO / "tests" / "fixtures" / "data"))
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.splitlines()[-1])
    assert found["file"].startswith(str(clone))
    assert found["pending"] == "" and found["roles"] == ["chat"] and found["requests"][0] > 0
    assert found["title"] == {"zh": "采样：n 与温度", "en": "Sampling: n and temperature"}
    assert found["same"] and {f"{NAME}.tok_s", f"{NAME}.tpot", f"{NAME}.decode:table"} <= set(found["keys"])
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", f"tests/test_chapter_{NAME}.py"],
                               cwd=clone, capture_output=True, text=True, env=os.environ | {"PYTHONPATH": str(clone)})
    assert collected.returncode == 0 and "2 tests collected" in collected.stdout, collected.stdout + collected.stderr
    # Scaffolding twice refuses instead of overwriting.
    with pytest.raises(SystemExit, match="exists already"):
        scaffold(NAME, "采样", "Sampling", clone)


def test_the_dry_run_plans_the_scaffolded_chapter_without_vllm(tmp_path):
    clone = skeleton(tmp_path)
    scaffold(NAME, "采样", "Sampling", clone)
    out = in_clone(clone, f"import sys; from measure.cli import main; sys.exit(main(['--data-root', {str(tmp_path / 'd')!r}, "
                          f"'run', {NAME!r}, '--profile', 'cpu', '--env', 'plan', '--dry-run']))",
                   MEASURE_STATE_DIR=str(tmp_path / "state"), COLUMNS="200")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{NAME}: will run" in out.stdout + out.stderr and "1 start-up(s)" in out.stdout + out.stderr


def test_titles_are_asked_for_on_a_terminal_and_required_elsewhere(monkeypatch):
    with pytest.raises(SystemExit, match=r"needs its English title: nox -s chapter -- kv --zh"):
        ask_titles("kv", "键值缓存", None, interactive=False)
    answers = iter(["键值缓存卸载 ", "KV cache offload"])
    monkeypatch.setattr("builtins.input", lambda prompt: next(answers))
    assert ask_titles("kv", None, None, interactive=True) == ("键值缓存卸载", "KV cache offload")


def test_a_title_with_yaml_syntax_is_quoted_in_the_nav(tmp_path):
    clone = skeleton(tmp_path)
    scaffold("quoted", "引号 \"与\" #号", "LoRA: #1, [a]", clone)
    config = yaml.load((clone / "mkdocs.yml").read_text(encoding="utf-8"), Loader=EnvTag)
    assert {"引号 \"与\" #号": "quoted.md"} in config["nav"]
    en = next(lang for p in config["plugins"] if isinstance(p, dict) and "i18n" in p for lang in p["i18n"]["languages"]
              if lang["locale"] == "en")
    assert en["nav_translations"]["引号 \"与\" #号"] == "LoRA: #1, [a]"


@pytest.mark.vllm
def test_a_scaffolded_chapter_measures_end_to_end_as_written(tmp_path):
    """The scaffold's experiment, unedited, starts the CPU stand-in's chat server and writes its CSV and provenance."""
    require(python_imports("import vllm.entrypoints.openai.api_server"), "vLLM", VLLM_HOW)
    clone = skeleton(tmp_path)
    scaffold(NAME, "采样", "Sampling", clone)
    tiny = smaller({NAME: {"points": [[2, 2]], "words": 16, "output_tokens": 8, "rounds": 2}})
    run = subprocess.run([sys.executable, "-m", "measure", "--data-root", str(tmp_path / "data"), "run", NAME,
                          "--profile", "cpu", "--env", "scaffold-cpu"], cwd=clone, capture_output=True, text=True,
                         timeout=900, env=os.environ | {"PYTHONPATH": str(clone), "COLUMNS": "200",
                                                        "MEASURE_STATE_DIR": str(tmp_path / "state")} | tiny)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    env = tmp_path / "data" / "scaffold-cpu"
    with open(env / f"{NAME}.decode.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["concurrency"]) for r in rows] == [2]
    row = rows[0]
    assert float(row["output_tok_s_min"]) <= float(row["output_tok_s"]) <= float(row["output_tok_s_max"])
    assert float(row["tpot_ms"]) > 0 and float(row["prompt_tokens_mean"]) > 0 and row["output_tokens"] == "8"
    provenance = json.loads((env / "provenance.json").read_text(encoding="utf-8"))
    servers = provenance["datasets"][f"{NAME}.decode"]["servers"]
    assert len(servers) == 1 and provenance["servers"][servers[0]]["model"] == "tiny-Qwen3-0.6B"
    assert provenance["experiments"][NAME]["code_revision"]


@pytest.mark.site
def test_a_scaffolded_chapter_builds_with_not_measured_badges(tmp_path):
    clone = skeleton(tmp_path)
    scaffold("kv_offload", "KV 缓存卸载", "KV cache offload", clone)
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=clone, capture_output=True, text=True,
        env=os.environ | {"PYTHONPATH": str(clone), "MEASURE_DATA_ROOT": str(REPO / "tests/fixtures/data"),
                          "MEASURE_PARTIAL_DATA": "1", "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    en = (tmp_path / "site" / "en" / "kv_offload" / "index.html").read_text(encoding="utf-8")
    assert "Not measured" in en and "claim-not-measured" in en and "KV cache offload" in en
    zh = (tmp_path / "site" / "kv_offload" / "index.html").read_text(encoding="utf-8")
    assert "未实测" in zh and "KV 缓存卸载" in zh
