"""Contributor tooling: a scaffolded chapter builds with its badges; the lint catches typed numbers."""

import shutil
import subprocess
import sys

from conftest import REPO, build_site

from measure.site.lint import typed_numbers


def test_scaffolded_chapter_builds_with_not_measured_badges(tmp_path):
    clone = tmp_path / "repo"
    top_level_skip = {".git", ".nox", ".cache", ".measure", "site", ".gpu", ".venv"}
    shutil.copytree(REPO, clone, ignore=lambda d, names: [
        n for n in names if (d == str(REPO) and n in top_level_skip) or n == "__pycache__" or n.endswith(".egg-info")])
    out = subprocess.run([sys.executable, "-c", "import sys; from measure.scaffold import scaffold; scaffold('kv_offload', "
                          f"__import__('pathlib').Path({str(clone)!r}))"], cwd=clone, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "  - Kv offload: kv_offload.md\n" in (clone / "mkdocs.yml").read_text()
    # Build the clone's site: its own measure package (with the new experiment) comes first on the path.
    env_path = f"{clone}"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=clone, capture_output=True, text=True,
        env={**__import__("os").environ, "PYTHONPATH": env_path, "MEASURE_DATA_ROOT": str(REPO / "tests/fixtures/data"), "MEASURE_PARTIAL_DATA": "1",
             "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    html = (tmp_path / "site" / "en" / "kv_offload" / "index.html").read_text()
    assert "Not measured" in html and "claim-not-measured" in html
    zh = (tmp_path / "site" / "kv_offload" / "index.html").read_text()
    assert "未实测" in zh
    # Scaffolding twice refuses instead of overwriting.
    again = subprocess.run([sys.executable, "-c", "from measure.scaffold import scaffold; scaffold('kv_offload', "
                            f"__import__('pathlib').Path({str(clone)!r}))"], cwd=clone, capture_output=True, text=True)
    assert again.returncode != 0 and "exists already" in again.stderr


def test_lint_catches_typed_numbers_but_not_code_or_macros():
    page = (
        "The server did 21,900 tok/s on the laptop.\n"
        "Latency fell to 35 ms and memory to 4.3 GiB, a 12% gain, 3.5× faster, 快了 2 倍.\n"
        "An 8 GB-class card; `--max-model-len 4096`; {{ value(\"a.b\", \"c\") }} tok/s; issue #5; a 448×448 image.\n"
        "```\nGPU KV cache size: 40,208 tokens, 9.82x\n```\n"
    )
    found = [f.message for f in typed_numbers(page, "p.md")]
    assert any("21,900 tok/s" in m for m in found)
    assert sum("p.md" not in m for m in found) == len(found)
    flagged = " ".join(found)
    for text in ("35 ms", "4.3 GiB", "12%", "3.5×", "2 倍"):
        assert text in flagged, text
    assert "4096" not in flagged and "40,208" not in flagged and "9.82x" not in flagged and "8 GB" not in flagged
    assert "448" not in flagged


def test_typed_number_in_a_page_fails_the_strict_build(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    page = docs / "lora.en.md"
    page.write_text(page.read_text() + "\nAdapters cost 12% of throughput.\n")
    result = build_site(REPO / "tests" / "fixtures" / "data", tmp_path / "site", docs_dir=docs, check=False)
    assert result.returncode != 0
    assert "number typed into prose: '12%'" in result.stdout + result.stderr
