"""Facts named once and cited by name; the answers block a topic page opens with (measure/site/facts/)."""

from __future__ import annotations

import logging
import re
from types import SimpleNamespace

import pytest

from measure.schema import UnknownName


@pytest.fixture(scope="module")
def real_store():
    from measure.site.scan import make_store

    return make_store()


def render(store, lang: str, call):
    from measure.site.claims import ClaimRenderer

    renderer = ClaimRenderer(store, lang, f"eager.{lang}.md")
    return call(renderer), renderer


def test_the_answers_block_cites_the_same_facts_in_both_languages_and_links_each_to_its_figure(real_store):
    html = {}
    keys = {}
    for lang in ("zh", "en"):
        html[lang], renderer = render(real_store, lang, lambda r: r.answers("eager"))
        keys[lang] = {c.key for c in renderer.claims}
        assert {c.status for c in renderer.claims} <= {"measured", "unconfirmed"}, "the committed data answer them"
    assert keys["zh"] == keys["en"] and "eager.tok_s_32_default" in keys["en"]
    assert "本页回答" in html["zh"] and "This page answers" in html["en"]
    figures = re.findall(r'href="#([^"]+)"', html["en"])
    assert figures == re.findall(r'href="#([^"]+)"', html["zh"]) and "generation-speed" in figures
    for lang in ("zh", "en"):
        page = open(f"docs/eager.{lang}.md", encoding="utf-8").read()
        for figure in figures:
            assert "{ #" + figure + " }" in page, f"eager.{lang}.md has no heading with id {figure}"


def test_a_ratio_renders_its_terms_even_where_the_page_did_not_cite_them(real_store):
    text, renderer = render(real_store, "en", lambda r: r.fact("eager.tpot_1_ratio"))
    assert "×" in text and {"eager.tpot_1_eager", "eager.tpot_1_default"} <= set(renderer.numbers)


def test_unknown_names_fail_naming_what_exists(real_store):
    with pytest.raises(UnknownName, match="eager declares: .*tok_s_32_default"):
        render(real_store, "en", lambda r: r.fact("eager.no_such_fact"))
    with pytest.raises(UnknownName, match="unknown topic 'nowhere'"):
        render(real_store, "en", lambda r: r.answers("nowhere"))


def test_a_question_whose_languages_cite_different_facts_is_refused():
    from measure.site.facts import Question, Value, topic

    with pytest.raises(UnknownName, match="zh and en answers cite different facts"):
        topic("test_mismatch", facts={"a": Value("eager.decode", "tpot_ms"), "b": Value("eager.decode", "tpot_ms")},
              questions=(Question(ask={"zh": "问？", "en": "Q?"}, answer={"zh": "{a}", "en": "{b}"}, figure="x"),),
              title={"zh": "测试", "en": "Test"})
    with pytest.raises(UnknownName, match="undeclared facts"):
        topic("test_undeclared", facts={}, questions=(
            Question(ask={"zh": "问？", "en": "Q?"}, answer={"zh": "{a}", "en": "{a}"}, figure="x"),),
              title={"zh": "测试", "en": "Test"})


def test_an_answer_without_data_says_what_would_settle_it(tmp_path):
    from measure.site.scan import make_store

    empty = make_store(tmp_path, partial=True)
    html, renderer = render(empty, "en", lambda r: r.answers("eager"))
    assert {c.status for c in renderer.claims if c.kind == "value"} == {"not_measured"}
    assert "Settling it takes the same requests served in both modes on one GPU." in html
    # none of its facts measured: one mark and what would settle it, not a sentence of blanks
    first = html.split("<dd>")[1].split("</dd>")[0]
    assert first.count("claim-not-measured") == 1 and "answer-unsettled" in first


def test_an_answer_measured_in_part_keeps_its_sentence_and_says_what_is_missing():
    from measure.site.scan import make_store

    # the H200 has Qwen3-0.6B's decode row and not Qwen3-8B's: the capacity page's first answer keeps the 0.6B
    # sentences, drops the 8B one, says what would settle it and links the other cards' figures
    html, _ = render(make_store(), "en", lambda r: r.answers("capacity"))
    first = re.sub(r'title="[^"]*"', "", html.split("<dd>")[1].split("</dd>")[0])
    words = re.sub(r"<[^>]+>", "", first)
    assert words.startswith("Not the memory bandwidth: on the H200, Qwen3-0.6B took") and "Qwen3-8B reads" not in words
    # the figure and what to do with it first; the conditions on their own line; the reasons folded
    assert '<span class="answer-conditions">One request at a time' in first
    assert '<details class="answer-caveats"><summary>Why, and caveats</summary>The rest of a step goes' in first
    assert first.count("claim-not-measured") == 1 and "answer-unsettled" in first
    assert 'href="#other-gpus-decode-floor"' in first and "H100" not in words
    measured, _ = render(make_store(), "en", lambda r: r.answers("method"))
    assert "claim-not-measured" not in measured.split("<dd>")[1].split("</dd>")[0]


