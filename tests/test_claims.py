import re

import pytest

from measure.schema import SchemaError, UnknownName
from measure.site.claims import ClaimRenderer, format_number, short_revision


def render(store, lang="en"):
    return ClaimRenderer(store, lang, f"page.{lang}.md", data_url="../data/")


def test_measured_value_has_number_provenance_and_data_link(store):
    r = render(store)
    html = r.value("pooling.embedding_throughput", "tokens_per_s", model="tiny-Qwen3-Embedding-0.6B",
                   batch_size=4, encoding_format="float", digits=0)
    assert "12,346\u00a0tok/s" in html  # a no-break space: the unit never starts a line of its own
    assert "claim-measured" in html and "vLLM 0.32.0" in html and "dummy weights" in html and "default mode" in html
    assert 'href="../data/fixture-cpu/pooling.embedding_throughput.csv"' in html
    assert r.claims[-1].status == "measured"


def test_cited_value_is_marked_cited(store):
    r = render(store, "zh")
    html = r.value("pooling.embedding_throughput", "tokens_per_s", source="cited", batch_size=64)
    assert "21,900\u00a0tok/s" in html and "claim-cited" in html and "引用" in html and "Fixture article" in html
    assert r.claims[-1].status == "cited"


def test_a_declared_gap_or_an_unmeasured_dataset_renders_not_measured(store):
    r = render(store, "zh")
    html = r.value("pooling.embedding_throughput", "tokens_per_s", batch_size=1024, encoding_format="float",
                   model="tiny-Qwen3-Embedding-0.6B", missing_ok=True)
    assert "未实测" in html and "claim-not-measured" in html
    html = render(store).value("pooling.prefill_comparison", "tokens_per_s", path="embeddings")  # published nowhere
    assert "Not measured" in html


@pytest.mark.parametrize("lang, words", [
    ("en", "No data for “API-server processes, throughput, latency and CPU” on <code>fixture-cpu</code> yet; "
           "<code>nox -s measure -- api_servers</code> on such a machine measures them."),
    ("zh", "<code>fixture-cpu</code> 上还没有“API 服务器进程数与吞吐、延迟和 CPU 占用”的数据；在这样的机器上运行 "
           "<code>nox -s measure -- api_servers</code> 即可测得。"),
])
def test_a_chart_or_table_with_no_rows_says_what_is_missing_and_the_command_that_measures_it(store, lang, words):
    r = render(store, lang)
    html = r.chart("api_servers.load", x="concurrency", y="tokens_per_s", env="fixture-cpu", missing_ok=True)
    assert 'class="claim-missing"' in html and words in html
    assert words in render(store, lang).table("api_servers.load", env="fixture-cpu", missing_ok=True)
    # the table below the chart on the same page: said once
    assert r.table("api_servers.load", env="fixture-cpu", missing_ok=True) == ""
    assert [c.status for c in r.claims] == ["not_measured", "not_measured"]


@pytest.mark.parametrize("call, why", [
    # a selector value misspelt the same way in both languages
    (lambda r: r.value("pooling.embedding_throughput", "tokens_per_s", batch_size=1024), "batch_size=1024 occurs in no"),
    (lambda r: r.table("pooling.embedding_throughput", where={"encoding_format": "flaot"}), "encoding_format='flaot'"),
    # each value exists, the combination does not: a stale sentence
    (lambda r: r.value("pooling.embedding_throughput", "tokens_per_s", source="cited", batch_size=4),
     "is published in fixture-article but has no"),
    # a misspelt environment
    (lambda r: r.value("pooling.embedding_throughput", "tokens_per_s", env="fixture-cpv", batch_size=4), "env 'fixture-cpv'"),
])
def test_a_claim_that_finds_nothing_in_published_data_fails_the_build(store, call, why):
    with pytest.raises(UnknownName, match=re.escape(why)):
        call(render(store))


@pytest.mark.parametrize("call", [
    lambda r: r.value("pooling.embedding_troughput", "tokens_per_s"),
    lambda r: r.value("pooling.embedding_throughput", "tokens_per_sec"),
    lambda r: r.value("pooling.embedding_throughput", "tokens_per_s", batchsize=4),
    lambda r: r.table("pooling.embedding_throughput", columns=["nope"]),
    lambda r: r.chart("pooling.embedding_throughput", x="batch_size", y="nope"),
    lambda r: r.value("pooling.embedding_throughput", "tokens_per_s", source="measurd"),
])
def test_typos_fail_loudly(store, call):
    with pytest.raises(UnknownName):
        call(render(store))


def test_ambiguous_selector_fails(store):
    with pytest.raises(UnknownName, match="matches 2 rows"):
        render(store).value("pooling.embedding_throughput", "tokens_per_s", batch_size=4)


def test_real_weights_only_dataset_ignores_dummy_rows(store):
    r = render(store)
    html = r.value("pooling.rerank_quality", "top_score", documents=32)
    assert "Not measured" in html and "dummy" in html
    assert "alert" not in r.table("pooling.rerank_quality")


def test_table_escapes_csv_text_and_marks_cited_rows(store, fixture_root):
    csv = fixture_root / "fixture-cpu" / "pooling.embedding_throughput.csv"
    csv.write_text(csv.read_text().replace("tiny-Qwen3-Embedding-0.6B,dummy,1,float", "<b>x</b>&,dummy,1,float", 1))
    html = render(store).table("pooling.embedding_throughput")
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;&amp;" in html
    assert 'class="claim-cited-row"' in html and 'class="claim-measured-row"' in html


