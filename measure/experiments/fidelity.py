"""Harness fidelity: our load generator against ``vllm bench serve`` on the same server, prompts and load,
and the load generator's own ceiling against a synthetic endpoint.

Rounds alternate which tool goes first, so drift (a warming cache, a busy host) hits both alike. Each
metric is the median over rounds, with the rounds' min and max; the ratio is ours / the bench's. Beside
every round the CPU share of each side is kept (our busiest worker, the bench's one process, vLLM's API
server process) and the engine's own view from ``/metrics``, so a row says which side limited it.
"""

from __future__ import annotations

import math
import shutil
import statistics
import tempfile
from pathlib import Path

from measure.experiment import POOLING, Experiment, ServerSpec, Step, register
from measure.harness import synthetic
from measure.harness.bench import LIMITED_BY_DOC, bench_serve, limited_by
from measure.harness.definitions import percentile
from measure.harness.loadgen import HttpRequest, LoadGenerator, default_workers
from measure.harness.metrics import histogram_mean_ms
from measure.harness.procstat import CpuSampler, group_cpu_s
from measure.harness.profiles import cpu_cores
from measure.schema import CLIENT_LOAD, SATURATED, Column, DatasetSchema
from measure.workloads import sentences

COMPARISON = DatasetSchema(
    name="fidelity.comparison",
    title={"zh": "本项目的负载生成器 vs vllm bench serve", "en": "Our load generator vs vllm bench serve"},
    key=("workload", "concurrency", "metric"),
    columns=(
        Column("workload", "str", doc="chat | embeddings"),
        Column("concurrency", "int", "requests", "in flight at most"),
        Column("metric", "str"),
        Column("unit", "str"),
        Column("harness", "float", doc="our load generator, median over rounds"),
        Column("harness_min", "float", doc="lowest round"),
        Column("harness_max", "float", doc="highest round"),
        Column("bench", "float", doc="vllm bench serve, median over rounds"),
        Column("bench_min", "float", doc="lowest round"),
        Column("bench_max", "float", doc="highest round"),
        # no ceiling: where a busy API server sends most of an answer in one message, a tool's inter-token gap reads
        # near 0 and the ratio is huge; that is what was measured (a round that read 0 is left out)
        Column("ratio", "float", "×", "harness / bench", maximum=math.inf),
        Column("gap_pct", "float", "%", "|ratio - 1| × 100", maximum=math.inf),
        Column("rounds", "int"),
        Column("harness_workers", "int", "processes", "our load generator's worker processes"),
        Column("harness_worker_cpu_max", "float", "", "our busiest worker's CPU seconds / wall seconds, highest round",
               role=CLIENT_LOAD),
        Column("bench_cpu_share", "float", "", "the bench process's CPU seconds / wall seconds, highest round",
               nullable=True, role=CLIENT_LOAD),
        Column("api_server_cpu_share", "float", "", "vLLM's API server process, CPU seconds / wall seconds, highest "
               "round of either tool (empty: attached server)", nullable=True),
        Column("limited_by", "str", doc=LIMITED_BY_DOC),
    ),
)
WORKLOADS = DatasetSchema(
    name="fidelity.workloads",
    title={"zh": "对比所用的负载", "en": "The workloads compared"},
    key=("workload", "concurrency"),
    columns=(
        Column("workload", "str"),
        Column("concurrency", "int", "requests", "in flight at most"),
        Column("model", "str"),
        Column("endpoint", "str"),
        Column("requests", "int", "requests", "per round and tool"),
        Column("prompt_tokens_mean", "float", "tokens", nullable=True),
        Column("output_tokens", "int", "tokens", "per request (ignore_eos)", nullable=True),
        Column("rounds", "int"),
        Column("harness_workers", "int", "processes"),
        Column("bench_command", "str"),
    ),
)
ENGINE_VIEW = DatasetSchema(
    name="fidelity.engine_view",
    title={"zh": "同一负载下引擎自己的计时（/metrics）", "en": "The engine's own timings under each tool (/metrics)"},
    key=("workload", "concurrency", "tool"),
    doc="Means of vLLM's histograms over each tool's rounds (median over rounds): stamped in the engine, "
        "they do not depend on how fast the client reads.",
    columns=(
        Column("workload", "str"),
        Column("concurrency", "int", "requests"),
        Column("tool", "str", doc="harness | bench"),
        Column("engine_ttft_ms", "float", "ms", "vllm:time_to_first_token_seconds, mean", nullable=True),
        Column("engine_itl_ms", "float", "ms", "vllm:inter_token_latency_seconds, mean", nullable=True),
        Column("engine_e2e_ms", "float", "ms", "vllm:e2e_request_latency_seconds, mean", nullable=True),
        Column("engine_queue_ms", "float", "ms", "vllm:request_queue_time_seconds, mean", nullable=True),
        Column("client_cpu_share", "float", "", "the tool's busiest process, CPU seconds / wall seconds", nullable=True,
               role=CLIENT_LOAD),
        Column("api_server_cpu_share", "float", "", "vLLM's API server process", nullable=True),
    ),
)
CEILING = DatasetSchema(
    name="fidelity.client_ceiling",
    title={"zh": "负载生成器自身的上限（合成端点）", "en": "The load generator's own ceiling (synthetic endpoint)"},
    key=("workload", "mode", "workers"),
    doc="Our load generator against a synthetic endpoint on 127.0.0.1 (measure/harness/synthetic.py) that stands in "
        "for no vLLM behaviour: flat out, it finds the most the client sustains; paced like a decoding GPU, how late "
        "the client reads a chunk after the server sent it.",
    columns=(
        Column("workload", "str", doc="chat (streamed) | embeddings"),
        Column("mode", "str", doc="flat out | paced"),
        Column("workers", "int", "processes"),
        Column("concurrency", "int", "requests"),
        Column("requests", "int", "requests"),
        Column("chunks_per_request", "int", "chunks", nullable=True),
        Column("chunk_gap_ms", "float", "ms", "the server's pause between chunks (0: none)", nullable=True),
        Column("request_per_s", "float", "req/s"),
        Column("chunks_per_s", "float", "chunks/s", nullable=True),
        Column("lag_median_ms", "float", "ms", "arrival minus the server's send stamp, median over chunks", nullable=True),
        Column("lag_p99_ms", "float", "ms", "the same, 99th percentile", nullable=True),
        Column("itl_median_ms", "float", "ms", "the client's inter-token latency, median", nullable=True),
        # not a client_load column: flat out, this dataset saturates the client on purpose (that is its ceiling)
        Column("worker_cpu_max", "float", "", "busiest worker, CPU seconds / wall seconds"),
        Column("client_cpu_cores", "float", "cores", "all workers' CPU seconds / wall seconds"),
        Column("server_processes", "int", "processes"),
        Column("server_cpu_cores", "float", "cores", "the synthetic server's CPU seconds / wall seconds"),
        Column("limited_by", "str", doc="client (busiest worker saturated) | synthetic server (all its processes busy) | "
                                        "neither"),
    ),
)

