"""--api-server-count on a real vLLM (CPU backend, tiny models), started through `vllm serve`: the processes it
left are the ones asked for, and each round's CPU shares of the API servers and the engine core are recorded."""

import json

import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

pytestmark = pytest.mark.vllm

# chat only (the embedding servers take the same path; `nox -s measure` runs them): one and two API servers
SIZES = {"api_servers": {"roles": ["chat"], "counts": [1, 2], "concurrency": [4], "min_requests": 8, "rounds": 1,
                         "words": 16, "output_tokens": 4},
         "colocate": 2}


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    require(python_imports("import vllm, aiohttp"), "vLLM", VLLM_HOW)
    root = tmp_path_factory.mktemp("api")
    run_measure(root, "api-cpu", "api_servers", sizes=SIZES, worker_in_engine=False)
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