def test_chart_is_stable_and_carries_every_environment(store):
    a = render(store).chart("pooling.embedding_throughput", x="batch_size", y="tokens_per_s", color="encoding_format")
    b = render(store).chart("pooling.embedding_throughput", x="batch_size", y="tokens_per_s", color="encoding_format")
    assert a == b
    assert "not stated · Qwen3-Embedding-0.6B · Fixture citation (cited)" in a and '"dash": "dash"' in a
    # in the stand-in's own chart the entries name what differs; the model and source they share are said once below
    assert '"name": "float"' in a
    assert 'claim-chart-shared">Every series: tiny Qwen3-Embedding-0.6B (2 layers, hidden 128) · Test fixture: CPU' in a


def test_unconfirmed_and_not_measured_badges(store):
    r = render(store, "zh")
    assert "未确认" in r.unconfirmed("k1", "原因未明")
    assert "未实测" in r.not_measured("k2", "没有实验")
    assert [c.status for c in r.claims] == ["unconfirmed", "not_measured"]
    # the reason closes its sentence, once: the page's text goes on after it
    assert '<span class="claim-reason">原因未明。</span>' in r.unconfirmed("k3", "原因未明")
    en = render(store, "en")
    assert '<span class="claim-reason">not measured.</span>' in en.unconfirmed("k4", "not measured")
    assert '<span class="claim-reason">not measured (see above).</span>' in en.unconfirmed("k5", "not measured (see above).")


def test_locale_formatting():
    assert format_number(21900.0, "en", 0) == "21,900"
    assert format_number(0.9934, "zh", 3) == "0.993"
    assert format_number(9.82, "en") == "9.82"


def test_numpy_scalars_and_bools_are_formatted():
    import numpy as np

    assert format_number(np.int64(20896), "zh") == "20,896"
    assert format_number(np.float64(3.6486), "en", 2) == "3.65"
    assert format_number(np.bool_(False), "zh") == "否" and format_number(True, "en") == "yes"


def _eager_store(fixture_root, low: float):
    from measure.site.scan import make_store

    root = fixture_root  # already a writable copy
    header = ("mode,concurrency,requests,output_tokens,rounds,output_tok_s,output_tok_s_min,output_tok_s_max,tpot_ms,"
              "tpot_ms_min,tpot_ms_max,ttft_ms,client_cpu_max\n")
    (root / "fixture-cpu" / "eager.decode.csv").write_text(
        header + f"default,32,128,64,3,6000.0,{low},7000.0,3.0,2.9,3.1,80.0,0.1\n"
                 "eager,32,128,64,3,1500.0,1400.0,1600.0,18.0,17.0,19.0,100.0,0.1\n")
    return make_store(root)


def test_chart_draws_each_points_spread_and_bars_on_a_category_axis(fixture_root):
    import json
    import re

    html = render(_eager_store(fixture_root, 5500.0)).chart(
        "eager.decode", x="concurrency", y="output_tok_s", color="mode", kind="bar",
        spread=("output_tok_s_min", "output_tok_s_max"))
    figure = json.loads(re.search(r'<script type="application/json"[^>]*>(.*?)</script>', html).group(1))
    default = next(tr for tr in figure["data"] if tr["name"].startswith("default"))
    assert default["error_y"]["array"] == [1000.0] and default["error_y"]["arrayminus"] == [500.0]
    assert figure["layout"]["xaxis"]["type"] == "category" and figure["layout"]["barmode"] == "group"


def test_a_point_outside_its_own_spread_fails_the_build(fixture_root):
    from measure.schema import SchemaError

    with pytest.raises(SchemaError, match="outside its spread"):
        render(_eager_store(fixture_root, 6500.0)).chart(
            "eager.decode", x="concurrency", y="output_tok_s", color="mode", kind="bar",
            spread=("output_tok_s_min", "output_tok_s_max"))


def test_compare_renders_the_ratio_of_two_named_values_and_fails_when_the_sentence_stops_holding(store):
    r = render(store, "zh")
    r.value("pooling.embedding_throughput", "tokens_per_s", model="tiny-Qwen3-Embedding-0.6B", batch_size=4,
            encoding_format="float", key="ours")
    r.value("pooling.embedding_throughput", "tokens_per_s", source="cited", batch_size=64, key="article")
    ours, article = r.numbers["ours"], r.numbers["article"]
    assert ours < article  # the fixture's premise: ours (12,346) below the article's (21,900)
    with pytest.raises(SchemaError, match="differ in 4 conditions"):  # the article's batch of 64, its laptop, …
        r.compare("ours", "<", "article")
    unlike = {"varies": ("batch_size", "encoding_format", "environment", "model")}  # said in the sentence
    html = r.compare("ours", "<", "article", **unlike)
    assert f"{ours / article:.2f}\u00a0倍" in html and r.claims[-1].status == "measured"
    assert r.compare("ours", "<", "article", show=False, **unlike) == ""
    with pytest.raises(SchemaError, match="ours .* is larger .*than article"):
        r.compare("ours", ">", "article", **unlike)
    with pytest.raises(UnknownName, match="no number named 'nope'"):
        r.compare("ours", "<", "nope")
    with pytest.raises(UnknownName, match="relation"):
        r.compare("ours", "smaller", "article")


def test_compare_calls_two_figures_within_the_tie_margin_a_tie_not_larger(store):
    from measure.site.claims import TIE_MARGIN

    r = render(store)
    r.numbers.update(engine_ttft_bench=60.92, engine_ttft_ours=60.85, highest=62.0)  # 0.1 % apart: a tie
    with pytest.raises(SchemaError, match="larger"):
        r.compare("engine_ttft_bench", ">", "engine_ttft_ours")
    with pytest.raises(SchemaError, match="smaller"):
        r.compare("engine_ttft_ours", "<", "engine_ttft_bench")
    assert r.compare("engine_ttft_bench", "≥", "engine_ttft_ours", show=False) == ""
    assert r.compare("engine_ttft_bench", "≈", "engine_ttft_ours", show=False) == ""
    with pytest.raises(SchemaError, match="no larger than"):
        r.compare("highest", "≤", "engine_ttft_bench")
    r.numbers.update(clearly_above=60.85 * (1 + 2 * TIE_MARGIN))
    assert r.compare("clearly_above", ">", "engine_ttft_ours", show=False) == ""


