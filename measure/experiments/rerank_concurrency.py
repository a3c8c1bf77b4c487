"""A reranker under concurrency: ``/rerank`` requests of one query and N documents, several in flight at once, the way
a retrieval service behind many users calls it. Query–document pairs scored per second and latency per request
(p50, p99) at each load.

The reranker server is the pooling chapter's (same flags, so one start serves every rerank experiment). Documents
are random common words (about one token each); dummy weights, so the ordering is not checked here.
"""

from __future__ import annotations

import random

import orjson

from measure.experiment import RERANKER_ARGS, Experiment, ServerSpec, Step, register, spread
from measure.harness.definitions import percentile
from measure.harness.loadgen import HttpRequest, default_workers
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import QUERY, random_words

# Workload sizes per profile (MEASURE_SIZES may replace them: '{"rerank_concurrency": {...}}').
SIZES = {
    # plan_pairs_s: the rate the dry-run's estimate assumes (a guess until measured)
    "cpu": {"documents": (10, 100), "document_words": 32, "concurrency": (1, 8, 32), "min_requests": 8,
            "rounds": 2, "plan_pairs_s": 500},
    "gpu": {"documents": (10, 100), "document_words": 256, "concurrency": (1, 8, 32), "min_requests": 32,
            "rounds": 3, "plan_pairs_s": 5_000},
}

LOAD = DatasetSchema(
    name="rerank_concurrency.load",
    title={"zh": "并发下的重排：每秒打分对数与延迟", "en": "Reranking under concurrency: pairs per second and latency"},
    key=("documents", "concurrency"),
    doc="Each round sends max(2 × concurrency, min_requests) /rerank requests, each one query and N documents of the "
        "same length. One warm-up round at each load point is not kept; medians, lowest and highest over the timed "
        "rounds. Pairs per second: documents scored in a round ÷ the round's wall time.",
    columns=(
        Column("model", "str"),
        Column("weights", "str", doc="dummy | real"),
        Column("documents", "int", "docs", "documents in one request"),
        Column("document_words", "int", "words", "random common words per document (about one token each)"),
        Column("pair_tokens", "float", "tokens", "prompt tokens per query–document pair, as vLLM counted them",
               nullable=True),
        Column("concurrency", "int", "requests", "requests in flight"),
        Column("requests", "int", "requests", "per round"),
        Column("rounds", "int", "", "timed rounds"),
        Column("pairs_per_s", "float", "docs/s", "median over rounds"),
        Column("pairs_per_s_min", "float", "docs/s"),
        Column("pairs_per_s_max", "float", "docs/s"),
        Column("latency_p50_ms", "float", "ms", "a round's median latency, median over rounds"),
        Column("latency_p50_ms_min", "float", "ms"),
        Column("latency_p50_ms_max", "float", "ms"),
        Column("latency_p99_ms", "float", "ms", "a round's 99th-percentile latency, median over rounds"),
        Column("latency_p99_ms_min", "float", "ms"),
        Column("latency_p99_ms_max", "float", "ms"),
        Column("client_cpu_max", "float", "cores", role=CLIENT_LOAD),
    ),
)


def rerank(model: str, documents: int, words: int, rng: random.Random) -> HttpRequest:
    body = {"model": model, "query": QUERY, "documents": [random_words(words, rng) for _ in range(documents)]}
    return HttpRequest("/rerank", orjson.dumps(body))


@register
class RerankConcurrency(Experiment):
    name = "rerank_concurrency"
    title = {"zh": "并发下的重排", "en": "Reranking under concurrency"}
    datasets = (LOAD,)
    spec = ServerSpec("reranker", RERANKER_ARGS, label="rerank")

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("rerank_concurrency", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    @staticmethod
    def requests(s: dict, concurrency: int) -> int:
        return max(2 * concurrency, s["min_requests"])

    def plan(self, profile):
        s = self.sizes(profile)
        pairs = sum((s["rounds"] + 1) * self.requests(s, c) * d for c in s["concurrency"] for d in s["documents"])
        n = sum((s["rounds"] + 1) * self.requests(s, c) for c in s["concurrency"]) * len(s["documents"])
        return [Step(self.spec, f"/rerank: {list(s['documents'])} documents of {s['document_words']} words, "
                                f"{list(s['concurrency'])} in flight × {s['rounds'] + 1} rounds", n,
                     pairs / s["plan_pairs_s"])]

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        todo = [(d, c) for d in s["documents"] for c in s["concurrency"]
                if not ctx.done(LOAD, documents=d, concurrency=c)]
        if not todo or not ctx.has("reranker"):
            return
        model = ctx.model("reranker")
        server = ctx.server(self.spec)
        for documents, concurrency in todo:
            ctx.record(LOAD, {"model": model.name, "weights": model.weights}
                       | self.measure(ctx, server, documents, concurrency, s))

    def measure(self, ctx, server, documents: int, concurrency: int, s: dict) -> dict:
        load = ctx.load(server, workers=default_workers(concurrency))
        count = self.requests(s, concurrency)
        rounds = []
        for r in range(s["rounds"] + 1):  # round 0 warms this load point up and is not kept
            rng = random.Random(f"rerank-load-{documents}-{concurrency}-{r}")
            batch = load.run([rerank(server.model, documents, s["document_words"], rng) for _ in range(count)],
                             concurrency)
            if batch.errors:
                raise RuntimeError(f"/rerank with {documents} documents failed at {concurrency} in flight: "
                                   f"{batch.errors[:2]}")
            if r:
                rounds.append(batch)
        pairs = spread([count * documents / b.wall_s for b in rounds])
        p50 = spread([percentile([t.e2e_s * 1000 for t in b.timings], 50) for b in rounds])
        p99 = spread([percentile([t.e2e_s * 1000 for t in b.timings], 99) for b in rounds])
        tokens = [t.prompt_tokens for b in rounds for t in b.timings if t.prompt_tokens]
        ctx.log(f"  {documents} documents, {concurrency} in flight: {pairs[0]:,.0f} pairs/s, p50 {p50[0]:,.0f} ms, "
                f"p99 {p99[0]:,.0f} ms")
        return {"documents": documents, "document_words": s["document_words"],
                "pair_tokens": sum(tokens) / len(tokens) / documents if tokens else None,
                "concurrency": concurrency, "requests": count, "rounds": s["rounds"],
                "pairs_per_s": pairs[0], "pairs_per_s_min": pairs[1], "pairs_per_s_max": pairs[2],
                "latency_p50_ms": p50[0], "latency_p50_ms_min": p50[1], "latency_p50_ms_max": p50[2],
                "latency_p99_ms": p99[0], "latency_p99_ms_min": p99[1], "latency_p99_ms_max": p99[2],
                "client_cpu_max": max(b.worker_cpu_max for b in rounds)}
