"""Load generators side by side: ours, ``vllm bench serve``, AIPerf and GuideLLM on the same vLLM server and
the same load (in flight, requests, prompt and output length), and each one's ceiling against the synthetic
endpoint that answers as fast as it can.

AIPerf and GuideLLM write their own synthetic prompts; they get the prompt length in tokens that our
prompts had, so the workloads match in shape, not text. Each figure is the tool's own, renamed to vLLM's
definitions where the tool measures the same quantity under another name (see ``measure.harness.external``).
Rounds rotate which tool goes first, so a warming server does not favour one.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from pathlib import Path

from measure.experiment import Experiment, ServerSpec, Step, register
from measure.harness import external, synthetic
from measure.harness.bench import bench_serve
from measure.harness.loadgen import HttpRequest, LoadGenerator, default_workers
from measure.harness.procstat import group_cpu_s
from measure.harness.profiles import cpu_cores
from measure.models import qwen_tokenizer_dir
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import sentences

TOOL_DOC = "ours, vllm bench serve, AIPerf or GuideLLM"
COMMON = (
    Column("tool", "str", doc=TOOL_DOC),
    Column("version", "str", doc="the tool's version (ours: this site's code revision is in the provenance)"),
    Column("concurrency", "int", "requests", "requests in flight"),
    Column("requests", "int", "requests", "requests per round"),
)
SERVER = DatasetSchema(
    name="loadgens.vllm_server",
    title={"zh": "同一台 vLLM 服务器、同样负载下的各个负载生成器", "en": "Load generators on one vLLM server, one load"},
    key=("tool",),
    columns=COMMON + (
        Column("rounds", "int", "", "rounds per tool"),
        Column("prompt_tokens", "int", "tokens", "prompt length each tool was given (ours: measured mean)"),
        Column("output_tokens_mean", "float", "tokens", "output tokens per request, as the tool counted them"),
        Column("output_tok_s", "float", "tok/s", "output throughput, median over rounds"),
        Column("output_tok_s_min", "float", "tok/s", "slowest round"),
        Column("output_tok_s_max", "float", "tok/s", "fastest round"),
        Column("ttft_median_ms", "float", "ms", "time to first token (vllm bench serve and ours count vLLM's "
               "role-only first chunk; AIPerf and GuideLLM wait for the first content)", nullable=True),
        Column("itl_median_ms", "float", "ms", "vLLM's ITL: gap between streamed chunks (GuideLLM keeps no "
               "per-chunk times)", nullable=True),
        Column("tpot_median_ms", "float", "ms", "vLLM's TPOT: (end-to-end − TTFT) / (tokens − 1)", nullable=True),
        Column("busiest_process_cpu", "float", "", "the tool's busiest process, CPU seconds / wall seconds (ours: "
               "busiest worker; bench: its one process); AIPerf and GuideLLM: not read", nullable=True,
               role=CLIENT_LOAD),
        Column("cpu_cores", "float", "cores", "CPU seconds of the tool's processes over its wall time (AIPerf and "
               "GuideLLM: start-up included)", nullable=True),
        Column("command", "str", doc="the tool's command (ours: the harness)", nullable=True),
    ),
)
CEILING = DatasetSchema(
    name="loadgens.ceiling",
    title={"zh": "各个负载生成器的上限（合成端点）", "en": "Each load generator's ceiling (synthetic endpoint)"},
    key=("tool",),
    columns=COMMON + (
        Column("chunks_per_request", "int", "chunks", "streamed tokens per answer"),
        Column("request_per_s", "float", "req/s", "requests completed per second"),
        Column("chunks_per_s", "float", "chunks/s", "streamed tokens read per second"),
        Column("cpu_cores", "float", "cores", "CPU seconds of the tool's processes over its wall time", nullable=True),
        Column("server_cpu_cores", "float", "cores", "the synthetic server's CPU over the tool's wall time"),
    ),
)

CPU_SIZES = {"concurrency": 8, "requests": 64, "words": 60, "output_tokens": 32, "rounds": 3,
             "ceiling": {"concurrency": 64, "requests": 512, "chunks": 128}}
BENCH = "vllm bench serve"


@register
class LoadGenerators(Experiment):
    name = "loadgens"
    title = {"zh": "负载生成器对比", "en": "Load generators compared"}
    datasets = (SERVER, CEILING)

    chat = ServerSpec("chat", (), label="generate")

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("loadgens", CPU_SIZES)

    @staticmethod
    def tools() -> list[str]:
        return [t for t in external.TOOLS if external.executable(t)]

    def unavailable(self, profile, python):
        if not self.tools():
            return ("neither AIPerf nor GuideLLM is installed: `nox -s load_generators` makes their virtualenvs "
                    "(or point $MEASURE_AIPERF / $MEASURE_GUIDELLM at their executables)")
        return None

    def plan(self, profile):
        s, c = self.sizes(profile), self.sizes(profile)["ceiling"]
        n = 2 + len(self.tools())
        return [Step(None, f"ceiling: {n} tools × {c['requests']} requests against a synthetic endpoint",
                     n * c["requests"], n * 15),
                Step(self.chat, f"{n} tools × {s['rounds']} rounds × {s['requests']} requests, {s['concurrency']} in "
                                f"flight, {s['output_tokens']} tokens", n * s["rounds"] * s["requests"],
                     n * s["rounds"] * 20)]

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        work = Path(tempfile.mkdtemp(prefix="loadgens-"))
        try:
            if not ctx.skipped(CEILING):
                self.ceiling(ctx, s["ceiling"], work / "ceiling")
            if not ctx.skipped(SERVER):
                self.on_server(ctx, s, work / "server")
        finally:
            shutil.rmtree(work, ignore_errors=True)

    # ---- the tools alone -------------------------------------------------------------------------------------
    def ceiling(self, ctx, c, work):
        processes = max(1, min(8, len(cpu_cores()) - 1))
        request = HttpRequest.chat([{"role": "user", "content": "ceiling"}], "synthetic", c["chunks"])
        prompts = ["ceiling"] * c["requests"]
        tokenizer = ctx.model("chat").path
        for tool in ["ours", BENCH, *self.tools()]:
            if ctx.done(CEILING, tool=external.TOOLS_NAMES.get(tool, tool)):
                continue
            with synthetic.running(processes=processes) as (base_url, pgid):
                cpu0 = group_cpu_s(pgid)
                if tool == "ours":
                    with LoadGenerator(base_url) as generator:
                        generator.run([request] * c["concurrency"], c["concurrency"])  # warm-up
                        cpu0 = group_cpu_s(pgid)
                        summary = generator.run([request] * c["requests"], c["concurrency"]).summary()
                    wall, req_s, chunks_s, cores = (summary.wall_s, summary.request_per_s,
                                                    summary.output_tokens / summary.wall_s, summary.client_cpu_cores)
                    version = "this site"
                elif tool == BENCH:
                    run = bench_serve(ctx.pool.python, base_url, "synthetic", str(tokenizer), prompts,
                                      backend="openai-chat", endpoint="/v1/chat/completions",
                                      concurrency=c["concurrency"], output_len=c["chunks"], workdir=work / "bench")
                    wall = float(run.result["duration"])
                    req_s, chunks_s = run.result["request_throughput"], run.result["output_throughput"]
                    cores, version = run.cpu_share, "vLLM's own"
                else:
                    r = external.RUNNERS[tool](base_url, "synthetic", str(qwen_tokenizer_dir()), concurrency=c["concurrency"],
                                               requests=c["requests"], prompt_tokens=4, output_tokens=c["chunks"],
                                               workdir=work / tool)
                    wall, req_s, chunks_s, cores, version = r.wall_s, r.request_per_s, r.output_tok_s, r.cpu_cores, r.version
                server_cores = (group_cpu_s(pgid) - cpu0) / wall
            name = external.TOOLS_NAMES.get(tool, tool)
            ctx.log(f"  ceiling, {name}: {req_s:,.0f} req/s, {chunks_s:,.0f} chunks/s")
            ctx.record(CEILING, {"tool": name, "version": version, "concurrency": c["concurrency"],
                                 "requests": c["requests"], "chunks_per_request": c["chunks"], "request_per_s": req_s,
                                 "chunks_per_s": chunks_s, "cpu_cores": cores, "server_cpu_cores": server_cores})

    # ---- the tools against vLLM ------------------------------------------------------------------------------
    def on_server(self, ctx, s, work):
        server = ctx.server(self.chat)
        model = ctx.model("chat")
        prompts = sentences(s["requests"], s["words"], seed=11)
        requests = [HttpRequest.chat([{"role": "user", "content": p}], server.model, s["output_tokens"], ignore_eos=True)
                    for p in prompts]
        workers = default_workers(s["concurrency"])
        generator = ctx.load(server, workers=workers)
        generator.run(requests, s["concurrency"])  # warm-up: the server's first batches are slower
        prompt_tokens = None
        tools = ["ours", BENCH, *self.tools()]
        rounds: dict[str, list[dict]] = {t: [] for t in tools}
        for r in range(s["rounds"]):
            for tool in tools[r % len(tools):] + tools[: r % len(tools)]:
                if tool == "ours":
                    m = generator.run(requests, s["concurrency"]).summary()
                    prompt_tokens = round(m.prompt_tokens / m.requests)
                    row = {"output_tok_s": m.output_tok_s, "ttft": m.ttft_median_ms, "itl": m.itl_median_ms,
                           "tpot": m.tpot_median_ms, "busiest": m.worker_cpu_max, "cores": m.client_cpu_cores,
                           "tokens": m.output_tokens / m.requests, "version": "this site", "command": None}
                elif tool == BENCH:
                    b = bench_serve(ctx.pool.python, server.base_url, server.model, str(model.path), prompts,
                                    backend="openai-chat", endpoint="/v1/chat/completions",
                                    concurrency=s["concurrency"], output_len=s["output_tokens"], workdir=work / "bench")
                    res = b.result
                    row = {"output_tok_s": res["output_throughput"], "ttft": res["median_ttft_ms"],
                           "itl": res["median_itl_ms"], "tpot": res["median_tpot_ms"], "busiest": b.cpu_share,
                           "cores": b.cpu_share, "tokens": res["total_output_tokens"] / res["completed"],
                           "version": "vLLM's own", "command": b.command}
                else:
                    # the real Qwen tokenizer's own folder: their transformers does not load it from a model folder
                    t = external.RUNNERS[tool](server.base_url, server.model, str(qwen_tokenizer_dir()),
                                               concurrency=s["concurrency"], requests=s["requests"],
                                               prompt_tokens=prompt_tokens or 64, output_tokens=s["output_tokens"],
                                               workdir=work / tool)
                    row = {"output_tok_s": t.output_tok_s, "ttft": t.ttft_median_ms, "itl": t.itl_median_ms,
                           "tpot": t.tpot_median_ms, "busiest": None, "cores": t.cpu_cores,
                           "tokens": t.output_tokens_mean, "version": t.version, "command": t.command}
                rounds[tool].append(row)
                ctx.log(f"  round {r + 1}/{s['rounds']}, {external.TOOLS_NAMES.get(tool, tool)}: "
                        f"{row['output_tok_s']:,.0f} tok/s")
        for tool, runs in rounds.items():
            def median(key, runs=runs):
                values = [x[key] for x in runs if x[key] is not None]
                return statistics.median(values) if values else None

            ctx.record(SERVER, {
                "tool": external.TOOLS_NAMES.get(tool, tool), "version": runs[-1]["version"],
                "concurrency": s["concurrency"], "requests": s["requests"], "rounds": len(runs),
                "prompt_tokens": prompt_tokens, "output_tokens_mean": median("tokens"),
                "output_tok_s": median("output_tok_s"), "output_tok_s_min": min(x["output_tok_s"] for x in runs),
                "output_tok_s_max": max(x["output_tok_s"] for x in runs), "ttft_median_ms": median("ttft"),
                "itl_median_ms": median("itl"), "tpot_median_ms": median("tpot"),
                "busiest_process_cpu": median("busiest"), "cpu_cores": median("cores"), "command": runs[-1]["command"],
            })
