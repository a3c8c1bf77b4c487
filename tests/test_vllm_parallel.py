"""The parallelism experiment on the CPU backend: TP=2, PP=2 and DP=2 with one core per rank."""

import os

import pandas as pd
import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

from measure.experiments.parallelism import Parallelism
from measure.harness.profiles import CPU

pytestmark = pytest.mark.vllm


def test_parallel_layouts_on_cpu(tmp_path):
    require(python_imports("import vllm"), "vLLM", VLLM_HOW)
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("two CPU ranks need two cores")
    load = Parallelism.load(CPU) | {"rounds": 2}
    run_measure(tmp_path, "par-cpu", "parallelism", sizes={"parallel_load": load}, worker_in_engine=False)
    from measure.site.scan import make_store

    store = make_store(tmp_path / "data")
    env_ = store.env("par-cpu")
    layouts = store.frame(env_, "parallelism.layouts")
    # Every layout got served in the end; a failed first attempt (--enforce-eager) is kept as a row with its reason.
    assert set(layouts[layouts["first_request_ok"] == True]["layout"]) == {"single", "TP=2", "PP=2", "DP=2"}  # noqa: E712
    assert layouts[layouts["first_request_ok"] == False]["error"].notna().all()  # noqa: E712
    scaling = store.frame(env_, "parallelism.scaling")
    assert set(scaling["layout"]) == {"single", "TP=2", "PP=2", "DP=2"}
    assert (scaling["output_tok_s"] > 0).all() and (scaling["kv_cache_tokens"] > 0).all()
    assert (scaling["rounds"] == 2).all()
    assert ((scaling["output_tok_s_min"] <= scaling["output_tok_s"]) & (scaling["output_tok_s"] <= scaling["output_tok_s_max"])).all()
    assert dict(zip(scaling["layout"], scaling["ranks"], strict=True)) == {"single": 1, "TP=2": 2, "PP=2": 2, "DP=2": 2}
    # A vLLM step on these CPUs takes milliseconds. The client saw DP=2's tokens at 4 in flight arrive in one burst
    # (its TPOT fell to about 0.1 ms); the engine's own timestamps must not shrink that way.
    assert (scaling["engine_itl_ms"] > 0.5).all(), scaling[["layout", "concurrency", "tpot_ms", "engine_itl_ms"]]
    comm = store.frame(env_, "parallelism.comm_cost").set_index("layout")
    # the client's ITL is a median of gaps between network reads: on the busy 2-core CI machine it once read 0 ms for
    # the single layout (most messages came in the read before), and a ratio to 0 is left empty, as the schema says
    single = comm.loc["single"]
    if single["itl_ms"] > 0:
        assert single["itl_vs_single"] == pytest.approx(1.0)
    else:
        assert pd.isna(single["itl_vs_single"]) and (comm["itl_vs_single"].isna()).all()
    assert comm.loc["single", "engine_itl_vs_single"] == pytest.approx(1.0)
    assert (comm["engine_itl_ms"] > 0.5).all(), comm[["itl_ms", "engine_itl_ms"]]
    assert comm.loc["TP=2", "interconnect"].startswith("shared memory")
    routing = store.frame(env_, "parallelism.dp_routing").set_index("routing")
    # Each engine keeps its own prefix cache: pinning a prefix to one engine must hit more than scattering it.
    assert routing.loc["pinned", "prefix_hit_rate"] > routing.loc["round-robin", "prefix_hit_rate"]
