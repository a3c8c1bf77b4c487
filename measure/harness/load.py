"""Closed-loop load: N requests with at most C in flight, summarised as serving benchmarks do
(output tokens over the whole wall time; TTFT, ITL and end-to-end latency per request)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from measure.harness.client import BatchResult, Client, gather_limited


@dataclass(frozen=True)
class LoadSummary:
    requests: int
    concurrency: int
    wall_s: float
    prompt_tokens: int
    output_tokens: int
    output_tok_s: float
    request_per_s: float
    ttft_median_ms: float | None
    ttft_mean_ms: float | None
    first_chunk_median_ms: float | None  # any chunk with choices: vllm bench serve's first-token rule
    itl_median_ms: float | None  # gap between chunks: shrinks to nothing when chunks arrive in bursts
    tpot_median_ms: float | None  # (end-to-end − TTFT) / (tokens − 1) per request: bursts do not change it
    e2e_median_ms: float
    client_cpu_share: float

    def as_dict(self) -> dict:
        return asdict(self)


def _median_ms(values) -> float | None:
    values = [v * 1000 for v in values if v is not None]
    return statistics.median(values) if values else None


def summarise(batch: BatchResult, concurrency: int) -> LoadSummary:
    if batch.errors:
        raise RuntimeError(f"{len(batch.errors)} of {len(batch.results)} requests failed, e.g. {batch.errors[0]}")
    results = batch.results
    ttfts = [r.ttft_s for r in results if r.ttft_s is not None]
    output = sum(r.completion_tokens or 0 for r in results)
    return LoadSummary(
        requests=len(results),
        concurrency=concurrency,
        wall_s=batch.wall_s,
        prompt_tokens=sum(r.prompt_tokens or 0 for r in results),
        output_tokens=output,
        output_tok_s=output / batch.wall_s,
        request_per_s=len(results) / batch.wall_s,
        ttft_median_ms=_median_ms(ttfts),
        ttft_mean_ms=statistics.mean(ttfts) * 1000 if ttfts else None,
        first_chunk_median_ms=_median_ms(r.first_chunk_s for r in results),
        itl_median_ms=_median_ms(gap for r in results for gap in r.itl_s),
        tpot_median_ms=_median_ms((r.e2e_s - r.ttft_s) / (r.completion_tokens - 1) for r in results
                                  if r.ttft_s is not None and (r.completion_tokens or 0) > 1),
        e2e_median_ms=_median_ms(r.e2e_s for r in results),
        client_cpu_share=batch.client_cpu_s / batch.wall_s,
    )


async def chat_load(client: Client, prompts: list[str], max_tokens: int, concurrency: int) -> BatchResult:
    """One streamed chat request per prompt; ``ignore_eos`` so every request generates ``max_tokens``."""
    def request(prompt: str):
        return lambda: client.chat_stream([{"role": "user", "content": prompt}], max_tokens=max_tokens,
                                          extra_body={"ignore_eos": True})

    return await gather_limited([request(p) for p in prompts], concurrency)


async def embed_load(client: Client, texts: list[str], concurrency: int) -> BatchResult:
    """One single-input /v1/embeddings request per text."""
    return await gather_limited([(lambda t=t: client.embed([t])) for t in texts], concurrency)
