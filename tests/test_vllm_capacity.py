"""The capacity, kv_dtype and batch_limits experiments end to end on a real vLLM (CPU backend, tiny Qwen3), in one
run: a KV cache of a set size fills, and requests then queue; an fp8 cache holds twice the tokens of the same bytes
(where the CPU can run one: AVX-512 or AMX); a --max-num-seqs below the requests in flight makes the others wait for
their first token."""

import pandas as pd
import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

pytestmark = [pytest.mark.vllm, pytest.mark.timing]  # TTFT against step time, decode against its floor: alone, after the rest

CAPACITY = {"bandwidth_mib": 64, "floor": {"prompt_words": 16, "output_tokens": 16, "requests": 2, "rounds": 1,
                                          "roles": ["chat", "chat_large"], "large_args": ["--max-model-len", "1024"]},
            "memory": {"flag": "--kv-cache-memory-bytes", "full": [str(4 << 20)], "facts_only": []},
            "knee": {"prompt_words": 512, "output_tokens": 16, "concurrency": [4, 32], "rounds": 1}}
KV_DTYPE = {"dtypes": ["auto", "fp8"], "prompt_tokens": [128], "output_tokens": 8, "sequential": 2, "rounds": 1,
            "concurrency": 4, "requests": 4, "shared_memory": []}
# 64 output tokens: with 16, the prefills the two settings share were most of a request, and the 4th request's wait
# under --max-num-seqs 1 came out 1.97x, not 2x, beside another test's vLLM in CI
BATCH_LIMITS = {"max_num_seqs": [1, 4], "max_num_batched_tokens": [512], "prompt_words": 256, "output_tokens": 64,
                "concurrency": 4, "requests": 8, "rounds": 1, "shared_memory": []}


def cpu_runs_fp8_kv_cache() -> bool:
    # vLLM's CPU backend runs an fp8 KV cache only on x86 with AVX-512 or AMX (an AVX2-only EPYC refuses it)
    from measure.harness.provenance import cpu_extensions

    return bool({"avx512f", "amx_tile"} & set(cpu_extensions()))


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    require(python_imports("import vllm"), "vLLM", VLLM_HOW)
    root = tmp_path_factory.mktemp("capacity")
    run_measure(root, "capacity-cpu", "capacity", "kv_dtype", "batch_limits",
                sizes={"capacity": CAPACITY, "kv_dtype": KV_DTYPE, "batch_limits": BATCH_LIMITS, "colocate": 3})
    from measure.site.scan import make_store

    return make_store(root / "data")