def test_compare_with_an_unmeasured_side_is_not_measured_not_a_pass(store):
    r = render(store)
    r.value("pooling.embedding_throughput", "tokens_per_s", batch_size=1024, encoding_format="float",
            model="tiny-Qwen3-Embedding-0.6B", key="missing", missing_ok=True)
    r.value("pooling.embedding_throughput", "tokens_per_s", source="cited", batch_size=64, key="article")
    assert "Not measured" in r.compare("missing", ">", "article")
    assert r.claims[-1].status == "not_measured"


def _with_roofline(fixture_root, tokens_per_s: float, spread: tuple[float, float] | None = None):
    """The fixture's throughput table plus a roofline row for the same model and batch (one quantity)."""
    from measure.site.scan import make_store

    env = fixture_root / "fixture-cpu"
    (env / "pooling_limits.roofline.csv").write_text(
        "model,weights,batch_size,tokens_per_s,tokens_per_s_min,tokens_per_s_max,repeats,matmul_params,achieved_tflops,"
        "peak_share_pct,client_ms,engine_ms,queue_ms,prefill_ms,outside_engine_ms,client_cpu_share\n"
        f"tiny-Qwen3-Embedding-0.6B,dummy,4,{tokens_per_s},,,,294912,0.01,1.0,40.0,20.0,0.1,10.0,20.0,0.2\n")
    if spread:  # the throughput table with the range of its repeats (columns in the schema's order)
        (env / "pooling.embedding_throughput.csv").write_text(
            "model,weights,batch_size,encoding_format,tokens_per_input,tokens_per_s,tokens_per_s_min,tokens_per_s_max,"
            "latency_ms,repeats,warmup,client_cpu_share\n"
            f"tiny-Qwen3-Embedding-0.6B,dummy,4,float,130.0,12345.6,{spread[0]},{spread[1]},42.0,3,1,0.2\n")
    return make_store(fixture_root)


def _throughput_at_4(r, **kw):
    return r.value("pooling.embedding_throughput", "tokens_per_s", model="tiny-Qwen3-Embedding-0.6B", batch_size=4,
                   encoding_format="float", **kw)


def test_figures_of_one_quantity_that_agree_stay_measured(fixture_root):
    r = render(_with_roofline(fixture_root, 12345.6 * 1.1))  # within the 15 % tolerance of the throughput table
    assert "Unconfirmed" not in _throughput_at_4(r) and r.claims[-1].status == "measured"


def test_figures_of_one_quantity_that_disagree_render_unconfirmed_naming_both(fixture_root):
    r = render(_with_roofline(fixture_root, 12345.6 * 1.5))
    html = _throughput_at_4(r)
    assert "Unconfirmed" in html and r.claims[-1].status == "unconfirmed"
    # named as a reader knows them: by title, not by id
    assert "“How far embeddings are from the compute ceiling, and where the time goes” 18,518" in html
    assert "“Embedding throughput vs batch size” 12,346" in html and "pooling_limits.roofline" not in html
    # the roofline's own figure is marked too: neither is known to be the right one
    r.value("pooling_limits.roofline", "tokens_per_s", batch_size=4)
    assert r.claims[-1].status == "unconfirmed"
    # another column of the same row is no member of the quantity
    r.value("pooling_limits.roofline", "engine_ms", batch_size=4)
    assert r.claims[-1].status == "measured"


def test_figures_measured_on_different_machines_are_not_compared(fixture_root):
    """An environment whose roofline was re-measured on a CPU of the same name without AVX-512: its figure is no
    second reading of the throughput table's (several times slower there), so neither renders 未确认."""
    import json

    _with_roofline(fixture_root, 12345.6 * 1.5)
    prov_path = fixture_root / "fixture-cpu" / "provenance.json"
    prov = json.loads(prov_path.read_text())
    prov["datasets"]["pooling_limits.roofline"] = {
        "experiment": "pooling_limits", "servers": [],
        "hardware": prov["hardware"] | {"cpu_extensions": ["avx2"]}}
    prov_path.write_text(json.dumps(prov))
    from measure.site.scan import make_store

    r = render(make_store(fixture_root))
    assert "Unconfirmed" not in _throughput_at_4(r) and r.claims[-1].status == "measured"
    r.value("pooling_limits.roofline", "tokens_per_s", batch_size=4)
    assert r.claims[-1].status == "measured"
    assert "fixture CPU (AVX2, no AVX-512)" in r.value("pooling_limits.roofline", "tokens_per_s", batch_size=4, key="again")


def test_a_recorded_spread_that_reaches_the_other_figure_counts_as_agreement(fixture_root):
    r = render(_with_roofline(fixture_root, 14000.0, spread=(11000.0, 14500.0)))  # medians 13 % apart, ranges overlap
    _throughput_at_4(r)
    assert r.claims[-1].status == "measured"


def test_overlapping_ranges_with_medians_far_apart_are_too_wide_to_tell(fixture_root):
    """Ranges that overlap only because the repeats spread widely are no agreement: medians 30 % apart (beyond the
    quantity's 15 %) render 未确认, and the sentence says the repeats spread too widely to tell."""
    r = render(_with_roofline(fixture_root, 16000.0, spread=(11000.0, 14500.0)))  # 12,346 ± 15 % reaches 14,500
    html = _throughput_at_4(r)
    assert r.claims[-1].status == "unconfirmed" and "Unconfirmed" in html
    assert "spread too widely to tell" in html.replace("&#x27;", "'")