def test_an_answer_linking_to_a_missing_heading_fails_the_build(caplog):
    from measure.site import hooks

    page = SimpleNamespace(file=SimpleNamespace(src_uri="eager.en.md"))
    with caplog.at_level(logging.WARNING):
        hooks.on_page_content('<a href="#gone" data-answer-figure="gone">Q?</a><h2 id="here">x</h2>', page)
    assert "links to #gone, which no heading of the page has" in caplog.text  # a warning fails `mkdocs build --strict`


def test_the_home_page_answers_each_topics_first_question_and_links_the_rest(real_store):
    from measure.site.claims import ClaimRenderer

    renderer = ClaimRenderer(real_store, "en", "index.en.md")
    html = renderer.site_answers()
    assert "Questions this site answers" in html
    assert 'href="eager/#generation-speed"' in html and 'href="prefill/#beside-a-long-prompt"' in html
    assert html.count("<dd>") == html.count('class="page-answers-topic"') >= 3


def test_the_faq_lists_every_question_as_a_heading_with_open_questions_last(real_store):
    from measure.site import facts
    from measure.site.claims import ClaimRenderer

    for lang in ("zh", "en"):
        renderer = ClaimRenderer(real_store, lang, f"faq.{lang}.md")
        markdown = renderer.faq(pages={name: f"../{name}/" for name in facts.topics()})
        questions = [line[4:] for line in markdown.splitlines() if line.startswith("### ")]
        assert len(questions) >= 30 and all(q.endswith("？" if lang == "zh" else "?") for q in questions)
        sections = [line[3:] for line in markdown.splitlines() if line.startswith("## ")]
        statuses = {c.key.split(".")[0]: set() for c in renderer.claims}
        for claim in renderer.claims:
            statuses[claim.key.split(".")[0]].add(claim.status)
        assert "measured" in statuses["prefill"]
        if facts.get_topic("open").questions:  # questions no experiment takes up yet come last, all 未实测
            assert sections[-1] == facts.get_topic("open").title[lang] and statuses["open"] == {"not_measured"}
        else:  # every question has its topic: no empty section for the open ones
            assert facts.get_topic("open").title[lang] not in sections
    assert 'href="../eager/#generation-speed"' in markdown


def _one_story_failures(store) -> list[str]:
    """Every figure on the home page (both languages) and in every answer (each on its own, as the FAQ and the home
    page show it) that other datasets measure differently (measure/quantities.py), shown without those other figures
    beside it: the reader would meet one figure of a quantity that has two stories."""
    import jinja2

    from measure.site import facts
    from measure.site.claims import ClaimRenderer, _verdict_id

    blocks = []
    for lang in ("zh", "en"):
        page = f"index.{lang}.md"
        renderer = ClaimRenderer(store, lang, page)
        names = renderer.macros() | {"claims_status": lambda *a, **k: "", "reproduce": lambda *a, **k: ""}
        source = open(f"docs/{page}", encoding="utf-8").read()
        jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(source).render(**names)
        blocks.append((page, renderer))
        for found in facts.topics().values():
            for question in found.questions:
                renderer = ClaimRenderer(store, lang, f"{found.name}.{lang}.md")
                renderer._answer_html(found, question)
                blocks.append((f"{found.name}.{lang}.md, “{question.ask[lang]}”", renderer))
    failures = []
    for where, renderer in blocks:
        status = {c.key: c.status for c in renderer.claims}
        shown = {_verdict_id(v) for v in renderer.verdicts_shown}
        for figure in renderer.figures:
            verdict = figure.verdict
            if verdict is None or verdict.agree:
                continue
            if figure.differs is None and status.get(figure.key) != "unconfirmed":
                failures.append(f"{where}: {figure.key} disagrees with {verdict.describe()} yet renders as measured")
            beside = _verdict_id(verdict) in shown or any(
                f.verdict is not None and _verdict_id(f.verdict) == _verdict_id(verdict) and f.dataset != figure.dataset
                for f in renderer.figures)
            if not beside:
                failures.append(f"{where}: {figure.key} ({figure.dataset}) is one figure of {verdict.describe()}; "
                                "show the others beside it (agreement(...), or their values) and say which condition "
                                "differs (differs=) or leave it 未确认")
    return failures