def test_a_full_kv_cache_queues_requests_and_fp8_holds_twice_the_tokens(measured):
    env = measured.env("capacity-cpu")
    bandwidth = measured.frame(env, "capacity.bandwidth").iloc[0]
    assert bandwidth["bandwidth_gb_s"] > 0.5 and bandwidth["buffer_mib"] == 64
    floors = measured.frame(env, "capacity.decode_floor").set_index("model")
    assert set(floors.index) == {"tiny-Qwen3-0.6B", "Qwen3-0.6B"}
    for _, floor in floors.iterrows():
        assert floor["floor_ms"] > 0
        assert floor["floor_ms"] == pytest.approx(floor["weight_gb"] / floor["bandwidth_gb_s"] * 1000)
        # a step faster than the floor records no time beyond it (the row's floor share shows it)
        if floor["tpot_ms"] < floor["floor_ms"]:
            assert pd.isna(floor["beyond_floor_ms"]) and floor["floor_share_pct"] > 100
        else:
            assert floor["beyond_floor_ms"] == pytest.approx(floor["tpot_ms"] - floor["floor_ms"])
    # the full-size model reads ~30x the tiny one's weights a step: its floor, and its time per token, are longer.
    # Its 1.2 GB are no CPU cache's, so its steps cannot beat the copy's floor; the tiny model's 40 MB may sit in a
    # large L3 cache and be read faster than a copy through main memory (CI hosts: 2.3 ms a step, 4.4 ms "floor").
    tiny, full = floors.loc["tiny-Qwen3-0.6B"], floors.loc["Qwen3-0.6B"]
    assert full["floor_ms"] < full["tpot_ms"]
    assert full["weight_gb"] > 20 * tiny["weight_gb"] and full["tpot_ms"] > tiny["tpot_ms"]
    memory = measured.frame(env, "capacity.memory").iloc[0]
    # 4 MiB of a two-layer, one-KV-head, 64-wide cache: 512 bytes a token
    assert memory["started"] and memory["kv_cache_tokens"] == (4 << 20) // 512
    assert memory["request_tokens"] > 512 and memory["requests_fit"] == pytest.approx(8192 / memory["request_tokens"])
    knee = measured.frame(env, "capacity.knee").set_index("concurrency")
    assert memory["requests_fit"] < 32 < knee.loc[32, "requests"] + 1
    # beyond what the cache holds, requests wait to be scheduled: at 32 in flight the mean wait is many decode steps;
    # below it they are scheduled at once. Each side is one round's own ratio (a busy neighbour in CI slows the whole
    # round; a ratio across rounds failed that way once). Measured here: 1,593 ms = 22 steps; 0.02 of 172 ms.
    assert knee.loc[32, "queue_ms"] > 5 * knee.loc[32, "tpot_p50_ms"]
    assert knee.loc[4, "queue_ms"] < 0.1 * knee.loc[4, "ttft_p50_ms"]
    kv = measured.frame(env, "kv_dtype.compare").set_index("kv_cache_dtype")
    assert kv.loc["auto", "started"] and kv.loc["auto", "ttft_ms"] > 0 and kv.loc["auto", "tpot_ms"] > 0
    if cpu_runs_fp8_kv_cache():
        assert kv.loc["fp8", "started"] and kv.loc["fp8", "kv_cache_tokens"] == 2 * kv.loc["auto", "kv_cache_tokens"]
        assert kv.loc["fp8", "ttft_ms"] > 0 and kv.loc["fp8", "tpot_ms"] > 0
    else:  # a server this CPU cannot run is published as a finding, with vLLM's reason, and nothing measured
        fp8 = kv.loc["fp8"]
        assert not fp8["started"] and "AVX-512" in fp8["error"]
        assert fp8[["kv_cache_tokens", "ttft_ms", "tpot_ms", "output_tok_s"]].isna().all()


def test_one_sequence_at_a_time_makes_the_other_requests_wait(measured):
    grid = measured.frame(measured.env("capacity-cpu"), "batch_limits.grid").set_index("max_num_seqs")
    assert grid["started"].all() and set(grid["max_num_batched_tokens"]) == {512}
    assert (grid["prompt_tokens"] > 256).all() and (grid["preemptions"] == 0).all()
    # with --max-num-seqs 1 the 4th request in flight waits for three others to finish (3 × 64 decode steps) before
    # its first token: compared with the same round's step time (a ratio across rounds failed in CI, 1.5x for 2x asked,
    # when a neighbour's vLLM slowed one round and not the other)
    # (measured alone: 1,891 ms = 203 steps; with --max-num-seqs 4 all four start together: 131 ms = 6 steps)
    assert grid.loc[1, "ttft_p99_ms"] > 32 * grid.loc[1, "tpot_p50_ms"]
    assert grid.loc[4, "ttft_p99_ms"] < 32 * grid.loc[4, "tpot_p50_ms"]
    # more sequences a step: a round's output rate × its step time is the tokens each step produced, about 1 with one
    # sequence and several with four. Within one round each, as above (comparing the two rounds' throughput failed in
    # CI: 29 tok/s with 4 against 82 with 1, when a neighbour's vLLM slowed the round of 4)
    tokens_per_step = grid["output_tok_s"] * grid["tpot_p50_ms"] / 1000
    assert tokens_per_step[1] < 1.5 and tokens_per_step[4] > 2, tokens_per_step.to_dict()
    assert (grid["tpot_p50_ms"] <= grid["tpot_p99_ms"]).all() and (grid["ttft_p50_ms"] <= grid["ttft_p99_ms"]).all()
