"""One card per answer, and the same figure compared across cards (measure/site/cards.py)."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest

from measure.schema import UnknownName
from measure.site import facts
from measure.site.claims import ClaimRenderer
from measure.site.facts import Question, Ratio, Value

REPO = Path(__file__).resolve().parents[1]
H200, H100 = "gpu-1x-nvidia-h200", "gpu-1x-nvidia-h100-80gb-hbm3"
DECODE_HEADER = ("model,weights,weight_gb,bandwidth_gb_s,floor_ms,output_tokens,rounds,tpot_ms,tpot_ms_min,tpot_ms_max,"
                 "floor_share_pct,beyond_floor_ms,client_cpu_max\n")


def two_cards(tmp_path: Path, h100_tpot: tuple[float, float, float], h200_tpot: tuple[float, float, float],
              h100_bandwidth: float = 3000.0) -> Path:
    """A data root with the two cards' environments as committed, their decode rows and bandwidths replaced."""
    root = tmp_path / "data"
    for env in (H200, H100):
        shutil.copytree(REPO / "data" / env, root / env)
    for env, (tpot, low, high), bandwidth in ((H100, h100_tpot, h100_bandwidth), (H200, h200_tpot, 4200.0)):
        (root / env / "capacity.decode_floor.csv").write_text(
            DECODE_HEADER + f"Qwen3-0.6B,dummy,1.19,{bandwidth},0.3,256,3,{tpot},{low},{high},20.0,1.0,0.05\n")
        (root / env / "capacity.bandwidth.csv").write_text(
            "device,buffer_mib,bandwidth_gb_s,threads,torch\n" + f"card,4096,{bandwidth},16,2.11.0+cu130\n")
    return root


def renderer(root: Path, lang: str = "en") -> ClaimRenderer:
    from measure.site.scan import make_store

    return ClaimRenderer(make_store(root), lang, f"page.{lang}.md", data_url="../data/")


def tpot(r: ClaimRenderer, env: str) -> str:
    """The figure's HTML, entities decoded and no-break spaces as spaces (what a reader sees in its tooltip)."""
    out = r.value("capacity.decode_floor", "tpot_ms", env=env, model="Qwen3-0.6B", digits=2, key=f"tpot-{env}")
    return html.unescape(out).replace("\xa0", " ").replace("\u202f", " ")


def test_a_weaker_card_faster_beyond_the_spread_marks_both_figures_naming_both(tmp_path):
    r = renderer(two_cards(tmp_path, (1.52, 1.51, 1.53), (1.91, 1.82, 2.04)))
    for env in (H100, H200):
        html = tpot(r, env)
        assert r.claims[-1].status == "unconfirmed", env
        assert "NVIDIA H100 80GB HBM3 1.52 ms (1.51–1.53)" in html and "NVIDIA H200 1.91 ms (1.82–2.04)" in html
    zh = renderer(two_cards(tmp_path / "zh", (1.52, 1.51, 1.53), (1.91, 1.82, 2.04)), "zh")
    assert "实测带宽更低" in tpot(zh, H200) and zh.claims[-1].status == "unconfirmed"


@pytest.mark.parametrize("h100, h200, bandwidth, why", [
    ((2.10, 2.00, 2.20), (1.91, 1.82, 2.04), 3000.0, "the weaker card is slower"),
    ((1.80, 1.75, 1.85), (1.91, 1.82, 2.04), 3000.0, "the two ranges overlap"),
    ((1.52, 1.51, 1.53), (1.91, 1.82, 2.04), 4300.0, "the H100 measured as much bandwidth: no weaker card"),
])
def test_figures_the_cards_strengths_explain_stay_measured(tmp_path, h100, h200, bandwidth, why):
    r = renderer(two_cards(tmp_path, h100, h200, h100_bandwidth=bandwidth))
    for env in (H100, H200):
        tpot(r, env)
        assert r.claims[-1].status == "measured", why


def test_a_declared_measured_reason_keeps_the_figures_measured(tmp_path):
    from measure.quantities import CardFigure
    from measure.site import cards

    root = two_cards(tmp_path, (1.52, 1.51, 1.53), (1.91, 1.82, 2.04))
    r = renderer(root)
    explained = (CardFigure("capacity.decode_floor", "tpot_ms", "lower", reason={"zh": "原因", "en": "a reason"}),)
    r.store._checks[cards.CrossCards] = cards.CrossCards(r.store, explained)
    tpot(r, H100)
    assert r.claims[-1].status == "measured"


def test_a_table_row_of_either_card_is_marked(tmp_path):
    r = renderer(two_cards(tmp_path, (1.52, 1.51, 1.53), (1.91, 1.82, 2.04)))
    out = html.unescape(r.table("capacity.decode_floor", env=H100, columns=["model", "tpot_ms"])).replace("\xa0", " ")
    assert "Unconfirmed" in out and "NVIDIA H200 1.91 ms" in out


