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


@pytest.mark.parametrize("source, rendered", [
    ("显存\n与容量。\n  下一句", "显存与容量。下一句"),  # a wrapped zh paragraph (and its indented continuation) is one line
    ("GPU 上\nvLLM 的\n吞吐", "GPU 上\nvLLM 的吞吐"),  # beside a Latin word the break stays a space
    ("独占 GPU。\n“装得下”\n的数", "独占 GPU。“装得下”的数"),  # Chinese quotes join as the characters do
    ("## 标题\n正文", "## 标题\n正文"),  # a heading stays a line of its own
    ("第一段\n\n第二段", "第一段\n\n第二段"),  # a paragraph break stays
    ("尚未\n<span class=\"m\">测量</span>\n<div>块</div>", "尚未<span class=\"m\">测量</span>\n<div>块</div>"),
    ("前\n```\n代码\n行\n```\n后\n面", "前\n```\n代码\n行\n```\n后面"),  # code is left as written
])
def test_a_zh_line_break_between_chinese_characters_renders_no_space(source, rendered):
    from measure.site.hooks import join_cjk_lines

    assert join_cjk_lines(source) == rendered
