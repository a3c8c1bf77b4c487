"""On a real vLLM (CPU backend): our client against `vllm bench serve`, the pooling roofline and memory
settings, embeddings batched in one request against requests in flight (on the fidelity check's embedding server),
reranking longer documents, and `--only-missing` re-measuring one dataset while the others keep their provenance."""

import json

import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

from measure.experiments.fidelity import CPU_SIZES

pytestmark = pytest.mark.vllm


# Two rounds of fewer requests at one load point per workload (each point runs `vllm bench serve` once a round, and
# each run imports vLLM): what is checked is how each figure is measured and recorded, not its value.
FIDELITY = CPU_SIZES | {"rounds": 2, "warmup": 1, "chat_points": ((16, 32),), "embed_points": ((8, 64),),
                        "ceiling": CPU_SIZES["ceiling"] | {"requests": 256, "embed_requests": 256,
                                                           "paced": CPU_SIZES["ceiling"]["paced"] | {"requests": 32}}}
EMBEDDING_BATCHING = {"input_words": [16], "inputs_per_request": [1, 16], "concurrency": [1, 4], "min_requests": 8,
                      "max_round_tokens": 1 << 16, "rounds": 1}
RERANK_DOCUMENTS = {"document_words": [64, 512], "documents": [4], "requests": 3, "warmup": 1}
SIZES = {"fidelity": FIDELITY, "embedding_batching": EMBEDDING_BATCHING, "rerank_documents": RERANK_DOCUMENTS, "repeats": 2,
         "colocate": 2}  # two servers may start at once


def measure(tmp_path, *args):
    return run_measure(tmp_path, "limits-cpu", *args, sizes=SIZES)


def test_fidelity_and_pooling_limits(tmp_path):
    require(python_imports("import vllm, aiohttp"), "vLLM (with vllm bench serve)", VLLM_HOW)
    measure(tmp_path, "fidelity", "pooling_limits", "embedding_batching", "rerank_documents")
    from measure.site.scan import make_store

    store = make_store(tmp_path / "data")
    env = store.env("limits-cpu")

    comparison = store.frame(env, "fidelity.comparison").set_index(["workload", "concurrency", "metric"])
    points = {("chat", 16), ("embeddings", 8)}
    assert {(w, c) for w, c, _ in comparison.index} == points
    for workload, concurrency in points:
        metric = "output throughput" if workload == "chat" else "request throughput"
        row = comparison.loc[(workload, concurrency, metric)]
        assert row["harness"] > 0 and row["bench"] > 0 and row["rounds"] == FIDELITY["rounds"]
        assert row["harness_min"] <= row["harness"] <= row["harness_max"]
        assert row["bench_min"] <= row["bench"] <= row["bench_max"]
        assert row["ratio"] == pytest.approx(row["harness"] / row["bench"])
        # every side's CPU share was measured over its own timed window
        assert 0 < row["harness_worker_cpu_max"] < 1.5 and 0 < row["bench_cpu_share"] < 1.5
        assert 0 < row["api_server_cpu_share"] < 1.5
    # Same server, same prompts, same load: the two tools cannot disagree by a factor of two on throughput.
    assert 0.5 < comparison.loc[("chat", 16, "output throughput"), "ratio"] < 2
    # the bench's definitions: TTFT counts the role-only message, so TTFT ≤ end-to-end for both tools
    assert comparison.loc[("chat", 16, "TTFT median"), "harness"] < comparison.loc[("chat", 16, "end-to-end median"), "harness"]
    engine = store.frame(env, "fidelity.engine_view")
    assert len(engine) == 2 * len(points) and (engine["engine_ttft_ms"] > 0).all()
    assert (engine[engine["workload"] == "chat"]["engine_itl_ms"] > 0).all()
    workloads = store.frame(env, "fidelity.workloads").set_index(["workload", "concurrency"])
    assert "bench serve" in workloads.loc[("chat", 16), "bench_command"] and workloads.loc[("chat", 16), "output_tokens"] > 0
    assert str(tmp_path) not in workloads.loc[("chat", 16), "bench_command"]  # no temporary paths in published data
    ceiling = store.frame(env, "fidelity.client_ceiling")
    assert set(ceiling["workers"]) == {1, 2} and (ceiling["request_per_s"] > 0).all()
    assert set(ceiling["limited_by"]) <= {"client", "synthetic server", "neither"}
    paced = ceiling[ceiling["mode"] == "paced"]
    assert (paced["itl_median_ms"] > paced["chunk_gap_ms"] * 0.8).all()  # the pause between chunks is what it reads
    # the ceiling ran against no vLLM: its provenance names no server
    provenance = json.loads((tmp_path / "data" / "limits-cpu" / "provenance.json").read_text())
    assert provenance["datasets"]["fidelity.client_ceiling"]["servers"] == []

    batching = store.frame(env, "embedding_batching.grid").set_index(["inputs_per_request", "concurrency"])
    assert len(batching) == 4 and (batching["tokens_per_input"] >= 16).all()
    assert ((batching["tokens_per_s"] - batching["inputs_per_s"] * batching["tokens_per_input"]).abs()
            < 1e-6 * batching["tokens_per_s"]).all()  # one round each: the same round counted in inputs and in tokens
    # sixteen inputs in one request embed far more per second than one input per request, one request at a time
    assert batching.loc[(16, 1), "inputs_per_s"] > 2 * batching.loc[(1, 1), "inputs_per_s"]
    assert (batching["requests"] == [8, 8, 8, 8]).all()
    datasets = json.loads((tmp_path / "data" / "limits-cpu" / "provenance.json").read_text())["datasets"]
    assert set(datasets["embedding_batching.grid"]["servers"]) <= set(datasets["fidelity.comparison"]["servers"]), \
        "the same pooling server: no second start"

    rerank = store.frame(env, "rerank_documents.latency").set_index("document_words")
    assert set(rerank["documents"]) == {4} and (rerank["requests"] == 3).all()
    # the query and the template are the same in every pair: 448 more words are about 448 more tokens (one a word)
    assert 400 < rerank.loc[512, "document_tokens"] - rerank.loc[64, "document_tokens"] < 520
    assert rerank.loc[512, "latency_p50_ms"] > rerank.loc[64, "latency_p50_ms"]
    assert (rerank["pairs_per_s"] * rerank["latency_p50_ms"] / 1000 - 4).abs().max() < 0.5  # documents ÷ latency

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
