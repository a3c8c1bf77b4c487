"""Our client against `vllm bench serve` on a real vLLM (CPU backend, tiny model) with two API servers, in
alternating pairs of rounds: the ratio of each metric with a confidence interval from the pairs.

A `timing` test: `nox -s tests` runs it alone, after the rest. Beside another test's vLLM on two cores, rounds of a
second spread by a factor of three and a CI run saw the two tools' throughputs 2.3× apart."""

import json

import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

pytestmark = [pytest.mark.vllm, pytest.mark.timing]

POINT = {"point": "high load", "concurrency": 4, "api_server_count": 2, "requests": 16}
SIZES = {"fidelity_interval": {"points": [POINT], "words": 16, "output_tokens": 16, "rounds": 3, "workers": 1}}


def test_the_fidelity_ratio_has_a_confidence_interval_from_paired_rounds(tmp_path):
    from measure.site.scan import make_store

    require(python_imports("import vllm, aiohttp, scipy"), "vLLM (with vllm bench serve) and scipy", VLLM_HOW)
    root = tmp_path
    run_measure(root, "fid-cpu", "fidelity_interval", sizes=SIZES, worker_in_engine=False)
    store = make_store(root / "data")
    ratio = store.frame(store.env("fid-cpu"), "fidelity_interval.ratio").set_index("metric")
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
    # same server, same prompts, same load, nothing else running: the tools' throughputs cannot differ twofold
    assert 0.5 < throughput["ratio"] < 2, (throughput["harness"], throughput["bench"])
    # both API-server processes and the engine core were sampled over the rounds, and both clients' own CPU
    assert throughput["api_cpu_max"] > 0 and throughput["engine_cpu"] > 0
    assert 0 < throughput["harness_worker_cpu_max"] < 1.5 and 0 < throughput["bench_cpu_share"] < 1.5
    # the rows name the server they measured: two API servers, started through `vllm serve`, the only start that
    # acts on the flag
    provenance = json.loads((root / "data" / "fid-cpu" / "provenance.json").read_text())
    [name] = provenance["datasets"]["fidelity_interval.ratio"]["servers"]
    command = provenance["servers"][name]["command"]
    assert name.startswith("api-2x") and command[3] == "serve" and "--api-server-count" in command, command