def _topic(*values: tuple[str, str], answer: str, elsewhere: str = "") -> tuple[facts.Topic, Question]:
    declared = {name: Value("capacity.decode_floor", "tpot_ms", {"model": "Qwen3-0.6B"}, {"env": env, "digits": 2,
                                                                                         "missing_ok": True})
                for name, env in values}
    if len(values) == 2:
        declared["ratio"] = Ratio(values[0][0], ">", values[1][0])
    question = Question({"zh": "问？", "en": "Which card?"}, {"zh": answer, "en": answer}, "decode-floor",
                        {"zh": "要测。", "en": "Measure it."}, elsewhere=elsewhere)
    return facts.Topic("cardtest", declared, (question,), {"zh": "卡", "en": "Cards"}), question


def test_an_answer_citing_another_card_fails_the_build_naming_page_and_question(tmp_path):
    r = renderer(two_cards(tmp_path, (2.1, 2.0, 2.2), (1.91, 1.82, 2.04)))
    topic, question = _topic(("on_h100", H100), answer="It took {on_h100}.")
    with pytest.raises(UnknownName, match=r"page\.en\.md: the answer to 'Which card\?'.*gpu-1x-nvidia-h100-80gb-hbm3"):
        r._answer_html(topic, question)
    mixed, question = _topic(("a", H200), ("b", H100), answer="It took {a} against {b}, {ratio}.")
    with pytest.raises(UnknownName, match="one card"):
        renderer(two_cards(tmp_path / "2", (2.1, 2.0, 2.2), (1.91, 1.82, 2.04)))._answer_html(mixed, question)


def test_an_answer_on_the_answer_card_alone_renders(tmp_path):
    r = renderer(two_cards(tmp_path, (2.1, 2.0, 2.2), (1.91, 1.82, 2.04)))
    topic, question = _topic(("on_h200", H200), answer="It took {on_h200}.")
    assert "1.91" in r._answer_html(topic, question)


def test_an_answer_the_answer_card_cannot_give_says_not_measured_and_links_the_other_cards(tmp_path):
    root = two_cards(tmp_path, (2.1, 2.0, 2.2), (1.91, 1.82, 2.04))
    (root / H200 / "capacity.decode_floor.csv").write_text(  # the H200 lacks the 0.6B row
        DECODE_HEADER + "Qwen3-8B,dummy,15.1,4200.0,3.6,256,3,5.0,4.9,5.1,70.0,1.4,0.01\n")
    r = renderer(root)
    topic, question = _topic(("on_h200", H200), answer="It took {on_h200}.", elsewhere="other-gpus-decode-floor")
    out = r._answer_html(topic, question)
    assert "Not measured" in out and 'href="#other-gpus-decode-floor"' in out
    home = renderer(root)._answer_html(topic, question, "cardtest/")  # the home page links the topic's page
    assert 'href="cardtest/#other-gpus-decode-floor"' in home


def test_a_comparison_sentence_across_cards_fails(tmp_path):
    r = renderer(two_cards(tmp_path, (2.1, 2.0, 2.2), (1.91, 1.82, 2.04)))
    tpot(r, H100)
    tpot(r, H200)
    with pytest.raises(UnknownName, match="compares a figure from gpu-1x-nvidia-h100-80gb-hbm3 with one from "):
        r.compare(f"tpot-{H100}", ">", f"tpot-{H200}")


def test_the_site_s_answers_cite_the_answer_card_alone():
    """Every topic's answers, rendered against the committed data, cite no other GPU card (the build runs this for
    each page; here every question at once, both languages)."""
    from measure.site.scan import make_store

    for lang in ("zh", "en"):
        r = ClaimRenderer(make_store(REPO / "data"), lang, f"all.{lang}.md", data_url="../data/")
        for found in facts.topics().values():
            for question in found.questions:
                r._answer_html(found, question)


def test_the_method_page_lists_every_gpu_experiment_with_card_revision_date_and_minutes(tmp_path):
    root = two_cards(tmp_path, (2.1, 2.0, 2.2), (1.91, 1.82, 2.04))
    prov = json.loads((root / H100 / "provenance.json").read_text())
    out = renderer(root).gpu_runs()
    for name, record in prov["experiments"].items():
        assert f"<td>{name}</td><td>H100 80GB HBM3</td><td><code>{record['code_revision'][:7]}</code>" in out
    assert out.index("<td>H200</td>") < out.index("<td>H100 80GB HBM3</td>")  # the answer card first
    capacity = prov["experiments"]["capacity"]
    assert f"<td>{capacity['date'][:10]}</td><td>{capacity['wall_s'] / 60:.1f}</td>" in out
