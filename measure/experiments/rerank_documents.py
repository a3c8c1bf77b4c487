"""Rerank over long documents: one query against N documents of a given length in one ``/rerank`` request, the way a
retrieval pipeline calls it. Latency per request (p50, p99) and query–document pairs scored per second, one request
at a time, at several document lengths and counts.

The reranker server is the pooling chapter's (same flags, so one start serves both). Documents are random common words
(about one token each); dummy weights, so the ordering is not checked here.
"""

from __future__ import annotations

import random
import statistics
import time

from measure.experiment import RERANKER_ARGS, Experiment, ServerSpec, Step, register, spread
from measure.harness.definitions import percentile
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import QUERY, random_words

# Workload sizes per profile (MEASURE_SIZES may replace them: '{"rerank_documents": {...}}').
SIZES = {
    # plan_tok_s: the prefill rate the dry-run's time estimate assumes (CPU stand-in: ~40k measured; H200: a guess)
    "cpu": {"document_words": (64, 256, 1024), "documents": (4, 16), "requests": 6, "warmup": 1, "plan_tok_s": 20_000},
    "gpu": {"document_words": (256, 1024, 4096), "documents": (10, 100), "requests": 20, "warmup": 2,
            "plan_tok_s": 200_000},
}

GRID = DatasetSchema(
    name="rerank_documents.latency",
    title={"zh": "长文档重排：延迟与每秒打分对数", "en": "Reranking long documents: latency and pairs per second"},
    key=("document_words", "documents"),
    doc="One /rerank request at a time: one query, N documents of the same length. Pairs per second: documents ÷ "
        "latency, median over the timed requests.",
    columns=(
        Column("model", "str"),
        Column("weights", "str", doc="dummy | real"),
        Column("document_words", "int", "words", "random common words per document (about one token each)"),
        Column("document_tokens", "float", "tokens", "prompt tokens per query–document pair, as vLLM counted them "
               "(query and template included)", nullable=True),
        Column("documents", "int", "docs", "documents in one request"),
        Column("requests", "int", "requests", "timed (after the warm-up)"),
        Column("latency_p50_ms", "float", "ms"),
        Column("latency_p99_ms", "float", "ms"),
        Column("latency_min_ms", "float", "ms", "fastest request"),
        Column("pairs_per_s", "float", "docs/s", "documents ÷ latency, median"),
        Column("pairs_per_s_min", "float", "docs/s"),
        Column("pairs_per_s_max", "float", "docs/s"),
        Column("client_cpu_share", "float", "cores", "client CPU seconds ÷ wall seconds", role=CLIENT_LOAD),
    ),
)



@register
class RerankDocuments(Experiment):
    name = "rerank_documents"
    title = {"zh": "长文档重排", "en": "Reranking long documents"}
    datasets = (GRID,)
    spec = ServerSpec("reranker", RERANKER_ARGS, label="rerank")

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("rerank_documents", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    def plan(self, profile):
        s = self.sizes(profile)
        points = [(w, n) for w in s["document_words"] for n in s["documents"]]
        return [Step(self.spec, f"/rerank: 1 query × {list(s['documents'])} documents of {list(s['document_words'])} "
                                f"words", len(points) * (s["requests"] + s["warmup"]),
                     sum(w * n for w, n in points) * (s["requests"] + s["warmup"]) / s.get("plan_tok_s", 20_000))]

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        todo = [(w, n) for w in s["document_words"] for n in s["documents"]
                if not ctx.done(GRID, document_words=w, documents=n)]
        if not todo or not ctx.has("reranker"):
            return
        model = ctx.model("reranker")
        client = ctx.client(ctx.server(self.spec))
        for words, count in todo:
            ctx.record(GRID, {"model": model.name, "weights": model.weights}
                       | self.measure(ctx, client, model.name, words, count, s))

    @staticmethod
    def measure(ctx, client, model: str, words: int, count: int, s: dict) -> dict:
        rng = random.Random(f"rerank-{words}-{count}")
        latencies, tokens = [], None
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        for i in range(s["warmup"] + s["requests"]):
            body = {"model": model, "query": QUERY, "documents": [random_words(words, rng) for _ in range(count)]}
            status, payload, elapsed = ctx.run(client.post("/rerank", body))
            if status != 200:
                raise RuntimeError(f"/rerank with {count} documents of {words} words answered {status}: "
                                   f"{str(payload)[:300]}")
            if i >= s["warmup"]:
                latencies.append(elapsed * 1000)
                usage = payload.get("usage", {}) if isinstance(payload, dict) else {}
                tokens = usage.get("prompt_tokens") or usage.get("total_tokens") or tokens
        cpu_share = (time.process_time() - cpu_start) / (time.perf_counter() - wall_start)
        pairs = spread([count / (ms / 1000) for ms in latencies])
        row = {"document_words": words, "document_tokens": tokens / count if tokens else None, "documents": count,
               "requests": len(latencies), "latency_p50_ms": statistics.median(latencies),
               "latency_p99_ms": percentile(latencies, 99), "latency_min_ms": min(latencies),
               "pairs_per_s": pairs[0], "pairs_per_s_min": pairs[1], "pairs_per_s_max": pairs[2],
               "client_cpu_share": cpu_share}
        ctx.log(f"  {count} documents of {words} words: p50 {row['latency_p50_ms']:,.0f} ms, "
                f"{pairs[0]:,.0f} pairs/s")
        return row
