"""On a real vLLM (CPU backend): our client against `vllm bench serve` on the same server, prompts and load, and the
client's own ceiling against a synthetic server."""

import json

import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

from measure.experiments.fidelity import CPU_SIZES

pytestmark = [pytest.mark.vllm, pytest.mark.timing]  # two clients timed against each other: alone, after the rest


# Two rounds of fewer requests at one load point per workload (each point runs `vllm bench serve` once a round, and
# each run imports vLLM): what is checked is how each figure is measured and recorded, not its value.
FIDELITY = CPU_SIZES | {"rounds": 2, "warmup": 1, "chat_points": ((16, 32),), "embed_points": ((8, 64),),
                        "ceiling": CPU_SIZES["ceiling"] | {"requests": 256, "embed_requests": 256,
                                                           "paced": CPU_SIZES["ceiling"]["paced"] | {"requests": 32}}}
SIZES = {"fidelity": FIDELITY, "repeats": 2, "colocate": 2}  # two servers may start at once


def test_our_client_against_vllm_bench_serve(tmp_path):
    require(python_imports("import vllm, aiohttp"), "vLLM (with vllm bench serve)", VLLM_HOW)
    run_measure(tmp_path, "fidelity-cpu", "fidelity", sizes=SIZES)
    from measure.site.scan import make_store

    store = make_store(tmp_path / "data")
    env = store.env("fidelity-cpu")

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
    provenance = json.loads((tmp_path / "data" / "fidelity-cpu" / "provenance.json").read_text())
    assert provenance["datasets"]["fidelity.client_ceiling"]["servers"] == []
