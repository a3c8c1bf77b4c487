"""The doubled-unit lint (measure/site/lint.py) knows named facts: a fact prints its unit as its value() does."""

import pytest


@pytest.mark.parametrize("source, flagged", [
    ('A token took {{ fact("eager.tpot_1_default") }} ms in the default mode.', "'ms'"),
    ("每个 token {{ fact('eager.tpot_1_default') }} ms，", "'ms'"),
    ('Cached: {{ fact("prefill.hit_vs_miss_16k") }} the time of a miss.', None),  # a ratio prints ×, not a unit
    ('Started: {{ fact("eager.image_0_default") }} in default mode.', None),  # a yes/no prints no unit
    ('{{ fact("lora.base_tok_s") }} tok/s', "'tok/s'"),  # the fact's own unit= option
])
def test_a_unit_typed_after_a_fact_that_prints_it_is_flagged_with_page_and_line(source, flagged):
    from measure.experiment import all_schemas
    from measure.site.lint import doubled_units

    lang = "zh" if "每个" in source else "en"
    found = doubled_units("# Title\n\n" + source + "\n", f"page.{lang}.md", all_schemas(), lang)
    if flagged is None:
        assert found == []
    else:
        assert len(found) == 1 and str(found[0]).startswith(f"page.{lang}.md:3: {flagged} typed after")


@pytest.mark.parametrize("html, shown", [
    ("<p>显存\n与容量。\n  下一句</p>", "<p>显存与容量。下一句</p>"),  # a wrapped zh paragraph is one line
    ("<p>GPU 上\nvLLM 的\n吞吐</p>", "<p>GPU 上\nvLLM 的吞吐</p>"),  # beside a Latin word the break stays a space
    ("<p>独占 GPU。\n“装得下”\n的数</p>", "<p>独占 GPU。“装得下”的数</p>"),  # Chinese quotes join as characters do
    ("<p>会怎样，\nfp8 缓存</p>", "<p>会怎样，fp8 缓存</p>"),  # full-width punctuation has its own room
    ("<p><strong>为什么。</strong> 一个\n<a href=\"m\">方法</a>页</p>",
     "<p><strong>为什么。</strong>一个<a href=\"m\">方法</a>页</p>"),  # through inline tags
    ("<p>7.0 倍 （见下） 和 “最大并发” 28 倍</p>", "<p>7.0 倍（见下）和“最大并发”28 倍</p>"),  # a number keeps its space
    ('<p>是 <span class="v">7.0 倍</span><a class="claim-src" href="x">[env]</a> 和</p>',
     '<p>是 <span class="v">7.0 倍</span><a class="claim-src" href="x">[env]</a>和</p>'),  # a source link looked through
    ("<h2>标题</h2>\n<p>正文。</p>\n<p>第二段</p>", "<h2>标题</h2>\n<p>正文。</p>\n<p>第二段</p>"),  # blocks stay apart
    ("<p>前</p>\n<pre><code>代码， 行\n行</code></pre>\n<p>后\n面 <code>a， b</code></p>",
     "<p>前</p>\n<pre><code>代码， 行\n行</code></pre>\n<p>后面 <code>a， b</code></p>"),  # code as written
    ("<p>计数器：\n<code>a</code>、\n<code>b</code> 和 <code>c</code></p>",
     "<p>计数器：<code>a</code>、<code>b</code> 和 <code>c</code></p>"),  # after punctuation, code is a word like others
    ('<p>图</p><script type="application/json">{"a": "中 文，  x"}</script>',
     '<p>图</p><script type="application/json">{"a": "中 文，  x"}</script>'),  # chart data as written
])
def test_a_zh_page_shows_no_space_between_chinese_characters_or_around_their_punctuation(html, shown):
    from measure.site.hooks import tighten_zh

    assert tighten_zh(html) == shown


def test_glossary_terms_get_their_definition_in_chinese_text_too():
    """abbr's \\b boundaries never fell between two Chinese characters: "KV 缓存是" left the term undefined."""
    import markdown

    glossary = "*[KV 缓存]: 已处理 token 的 key 和 value\n*[TP]: 张量并行\n"
    html = markdown.markdown("KV 缓存是显存里最大的一块；TP 与 TPOT 不同。\n\n" + glossary,
                             extensions=["abbr", "measure.site.glossary_terms"])
    assert '<abbr title="已处理 token 的 key 和 value">KV 缓存</abbr>是' in html
    assert '<abbr title="张量并行">TP</abbr> 与 TPOT' in html  # a term never runs on into a Latin letter
    plain = markdown.markdown("KV 缓存是显存里最大的一块。\n\n" + glossary, extensions=["abbr"])
    assert "<abbr" not in plain, "abbr alone now marks Chinese terms: this extension may be unnecessary"