def test_one_quantity_one_story_on_the_home_page_and_in_every_answer(real_store):
    """Issue #34, point 8: a figure the home page or an answer cites, that another dataset measures differently, is
    never alone: the figures of its quantity stand side by side in one unit, marked 未确认 unless a condition
    (differs=) explains the gap."""
    assert _one_story_failures(real_store) == []


def test_one_quantity_one_story_fails_once_the_data_tell_two_stories(tmp_path):
    """The check above can fail: the roofline's batch of 64 made to read half the throughput table's figure puts a
    home-page figure (the float batch of 64) beside a disagreeing one it does not show."""
    import shutil

    from measure.site.scan import make_store

    root = tmp_path / "data"
    shutil.copytree("data", root)
    path = root / "gpu-1x-nvidia-h200" / "pooling_limits.roofline.csv"
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    at = {name: header.index(name) for name in ("batch_size", "tokens_per_s", "tokens_per_s_min", "tokens_per_s_max")}
    for i, line in enumerate(lines[1:], 1):
        cells = line.split(",")
        if cells[at["batch_size"]] == "64":
            for name in ("tokens_per_s", "tokens_per_s_min", "tokens_per_s_max"):
                cells[at[name]] = str(float(cells[at[name]]) / 2)
            lines[i] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    failures = _one_story_failures(make_store(root))
    assert any(f.startswith("index.en.md: home-float-64") for f in failures), failures
    assert any(f.startswith("index.zh.md: home-float-64") for f in failures), failures


def test_an_answer_leaves_out_the_sentences_it_cannot_fill_and_says_so_once(store):
    from measure.site.facts import Question, Topic, Value, sentences

    measured = Value("pooling.embedding_throughput", "tokens_per_s", {"batch_size": 4, "encoding_format": "float"},
                     {"env": "fixture-cpu", "digits": 0})
    missing = Value("fidelity_interval.ratio", "ratio", {"point": "engine-bound", "metric": "output throughput"},
                    {"digits": 3})
    topic = Topic("t", {"tok": measured, "ratio": missing})
    question = Question(ask={"zh": "问？", "en": "Ask?"},
                        answer={"zh": "比值是 {ratio}。四个一批时 {tok}。", "en": "The ratio was {ratio}. Four at a time: {tok}."},
                        figure="f", unsettled={"zh": "需要再测。", "en": "Settling it takes a run."})
    assert sentences(question.answer["en"], "en") == ["The ratio was {ratio}.", "Four at a time: {tok}."]
    assert sentences("0.5 s. --max-loras {x} was 1.5. 下一句。", "en") == ["0.5 s.", "--max-loras {x} was 1.5. 下一句。"]
    for lang, kept, dropped in (("en", "Four at a time:", "The ratio was"), ("zh", "四个一批时", "比值是")):
        html, renderer = render(store, lang, lambda r: r._answer_html(topic, question))
        text = re.sub(r"<[^>]+>", "", re.sub(r'title="[^"]*"', "", html))
        assert kept in text and "12,346" in text and dropped not in text, text
        assert html.count("claim-not-measured") == 1 and ("Settling it takes a run." in html or "需要再测。" in html)


def test_what_would_settle_an_answer_shows_backticks_as_code(tmp_path):
    import shutil

    from measure.site.scan import make_store

    shutil.copytree("data", tmp_path / "data")  # capacity's --api-server-count answer, unsettled without its GPU rows
    for path in (tmp_path / "data" / "gpu-1x-nvidia-h100-80gb-hbm3").glob("api_servers.*.csv"):
        path.unlink()
    html, _ = render(make_store(tmp_path / "data", partial=True), "en", lambda r: r.answers("capacity"))
    unsettled = [part.split("</span>")[0] for part in html.split('class="answer-unsettled">')[1:]]
    assert any("<code>vllm serve</code>" in part for part in unsettled) and not any("`" in p for p in unsettled)


