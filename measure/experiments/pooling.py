"""Pooling: embeddings and rerank served by the same engine (``--runner pooling``)."""

from __future__ import annotations

import statistics

from measure.experiment import POOLING, RERANKER_ARGS, Experiment, ServerSpec, Step, register
from measure.harness.client import gather_limited, median
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import QUERY, documents, sentences

THROUGHPUT = DatasetSchema(
    name="pooling.embedding_throughput",
    title={"zh": "嵌入吞吐量与批大小", "en": "Embedding throughput vs batch size"},
    key=("model", "batch_size", "encoding_format"),
    columns=(
        Column("model", "str"),
        Column("weights", "str", doc="real | dummy"),
        Column("batch_size", "int", "inputs", "inputs in one /v1/embeddings request"),
        Column("encoding_format", "str", doc="float | base64"),
        Column("tokens_per_input", "float", "tokens", "mean prompt tokens per input (usage)", nullable=True),
        Column("tokens_per_s", "float", "tok/s", "prompt tokens / request latency, median over repeats"),
        Column("tokens_per_s_min", "float", "tok/s", "slowest timed repeat", nullable=True),
        Column("tokens_per_s_max", "float", "tok/s", "fastest timed repeat", nullable=True),
        Column("latency_ms", "float", "ms", "median request latency", nullable=True),
        Column("repeats", "int", "", "timed repeats (warm-up excluded)", nullable=True),
        Column("warmup", "int", "", "untimed warm-up requests", nullable=True),
        Column("client_cpu_share", "float", "", "client CPU seconds / wall seconds", nullable=True, role=CLIENT_LOAD),
    ),
)
PREFILL = DatasetSchema(
    name="pooling.prefill_comparison",
    title={"zh": "同样的 token：池化 vs 生成模型的 prefill", "en": "The same tokens: pooling vs a generative prefill"},
    key=("path",),
    columns=(
        Column("path", "str", doc="embeddings | prefill (completions, max_tokens=1)"),
        Column("model", "str"),
        Column("batch_size", "int", "inputs", nullable=True),
        Column("tokens_per_s", "float", "tok/s", "median over repeats (embeddings: the embedding_throughput row of "
               "float at this batch, the same measurement)"),
        Column("tokens_per_s_min", "float", "tok/s", "slowest timed repeat", nullable=True),
        Column("tokens_per_s_max", "float", "tok/s", "fastest timed repeat", nullable=True),
        Column("repeats", "int", "", "timed repeats", nullable=True),
    ),
)
RERANK = DatasetSchema(
    name="pooling.rerank_latency",
    title={"zh": "重排延迟与文档数", "en": "Rerank latency vs document count"},
    key=("model", "route", "documents"),
    columns=(
        Column("model", "str"),
        Column("route", "str", doc="/rerank | /score"),
        Column("documents", "int", "docs"),
        Column("latency_ms", "float", "ms", "median over repeats"),
        Column("latency_ms_min", "float", "ms", "fastest timed repeat", nullable=True),
        Column("latency_ms_max", "float", "ms", "slowest timed repeat", nullable=True),
        Column("repeats", "int", "", "timed repeats (warm-up excluded)", nullable=True),
        Column("prompt_tokens", "int", "tokens", nullable=True),
    ),
)
RERANK_QUALITY = DatasetSchema(
    name="pooling.rerank_quality",
    title={"zh": "重排结果（仅真实权重）", "en": "Rerank ordering (real weights only)"},
    key=("model", "documents"),
    needs_real_weights=True,
    columns=(
        Column("model", "str"),
        Column("documents", "int", "docs"),
        Column("top_document_kind", "str"),
        Column("top_score", "float", "", "relevance score of the top document"),
    ),
)

EMBED_ROLES = ("embedding", "embedding_real")


