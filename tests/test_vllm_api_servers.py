"""--api-server-count on a real vLLM (CPU backend, tiny models), started through `vllm serve`: the processes it
left are the ones asked for, and each round's CPU shares of the API servers and the engine core are recorded."""

import json

import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

pytestmark = pytest.mark.vllm

# chat only (the embedding servers take the same path; `nox -s measure` runs them): one and two API servers
SIZES = {"api_servers": {"roles": ["chat"], "counts": [1, 2], "concurrency": [4], "min_requests": 8, "rounds": 1,
                         "words": 16, "output_tokens": 4}, "colocate": 2}


def test_api_server_count_takes_effect_through_vllm_serve(tmp_path):
    require(python_imports("import vllm"), "vLLM", VLLM_HOW)
    run_measure(tmp_path, "api-cpu", "api_servers", sizes=SIZES)
    from measure.site.scan import make_store

    store = make_store(tmp_path / "data")
    env = store.env("api-cpu")
    load = store.frame(env, "api_servers.load")
    assert sorted(zip(load["workload"], load["api_server_count"], strict=True)) == [("chat", 1), ("chat", 2)]
    # vllm serve acts on the flag: as many API-server processes as asked, beside one engine core
    assert (load["api_processes"] == load["api_server_count"]).all(), load[["api_server_count", "processes"]]
    assert load["processes"].str.contains("EngineCore×1").all() and load["processes"].str.contains("Worker×1").all()
    assert (load["api_cpu"] > 0).all() and (load["engine_cpu"] > 0).all() and (load["tokens_per_s"] > 0).all()
    assert (load["api_cpu_max"] <= load["api_cpu"] + 1e-9).all()
    assert load["ttft_p50_ms"].notna().all() and load["itl_p50_ms"].notna().all()
    provenance = json.loads((tmp_path / "data" / "api-cpu" / "provenance.json").read_text())
    commands = [s["command"] for name, s in provenance["servers"].items() if name.startswith("api-")]
    assert len(commands) == 2 and all("vllm.entrypoints.cli.main" in c[2] and c[3] == "serve" for c in commands)
