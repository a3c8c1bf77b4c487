"""--api-server-count on a real vLLM (CPU backend, tiny models), started through `vllm serve`: the processes it
left are the ones asked for, and each round's CPU shares of the API servers and the engine core are recorded. On the
same two-API-server server, our client against `vllm bench serve` in alternating pairs of rounds, with a confidence
interval of their ratio."""

import json

import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

pytestmark = pytest.mark.vllm

# chat only (the embedding servers take the same path; `nox -s measure` runs them): one and two API servers; the
# fidelity interval at one point, on the two-API-server server api_servers starts (no start of its own)
POINT = {"point": "high load", "concurrency": 4, "api_server_count": 2, "requests": 8}
SIZES = {"api_servers": {"roles": ["chat"], "counts": [1, 2], "concurrency": [4], "min_requests": 8, "rounds": 1,
                         "words": 16, "output_tokens": 4},
         "fidelity_interval": {"points": [POINT], "words": 16, "output_tokens": 16, "rounds": 3, "workers": 1},
         "colocate": 2}


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    require(python_imports("import vllm, aiohttp, scipy"), "vLLM (with vllm bench serve) and scipy", VLLM_HOW)
    root = tmp_path_factory.mktemp("api")
    run_measure(root, "api-cpu", "api_servers", "fidelity_interval", sizes=SIZES, worker_in_engine=False)
    from measure.site.scan import make_store

    return root, make_store(root / "data")


def test_api_server_count_takes_effect_through_vllm_serve(measured):
    root, store = measured
    load = store.frame(store.env("api-cpu"), "api_servers.load")
    assert sorted(zip(load["workload"], load["api_server_count"], strict=True)) == [("chat", 1), ("chat", 2)]
    # vllm serve acts on the flag: as many API-server processes as asked, beside one engine core
    assert (load["api_processes"] == load["api_server_count"]).all(), load[["api_server_count", "processes"]]
    assert load["processes"].str.contains("EngineCore×1").all() and load["processes"].str.contains("Worker×1").all()
    # every process's CPU is read for every row (a round without a sample would leave it empty); an idle engine core
    # can read 0 over a short round on two busy cores (/proc counts 10 ms ticks: CI saw 0.0 beside 0.10), so one
    # row must show it working, not every row
    assert load[["api_cpu", "engine_cpu"]].notna().all().all(), load[["api_server_count", "api_cpu", "engine_cpu"]]
    assert (load["api_cpu"] > 0).all() and (load["engine_cpu"] > 0).any() and (load["tokens_per_s"] > 0).all()
    assert (load["api_cpu_max"] <= load["api_cpu"] + 1e-9).all()
    assert load["ttft_p50_ms"].notna().all() and load["itl_p50_ms"].notna().all()
    provenance = json.loads((root / "data" / "api-cpu" / "provenance.json").read_text())
    commands = [s["command"] for name, s in provenance["servers"].items() if name.startswith("api-")]
    assert len(commands) == 2 and all("vllm.entrypoints.cli.main" in c[2] and c[3] == "serve" for c in commands)


def test_the_fidelity_ratio_has_a_confidence_interval_from_paired_rounds(measured):
    root, store = measured
    ratio = store.frame(store.env("api-cpu"), "fidelity_interval.ratio").set_index("metric")
    # every round has a throughput; a latency may lack a pair (the bench reports ITL 0 when a busy API server sent
    # a whole answer in one message), and then counts fewer rounds
    assert {"output throughput", "TTFT median"} <= set(ratio.index) <= {"output throughput", "TTFT median", "ITL median"}
    assert ratio["rounds"].between(2, 3).all() and ratio.loc["output throughput", "rounds"] == 3
    assert (ratio["api_server_count"] == 2).all() and (ratio["point"] == "high load").all()
    for metric, row in ratio.iterrows():
        assert row["ratio_ci_low"] < row["ratio"] < row["ratio_ci_high"], metric
        assert row["ci_max_gap_pct"] == pytest.approx(max(1 - row["ratio_ci_low"], row["ratio_ci_high"] - 1) * 100)
        assert row["harness_spread_pct"] >= 0 and row["bench_spread_pct"] >= 0
    throughput = ratio.loc["output throughput"]
    # same server, same prompts, same load: the tools' throughputs cannot differ by a factor of two (their latencies,
    # on two cores shared with another test's vLLM, can: a CI run once saw a TTFT ratio of 0.49)
    assert 0.5 < throughput["ratio"] < 2, (throughput["harness"], throughput["bench"])
    # both API-server processes and the engine core were sampled over the rounds, and both clients' own CPU
    assert throughput["api_cpu_max"] > 0 and throughput["engine_cpu"] > 0
    assert 0 < throughput["harness_worker_cpu_max"] < 1.5 and 0 < throughput["bench_cpu_share"] < 1.5
    # one server for both experiments: fidelity_interval's rows name api_servers' two-API-server server
    datasets = json.loads((root / "data" / "api-cpu" / "provenance.json").read_text())["datasets"]
    assert datasets["fidelity_interval.ratio"]["servers"] == \
        [s for s in datasets["api_servers.load"]["servers"] if s.startswith("api-2x")]