# metric -> (our summary field, the bench JSON key, unit)
CHAT_METRICS = {
    "output throughput": ("output_tok_s", "output_throughput", "tok/s"),
    "request throughput": ("request_per_s", "request_throughput", "req/s"),
    "TTFT median": ("ttft_median_ms", "median_ttft_ms", "ms"),
    "TTFT mean": ("ttft_mean_ms", "mean_ttft_ms", "ms"),
    "ITL median": ("itl_median_ms", "median_itl_ms", "ms"),
    "TPOT median": ("tpot_median_ms", "median_tpot_ms", "ms"),
    "end-to-end median": ("e2e_median_ms", "median_e2el_ms", "ms"),
}
# The bench's latency for a pooling request ends at the response headers: compared with our ttft_s (ours).
EMBED_METRICS = {
    "request throughput": ("request_per_s", "request_throughput", "req/s"),
    "latency median (to headers)": ("ttft_median_ms", "median_e2el_ms", "ms"),
}
ENGINE_HISTOGRAMS = {"engine_ttft_ms": "vllm:time_to_first_token_seconds", "engine_itl_ms": "vllm:inter_token_latency_seconds",
                     "engine_e2e_ms": "vllm:e2e_request_latency_seconds", "engine_queue_ms": "vllm:request_queue_time_seconds"}