def test_two_recorded_ranges_that_do_not_overlap_disagree_even_when_close(fixture_root):
    # the H200's batch-1 embeddings: 5,432–7,428 in one dataset, 7,994–9,045 in another
    env = fixture_root / "fixture-cpu"
    from measure.site.scan import make_store

    _with_roofline(fixture_root, 13000.0, spread=(12000.0, 12600.0))
    roofline = (env / "pooling_limits.roofline.csv").read_text().splitlines()
    row = roofline[1].replace(",13000.0,,,,", ",13000.0,12800.0,13300.0,5,")
    (env / "pooling_limits.roofline.csv").write_text(f"{roofline[0]}\n{row}\n")  # 5 % apart, ranges apart
    r = render(make_store(fixture_root))
    assert "Unconfirmed" in _throughput_at_4(r) and r.claims[-1].status == "unconfirmed"


def test_differs_states_other_conditions_and_fails_once_the_figures_agree(fixture_root):
    r = render(_with_roofline(fixture_root, 12345.6 * 1.5))
    html = _throughput_at_4(r, differs="other batch order")
    assert "Unconfirmed" not in html and "other batch order" in html and r.claims[-1].status == "measured"
    agreeing = render(_with_roofline(fixture_root, 12345.6))
    with pytest.raises(UnknownName, match="agrees with the other figures"):
        _throughput_at_4(agreeing, differs="other batch order")
    with pytest.raises(UnknownName, match="no quantity"):
        agreeing.value("pooling.embedding_throughput", "latency_ms", model="tiny-Qwen3-Embedding-0.6B", batch_size=4,
                       encoding_format="float", differs="why")


def test_a_quantity_declaring_a_selector_value_no_data_has_fails(fixture_root):
    from measure.quantities import Member, Quantity
    from measure.site.consistency import Consistency

    typo = Quantity("typo", "", (Member("pooling.embedding_throughput", "tokens_per_s", {"encoding_format": "flaot"}),
                                 Member("pooling_limits.roofline", "tokens_per_s")), by=("model", "batch_size"))
    with pytest.raises(UnknownName, match="flaot"):
        Consistency(_with_roofline(fixture_root, 1.0), (typo,))
    with pytest.raises(UnknownName, match="column"):
        Consistency(_with_roofline(fixture_root, 1.0), (Quantity("c", "", typo.members, by=("modle",)),))


def test_a_quantity_compares_a_column_that_another_dataset_names_differently():
    """The prefix study's caching-off rows re-measure the long-prompt study's TTFT: its prompt length is the prefix
    length (its own prompt_tokens adds the question's ~34 tokens and would never meet the long-prompt rows)."""
    from dataclasses import replace

    from measure.quantities import QUANTITIES
    from measure.site.consistency import Consistency
    from measure.site.scan import make_store

    store = make_store()
    (quantity,) = [q for q in QUANTITIES if q.name == "prefill-ttft-one-request"]
    both = {"prefill.long_prompt", "prefill.prefix_cache"}
    verdicts = [v for v in Consistency(store, (quantity,)).verdicts if v.env == "gpu-1x-nvidia-h200"]
    assert {v.group for v in verdicts} == {(1024, 2048), (4096, 2048), (16384, 2048)}
    assert all({r.dataset for r in v.readings} == both for v in verdicts)
    long_prompt, prefix = quantity.members
    unmapped = replace(quantity, members=(long_prompt, replace(prefix, by_columns={})))
    assert not any({r.dataset for r in v.readings} == both for v in Consistency(store, (unmapped,)).verdicts)
    with pytest.raises(UnknownName, match="prefix_length"):
        Consistency(store, (replace(quantity, members=(long_prompt, replace(prefix, by_columns={"prompt_tokens": "prefix_length"}))),))


