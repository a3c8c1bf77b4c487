"""On a real vLLM (CPU backend): the pooling roofline and memory settings, embeddings batched in one request against
requests in flight, reranking longer documents, and `--only-missing` re-measuring one dataset while the others keep
their provenance."""

import json

import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

# Its assertions compare rates and latencies: alone, after the rest. Beside another test's vLLM, 16 inputs a request
# once embedded only 1.33 times as many inputs a second as one input a request (alone: about 12 times).
pytestmark = [pytest.mark.vllm, pytest.mark.timing]


EMBEDDING_BATCHING = {"input_words": [16], "inputs_per_request": [1, 16], "concurrency": [1, 4], "min_requests": 8,
                      "max_round_tokens": 1 << 16, "rounds": 1}
RERANK_DOCUMENTS = {"document_words": [64, 512], "documents": [4], "requests": 3, "warmup": 1}
SIZES = {"embedding_batching": EMBEDDING_BATCHING, "rerank_documents": RERANK_DOCUMENTS, "repeats": 2,
         "colocate": 2}  # two servers may start at once


def measure(tmp_path, *args):
    return run_measure(tmp_path, "limits-cpu", *args, sizes=SIZES)


def test_pooling_limits_batching_and_reranking(tmp_path):
    require(python_imports("import vllm"), "vLLM", VLLM_HOW)
    measure(tmp_path, "pooling_limits", "embedding_batching", "rerank_documents")
    from measure.site.scan import make_store

    store = make_store(tmp_path / "data")
    env = store.env("limits-cpu")

    batching = store.frame(env, "embedding_batching.grid").set_index(["inputs_per_request", "concurrency"])
    assert len(batching) == 4 and (batching["tokens_per_input"] >= 16).all()
    assert ((batching["tokens_per_s"] - batching["inputs_per_s"] * batching["tokens_per_input"]).abs()
            < 1e-6 * batching["tokens_per_s"]).all()  # one round each: the same round counted in inputs and in tokens
    # sixteen inputs in one request embed far more per second than one input per request, one request at a time
    assert batching.loc[(16, 1), "inputs_per_s"] > 2 * batching.loc[(1, 1), "inputs_per_s"]
    assert (batching["requests"] == [8, 8, 8, 8]).all()
    datasets = json.loads((tmp_path / "data" / "limits-cpu" / "provenance.json").read_text())["datasets"]
    assert set(datasets["embedding_batching.grid"]["servers"]) <= set(datasets["pooling_limits.roofline"]["servers"]), \
        "the same pooling server as the roofline's (and the fidelity check's): one name, one set of flags"

    rerank = store.frame(env, "rerank_documents.latency").set_index("document_words")
    assert set(rerank["documents"]) == {4} and (rerank["requests"] == 3).all()
    # the query and the template are the same in every pair: 448 more words are about 448 more tokens (one a word)
    assert 400 < rerank.loc[512, "document_tokens"] - rerank.loc[64, "document_tokens"] < 520
    assert rerank.loc[512, "latency_p50_ms"] > rerank.loc[64, "latency_p50_ms"]
    assert (rerank["pairs_per_s"] * rerank["latency_p50_ms"] / 1000 - 4).abs().max() < 0.5  # documents ÷ latency

    peak = store.frame(env, "pooling_limits.matmul_peak")
    assert len(peak) == 1 and peak["tflops"].iloc[0] > 0 and peak["dtype"].iloc[0] in {"bfloat16", "float32"}
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
