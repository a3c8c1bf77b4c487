"""Load generators side by side: ours, ``vllm bench serve``, AIPerf and GuideLLM on the same vLLM server and
the same load (in flight, requests, prompt and output length), and each one's ceiling against the synthetic
endpoint that answers as fast as it can.

AIPerf and GuideLLM write their own synthetic prompts; they get the prompt length in tokens that our
prompts had, so the workloads match in shape, not text. Each figure is the tool's own, renamed to vLLM's
definitions where the tool measures the same quantity under another name (see ``measure.harness.external``).
Rounds rotate which tool goes first, so a warming server does not favour one.
"""

from __future__ import annotations

import contextlib
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
OURS, BENCH = "ours", "vllm bench serve"


def tool_name(tool: str) -> str:
    """The tool's name in the datasets: ours, vllm bench serve, AIPerf, GuideLLM."""
    return external.TOOLS[tool][0] if tool in external.TOOLS else tool


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

    def run_tool(self, ctx, tool, base_url, model, prompts, generator, output_tokens, concurrency, prompt_tokens,
                 work) -> external.ToolRun:
        """One run of ``tool`` on ``prompts``, as a ToolRun whatever the tool (``generator``: ours, already warm)."""
        if tool == OURS:
            m = generator.run([HttpRequest.chat([{"role": "user", "content": p}], model, output_tokens, ignore_eos=True)
                               for p in prompts], concurrency).summary()
            return external.ToolRun(OURS, "this site", None, m.request_per_s, m.output_tok_s,
                                    m.output_tokens / m.requests, m.ttft_median_ms, m.itl_median_ms, m.tpot_median_ms,
                                    m.client_cpu_cores, m.wall_s, busiest_process_cpu=m.worker_cpu_max,
                                    prompt_tokens_mean=m.prompt_tokens / m.requests)
        if tool == BENCH:
            b = bench_serve(ctx.pool.python, base_url, model, str(ctx.model("chat").path), prompts,
                            backend="openai-chat", endpoint="/v1/chat/completions", concurrency=concurrency,
                            output_len=output_tokens, workdir=work / "bench")
            r = b.result
            return external.ToolRun(BENCH, "vLLM's own", b.command, r["request_throughput"], r["output_throughput"],
                                    r["total_output_tokens"] / r["completed"], r["median_ttft_ms"], r["median_itl_ms"],
                                    r["median_tpot_ms"], b.cpu_share, float(r["duration"]), busiest_process_cpu=b.cpu_share)
        # the real Qwen tokenizer's own folder: their transformers does not load it from a model folder
        return external.RUNNERS[tool](base_url, model, str(qwen_tokenizer_dir()), concurrency=concurrency,
                                      requests=len(prompts), prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                                      workdir=work / tool)

    # ---- the tools alone -------------------------------------------------------------------------------------
    def ceiling(self, ctx, c, work):
        processes = max(1, min(8, len(cpu_cores()) - 1))
        prompts = ["ceiling"] * c["requests"]
        for tool in [OURS, BENCH, *self.tools()]:
            if ctx.done(CEILING, tool=tool_name(tool)):
                continue
            with synthetic.running(processes=processes) as (base_url, pgid), \
                    (LoadGenerator(base_url) if tool == OURS else contextlib.nullcontext()) as generator:
                if tool == OURS:
                    generator.run([HttpRequest.chat([{"role": "user", "content": "ceiling"}], "synthetic",
                                                    c["chunks"])] * c["concurrency"], c["concurrency"])  # warm-up
                cpu0 = group_cpu_s(pgid)
                r = self.run_tool(ctx, tool, base_url, "synthetic", prompts, generator, c["chunks"], c["concurrency"],
                                  4, work)
                server_cores = (group_cpu_s(pgid) - cpu0) / r.wall_s
            ctx.log(f"  ceiling, {r.tool}: {r.request_per_s:,.0f} req/s, {r.output_tok_s:,.0f} chunks/s")
            ctx.record(CEILING, {"tool": r.tool, "version": r.version, "concurrency": c["concurrency"],
                                 "requests": c["requests"], "chunks_per_request": c["chunks"],
                                 "request_per_s": r.request_per_s, "chunks_per_s": r.output_tok_s,
                                 "cpu_cores": r.cpu_cores, "server_cpu_cores": server_cores})

    # ---- the tools against vLLM ------------------------------------------------------------------------------
    def on_server(self, ctx, s, work):
        server = ctx.server(self.chat)
        prompts = sentences(s["requests"], s["words"], seed=11)
        generator = ctx.load(server, workers=default_workers(s["concurrency"]))
        generator.run([HttpRequest.chat([{"role": "user", "content": p}], server.model, s["output_tokens"],
                                        ignore_eos=True) for p in prompts], s["concurrency"])  # warm-up: first batches are slower
        tools = [OURS, BENCH, *self.tools()]  # ours first: the others get its measured prompt length
        rounds: dict[str, list[external.ToolRun]] = {t: [] for t in tools}
        prompt_tokens = 64
        for r in range(s["rounds"]):
            for tool in tools[r % len(tools):] + tools[: r % len(tools)]:
                run = self.run_tool(ctx, tool, server.base_url, server.model, prompts, generator, s["output_tokens"],
                                    s["concurrency"], prompt_tokens, work)
                if tool == OURS:
                    prompt_tokens = round(run.prompt_tokens_mean)
                rounds[tool].append(run)
                ctx.log(f"  round {r + 1}/{s['rounds']}, {run.tool}: {run.output_tok_s:,.0f} tok/s")
        for runs in rounds.values():
            def median(field, runs=runs):
                values = [getattr(x, field) for x in runs if getattr(x, field) is not None]
                return statistics.median(values) if values else None

            throughput = [x.output_tok_s for x in runs]
            ctx.record(SERVER, {
                "tool": runs[-1].tool, "version": runs[-1].version, "concurrency": s["concurrency"],
                "requests": s["requests"], "rounds": len(runs), "prompt_tokens": prompt_tokens,
                "output_tokens_mean": median("output_tokens_mean"), "output_tok_s": statistics.median(throughput),
                "output_tok_s_min": min(throughput), "output_tok_s_max": max(throughput),
                "ttft_median_ms": median("ttft_median_ms"), "itl_median_ms": median("itl_median_ms"),
                "tpot_median_ms": median("tpot_median_ms"), "busiest_process_cpu": median("busiest_process_cpu"),
                "cpu_cores": median("cpu_cores"), "command": runs[-1].command,
            })