CPU_SIZES = {
    "chat_points": ((4, 16), (16, 32)),  # (in flight, requests per round)
    "embed_points": ((8, 64), (32, 128)),
    "words": 60, "output_tokens": 32, "rounds": 3, "workers": 1,
    "warmup": 3,  # a fresh CPU server speeds up over its first few batches
    "ceiling": {"workers": (1, 2), "concurrency": 64, "requests": 512, "chunks": 128,
                "paced": {"concurrency": 32, "requests": 64, "chunks": 32, "gap_ms": 10.0},
                "embed_concurrency": 32, "embed_requests": 512},
}


def progress_line(workload, concurrency, r, total, rounds, chat) -> str:
    ours, _, _ = rounds["harness"][-1]
    theirs, _, _ = rounds["bench"][-1]
    field, key, unit = ("output_tok_s", "output_throughput", "tok/s") if chat else ("request_per_s", "request_throughput", "req/s")
    bench_cpu = "?" if theirs.cpu_share is None else f"{theirs.cpu_share:.2f}"
    return (f"  {workload}, {concurrency} in flight, round {r + 1}/{total}: ours {getattr(ours, field):,.0f} {unit} "
            f"(busiest worker {ours.worker_cpu_max:.2f} of a core), bench {theirs.result.get(key, 0):,.0f} {unit} "
            f"(its process {bench_cpu})")


