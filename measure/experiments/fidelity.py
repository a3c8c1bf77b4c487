"""Harness fidelity: our client against ``vllm bench serve`` on the same server, prompts and load.

Rounds alternate which tool goes first, so drift (a warming cache, a busy host) hits both alike.
Each metric is the median over rounds; the ratio is ours / the bench's.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from measure.experiment import Experiment, ServerSpec, Step, register
from measure.experiments.pooling import POOLING, sentences
from measure.harness.bench import bench_serve
from measure.harness.load import chat_load, embed_load, summarise
from measure.schema import Column, DatasetSchema

COMPARISON = DatasetSchema(
    name="fidelity.comparison",
    title={"zh": "本项目的客户端 vs vllm bench serve", "en": "Our client vs vllm bench serve"},
    key=("workload", "metric"),
    columns=(
        Column("workload", "str", doc="chat | embeddings"),
        Column("metric", "str"),
        Column("unit", "str"),
        Column("harness", "float", doc="our client, median over rounds"),
        Column("bench", "float", doc="vllm bench serve, median over rounds"),
        Column("ratio", "float", "×", "harness / bench"),
        Column("gap_pct", "float", "%", "|ratio - 1| × 100"),
    ),
)
WORKLOADS = DatasetSchema(
    name="fidelity.workloads",
    title={"zh": "对比所用的负载", "en": "The workloads compared"},
    key=("workload",),
    columns=(
        Column("workload", "str"),
        Column("model", "str"),
        Column("endpoint", "str"),
        Column("requests", "int", "requests", "per round and tool"),
        Column("concurrency", "int", "requests", "in flight at most"),
        Column("prompt_tokens_mean", "float", "tokens", nullable=True),
        Column("output_tokens", "int", "tokens", "per request (ignore_eos)", nullable=True),
        Column("rounds", "int"),
        Column("harness_client_cpu_share", "float", "", "our client's CPU seconds / wall seconds", nullable=True),
        Column("harness_transport", "str", doc="HTTP transport under the openai SDK: aiohttp | httpx", nullable=True),
        Column("bench_command", "str"),
    ),
)

# (our summary field, the bench JSON key, unit) per metric
CHAT_METRICS = {
    "output throughput": ("output_tok_s", "output_throughput", "tok/s"),
    "request throughput": ("request_per_s", "request_throughput", "req/s"),
    "TTFT median": ("ttft_median_ms", "median_ttft_ms", "ms"),
    "TTFT mean": ("ttft_mean_ms", "mean_ttft_ms", "ms"),
    "first chunk median (bench's rule)": ("first_chunk_median_ms", "median_ttft_ms", "ms"),
    "ITL median": ("itl_median_ms", "median_itl_ms", "ms"),
    "end-to-end median": ("e2e_median_ms", "median_e2el_ms", "ms"),
}
EMBED_METRICS = {
    "request throughput": ("request_per_s", "request_throughput", "req/s"),
    "end-to-end median": ("e2e_median_ms", "median_e2el_ms", "ms"),
}


@register
class Fidelity(Experiment):
    name = "fidelity"
    title = {"zh": "测量工具的保真度", "en": "Harness fidelity"}
    datasets = (COMPARISON, WORKLOADS)

    chat = ServerSpec("chat", (), label="generate")
    embedding = ServerSpec("embedding", POOLING, label="pooling-embedding")

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("fidelity", {"requests": 16, "concurrency": 4, "words": 60, "output_tokens": 32,
                                              "embed_requests": 64, "embed_concurrency": 8, "rounds": 3})

    def plan(self, profile):
        s = self.sizes(profile)
        n = s["rounds"] * 2
        return [Step(self.chat, f"chat: {s['requests']} requests × {s['output_tokens']} tokens, {s['concurrency']} in "
                                f"flight; ours and vllm bench serve × {s['rounds']} rounds", n * s["requests"], n * 20),
                Step(self.embedding, f"embeddings: {s['embed_requests']} single-input requests, {s['embed_concurrency']} "
                                     f"in flight; × {s['rounds']} rounds each", n * s["embed_requests"], n * 15)]

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        work = Path(tempfile.mkdtemp(prefix="fidelity-"))
        if not ctx.done(WORKLOADS, workload="chat"):
            prompts = sentences(s["requests"], s["words"], seed=7)
            self.compare(ctx, "chat", self.chat, prompts, CHAT_METRICS, s["concurrency"], s["output_tokens"], s["rounds"],
                         work / "chat")
        if ctx.has("embedding") and not ctx.done(WORKLOADS, workload="embeddings"):
            texts = sentences(s["embed_requests"], s["words"], seed=8)
            self.compare(ctx, "embeddings", self.embedding, texts, EMBED_METRICS, s["embed_concurrency"], None,
                         s["rounds"], work / "embed")

    def compare(self, ctx, workload, spec, prompts, metrics, concurrency, output_tokens, rounds, workdir):
        server = ctx.server(spec)
        model = ctx.model(spec.model_role)
        client = ctx.client(server)
        chat = output_tokens is not None

        def ours():
            load = chat_load(client, prompts, output_tokens, concurrency) if chat else embed_load(client, prompts, concurrency)
            return summarise(ctx.run(load), concurrency)

        def theirs():
            tokenizer = model.path if Path(model.path).is_dir() else model.name  # attach mode: a hub id, maybe
            return bench_serve(ctx.pool.python, server.base_url, model.name, tokenizer, prompts,
                               backend="openai-chat" if chat else "openai-embeddings",
                               endpoint="/v1/chat/completions" if chat else "/v1/embeddings",
                               concurrency=concurrency, output_len=output_tokens or 1, workdir=workdir)

        ours()  # warm-up: first requests pay for lazy initialisation on the server
        harness, bench, command = [], [], ""
        for r in range(rounds):
            if r % 2 == 0:
                harness.append(ours())
                run = theirs()
            else:
                run = theirs()
                harness.append(ours())
            bench.append(run.result)
            command = run.command
        for metric, (field, key, unit) in metrics.items():
            ours_values = [getattr(h, field) for h in harness if getattr(h, field) is not None]
            bench_values = [b[key] for b in bench if b.get(key) is not None]
            if not ours_values or not bench_values:
                continue
            a, b = statistics.median(ours_values), statistics.median(bench_values)
            ctx.record(COMPARISON, {"workload": workload, "metric": metric, "unit": unit, "harness": a, "bench": b,
                                    "ratio": a / b if b else None, "gap_pct": abs(a / b - 1) * 100 if b else None})
        ctx.record(WORKLOADS, {
            "workload": workload, "model": model.name, "endpoint": "/v1/chat/completions" if chat else "/v1/embeddings",
            "requests": len(prompts), "concurrency": concurrency,
            "prompt_tokens_mean": statistics.median(h.prompt_tokens for h in harness) / len(prompts),
            "output_tokens": output_tokens, "rounds": rounds,
            "harness_client_cpu_share": statistics.median(h.client_cpu_share for h in harness),
            "harness_transport": client.transport,
            "bench_command": command,
        })
