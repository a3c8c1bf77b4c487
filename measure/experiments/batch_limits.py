"""Batch limits: what ``--max-num-seqs`` (requests the engine runs in one step) and ``--max-num-batched-tokens`` (the
tokens one step may hold; prefills beyond it are split into chunks) do to throughput, time to first token and time
per output token, at one request shape (about 1k prompt tokens, 256 output tokens) with more requests in flight than
the smallest limit admits (on the GPU: 128 sent at once, a closed batch).

One server per combination; on the GPU they share the device (each with the same KV cache in bytes, large enough that
no setting runs out of cache), and are measured one at a time. Rounds after one warm-up; p50/p99 are over each
round's requests, then the median over rounds.
"""

from __future__ import annotations

import random
import statistics

from measure.experiment import Experiment, ServerSpec, Step, register, spread
from measure.harness.definitions import percentile
from measure.harness.loadgen import HttpRequest, default_workers
from measure.harness.server import ServerFailed
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import random_words

ROLE = "chat"  # Qwen3-0.6B on the GPU (the tiny stand-in on the CPU)
# Workload sizes per profile (MEASURE_SIZES may replace them: '{"batch_limits": {...}}').
SIZES = {
    "cpu": {"max_num_seqs": (2, 8), "max_num_batched_tokens": (256, 2048), "prompt_words": 512, "output_tokens": 32,
            "concurrency": 8, "requests": 16, "rounds": 2, "shared_memory": ()},
    # 20 GiB of KV cache each: 1.4× what 128 requests of 1,280 tokens hold, so no setting preempts
    "gpu": {"max_num_seqs": (8, 32, 128), "max_num_batched_tokens": (2048, 8192), "prompt_words": 1024,
            "output_tokens": 256, "concurrency": 128, "requests": 128, "rounds": 3,
            "shared_memory": ("--gpu-memory-utilization", "0.1", "--kv-cache-memory-bytes", str(20 << 30))},
}

GRID = DatasetSchema(
    name="batch_limits.grid",
    title={"zh": "--max-num-seqs 与 --max-num-batched-tokens", "en": "--max-num-seqs and --max-num-batched-tokens"},
    key=("max_num_seqs", "max_num_batched_tokens"),
    doc="Every request has the same shape; more are in flight than the smallest --max-num-seqs admits, so the rest "
        "wait in vLLM's queue. Latency percentiles: over one round's requests, median over rounds.",
    columns=(
        Column("max_num_seqs", "int", "requests", "--max-num-seqs"),
        Column("max_num_batched_tokens", "int", "tokens", "--max-num-batched-tokens"),
        Column("started", "bool", doc="false: vLLM refused this combination"),
        Column("prompt_tokens", "int", "tokens", "per request, as vLLM counted them (chat template included)",
               nullable=True),
        Column("output_tokens", "int", "tokens", "per request, ignore_eos"),
        Column("concurrency", "int", "requests", "in flight"),
        Column("requests", "int", "requests", "per round"),
        Column("rounds", "int", "", "rounds measured (after one warm-up)", nullable=True),
        Column("output_tok_s", "float", "tok/s", "median over rounds", nullable=True),
        Column("output_tok_s_min", "float", "tok/s", nullable=True),
        Column("output_tok_s_max", "float", "tok/s", nullable=True),
        Column("ttft_p50_ms", "float", "ms", nullable=True),
        Column("ttft_p99_ms", "float", "ms", nullable=True),
        Column("tpot_p50_ms", "float", "ms", nullable=True),
        Column("tpot_p99_ms", "float", "ms", nullable=True),
        Column("preemptions", "int", "", "vllm:num_preemptions over the measured rounds", nullable=True),
        Column("client_cpu_max", "float", "cores", role=CLIENT_LOAD, nullable=True),
        Column("error", "str", doc="the last error line of the log when it did not start", nullable=True),
    ),
)



def chat(server, words: int, output_tokens: int, rng: random.Random) -> HttpRequest:
    return HttpRequest.chat([{"role": "user", "content": random_words(words, rng)}], server.model, output_tokens,
                            ignore_eos=True)


