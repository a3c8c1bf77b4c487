"""The LoRA experiment end to end on a real vLLM (CPU backend, tiny Qwen3, random peft adapters)."""

import os
import subprocess
import sys

import pytest
from conftest import REPO, VLLM_HOW, python_imports, require

pytestmark = pytest.mark.vllm


def test_lora_datasets(tmp_path):
    require(python_imports("import vllm, peft"), "vLLM and peft", VLLM_HOW)
    env = os.environ | {"MEASURE_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200"}
    run = subprocess.run(
        [sys.executable, "-m", "measure", "--data-root", str(tmp_path / "data"), "run", "lora", "--profile", "cpu",
         "--env", "lora-cpu"], cwd=REPO, env=env, capture_output=True, text=True, timeout=1500,
    )
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-5000:]
    from measure.site.scan import make_store

    store = make_store(tmp_path / "data")
    env_ = store.env("lora-cpu")
    overhead = store.frame(env_, "lora.overhead")
    assert sorted(overhead["rank"].unique()) == [8, 16, 64] and set(overhead["metric"]) == {"throughput", "ttft"}
    assert (overhead["base_value"] > 0).all() and (overhead["adapter_value"] > 0).all()
    slots = store.frame(env_, "lora.slots")
    assert sorted(slots["adapters"]) == [1, 2, 4, 8] and (slots["tokens_per_s"] > 0).all()
    compat = store.frame(env_, "lora.compat")
    assert len(compat) == 1  # started or refused: either is the recorded answer