def test_every_count_unit_reads_in_chinese_on_zh_pages():
    """A zh page printed "17 tokens": a unit that is an English word needs its Chinese in labels.UNIT_ZH (units of
    physics and symbols, ms or tok/s, read the same in both languages)."""
    import re

    from measure.experiment import all_schemas
    from measure.site.labels import UNIT_ZH, unit_label

    words = {c.unit for s in all_schemas().values() for c in s.columns
             if re.fullmatch(r"[a-z][a-z ]+", c.unit or "") and c.unit not in ("ms", "px")}
    assert words and not sorted(words - set(UNIT_ZH)), "add these units to labels.UNIT_ZH"
    assert unit_label("tokens", "zh") == "个 token" and unit_label("tokens", "zh", heading=True) == "token"


def test_no_page_names_columns_itself():
    """A column's reader-facing name is declared once, for both languages (labels.COLUMN_LABELS, or DATASET_LABELS
    where one dataset's readers need more); a page passing labels= would let zh and en drift apart."""
    import re

    from conftest import REPO

    pages = sorted((REPO / "docs").glob("*.md"))
    offenders = [p.name for p in pages if re.search(r"\{\{[^}]*\blabels=", p.read_text())]
    assert pages and not offenders, f"pages passing labels=: {offenders}"


def test_no_page_declares_its_own_tables_and_charts():
    """A table, chart or matrix is declared once, by name, in its topic's facts module (facts.Table / Chart / Matrix)
    and cited with fact(): a page calling table(), chart() or matrix() itself would let zh and en drift apart. The
    guide's examples, escaped as text, do not count."""
    import re

    from conftest import REPO

    pages = sorted((REPO / "docs").glob("*.md"))
    offenders = [p.name for p in pages if re.search(r"\{\{\s*(table|chart|matrix)\(", p.read_text())]
    assert pages and not offenders, f"pages calling table()/chart()/matrix() instead of fact(): {offenders}"


def test_open_claims_are_grouped_by_cause_and_said_once():
    """The open-claims page lists a cause once: a dataset's 未实测 figures, on whatever pages, are one line, as are
    the 未确认 figures sharing a reason; a comparison of figures not measured adds no line of its own; topic pages
    come before the home page and the FAQ."""
    from measure.site.claims import Claim
    from measure.site.macros import claim_groups

    claims = [
        Claim("faq.en.md", "a", "value", "not_measured", dataset="api_servers.load"),
        Claim("capacity.en.md", "a", "value", "not_measured", dataset="api_servers.load"),
        Claim("capacity.en.md", "b", "value", "not_measured", dataset="api_servers.load"),
        Claim("capacity.en.md", "compare:a>b", "compare", "not_measured", detail="a > b"),
        Claim("capacity.en.md", "c", "value", "unconfirmed", dataset="capacity.knee", detail="spread too wide"),
        Claim("method.en.md", "d", "value", "unconfirmed", dataset="fidelity.comparison", detail="spread too wide"),
        Claim("method.en.md", "e", "value", "unconfirmed", dataset="fidelity.comparison", detail="another reason"),
    ]
    groups = claim_groups(claims)
    assert [[c.key for c in g] for g in groups] == [["a", "b", "a"], ["c", "d"], ["e"]]
    assert [c.page for c in groups[0]] == ["capacity.en.md", "capacity.en.md", "faq.en.md"]


def test_every_page_that_shows_data_lists_what_its_text_leaves_unsaid():
    """Each topic page showing a table or chart ends with also_in_data(): the effects of ≥ 2× (beyond the spread of
    repeats) that neither its text nor a chart says are listed there, so none goes unmentioned."""
    from conftest import REPO

    from measure.site.facts import Shown, topics

    for name, found in topics().items():
        if not found.has_page or not any(isinstance(f, Shown) for f in found.facts.values()):
            continue
        for lang in ("zh", "en"):
            assert "{{ also_in_data() }}" in (REPO / "docs" / f"{name}.{lang}.md").read_text(), (name, lang)


def test_operator_words_become_one_search_token_each():
    """Flags, routes and names with underscores in a page's text become joined tokens (search-language.js turns a
    typed one into the same); prose, paths inside URLs and hyphenated words stay out."""
    from measure.site.hooks import operator_terms

    text = ("<p>Set <code>--max-num-batched-tokens</code> and --api-server-count 4; GET /metrics and "
            "/v1/embeddings; max_pixels, VLLM_MEDIA_URL_ALLOW_REDIRECTS=0.</p> A well-known https://x.org/a/b "
            "data/gpu-1x/file.csv")
    assert operator_terms(text) == ["opmaxnumbatchedtokens", "opapiservercount", "opmetrics", "opv1embeddings",
                                    "opmaxpixels", "opvllmmediaurlallowredirects"]
