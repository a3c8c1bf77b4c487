"""The tuning chapter's experiments on a real vLLM (CPU backend, tiny models): the ladder keeps each rung's flags and
compares it with the one before, --max-model-len changes the longest request and not the KV cache, n-gram
speculation reports its drafts (or its refusal), a reranker runs under concurrency, and max_pixels cuts image tokens
whether the server or the request sets it (tests/test_vllm_image_limits.py)."""

import json

import pandas as pd
import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

pytestmark = pytest.mark.vllm

SIZES = {
    "tuning_ladder": {"rungs": ["defaults", "api-servers"], "system_words": 300, "question_words": 16,
                      "output_tokens": 4, "concurrency": [4], "min_requests": 8, "rounds": 1},
    "max_model_len": {"lengths": ["512", "model's own"], "words": 32, "output_tokens": 4, "concurrency": 2,
                      "min_requests": 4, "rounds": 1},
    "spec_ngram": {"modes": ["none", "ngram"], "samplings": ["greedy", "sampled"], "words": 32, "output_tokens": 16, "concurrency": [1],
                   "min_requests": 2, "rounds": 1},
    "instances": {"roles": ["chat"], "layouts": ["2 instances"], "concurrency": [2, 4], "min_requests": 8,
                  "rounds": 1, "words": 16, "output_tokens": 4, "memory_share": None},
    "rerank_concurrency": {"documents": [4], "document_words": 16, "concurrency": [1, 4], "min_requests": 4,
                           "rounds": 1, "plan_pairs_s": 100},
}


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    require(python_imports("import vllm, aiohttp"), "vLLM", VLLM_HOW)
    root = tmp_path_factory.mktemp("tuning")
    # vLLM's own process layout where it is measured: --api-server-count needs the engine core apart from the API
    # servers, and the instances' figures sample both. The others start faster with the engine in the API server.
    # Two servers start together: a start-up is mostly one core's imports.
    sizes = SIZES | {"colocate": 2}
    run_measure(root, "tuning-cpu", "tuning_ladder", "instances", sizes=sizes, worker_in_engine=False)
    run_measure(root, "tuning-cpu", "max_model_len", "spec_ngram", "rerank_concurrency", sizes=sizes)
    from measure.site.scan import make_store

    store = make_store(root / "data")
    return root, store, store.env("tuning-cpu")


def test_the_ladder_keeps_each_rungs_flags_and_compares_it_with_the_one_before(measured):
    root, store, env = measured
    rungs = store.frame(env, "tuning_ladder.rungs").sort_values("step")
    assert list(rungs["rung"]) == ["defaults", "api-servers"] and rungs["started"].all()
    assert pd.isna(rungs.iloc[0]["flags"]) and rungs.iloc[1]["flags"] == "--api-server-count 4"
    # every request opens with the same system prompt: the prefix cache (on by default) serves part of the prompts
    assert (rungs["prefix_hit_share"] > 0).all(), rungs["prefix_hit_share"]
    assert (rungs["ttft_p99_ms"] >= rungs["ttft_p50_ms"]).all() and (rungs["tpot_p99_ms"] >= rungs["tpot_p50_ms"]).all()
    gains = store.frame(env, "tuning_ladder.gains")
    assert sorted(gains["metric"]) == sorted(["output throughput", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99"])
    assert set(gains["verdict"]) <= {"better", "worse", "no measurable change"} and (gains["previous"] == "defaults").all()
    throughput = gains[gains["metric"] == "output throughput"].iloc[0]
    mine, before = rungs.iloc[1], rungs.iloc[0]
    assert throughput["ratio"] == pytest.approx(mine["output_tok_s"] / before["output_tok_s"])
    # one round per rung: the range is the round itself, so the verdict follows the medians' order
    assert throughput["verdict"] == ("better" if mine["output_tok_s"] > before["output_tok_s"] else "worse")
    best = store.frame(env, "tuning_ladder.best").iloc[0]
    assert (best["best_added"] == "--api-server-count 4") == (throughput["verdict"] == "better")
    servers = json.loads((root / "data" / "tuning-cpu" / "provenance.json").read_text())["servers"]
    commands = [s["command"] for name, s in servers.items() if name.startswith("ladder-")]
    assert len(commands) == 2 and all("vllm.entrypoints.cli.main" in c[2] and c[3] == "serve" for c in commands)


def test_max_model_len_sets_the_longest_request_not_the_kv_cache(measured):
    _, store, env = measured
    lengths = store.frame(env, "max_model_len.settings").set_index("max_model_len")
    assert lengths.loc["512", "context_tokens"] == 512
    assert lengths.loc["model's own", "context_tokens"] > 512
    # the CPU backend's cache is a set size (VLLM_CPU_KVCACHE_SPACE): the same tokens at either setting
    assert lengths.loc["512", "kv_cache_tokens"] == lengths.loc["model's own", "kv_cache_tokens"]
    assert lengths["max_concurrency"].notna().all() and (lengths["output_tok_s"] > 0).all()


def test_ngram_speculation_is_bracketed_by_greedy_and_sampled_dummy_output(measured):
    _, store, env = measured
    spec = store.frame(env, "spec_ngram.compare").set_index(["speculation", "sampling"])
    assert spec.loc[("none", "greedy"), "started"] and pd.isna(spec.loc[("none", "greedy"), "draft_tokens_per_output"])
    greedy, sampled = spec.loc[("ngram", "greedy")], spec.loc[("ngram", "sampled")]
    if not greedy["started"]:
        assert greedy["error"], "a refused start keeps vLLM's reason"
        return
    # greedy dummy output repeats itself, so the lookup finds drafts; random tokens seldom give it one
    assert greedy["draft_tokens_per_output"] > 0 and 0 <= greedy["acceptance"] <= 1
    drafted_sampled = 0 if pd.isna(sampled["draft_tokens_per_output"]) else sampled["draft_tokens_per_output"]
    assert drafted_sampled < greedy["draft_tokens_per_output"], (greedy, sampled)


def test_a_reranker_under_concurrency(measured):
    _, store, env = measured
    load = store.frame(env, "rerank_concurrency.load").sort_values("concurrency")
    assert list(load["concurrency"]) == [1, 4] and (load["documents"] == 4).all()
    assert (load["pairs_per_s"] > 0).all() and (load["pair_tokens"] > 16).all()
    assert (load["latency_p99_ms"] >= load["latency_p50_ms"]).all()


def test_instances_are_loaded_together_and_each_process_is_sampled(measured):
    root, store, env = measured
    # two load points: the load generators' workers outlive the first (they end with the thread that started them)
    load = store.frame(env, "instances.load").set_index("concurrency")
    assert sorted(load.index) == [2, 4] and (load["layout"] == "2 instances").all() and (load["instances"] == 2).all()
    assert (load["tokens_per_s"] > 0).all() and load[["api_cpu", "engine_cpu", "engine_cpu_max"]].notna().all().all()
    # two engines together did at least the work of the busier one alone
    assert (load["engine_cpu"] >= load["engine_cpu_max"]).all()
    provenance = json.loads((root / "data" / "tuning-cpu" / "provenance.json").read_text())
    behind = provenance["datasets"]["instances.load"]["servers"]
    instances = sorted(provenance["servers"][name]["env"].get("MEASURE_INSTANCE") for name in behind)
    assert instances == ["0", "1"], "the 2-instance layout is two servers, told apart by their instance number"