@register
class BatchLimits(Experiment):
    name = "batch_limits"
    title = {"zh": "批处理上限", "en": "Batch limits"}
    datasets = (GRID,)
    attachable = False  # the server's batch flags are the variables

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("batch_limits", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    def combinations(self, profile) -> list[tuple[int, int]]:
        s = self.sizes(profile)
        return [(seqs, tokens) for tokens in s["max_num_batched_tokens"] for seqs in s["max_num_seqs"]]

    def spec(self, profile, seqs: int, tokens: int) -> ServerSpec:
        return ServerSpec(ROLE, ("--max-num-seqs", str(seqs), "--max-num-batched-tokens", str(tokens)),
                          label=f"batch-{seqs}x{tokens}", shared_memory=tuple(self.sizes(profile)["shared_memory"]))

    def plan(self, profile):
        s = self.sizes(profile)
        return [Step(self.spec(profile, seqs, tokens), f"--max-num-seqs {seqs} --max-num-batched-tokens {tokens}: "
                     f"{s['requests']} requests at {s['concurrency']} in flight", (s["rounds"] + 1) * s["requests"], 30)
                for seqs, tokens in self.combinations(profile)]

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        for seqs, tokens in self.combinations(ctx.profile):
            if ctx.done(GRID, max_num_seqs=seqs, max_num_batched_tokens=tokens):
                continue
            fixed = {"max_num_seqs": seqs, "max_num_batched_tokens": tokens, "output_tokens": s["output_tokens"],
                     "concurrency": s["concurrency"], "requests": s["requests"]}
            try:
                server = ctx.server(self.spec(ctx.profile, seqs, tokens))
            except ServerFailed as exc:  # a combination vLLM refuses is the finding
                ctx.record(GRID, fixed | {"started": False, "error": exc.reason[:300]})
                continue
            ctx.record(GRID, fixed | self.measure(ctx, server, seqs, tokens, s))

    @staticmethod
    def measure(ctx, server, seqs: int, tokens: int, s: dict) -> dict:
        load = ctx.load(server, workers=default_workers(s["concurrency"]))
        rates, ttft50, ttft99, tpot50, tpot99, prompt_tokens, preempted, cpu = [], [], [], [], [], [], 0, 0.0
        for r in range(s["rounds"] + 1):  # round 0 warms this server up at this load and is not kept
            rng = random.Random(f"batch-{r}")  # every combination gets the same prompts
            before = server.metrics()
            batch = load.run([chat(server, s["prompt_words"], s["output_tokens"], rng) for _ in range(s["requests"])],
                             s["concurrency"])
            delta = server.metrics() - before
            if not r:
                continue
            ttfts = [t.ttft_s * 1000 for t in batch.timings if t.ttft_s is not None]
            tpots = [t.tpot_s * 1000 for t in batch.timings if t.tpot_s is not None]
            rates.append(batch.summary().output_tok_s)
            ttft50.append(statistics.median(ttfts))
            ttft99.append(percentile(ttfts, 99))
            tpot50.append(statistics.median(tpots))
            tpot99.append(percentile(tpots, 99))
            prompt_tokens += [t.prompt_tokens for t in batch.timings if t.prompt_tokens]
            preempted += round(delta.get("vllm:num_preemptions", 0.0))
            cpu = max(cpu, batch.worker_cpu_max)
        rate = spread(rates)
        row = {"started": True, "prompt_tokens": round(statistics.median(prompt_tokens)), "rounds": s["rounds"],
               "output_tok_s": rate[0], "output_tok_s_min": rate[1], "output_tok_s_max": rate[2],
               "ttft_p50_ms": statistics.median(ttft50), "ttft_p99_ms": statistics.median(ttft99),
               "tpot_p50_ms": statistics.median(tpot50), "tpot_p99_ms": statistics.median(tpot99),
               "preemptions": preempted, "client_cpu_max": cpu}
        ctx.log(f"  --max-num-seqs {seqs} --max-num-batched-tokens {tokens}: {rate[0]:,.0f} tok/s, TTFT p50 "
                f"{row['ttft_p50_ms']:,.0f} ms p99 {row['ttft_p99_ms']:,.0f} ms, TPOT p50 {row['tpot_p50_ms']:.1f} ms")
        return row