@register
class Fidelity(Experiment):
    name = "fidelity"
    title = {"zh": "测量工具的保真度", "en": "Harness fidelity"}
    datasets = (COMPARISON, WORKLOADS, ENGINE_VIEW, CEILING)

    chat = ServerSpec("chat", (), label="generate")
    embedding = ServerSpec("embedding", POOLING, label="pooling-embedding")

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("fidelity", CPU_SIZES)

    def plan(self, profile):
        s = self.sizes(profile)
        c = s["ceiling"]
        n = s["rounds"] * 2 + 1
        steps = [Step(None, f"client ceiling: {len(c['workers'])} worker counts × (chat flat out, chat paced, "
                            f"embeddings) against a synthetic endpoint", len(c["workers"]) * 3 * c["requests"],
                      len(c["workers"]) * 3 * 5)]
        for conc, requests in s["chat_points"]:
            steps.append(Step(self.chat, f"chat: {requests} requests × {s['output_tokens']} tokens, {conc} in flight; "
                                         f"ours and vllm bench serve × {s['rounds']} rounds", n * requests, n * 20))
        for conc, requests in s["embed_points"]:
            steps.append(Step(self.embedding, f"embeddings: {requests} single-input requests, {conc} in flight; "
                                              f"× {s['rounds']} rounds each", n * requests, n * 15))
        return steps

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        if not ctx.skipped(CEILING):
            self.ceiling(ctx, s["ceiling"])
        work = Path(tempfile.mkdtemp(prefix="fidelity-"))
        try:
            prompts = sentences(max(r for _, r in s["chat_points"]), s["words"], seed=7)
            for conc, requests in s["chat_points"]:
                if not ctx.done(WORKLOADS, workload="chat", concurrency=conc):
                    self.compare(ctx, "chat", self.chat, prompts[:requests], conc, s, work / f"chat-{conc}")
            if ctx.has("embedding"):
                texts = sentences(max(r for _, r in s["embed_points"]), s["words"], seed=8)
                for conc, requests in s["embed_points"]:
                    if not ctx.done(WORKLOADS, workload="embeddings", concurrency=conc):
                        self.compare(ctx, "embeddings", self.embedding, texts[:requests], conc, s, work / f"embed-{conc}")
        finally:
            shutil.rmtree(work, ignore_errors=True)

    # ---- our client against vllm bench serve ---------------------------------------------------------------
    def compare(self, ctx, workload, spec, prompts, concurrency, s, workdir):
        server = ctx.server(spec)
        model = ctx.model(spec.model_role)
        chat = workload == "chat"
        output_tokens = s["output_tokens"] if chat else None
        workers = s.get("workers") or default_workers(concurrency)
        requests = [HttpRequest.chat([{"role": "user", "content": p}], server.model, output_tokens, ignore_eos=True)
                    if chat else HttpRequest.embedding(p, server.model) for p in prompts]
        api_pid = server.process.pid if server.process is not None else None  # None: an attached server
        generator = ctx.load(server, workers=workers)

        def observed(sampler, tool):
            """One round of ``tool``: what it measured, the engine's view, and the API server's CPU share."""
            before = server.metrics()
            if tool == "harness":
                result = generator.run(requests, concurrency)
                window, summary = result.window, result.summary()
            else:
                tokenizer = model.path if Path(model.path).is_dir() else model.name  # attach mode: a hub id, maybe
                summary = bench_serve(ctx.pool.python, server.base_url, server.model, tokenizer, prompts,
                                      backend="openai-chat" if chat else "openai-embeddings",
                                      endpoint="/v1/chat/completions" if chat else "/v1/embeddings",
                                      concurrency=concurrency, output_len=output_tokens or 1, workdir=workdir,
                                      sampler=sampler)
                window = summary.window
            delta = server.metrics() - before
            api_share = sampler.share("api", *window) if window else None
            return summary, {k: histogram_mean_ms(delta, h) for k, h in ENGINE_HISTOGRAMS.items()}, api_share

        for _ in range(s.get("warmup", 1)):  # first requests pay for lazy initialisation on the server
            generator.run(requests, concurrency)
        rounds: dict[str, list] = {"harness": [], "bench": []}
        with CpuSampler({"api": api_pid}) as sampler:
            for r in range(s["rounds"]):
                for tool in ("harness", "bench") if r % 2 == 0 else ("bench", "harness"):
                    rounds[tool].append(observed(sampler, tool))
                ctx.log(progress_line(workload, concurrency, r, s["rounds"], rounds, chat))
        self.record_comparison(ctx, workload, concurrency, workers, rounds, CHAT_METRICS if chat else EMBED_METRICS)
        self.record_engine_view(ctx, workload, concurrency, rounds)
        harness = [h for h, _, _ in rounds["harness"]]
        ctx.record(WORKLOADS, {
            "workload": workload, "concurrency": concurrency, "model": model.name,
            "endpoint": "/v1/chat/completions" if chat else "/v1/embeddings", "requests": len(prompts),
            "prompt_tokens_mean": statistics.median(h.prompt_tokens for h in harness) / len(prompts),
            "output_tokens": output_tokens, "rounds": s["rounds"], "harness_workers": workers,
            "bench_command": rounds["bench"][-1][0].command,
        })

    @staticmethod
    def record_comparison(ctx, workload, concurrency, workers, rounds, metrics):
        harness = [h for h, _, _ in rounds["harness"]]
        bench = [b for b, _, _ in rounds["bench"]]
        harness_cpu = max(h.worker_cpu_max for h in harness)
        bench_cpus = [b.cpu_share for b in bench if b.cpu_share is not None]
        bench_cpu = max(bench_cpus) if bench_cpus else None
        api_cpus = [a for tool in rounds.values() for _, _, a in tool if a is not None]
        api_cpu = max(api_cpus) if api_cpus else None
        for metric, (field, key, unit) in metrics.items():
            ours = [getattr(h, field) for h in harness if getattr(h, field)]  # None or 0: not measured this round
            theirs = [b.result[key] for b in bench if b.result.get(key)]
            if not ours or not theirs:
                continue
            a, b = statistics.median(ours), statistics.median(theirs)
            ctx.record(COMPARISON, {
                "workload": workload, "concurrency": concurrency, "metric": metric, "unit": unit,
                "harness": a, "harness_min": min(ours), "harness_max": max(ours),
                "bench": b, "bench_min": min(theirs), "bench_max": max(theirs),
                "ratio": a / b, "gap_pct": abs(a / b - 1) * 100, "rounds": len(ours), "harness_workers": workers,
                "harness_worker_cpu_max": harness_cpu, "bench_cpu_share": bench_cpu, "api_server_cpu_share": api_cpu,
                "limited_by": limited_by(harness_cpu, bench_cpu, api_cpu),
            })

    @staticmethod
    def record_engine_view(ctx, workload, concurrency, rounds):
        def median(values):
            values = [v for v in values if v is not None]
            return statistics.median(values) if values else None

        for tool, runs in rounds.items():
            client = [r.worker_cpu_max if tool == "harness" else r.cpu_share for r, _, _ in runs]
            ctx.record(ENGINE_VIEW, {
                "workload": workload, "concurrency": concurrency, "tool": tool,
                **{k: median(e[k] for _, e, _ in runs) for k in ENGINE_HISTOGRAMS},
                "client_cpu_share": median(client), "api_server_cpu_share": median(a for _, _, a in runs),
            })

    # ---- the client alone ------------------------------------------------------------------------------------
    def ceiling(self, ctx, c):
        cores = len(cpu_cores())
        chat = {"flat out": (c["concurrency"], c["requests"], c["chunks"], 0.0),
                "paced": (c["paced"]["concurrency"], c["paced"]["requests"], c["paced"]["chunks"], c["paced"]["gap_ms"])}
        for workers in c["workers"]:
            processes = max(1, min(8, cores - workers))
            for mode, (conc, count, chunks, gap) in chat.items():
                if ctx.done(CEILING, workload="chat (streamed)", mode=mode, workers=workers):
                    continue
                requests = [HttpRequest.chat([{"role": "user", "content": "ceiling"}], "synthetic", chunks)] * count
                self.ceiling_row(ctx, "chat (streamed)", mode, workers, conc, requests, chunks, gap, processes)
            if not ctx.done(CEILING, workload="embeddings", mode="flat out", workers=workers):
                requests = [HttpRequest.embedding("ceiling", "synthetic")] * c["embed_requests"]
                self.ceiling_row(ctx, "embeddings", "flat out", workers, c["embed_concurrency"], requests, None, None,
                                 processes)

    @staticmethod
    def ceiling_row(ctx, workload, mode, workers, concurrency, requests, chunks, gap_ms, processes):
        with synthetic.running(processes=processes, chunk_gap_ms=gap_ms or 0.0) as (base_url, pgid), \
                LoadGenerator(base_url, workers=workers) as generator:
            generator.run(requests[: max(concurrency, 1)], concurrency)  # warm-up: connections, first-call costs
            cpu0 = group_cpu_s(pgid)
            batch = generator.run(requests, concurrency)
            server_cores = (group_cpu_s(pgid) - cpu0) / batch.wall_s
        summary = batch.summary()
        lags = sorted(lag * 1000 for t in batch.timings for lag in t.lag_s)
        saturated_server = server_cores >= SATURATED * processes
        ctx.log(f"  client ceiling, {workload} {mode}, {summary.workers} worker(s): {summary.request_per_s:,.0f} req/s, "
                f"busiest worker {summary.worker_cpu_max:.2f} of a core, synthetic server {server_cores:.2f} cores")
        ctx.record(CEILING, {
            "workload": workload, "mode": mode, "workers": summary.workers, "concurrency": concurrency,
            "requests": len(requests), "chunks_per_request": chunks, "chunk_gap_ms": gap_ms,
            "request_per_s": summary.request_per_s,
            "chunks_per_s": summary.output_tokens / summary.wall_s if chunks else None,
            "lag_median_ms": statistics.median(lags) if lags else None,
            "lag_p99_ms": percentile(lags, 99) if lags else None,
            "itl_median_ms": summary.itl_median_ms,
            "worker_cpu_max": summary.worker_cpu_max, "client_cpu_cores": summary.client_cpu_cores,
            "server_processes": processes, "server_cpu_cores": server_cores,
            "limited_by": "client" if summary.worker_cpu_max >= SATURATED else
                          "synthetic server" if saturated_server else "neither",
        })
