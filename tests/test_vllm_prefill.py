"""The prefill experiment end to end on a real vLLM (CPU backend, tiny Qwen3): prefix-cache hits against misses,
prompt length, and short requests beside one long prompt."""

import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

pytestmark = [pytest.mark.vllm, pytest.mark.timing]  # a cache hit's TTFT against a miss's: alone, after the rest

SIZES = {"prefix_tokens": [1024], "prompt_tokens": [128, 2048], "batched_tokens": [256, 2048], "rounds": 1,
         "sequential": 3, "batch": 4, "concurrency": 2, "output_tokens": 4,
         "short": {"requests": 4, "concurrency": 2, "words": 32, "output_tokens": 8}, "long_tokens": 2048}


def test_prefill_datasets(tmp_path):
    require(python_imports("import vllm"), "vLLM", VLLM_HOW)
    run_measure(tmp_path, "prefill-cpu", "prefill", sizes={"prefill": SIZES, "colocate": 3})
    from measure.site.scan import make_store

    store = make_store(tmp_path / "data")
    env_ = store.env("prefill-cpu")
    cache = store.frame(env_, "prefill.prefix_cache").set_index(["caching", "case"])
    assert len(cache) == 4 and (cache["prompt_tokens"] > 1024).all()
    # a hit recomputes only the question after a 1,024-token prefix: its first token comes well before a miss's
    assert cache.loc[("on", "hit"), "ttft_ms"] < 0.8 * cache.loc[("on", "miss"), "ttft_ms"]
    long = store.frame(env_, "prefill.long_prompt").set_index(["max_num_batched_tokens", "prompt_tokens"])
    assert sorted(long.index) == [(256, 128), (256, 2048), (2048, 128), (2048, 2048)]
    assert (long["measured_prompt_tokens"] >= long.index.get_level_values("prompt_tokens")).all()
    assert long.loc[(256, 2048), "ttft_ms"] > long.loc[(256, 128), "ttft_ms"]
    beside = store.frame(env_, "prefill.interference").set_index(["max_num_batched_tokens", "long_prompt"])
    assert beside["long_prompt_tokens"].notna().tolist() == [lp == "beside" for _, lp in beside.index]
    assert (beside["itl_p50_ms"] <= beside["itl_p99_ms"]).all() and (beside["itl_p99_ms"] <= beside["itl_max_ms"]).all()
