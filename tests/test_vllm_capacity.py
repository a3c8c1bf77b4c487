"""The capacity and kv_dtype experiments end to end on a real vLLM (CPU backend, tiny Qwen3): a KV cache of a set
size fills, and requests then queue; an fp8 cache holds twice the tokens of the same bytes."""

import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

pytestmark = pytest.mark.vllm

CAPACITY = {"bandwidth_mib": 64, "floor": {"prompt_words": 16, "output_tokens": 16, "requests": 2, "rounds": 1},
            "memory": {"flag": "--kv-cache-memory-bytes", "full": [str(4 << 20)], "facts_only": []},
            "knee": {"prompt_words": 512, "output_tokens": 16, "concurrency": [4, 32], "rounds": 1}}
KV_DTYPE = {"dtypes": ["auto", "fp8"], "prompt_tokens": [128], "output_tokens": 8, "sequential": 2, "rounds": 1,
            "concurrency": 4, "requests": 4, "shared_memory": []}


def test_a_full_kv_cache_queues_requests_and_fp8_holds_twice_the_tokens(tmp_path):
    require(python_imports("import vllm"), "vLLM", VLLM_HOW)
    run_measure(tmp_path, "capacity-cpu", "capacity", "kv_dtype", sizes={"capacity": CAPACITY, "kv_dtype": KV_DTYPE, "colocate": 3})
    from measure.site.scan import make_store

    store = make_store(tmp_path / "data")
    env = store.env("capacity-cpu")
    bandwidth = store.frame(env, "capacity.bandwidth").iloc[0]
    assert bandwidth["bandwidth_gb_s"] > 0.5 and bandwidth["buffer_mib"] == 64
    floor = store.frame(env, "capacity.decode_floor").iloc[0]
    assert floor["model"] == "tiny-Qwen3-0.6B" and 0 < floor["floor_ms"] < floor["tpot_ms"]
    assert floor["floor_ms"] == pytest.approx(floor["weight_gb"] / floor["bandwidth_gb_s"] * 1000)
    memory = store.frame(env, "capacity.memory").iloc[0]
    # 4 MiB of a two-layer, one-KV-head, 64-wide cache: 512 bytes a token
    assert memory["started"] and memory["kv_cache_tokens"] == (4 << 20) // 512
    assert memory["request_tokens"] > 512 and memory["requests_fit"] == pytest.approx(8192 / memory["request_tokens"])
    knee = store.frame(env, "capacity.knee").set_index("concurrency")
    assert memory["requests_fit"] < 32 < knee.loc[32, "requests"] + 1
    # beyond what the cache holds, requests wait for room: their first token comes much later
    assert knee.loc[32, "ttft_p50_ms"] > 3 * knee.loc[4, "ttft_p50_ms"]
    kv = store.frame(env, "kv_dtype.compare").set_index("kv_cache_dtype")
    assert kv["started"].all() and kv.loc["fp8", "kv_cache_tokens"] == 2 * kv.loc["auto", "kv_cache_tokens"]
    assert (kv["ttft_ms"] > 0).all() and (kv["tpot_ms"] > 0).all()