def test_an_answer_counts_disagreeing_datasets_and_opens_onto_them(real_store):
    """On the home page and in a topic page's answers alike: written out, two notes buried the answer they qualify."""
    from measure.site.claims import ClaimRenderer

    for lang, listed, counted in (("en", "these 2 measurements disagree",
                                   "2 of the figures above are unconfirmed"),
                                  ("zh", "这 2 次测量彼此不一致", "上面有 2 个数字标为未确认")):
        page = ClaimRenderer(real_store, lang, f"method.{lang}.md").answers("method")
        home = ClaimRenderer(real_store, lang, f"index.{lang}.md").site_answers()
        first_answer = page.split("<dd>")[1].split("</dd>")[0]
        method_on_home = home.split('href="method/#')[1].split("</dd>")[0]
        for answer in (first_answer, method_on_home):
            text, note = answer.split("<details", 1)
            assert listed not in text and counted not in text
            summary, details = note.split("<summary>")[1].split("</summary>")
            assert counted in summary and listed in details.split("</details>")[0]


def test_a_later_answer_citing_a_figure_compared_above_links_back_to_that_comparison(real_store):
    """The note comparing a figure's readings is shown once a page; a later answer citing the figure keeps its 未确认
    mark, and without a link the reader had a mark and no reason (the pooling page's later answers)."""
    from measure.site.claims import ClaimRenderer
    from measure.site.facts import topics

    links = 0
    for lang in ("en", "zh"):
        for name, topic in topics().items():
            if not topic.has_page or not topic.questions:
                continue
            html = ClaimRenderer(real_store, lang, f"{name}.{lang}.md").answers(name)
            for anchor in re.findall(r'class="answer-same-quantity-seen" href="#([^"]+)"', html):
                links += 1
                link_at = html.index(f'href="#{anchor}"')
                assert -1 < html.find(f'<details class="answer-same-quantity-brief" id="{anchor}"') < link_at, (name, anchor)
    assert links >= 2, "the pooling page's answers cite a compared figure twice (en and zh): its back-links are gone"


def test_an_empty_verdict_drops_its_sentence_and_the_absent_one_says_none(tmp_path):
    """The ladder's best rung is empty where no rung raised throughput measurably: the sentence naming the best rung
    drops itself and the Absent sentence stands; nothing reads 未实测, since it was measured."""
    import shutil

    from measure.site.facts import Absent, Question, Topic, Value
    from measure.site.scan import make_store

    root = tmp_path / "data"
    shutil.copytree("data", root)
    (root / "cpu-2c-x86-64" / "tuning_ladder.best.csv").write_text(
        "concurrency,best_step,best_added,best_gain,unchanged,worse\n"
        "4,1,--api-server-count 4,1.25,,--kv-cache-dtype fp8\n"
        "16,,,,--api-server-count 4; --max-num-batched-tokens 16384,\n")
    store = make_store(root)

    def cell(column, concurrency, digits=None):
        return Value("tuning_ladder.best", column, {"concurrency": concurrency},
                     {"env": "cpu-2c-x86-64", "drops_if_empty": True} | ({"digits": digits} if digits else {}))

    found = Topic("t", {f"{name}_{c}": fact for c in (4, 16) for name, fact in (
        ("best", cell("best_added", c)), ("gain", cell("best_gain", c, 2)), ("no_best", Absent(f"best_{c}")),
        ("unchanged", cell("unchanged", c)), ("worse", cell("worse", c)))})
    text = " ".join(f"{{best_{c}}} bought {{gain_{c}}}. {{no_best_{c}}}Nothing bought anything at {c}. "
                    f"{{unchanged_{c}}} changed nothing at {c}. {{worse_{c}}} hurt at {c}." for c in (4, 16))
    question = Question(ask={"zh": "问？", "en": "Ask?"}, answer={"zh": text, "en": text}, figure="f")
    html, renderer = render(store, "en", lambda r: r._answer_html(found, question))
    words = re.sub(r"<[^>]+>", "", re.sub(r'title="[^"]*"', "", html))
    assert "--api-server-count 4 bought 1.25" in words and "--kv-cache-dtype fp8 hurt at 4." in words, words
    assert "Nothing bought anything at 16." in words and "changed nothing at 16." in words, words
    for said_wrongly in ("Nothing bought anything at 4", "changed nothing at 4", "hurt at 16", "bought ."):
        assert said_wrongly not in words, (said_wrongly, words)
    assert "claim-not-measured" not in html and {c.status for c in renderer.claims} == {"measured"}
    # outside an answer's sentence an empty cell has no sentence to drop: it fails the build
    with pytest.raises(Exception, match="drops_if_empty works only in an answer's sentence"):
        render(store, "en", lambda r: r._fact_html(found, "best_16"))
    with pytest.raises(UnknownName, match="not a Value of the topic with drops_if_empty"):
        from measure.site.facts import topic

        topic("test_absent_refused", facts={"a": Value("tuning_ladder.best", "best_added"), "b": Absent("a")})
