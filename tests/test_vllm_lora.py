"""The LoRA experiment end to end on a real vLLM (CPU backend, tiny Qwen3, random peft adapters)."""

import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

pytestmark = pytest.mark.vllm


def test_lora_datasets(tmp_path):
    require(python_imports("import vllm, peft"), "vLLM and peft", VLLM_HOW)
    out = run_measure(tmp_path, "lora-cpu", "lora", sizes={"lora_requests": 8, "repeats": 2, "colocate": 2})
    assert "workload sizes replaced by MEASURE_SIZES" in out
    from measure.site.scan import make_store

    store = make_store(tmp_path / "data")
    env_ = store.env("lora-cpu")
    overhead = store.frame(env_, "lora.overhead")
    assert sorted(overhead["rank"].unique()) == [8, 16, 64] and set(overhead["metric"]) == {"throughput", "ttft"}
    assert (overhead["base_value"] > 0).all() and (overhead["adapter_value"] > 0).all()
    assert (overhead["repeats"] == 2).all() and (overhead["base_min"] <= overhead["base_max"]).all()
    slots = store.frame(env_, "lora.slots")
    assert sorted(slots["adapters"]) == [1, 2, 4, 8] and (slots["tokens_per_s"] > 0).all()
    compat = store.frame(env_, "lora.compat")
    assert len(compat) == 1  # started or refused: either is the recorded answer
    row = compat.iloc[0]
    if row["started"] and row["adapter_request_ok"]:  # then /metrics says whether speculation ran for it
        assert 0 <= row["accepted_tokens"] <= row["draft_tokens"]
