"""Embeddings in one unit: one request carrying N inputs against N single-input requests in flight, at several input
lengths. Both are counted the same way: inputs and prompt tokens embedded per second of a round's wall time (first
request sent to last answer), so the two ways of batching compare directly.

One pooling server (the same start as the other embedding figures). Each round sends ``max(2 × concurrency,
min_requests)`` requests; a point whose round would carry more than ``max_round_tokens`` tokens is not measured
(the largest batches of the longest inputs), which the plan lists.
"""

from __future__ import annotations

import random
import statistics

from measure.experiment import POOLING, Experiment, ServerSpec, Step, register, spread
from measure.harness.loadgen import HttpRequest, default_workers
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import random_words

# Workload sizes per profile (MEASURE_SIZES may replace them: '{"embedding_batching": {...}}').
SIZES = {
    "cpu": {"input_words": (16, 128), "inputs_per_request": (1, 8, 32), "concurrency": (1, 4), "min_requests": 8,
            "max_round_tokens": 1 << 16, "rounds": 2},
    "gpu": {"input_words": (32, 512, 4096), "inputs_per_request": (1, 16, 64), "concurrency": (1, 16, 64),
            "min_requests": 16, "max_round_tokens": 4 << 20, "rounds": 3},
}

GRID = DatasetSchema(
    name="embedding_batching.grid",
    title={"zh": "一个请求带多条输入，还是多个请求同时在途", "en": "Many inputs in one request, or many requests in flight"},
    key=("input_words", "inputs_per_request", "concurrency"),
    doc="Inputs and tokens per second over each round's wall time (median over rounds, after one warm-up round); "
        "float vectors.",
    columns=(
        Column("model", "str"),
        Column("weights", "str", doc="dummy | real"),
        Column("input_words", "int", "words", "random common words per input (about one token each)"),
        Column("tokens_per_input", "float", "tokens", "prompt tokens per input, as vLLM counted them"),
        Column("inputs_per_request", "int", "inputs", "inputs in one /v1/embeddings request"),
        Column("concurrency", "int", "requests", "requests in flight"),
        Column("requests", "int", "requests", "per round"),
        Column("rounds", "int", "", "rounds measured (after one warm-up)"),
        Column("inputs_per_s", "float", "inputs/s", "median over rounds"),
        Column("inputs_per_s_min", "float", "inputs/s"),
        Column("inputs_per_s_max", "float", "inputs/s"),
        Column("tokens_per_s", "float", "tok/s", "median over rounds"),
        Column("tokens_per_s_min", "float", "tok/s"),
        Column("tokens_per_s_max", "float", "tok/s"),
        Column("latency_p50_ms", "float", "ms", "one request, first byte sent to body read; median over rounds"),
        Column("client_cpu_max", "float", "cores", role=CLIENT_LOAD),
    ),
)


@register
class EmbeddingBatching(Experiment):
    name = "embedding_batching"
    title = {"zh": "嵌入：攒批还是并发", "en": "Embeddings: batch or concurrency"}
    datasets = (GRID,)
    spec = ServerSpec("embedding", POOLING, label="pooling-embedding")

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("embedding_batching", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    @staticmethod
    def requests(s: dict, concurrency: int) -> int:
        return max(2 * concurrency, s["min_requests"])

    def grid(self, profile) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
        """(words, inputs per request, concurrency): the points within the round-size cap, and those over it."""
        s = self.sizes(profile)
        points, skipped = [], []
        for w in s["input_words"]:
            for k in s["inputs_per_request"]:
                for c in s["concurrency"]:
                    (points if self.requests(s, c) * k * w <= s["max_round_tokens"] else skipped).append((w, k, c))
        return points, skipped

    def plan(self, profile):
        s = self.sizes(profile)
        points, skipped = self.grid(profile)
        what = (f"/v1/embeddings: {len(points)} points of input length × inputs per request × requests in flight"
                + (f" (not measured, over {s['max_round_tokens']:,} tokens a round: "
                   + ", ".join(f"{w} words × {k} × {c}" for w, k, c in skipped) + ")" if skipped else ""))
        requests = sum((s["rounds"] + 1) * self.requests(s, c) for _, _, c in points)
        return [Step(self.spec, what, requests, sum((s["rounds"] + 1) * 2 for _ in points))]

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        todo = [p for p in self.grid(ctx.profile)[0]
                if not ctx.done(GRID, input_words=p[0], inputs_per_request=p[1], concurrency=p[2])]
        if not todo or not ctx.has("embedding"):
            return
        server = ctx.server(self.spec)
        model = ctx.model("embedding")
        with ctx.progress() as bar:
            task = bar.add_task(f"embeddings {model.name}", total=len(todo))
            for words, per_request, concurrency in todo:
                row = self.measure(ctx, server, words, per_request, concurrency, s)
                ctx.record(GRID, {"model": model.name, "weights": model.weights} | row)
                bar.advance(task)

    def measure(self, ctx, server, words: int, per_request: int, concurrency: int, s: dict) -> dict:
        load = ctx.load(server, workers=default_workers(concurrency))
        count = self.requests(s, concurrency)
        inputs_rates, token_rates, latencies, per_input, cpu = [], [], [], [], 0.0
        for r in range(s["rounds"] + 1):  # round 0 warms this load point up and is not kept
            rng = random.Random(f"embed-{words}-{per_request}-{concurrency}-{r}")
            batch = load.run([HttpRequest.embedding([random_words(words, rng) for _ in range(per_request)],
                                                    server.model) for _ in range(count)], concurrency)
            summary = batch.summary()
            if not r:
                continue
            inputs_rates.append(count * per_request / batch.wall_s)
            token_rates.append(summary.prompt_tokens / batch.wall_s)
            latencies.append(summary.e2e_median_ms)
            per_input.append(summary.prompt_tokens / (count * per_request))
            cpu = max(cpu, batch.worker_cpu_max)
        inputs, tokens = spread(inputs_rates), spread(token_rates)
        ctx.log(f"  {words} words × {per_request} per request, {concurrency} in flight: {inputs[0]:,.0f} inputs/s, "
                f"{tokens[0]:,.0f} tok/s")
        return {"input_words": words, "tokens_per_input": statistics.median(per_input),
                "inputs_per_request": per_request, "concurrency": concurrency, "requests": count,
                "rounds": s["rounds"], "inputs_per_s": inputs[0], "inputs_per_s_min": inputs[1],
                "inputs_per_s_max": inputs[2], "tokens_per_s": tokens[0], "tokens_per_s_min": tokens[1],
                "tokens_per_s_max": tokens[2], "latency_p50_ms": statistics.median(latencies), "client_cpu_max": cpu}