@register
class Pooling(Experiment):
    name = "pooling"
    title = {"zh": "池化：嵌入与重排", "en": "Pooling: embeddings and rerank"}
    datasets = (THROUGHPUT, PREFILL, RERANK, RERANK_QUALITY)

    def specs(self):
        embed = {role: ServerSpec(role, POOLING, label=f"pooling-{role}") for role in EMBED_ROLES}
        chat = ServerSpec("chat", (), label="generate")
        rerank = ServerSpec("reranker", RERANKER_ARGS, label="rerank")
        return embed, chat, rerank

    def plan(self, profile):
        embed, chat, rerank = self.specs()
        sizes = profile.sizes
        per_batch = sizes["repeats"] + sizes["warmup"]
        steps = [
            Step(embed[role], f"/v1/embeddings batch {b} × {fmt}", per_batch, 0.02 * b * per_batch)
            for role in self.embed_roles(profile) for fmt in ("float", "base64") for b in sizes["embedding_batches"]
        ]
        steps.append(Step(chat, f"/v1/completions prefill, batch {max(sizes['embedding_batches'])}", per_batch, 10))
        steps += [Step(rerank, f"{route} 1 query × {n} docs", per_batch, 0.05 * n * per_batch)
                  for route in ("/rerank", "/score") for n in self.doc_counts(profile)]
        return steps

    @staticmethod
    def embed_roles(profile) -> list[str]:
        return [role for role in EMBED_ROLES if role in profile.models]

    @staticmethod
    def doc_counts(profile) -> tuple[int, ...]:
        return (4, 8, 16, 32)

    def run(self, ctx):
        embed, chat, rerank = self.specs()
        sizes = ctx.sizes
        biggest = max(sizes["embedding_batches"])
        texts = sentences(biggest, sizes["words_per_sentence"])
        for role in self.embed_roles(ctx.profile):
            if not ctx.has(role):
                continue
            model = ctx.model(role)
            points = [(fmt, b) for fmt in ("float", "base64") for b in sizes["embedding_batches"]
                      if not ctx.done(THROUGHPUT, model=model.name, batch_size=b, encoding_format=fmt)]
            needs_prefill_row = role == "embedding" and not ctx.done(PREFILL, path="embeddings")
            if not points and not needs_prefill_row:
                continue  # a resumed run already has these rows: no server start
            client = ctx.client(ctx.server(embed[role]))
            with ctx.progress() as bar:
                task = bar.add_task(f"embeddings {model.name}", total=len(points))
                for fmt, batch in points:
                    ctx.record(THROUGHPUT, self.embed_point(ctx, client, model, texts[:batch], fmt, sizes))
                    bar.advance(task)
            if needs_prefill_row:  # the same point as the throughput row of float at this batch: not measured twice
                row = next((r for r in ctx.staging.rows(THROUGHPUT) if r["model"] == model.name
                            and r["batch_size"] == biggest and r["encoding_format"] == "float"), None) \
                    or self.embed_point(ctx, client, model, texts[:biggest], "float", sizes)  # published earlier
                ctx.record(PREFILL, {"path": "embeddings", "model": model.name, "batch_size": biggest,
                                     **{k: row[k] for k in ("tokens_per_s", "tokens_per_s_min", "tokens_per_s_max",
                                                            "repeats")}})
        if ctx.has("chat") and not ctx.done(PREFILL, path="prefill"):
            server = ctx.server(chat)
            client = ctx.client(server)
            results = self.repeat(ctx, lambda: client.completion(texts[:biggest], max_tokens=1))
            rates = [r.prompt_tokens / r.e2e_s for r in results]
            ctx.record(PREFILL, {"path": "prefill", "model": ctx.model("chat").name, "batch_size": biggest,
                                 "tokens_per_s": statistics.median(rates), "tokens_per_s_min": min(rates),
                                 "tokens_per_s_max": max(rates), "repeats": len(rates)})
        if ctx.has("reranker"):
            self.run_rerank(ctx, rerank)

    @staticmethod
    def repeat(ctx, factory):
        """Warm-up requests (not timed), then timed repeats; raises if any request failed."""
        sizes = ctx.sizes
        batch = ctx.run(gather_limited([factory] * (sizes["warmup"] + sizes["repeats"]), concurrency=1))
        if batch.errors:
            raise RuntimeError(f"requests failed: {batch.errors[:3]}")
        return batch.results[sizes["warmup"]:]

    def embed_point(self, ctx, client, model, inputs, fmt, sizes) -> dict:
        batch = ctx.run(gather_limited([lambda: client.embed(inputs, fmt)] * (sizes["warmup"] + sizes["repeats"]), 1))
        if batch.errors:
            raise RuntimeError(f"/v1/embeddings failed: {batch.errors[:3]}")
        timed = batch.results[sizes["warmup"]:]
        return {
            "model": model.name,
            "weights": model.weights,
            "batch_size": len(inputs),
            "encoding_format": fmt,
            "tokens_per_input": timed[0].prompt_tokens / len(inputs),
            "tokens_per_s": median(rates := [r.prompt_tokens / r.e2e_s for r in timed]),
            "tokens_per_s_min": min(rates), "tokens_per_s_max": max(rates),
            "latency_ms": median(r.e2e_s for r in timed) * 1000,
            "repeats": len(timed),
            "warmup": sizes["warmup"],
            "client_cpu_share": batch.client_cpu_s / batch.wall_s,
        }

    def run_rerank(self, ctx, spec):
        model = ctx.model("reranker")
        points = [(route, n) for route in ("/rerank", "/score") for n in self.doc_counts(ctx.profile)
                  if not ctx.done(RERANK, model=model.name, route=route, documents=n)]
        if not points:
            return
        client = ctx.client(ctx.server(spec))
        for route, n in points:
            docs = documents(n)
            body = ({"model": model.name, "query": QUERY, "documents": [d for _, d in docs]} if route == "/rerank"
                    else {"model": model.name, "queries": QUERY, "documents": [d for _, d in docs]})
            answers = [ctx.run(client.post(route, body)) for _ in range(ctx.sizes["warmup"] + ctx.sizes["repeats"])]
            status, payload, _ = answers[-1]
            if status != 200:
                raise RuntimeError(f"{route} answered {status}: {str(payload)[:300]}")
            timed = answers[ctx.sizes["warmup"]:]
            usage = payload.get("usage", {}) if isinstance(payload, dict) else {}
            latencies_ms = [a[2] * 1000 for a in timed]
            ctx.record(RERANK, {"model": model.name, "route": route, "documents": n,
                                "latency_ms": median(latencies_ms), "latency_ms_min": min(latencies_ms),
                                "latency_ms_max": max(latencies_ms), "repeats": len(latencies_ms),
                                "prompt_tokens": usage.get("prompt_tokens") or usage.get("total_tokens")})
            if route == "/rerank" and model.weights == "real" and not ctx.done(RERANK_QUALITY, model=model.name, documents=n):
                top = max(payload["results"], key=lambda r: r["relevance_score"])
                ctx.record(RERANK_QUALITY, {"model": model.name, "documents": n,
                                            "top_document_kind": docs[top["index"]][0],
                                            "top_score": top["relevance_score"]})
