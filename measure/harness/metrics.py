"""vLLM's Prometheus ``/metrics``: snapshots and before/after deltas.

Counters are summed over every label set (so a DP>1 server's ``engine="0"``, ``engine="1"``… add
up); histograms keep ``_sum`` and ``_count``.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

COUNTERS = (
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:mm_cache_queries",
    "vllm:mm_cache_hits",
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:request_success",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
    "vllm:num_preemptions",
)
HISTOGRAMS = (
    "vllm:time_to_first_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:inter_token_latency_seconds",
)


@dataclass(frozen=True)
class Snapshot:
    values: dict[str, float]

    def __sub__(self, other: Snapshot) -> dict[str, float]:
        return {k: self.values.get(k, 0.0) - other.values.get(k, 0.0) for k in set(self.values) | set(other.values)}

    def get(self, name: str) -> float:
        return self.values.get(name, 0.0)


def histogram_mean_ms(delta: dict[str, float], name: str) -> float | None:
    """Mean of histogram ``name`` over a before/after delta, in ms (None when nothing was observed)."""
    count = delta.get(name + "_count", 0.0)
    return delta.get(name + "_sum", 0.0) / count * 1000 if count else None


def parse(text: str) -> Snapshot:
    """Sum counters (``NAME_total``) and histogram ``_sum``/``_count`` over all label sets.

    Samples are matched by name, not by family: the family name depends on whether the exporter's
    ``# TYPE`` line carries the ``_total`` suffix (vLLM's does).
    """
    wanted = {c + "_total": c for c in COUNTERS}
    wanted |= {h + suffix: h + suffix for h in HISTOGRAMS for suffix in ("_sum", "_count")}
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = wanted.get(sample.name)
            if key is not None:
                values[key] = values.get(key, 0.0) + sample.value
    return Snapshot(values)


def snapshot(base_url: str, api_key: str | None = None, timeout: float = 30.0) -> Snapshot:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    response = httpx.get(base_url.rstrip("/") + "/metrics", headers=headers, timeout=timeout)
    response.raise_for_status()
    return parse(response.text)
