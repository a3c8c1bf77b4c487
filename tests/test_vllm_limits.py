"""On a real vLLM (CPU backend): our client against `vllm bench serve`, the pooling roofline and memory
settings, and `--only-missing` re-measuring one dataset while the others keep their provenance."""

import json

import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

pytestmark = pytest.mark.vllm


def measure(tmp_path, *args):
    return run_measure(tmp_path, "limits-cpu", *args)


def test_fidelity_and_pooling_limits(tmp_path):
    require(python_imports("import vllm, aiohttp"), "vLLM (with vllm bench serve)", VLLM_HOW)
    measure(tmp_path, "fidelity", "pooling_limits")
    from measure.site.scan import make_store

    store = make_store(tmp_path / "data")
    env = store.env("limits-cpu")

    comparison = store.frame(env, "fidelity.comparison").set_index(["workload", "metric"])
    for workload, metric in (("chat", "output throughput"), ("chat", "TTFT median"), ("embeddings", "request throughput")):
        row = comparison.loc[(workload, metric)]
        assert row["harness"] > 0 and row["bench"] > 0
        assert row["ratio"] == pytest.approx(row["harness"] / row["bench"])
    # Same server, same prompts, same load: the two tools cannot disagree by a factor of two on throughput.
    assert 0.5 < comparison.loc[("chat", "output throughput"), "ratio"] < 2
    workloads = store.frame(env, "fidelity.workloads").set_index("workload")
    assert "bench serve" in workloads.loc["chat", "bench_command"] and workloads.loc["chat", "output_tokens"] > 0

    peak = store.frame(env, "pooling_limits.matmul_peak")
    assert len(peak) == 1 and peak["tflops"].iloc[0] > 0
    roofline = store.frame(env, "pooling_limits.roofline")
    assert set(roofline["batch_size"]) == {1, 16, 64}
    expected = roofline["tokens_per_s"] * 2 * roofline["matmul_params"] / 1e12 / peak["tflops"].iloc[0] * 100
    assert (roofline["peak_share_pct"] - expected).abs().max() < 1e-6
    # The engine's time is part of what the client waited for.
    assert (roofline["engine_ms"] > 0).all() and (roofline["engine_ms"] <= roofline["client_ms"]).all()
    memory = store.frame(env, "pooling_limits.memory").sort_values("kv_cache_gib")
    assert list(memory["setting"]) == [f"VLLM_CPU_KVCACHE_SPACE={g}" for g in (1, 2, 4)]
    assert memory["kv_cache_tokens"].is_monotonic_increasing and (memory["tokens_per_s"] > 0).all()

    # --only-missing: drop one dataset; only it is measured again (no server start), the others stay as they were.
    published = tmp_path / "data" / "limits-cpu"
    roofline_before = (published / "pooling_limits.roofline.csv").read_bytes()
    provenance = json.loads((published / "provenance.json").read_text())
    roofline_date = provenance["datasets"]["pooling_limits.roofline"]["date"]
    (published / "pooling_limits.matmul_peak.csv").unlink()
    out = measure(tmp_path, "pooling_limits", "--only-missing")
    assert "keeps 2 published dataset(s)" in out and "starting vLLM" not in out
    assert (published / "pooling_limits.matmul_peak.csv").is_file()
    assert (published / "pooling_limits.roofline.csv").read_bytes() == roofline_before
    provenance = json.loads((published / "provenance.json").read_text())
    assert provenance["datasets"]["pooling_limits.roofline"]["date"] == roofline_date
    assert "partial" in provenance["experiments"]["pooling_limits"]
    # A partial record never counts as up to date: a plain run plans the whole experiment again.
    out = measure(tmp_path, "pooling_limits", "--dry-run")
    assert "will run" in out