def test_a_chart_series_never_mixes_models_and_the_stand_in_gets_its_own_chart(fixture_root):
    import json

    from measure.site.scan import make_store

    csv = fixture_root / "fixture-cpu" / "pooling.embedding_throughput.csv"
    csv.write_text(csv.read_text() + "all-MiniLM-L6-v2,real,1,float,20.0,900.0,5.0,3,1,0.2\n"
                                     "all-MiniLM-L6-v2,real,4,float,20.0,3000.0,6.0,3,1,0.2\n")
    html = render(make_store(fixture_root)).chart("pooling.embedding_throughput", x="batch_size", y="tokens_per_s",
                                                  color="encoding_format", env="fixture-cpu")
    full, stand_in = (json.loads(m) for m in re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', html))
    # a real model and a scaled-down one never share an axis: the stand-in's chart is titled as shape, not speed
    assert [tr["name"] for tr in full["data"]] == ["float · all-MiniLM-L6-v2 · Test fixture: CPU"]
    assert full["data"][0]["y"] == [900.0, 3000.0]
    names = [tr["name"] for tr in stand_in["data"]]
    assert sorted(names) == ["base64", "float"]
    assert "Every series: tiny Qwen3-Embedding-0.6B (2 layers, hidden 128)" in html
    assert html.count('class="claim-chart-title"') == 1  # the stand-in's chart only, above it, where it can wrap
    assert html.index("Scaled-down models on the CPU backend: the shape, not the speed") > html.index(full["data"][0]["name"])


def test_a_table_keeps_full_size_and_stand_in_rows_apart_and_folds_what_never_varies(fixture_root):
    from measure.site.scan import make_store

    csv = fixture_root / "fixture-cpu" / "pooling.embedding_throughput.csv"
    # tokens_per_input empty in both: a column these rows do not have (added after they were measured)
    csv.write_text(csv.read_text() + "all-MiniLM-L6-v2,real,1,float,,900.0,5.0,3,1,0.2\n"
                                     "all-MiniLM-L6-v2,real,4,float,,3000.0,6.0,3,1,0.2\n")
    html = render(make_store(fixture_root)).table("pooling.embedding_throughput", env="fixture-cpu")
    full, stand_in = html.split('<div class="claim-table">')[1:]
    def shown(part):  # what the page shows, not its tooltips (the source link's names every server of the env)
        return re.sub(r' title="[^"]*"', "", part)

    full, stand_in = shown(full), shown(stand_in)
    assert "all-MiniLM-L6-v2" in full and "tiny Qwen3" not in full and "the shape, not the speed" not in full
    assert "tiny Qwen3" in stand_in and "all-MiniLM" not in stand_in
    assert "the shape, not the speed" in stand_in.split("<table>")[0]  # the stand-in table's caption
    # one model, one weights mode: said once above the table, not in every row
    assert "Same in every row: model all-MiniLM-L6-v2 · weights real" in full.split("<table>")[0]
    assert "tokens per input" not in full.split('<details class="claim-full-table">')[0].lower()
    assert "<th" not in full.split("<table>")[0] and ">model<" not in full


def test_numbers_print_three_significant_digits_with_separators_and_no_trailing_zeros():
    from measure.site.claims import format_number

    cases = {23614.97: "23,615", 134317.0: "134,317", 43.83: "43.8", 1.994: "1.99", 0.2834: "0.283", 0.06: "0.06",
             12.0: "12", 0: "0", -0.5: "-0.5", 1234567.891: "1,234,568"}
    assert {v: format_number(v, "en") for v in cases} == cases
    assert format_number(1234.5, "en", 2) == "1,234.50"  # a page that asks for digits gets them
    with pytest.raises(SchemaError):
        format_number(float("inf"), "en")


def test_categorical_values_read_in_chinese_on_zh_pages_and_stay_selectable(store):
    zh = render(store, "zh").table("pooling.embedding_throughput")
    assert "未说明" in zh and ">not stated<" not in zh  # the cited row's encoding_format
    assert "not stated" in render(store, "en").table("pooling.embedding_throughput")
    # pages still select on the data's own value
    r = render(store, "zh")
    r.value("pooling.embedding_throughput", "tokens_per_s", source="cited", batch_size=64, encoding_format="not stated")
    assert r.claims[-1].status == "cited"
    # a list of names (which processes were saturated) reads as a Chinese list; an unknown part leaves it whole
    from measure.site.labels import value_label
    assert value_label("vllm bench serve, vLLM API server", "zh") == "vllm bench serve、vLLM API 服务器"
    assert value_label("vllm bench serve, vLLM API server", "en") == "vllm bench serve, vLLM API server"
    assert value_label("Qwen3-8B, a new model", "zh") == "Qwen3-8B, a new model"


def test_matrix_pivots_releases_newest_first_by_number_and_marks_the_unmeasured(fixture_root):
    from measure.site.scan import make_store

    (fixture_root / "fixture-cpu" / "security_versions.matrix.csv").write_text(
        "vllm_version,group,probe,outcome,status,fetched,answer\n"
        "0.10.2,auth,GET /metrics without a key,200,200,,\n"
        "0.8.5,auth,GET /metrics without a key,200,200,,\n"
        "0.8.5,media fetch,default · image URL on 127.0.0.1,fetched <b>/x</b>,400,/x,\n")
    r = render(make_store(fixture_root), "zh")
    html = r.matrix("security_versions.matrix", rows="probe", columns="vllm_version", cell="outcome")
    assert html.index("<th>0.10.2</th>") < html.index("<th>0.8.5</th>")  # newest first, and 8 < 10 (not "1" < "8")
    assert "不带密钥：GET /metrics" in html and "<td>—</td>" in html  # 0.10.2 has no media row
    assert "&lt;b&gt;" in html and "<b>" not in html
    with pytest.raises(UnknownName):
        r.matrix("security_versions.matrix", rows="probe", columns="vllm_versoin", cell="outcome")


def test_a_table_of_chosen_columns_keeps_the_full_table_one_click_away(store):
    compact = render(store).table("pooling.embedding_throughput", columns=["batch_size", "tokens_per_s"])
    visible, hidden = compact.split('<details class="claim-full-table">')
    assert ">latency (ms)</th>" not in visible and ">latency (ms)</th>" in hidden
    assert "All 12 columns of the dataset" in hidden
    assert '<details class="claim-full-table">' not in render(store).table("pooling.embedding_throughput")


def test_a_table_row_whose_figure_disagrees_with_another_dataset_is_marked(fixture_root):
    html = render(_with_roofline(fixture_root, 12345.6 * 1.5)).table("pooling.embedding_throughput")
    row = next(r for r in html.split("<tr")[1:] if ">12,346<" in r)
    assert "claim-unconfirmed" in row and "How far embeddings are from the compute ceiling" in row
    agreeing = render(_with_roofline(fixture_root, 12345.6)).table("pooling.embedding_throughput")
    assert "pooling_limits.roofline" not in agreeing


def test_agreement_says_whether_the_figures_of_a_quantity_agree_in_both_languages(fixture_root):
    agreeing = render(_with_roofline(fixture_root, 12345.6 * 1.1))
    assert "they agree" in agreeing.agreement("embedding-throughput", env="fixture-cpu",
                                              model="tiny-Qwen3-Embedding-0.6B", batch_size=4)
    apart = _with_roofline(fixture_root, 12345.6 * 1.5)
    zh = render(apart, "zh").agreement("embedding-throughput", env="fixture-cpu", model="tiny-Qwen3-Embedding-0.6B",
                                       batch_size=4)
    assert "彼此不一致" in zh and "未确认" in zh
    with pytest.raises(UnknownName, match="no such quantity"):
        agreeing.agreement("embeddings-speed", env="fixture-cpu", model="tiny-Qwen3-Embedding-0.6B", batch_size=4)
    with pytest.raises(UnknownName, match="fewer than two datasets"):
        agreeing.agreement("embedding-throughput", env="fixture-cpu", model="tiny-Qwen3-Embedding-0.6B", batch_size=99)


def test_a_figure_with_a_recorded_range_shows_it_in_its_tooltip_and_on_request(fixture_root):
    r = render(_with_roofline(fixture_root, 12345.6 * 1.1, spread=(11000.0, 14500.0)))
    html = _throughput_at_4(r)
    assert "3 repeats, 11,000–14,500" in html and "claim-range" not in html  # the tooltip only
    assert "(3 repeats, 11,000–14,500)</span>" in _throughput_at_4(r, show_range=True)
    with pytest.raises(UnknownName, match="records no range"):
        r.value("pooling_limits.roofline", "engine_ms", batch_size=4, show_range=True)


def test_a_revision_from_uncommitted_code_keeps_its_dirty_mark_when_cut_short():
    assert short_revision("0693dfb8aa640cdcf83ebab453aa6ad3c02dc123+dirty") == "0693dfb8aa+dirty"
    assert short_revision("9fd18203abbc9b6423e75af0d8f16648667400c0") == "9fd18203ab"
    assert short_revision(None) == ""


def test_a_folded_table_or_chart_keeps_every_row_behind_all_data_with_its_csv_link(store):
    """Issue #34, point 3: a figure no question needs folds behind "全部数据 / All data"; nothing is dropped."""
    for lang, words in (("en", "All data: Embedding throughput vs batch size"), ("zh", "全部数据：嵌入吞吐量与批大小")):
        open_table = render(store, lang).table("pooling.embedding_throughput")
        r = render(store, lang)
        folded = r.table("pooling.embedding_throughput", collapsed=True)
        assert folded.startswith('<details class="claim-all-data"><summary>') and " open" not in folded.split(">")[0]
        summary = folded.split("</summary>")[0]
        assert words in summary and 'href="../data/fixture-cpu/pooling.embedding_throughput.csv"' in summary
        assert open_table in folded  # the same table, every row of it
        assert r.claims[-1].kind == "table" and r.claims[-1].status == "measured"
        chart = render(store, lang).chart("pooling.embedding_throughput", x="batch_size", y="tokens_per_s",
                                          collapsed=True)
        assert chart.startswith('<details class="claim-all-data">') and "data-chart-for" in chart
    assert "claim-all-data" not in render(store).table("pooling.embedding_throughput")


def test_legend_entries_lead_with_what_varies_between_series():
    from measure.site.claims import legend_names

    # one source, two models: the entries name the model, the rest is said once; two sources of one model: the source
    assert legend_names([("x", "A", "Ours"), ("x", "B", "Ours")]) == (["A", "B"], "x · Ours")
    assert legend_names([(None, "A", "Ours"), (None, "A", "Article (cited)")]) == (["Ours", "Article (cited)"], "A")
    assert legend_names([("1", "A", "Ours")]) == (["1 · A · Ours"], "")  # one series: value, model, source


def test_a_scatter_of_categories_stands_its_series_side_by_side_around_the_data_with_a_level_line():
    import json

    from measure.site.scan import make_store

    html = render(make_store()).chart("fidelity_interval.ratio", x="metric", y="ratio", color="point", kind="scatter",
                                      spread=("ratio_ci_low", "ratio_ci_high"), env="gpu-1x-nvidia-h200", line_at=1)
    layout = json.loads(re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', html)[0])["layout"]
    assert layout["scattermode"] == "group" and layout["shapes"][0]["y0"] == 1
    rows = make_store().frame(make_store().env("gpu-1x-nvidia-h200"), "fidelity_interval.ratio")
    low, high = layout["yaxis"]["range"]  # grouped markers made Plotly start at 0; the range hugs the intervals
    assert 0 < low < min(rows["ratio_ci_low"].min(), 1) and max(rows["ratio_ci_high"].max(), 1) < high
    assert layout["legend"]["y"] > 1 and layout["xaxis"]["automargin"]  # entries above; turned ticks keep their room
    with pytest.raises(UnknownName, match="line_at must be a finite number"):
        render(make_store()).chart("fidelity_interval.ratio", x="metric", y="ratio", line_at=float("nan"))


def test_chart_series_follow_the_numbers_in_their_names_not_the_text():
    from measure.site.claims import _natural_order

    settings = ["--kv-cache-memory-bytes 16777216", "--kv-cache-memory-bytes 4194304", "--kv-cache-memory-bytes 8388608"]
    assert [s.split()[-1] for s in sorted(settings, key=_natural_order)] == ["4194304", "8388608", "16777216"]
    assert sorted([(16, "a"), (2, "b"), (4, "a")], key=_natural_order) == [(2, "b"), (4, "a"), (16, "a")]
    memory = ["--gpu-memory-utilization 0.1", "--gpu-memory-utilization 0.2", "--gpu-memory-utilization 0.06"]
    assert [s.split()[-1] for s in sorted(memory, key=_natural_order)] == ["0.06", "0.1", "0.2"]


def test_a_log_axis_says_so_and_bars_refuse_one(store):
    html = render(store).chart("pooling.embedding_throughput", x="batch_size", y="tokens_per_s", log_x=True)
    assert "(log scale)" in html
    assert "（对数刻度）" in render(store, "zh").chart("pooling.embedding_throughput", x="batch_size",
                                                      y="tokens_per_s", log_y=True)
    with pytest.raises(UnknownName, match="bars on a log y axis"):
        render(store).chart("pooling.embedding_throughput", x="batch_size", y="tokens_per_s", kind="bar", log_y=True)


def test_a_count_of_what_fits_is_cut_not_rounded_up(store):
    # the fixture's batch-4 row: 12,345.6 tok/s
    r = render(store)
    where = dict(model="tiny-Qwen3-Embedding-0.6B", batch_size=4, encoding_format="float")
    assert "12,346\u00a0tok/s" in r.value("pooling.embedding_throughput", "tokens_per_s", digits=0, key="a", **where)
    assert "12,345\u00a0tok/s" in r.value("pooling.embedding_throughput", "tokens_per_s", digits=0, round_down=True,
                                     key="b", **where)


def test_two_readings_of_one_dataset_are_told_apart_by_their_own_key(store):
    from measure.quantities import Member, Quantity
    from measure.site.consistency import Consistency

    # float and base64 at batch 4 (12,346 and 11,000 tok/s) read as one quantity: the note must say which is which
    quantity = Quantity("embed", "", (Member("pooling.embedding_throughput", "tokens_per_s", {"batch_size": 4}),),
                        by=("model", "batch_size"), rel_tol=0.01)
    r = render(store)
    (verdict,) = Consistency(store, (quantity,)).verdicts
    sentence = r._verdict_sentence(verdict, "k")
    assert "(encoding format float) 12,346\u00a0tok/s" in sentence and "(encoding format base64) 11,000\u00a0tok/s" in sentence


def test_a_value_the_words_rely_on_fails_the_build_when_the_data_say_otherwise(store):
    where = dict(model="tiny-Qwen3-Embedding-0.6B", batch_size=4, encoding_format="float")
    assert "130" in render(store).value("pooling.embedding_throughput", "tokens_per_input", expect=130.0, **where)
    with pytest.raises(SchemaError, match="relies on pooling.embedding_throughput.tokens_per_input .* being 129"):
        render(store).value("pooling.embedding_throughput", "tokens_per_input", expect=129, **where)


def test_flags_in_an_answer_read_as_code_that_does_not_break_at_hyphens():
    from measure.site.claims import flags_as_code, inline_code

    assert flags_as_code("set --max-num-seqs 8 — or not") == 'set <code class="flag">--max-num-seqs</code> 8 — or not'
    # a flag already in backticks is code once, not twice
    assert flags_as_code(inline_code("`--api-server-count` 2")) == "<code>--api-server-count</code> 2"


def test_an_answer_links_each_data_file_once():
    from measure.site.claims import once_per_source

    a = '<a class="claim-src" href="d/x.csv" title="t">[env]</a>'
    b = '<a class="claim-src" href="d/y.csv" title="t">[env]</a>'
    assert once_per_source(f"1 ms{a}, 2 ms{a} and 3 ms{b}") == f"1 ms{a}, 2 ms and 3 ms{b}"
    # a value the run was set to gives the link up to the first measured figure of its file, and keeps it where the
    # answer cites none
    setting = a.replace('class="claim-src"', 'class="claim-src claim-src-setting"')
    assert once_per_source(f"at 0.9{setting}: 5 ms{a}, 6 ms{a}") == f"at 0.9: 5 ms{a}, 6 ms"
    assert once_per_source(f"at 0.9{setting} and 0.8{setting}") == f"at 0.9{a} and 0.8"


def test_a_number_and_its_unit_stay_together_and_a_factor_reads_as_one():
    from measure.site.labels import with_unit

    assert with_unit("16", "%", "en") == "16\u00a0%" and with_unit("16", "", "en") == "16"
    assert with_unit("1.15", "×", "en") == "1.15×" and with_unit("1.15", "×", "zh") == "1.15\u00a0倍"


def test_a_note_counts_how_far_the_other_readings_lie_from_the_figure_shown():
    from types import SimpleNamespace

    from measure.site.claims import _gap

    # 47.5 ms shown; the other datasets read 43.2 to 62: the group spans 44 %, the figure is at most 31 % from them
    verdict = SimpleNamespace(readings=[SimpleNamespace(value=v) for v in (43.2, 47.5, 62.0, 43.8, 44.2)], spread=0.435)
    assert _gap(47.5, verdict) == pytest.approx(62.0 / 47.5 - 1)
    assert _gap(43.2, verdict) == pytest.approx(62.0 / 43.2 - 1)


def test_a_range_unconfirmed_at_both_ends_for_one_reason_carries_one_mark():
    from measure.site.claims import one_mark_per_range

    mark = '<span class="claim-badge claim-unconfirmed" title="saturated">Unconfirmed</span>'
    other = mark.replace("saturated", "another reason")
    low, high = ('<span class="claim-value claim-measured" title="t">1.1×</span>',
                 '<span class="claim-value claim-measured" title="t">1.3×</span>')
    assert one_mark_per_range(f"{low}{mark}–{high}{mark}).") == f"{low}–{high}{mark})."
    assert one_mark_per_range(f"{low}{mark}–{high}{other}") == f"{low}{mark}–{high}{other}"  # two reasons stay two


def test_a_title_escapes_markup_twice_and_quotes_once():
    """Material inserts a title's text as HTML (markup escaped twice); the browser's own tooltip, before Material's
    script runs, shows the attribute as it is: an apostrophe escaped twice read "mode&#x27;s" there."""
    from measure.site.claims import title_attr_value

    assert title_attr_value("the mode's <img>") == "the mode&#x27;s &amp;lt;img&amp;gt;"


def test_the_count_of_saturated_rows_names_the_environments_they_come_from():
    """The method page's interval chart draws the GPUs and the CPU stand-in apart; the count below the last (the CPU's)
    chart counted only GPU rows and read as the CPU's."""
    from measure.site.claims import ClaimRenderer
    from measure.site.scan import make_store

    html = ClaimRenderer(make_store(), "en", "method.en.md").table("fidelity_interval.ratio")
    note = html.split('<p class="claim-saturated">')[1].split("</p>")[0]
    assert "gpu-1x-nvidia-h100-80gb-hbm3" in note and "cpu-2c-x86-64" not in note, note


def _two_formats(fixture_root, base64: tuple[float, float, float]):
    """The fixture's throughput table with float (12,346; 11,000–14,500) and base64 rows, each with its range."""
    from measure.site.scan import make_store

    (fixture_root / "fixture-cpu" / "pooling.embedding_throughput.csv").write_text(
        "model,weights,batch_size,encoding_format,tokens_per_input,tokens_per_s,tokens_per_s_min,tokens_per_s_max,"
        "latency_ms,repeats,warmup,client_cpu_share\n"
        "tiny-Qwen3-Embedding-0.6B,dummy,4,float,130.0,12345.6,11000.0,14500.0,42.0,3,1,0.2\n"
        f"tiny-Qwen3-Embedding-0.6B,dummy,4,base64,130.0,{base64[0]},{base64[1]},{base64[2]},40.0,3,1,0.2\n")
    r = render(make_store(fixture_root))
    for fmt in ("float", "base64"):
        r.value("pooling.embedding_throughput", "tokens_per_s", model="tiny-Qwen3-Embedding-0.6B", batch_size=4,
                encoding_format=fmt, digits=0, key=fmt)
    return r


def test_a_difference_inside_the_repeats_is_said_as_no_measurable_difference(fixture_root):
    """Noise is said as noise: where two figures' recorded ranges overlap, a sentence saying one is larger fails the
    build (even with show=False), and '~' prints both figures with their ranges, never their ratio."""
    from measure.schema import SchemaError

    r = _two_formats(fixture_root, (13000.0, 12000.0, 15000.0))  # 5 % above, ranges overlap
    with pytest.raises(SchemaError, match="no measurable difference.*'~'"):
        r.compare("base64", ">", "float", show=False)
    with pytest.raises(SchemaError, match="no measurable difference"):
        r.compare("base64", "≈", "float")  # a printed ratio would read as a finding
    html = r.compare("base64", "~", "float")
    assert "no measurable difference: 13,000\u00a0tok/s (12,000–15,000) against 12,346\u00a0tok/s (11,000–14,500)" in html
    assert "×" not in html and r.claims[-1].status == "measured"
    assert r.compare("base64", "≈", "float", show=False) == ""  # a closeness the words state, checked silently


def test_no_measurable_difference_fails_once_the_ranges_part(fixture_root):
    from measure.schema import SchemaError

    r = _two_formats(fixture_root, (20000.0, 19000.0, 21000.0))
    with pytest.raises(SchemaError, match="do not overlap.*rewrite the sentence"):
        r.compare("base64", "~", "float")
    assert "1.62" in r.compare("base64", ">", "float")


def test_a_comparison_varies_one_condition_unless_it_declares_more(fixture_root):
    """Like with like: rows differing in batch size and format at once fail the build, naming both conditions;
    varies= declares them (the sentence says them), and a declared condition the rows share fails too."""
    from measure.schema import SchemaError
    from measure.site.scan import make_store

    (fixture_root / "fixture-cpu" / "pooling.embedding_throughput.csv").write_text(
        "model,weights,batch_size,encoding_format,tokens_per_input,tokens_per_s,tokens_per_s_min,tokens_per_s_max,"
        "latency_ms,repeats,warmup,client_cpu_share\n"
        "tiny-Qwen3-Embedding-0.6B,dummy,4,float,130.0,12345.6,,,42.0,3,1,0.2\n"
        "tiny-Qwen3-Embedding-0.6B,dummy,8,float,130.0,20000.0,,,40.0,3,1,0.2\n"
        "tiny-Qwen3-Embedding-0.6B,dummy,8,base64,130.0,40000.0,,,40.0,3,1,0.2\n")
    r = render(make_store(fixture_root))
    for key, batch, fmt in (("float4", 4, "float"), ("float8", 8, "float"), ("base64_8", 8, "base64")):
        r.value("pooling.embedding_throughput", "tokens_per_s", model="tiny-Qwen3-Embedding-0.6B", batch_size=batch,
                encoding_format=fmt, key=key)
    assert "1.62" in r.compare("float8", ">", "float4")  # batch size alone
    with pytest.raises(SchemaError, match=r"differ in 2 conditions \(batch_size: 8 against 4; encoding_format"):
        r.compare("base64_8", ">", "float4")
    assert "3.24" in r.compare("base64_8", ">", "float4", varies=("batch_size", "encoding_format"))
    with pytest.raises(SchemaError, match="same model: drop it"):
        r.compare("float8", ">", "float4", varies=("batch_size", "model"))


def test_effects_are_pairs_differing_in_one_condition_by_twice_beyond_their_repeats(fixture_root):
    """findings.effects: batch 4 → 8 doubles beyond the repeats (an effect); float → base64 at batch 8 is 2.2× by
    the medians but the repeats reach within 2× (none); batch 4 float → batch 8 base64 differs in two conditions."""
    from measure.site import findings
    from measure.site.scan import make_store

    (fixture_root / "fixture-cpu" / "pooling.embedding_throughput.csv").write_text(
        "model,weights,batch_size,encoding_format,tokens_per_input,tokens_per_s,tokens_per_s_min,tokens_per_s_max,"
        "latency_ms,repeats,warmup,client_cpu_share\n"
        "tiny-Qwen3-Embedding-0.6B,dummy,4,float,130.0,10000.0,9500.0,10500.0,42.0,3,1,0.2\n"
        "tiny-Qwen3-Embedding-0.6B,dummy,8,float,130.0,25000.0,24000.0,26000.0,42.0,3,1,0.2\n"
        "tiny-Qwen3-Embedding-0.6B,dummy,8,base64,130.0,55000.0,40000.0,60000.0,42.0,3,1,0.2\n")
    store = make_store(fixture_root)
    found = {(e.column, e.condition): e for e in findings.effects(store, store.env("fixture-cpu"),
                                                                  "pooling.embedding_throughput")}
    assert set(found) == {("tokens_per_s", "batch_size")}
    pair = found["tokens_per_s", "batch_size"].strongest
    assert (pair.low_row["batch_size"], pair.high_row["batch_size"]) == (4, 8)
    assert pair.ratio == 2.5 and round(pair.beyond_spread, 3) == round(24000 / 10500, 3)
