"""Contributor tooling: the lint catches typed numbers (the scaffold: test_scaffold.py)."""

import shutil

import pytest
from conftest import REPO, build_site

from measure.experiment import all_schemas
from measure.site.lint import doubled_units, lint_docs, typed_numbers
from measure.site.macros import reproduce_box


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


@pytest.mark.site
def test_typed_number_in_a_page_fails_the_strict_build(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    page = docs / "lora.en.md"
    page.write_text(page.read_text() + "\nAdapters cost 12% of throughput.\n"
                    '{{ value("pooling.embedding_throughput", "latency_ms", model="tiny-Qwen3-Embedding-0.6B", batch_size=1, '
                    'encoding_format="float") }} ms per batch.\n')
    result = build_site(REPO / "tests" / "fixtures" / "data", tmp_path / "site", docs_dir=docs, check=False)
    assert result.returncode != 0
    assert "number typed into prose: '12%'" in result.stdout + result.stderr
    assert "'ms' typed after value('pooling.embedding_throughput.latency_ms'" in result.stdout + result.stderr


def test_a_unit_typed_after_a_value_that_prints_its_own_is_caught_with_page_and_line(tmp_path):
    schemas = all_schemas()
    tput = 'value("pooling.embedding_throughput", "tokens_per_s", batch_size=1, digits=0)'
    page = (f"Intro.\nIt did {{{{ {tput} }}}} tok/s, and {{{{ {tput} }}}} tokens a second.\n"
            f"Bare: {{{{ value(\"pooling.embedding_throughput\", \"tokens_per_s\", batch_size=1, unit=\"\") }}}} tok/s.\n"
            f"Fine: {{{{ {tput} }}}}, so {{{{ {tput} }}}} sounds right; {{{{ value(\"pooling.embedding_throughput\", "
            f"\"repeats\", batch_size=1) }}}} ms.\n")
    found = doubled_units(page, "x.en.md", schemas, "en")
    assert [f.where for f in found] == ["x.en.md:2", "x.en.md:2"]
    assert "'tok/s' typed after value('pooling.embedding_throughput.tokens_per_s'" in found[0].message
    assert "'tokens' typed" in found[1].message
    # zh prints count units in Chinese ("个请求"), and those typed after it are caught too.
    zh = '并发 {{ value("pooling.embedding_throughput", "batch_size", batch_size=4) }} 条输入时，{{ value(' \
         '"pooling.embedding_throughput", "latency_ms", batch_size=4) }}毫秒。'
    assert [f.message.split(" typed")[0] for f in doubled_units(zh, "x.zh.md", schemas, "zh")] == ["'条输入'", "'毫秒'"]
    # `python -m measure claims` runs the same check over the docs folder.
    (tmp_path / "x.en.md").write_text(page, encoding="utf-8")
    assert [f.where for f in lint_docs(tmp_path, [], {}) if "typed after" in f.message] == []  # no schema, no unit
    assert [str(f).split(": ")[0] for f in lint_docs(tmp_path, [], schemas) if "typed after" in f.message] == [
        "x.en.md:2", "x.en.md:2"]


def test_the_reproduce_box_lists_only_environments_with_data_for_the_page(store):
    pooling = reproduce_box(store, "en", ("pooling",))
    assert "nox -s measure -- pooling" in pooling and "data/: fixture-cpu<" in pooling
    assert "fixture-article" not in pooling  # cited: nothing there can be re-measured
    assert "data/: -<" in reproduce_box(store, "zh", ("lora",))


def test_every_file_that_starts_vllm_declares_its_cost_for_the_two_ci_workers():
    """`nox -s tests` hands the slowest files out first (conftest.SLOW_FILES); a new vLLM file left out would be
    handed out last and could leave one worker idle for its whole length."""
    from conftest import SLOW_FILES

    texts = {path.name: path.read_text() for path in (REPO / "tests").glob("test_*.py")}
    starts_vllm = {name for name, text in texts.items() if "pytest.mark.vllm" in text and "pytest.mark.timing]" not in text}
    assert starts_vllm - set(SLOW_FILES) == set(), "add these files to SLOW_FILES with their seconds in CI"
