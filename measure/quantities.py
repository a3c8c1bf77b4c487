"""Quantities that more than one dataset measures under the same conditions.

A figure that several datasets hold must tell one story: the build compares the members of each quantity per
environment and model (measure/site/consistency.py). Where they disagree beyond their recorded spread (or, without
one, beyond ``rel_tol``), every claim citing one of them renders 未确认, unless the claim says why its conditions
differ (``differs=``). Declare a quantity here when a new dataset re-measures a figure another one already holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Member:
    """Rows of one dataset that measure the quantity: ``where`` picks them (a tuple value: any of these)."""

    dataset: str
    column: str
    where: dict = field(default_factory=dict)
    # the quantity's ``by`` names that this dataset holds under another column: {by name: its column}
    by_columns: dict = field(default_factory=dict)

    def group_columns(self, by: tuple[str, ...]) -> tuple[str, ...]:
        """This dataset's columns for the quantity's ``by`` names."""
        return tuple(self.by_columns.get(name, name) for name in by)


@dataclass(frozen=True)
class Quantity:
    name: str
    doc: str
    members: tuple[Member, ...]
    by: tuple[str, ...]  # columns every member has (or maps, by_columns): values are compared within one combination
    # Without a recorded spread: how far apart (largest / smallest - 1) figures may be and still agree. Rounds of one
    # run on the H200 differ by up to a quarter at high load (fidelity.comparison), by ~10 % at a fixed batch.
    rel_tol: float = 0.15


QUANTITIES: tuple[Quantity, ...] = (
    Quantity(
        "embedding-throughput",
        "Embedding tok/s of one batch (float vectors), per model and batch size, on a server whose KV cache holds the"
        " batch: the throughput table, the prefill comparison, the roofline and the memory study measure it alike.",
        members=(
            Member("pooling.embedding_throughput", "tokens_per_s", {"encoding_format": "float"}),
            Member("pooling.prefill_comparison", "tokens_per_s", {"path": "embeddings"}),
            Member("pooling_limits.roofline", "tokens_per_s"),
            # 0.1 of the H200 holds fewer tokens than the batch (the study's point): only 0.9 is the same condition.
            Member("pooling_limits.memory", "tokens_per_s", {"setting": "--gpu-memory-utilization 0.9"}),
        ),
        by=("model", "batch_size"),
    ),
    Quantity(
        "first-image-ttft",
        "TTFT of one 448-px image the server has not seen before, one request in flight: the side sweep, the processor-"
        "cache study (both cache sizes: a first sight misses either way) and the one-image point of the multi-image "
        "study each measure it, on servers whose flags differ only in their image limits and cache size; the eager "
        "page's default-mode server (no image limit, sent through the load generator) measures it too.",
        members=(
            Member("eager.multimodal_ttft", "ttft_ms", {"mode": "default"}),
            Member("multimodal.image_tokens", "ttft_ms", {"side": 448}),
            Member("multimodal.processor_cache", "first_ttft_ms"),
            Member("multimodal.multi_image", "ttft_ms", {"images_per_prompt": 1, "concurrency": 1}),
        ),
        by=(),
    ),
    # The load-generator comparison (loadgens) and the fidelity check ran the same chat load (1,024 requests of 209
    # prompt and 128 output tokens, the same server flags and code revision) at 128 in flight on the H200, on two
    # leases. Each tool is its own instrument: ours against ours, the bench against the bench.
    Quantity(
        "chat-throughput-ours",
        "Output tok/s of the chat load as our load generator measured it, per number of requests in flight: the "
        "load-generator comparison and the fidelity check each measure it against the same server configuration.",
        members=(
            Member("loadgens.vllm_server", "output_tok_s", {"tool": "ours"}),
            Member("fidelity.comparison", "harness", {"workload": "chat", "metric": "output throughput"}),
        ),
        by=("concurrency",),
    ),
    Quantity(
        "chat-throughput-bench",
        "Output tok/s of the same chat load as `vllm bench serve` measured it, in the same two runs.",
        members=(
            Member("loadgens.vllm_server", "output_tok_s", {"tool": "vllm bench serve"}),
            Member("fidelity.comparison", "bench", {"workload": "chat", "metric": "output throughput"}),
        ),
        by=("concurrency",),
    ),
    # With prefix caching off every request is a miss, so the prefix study's rows re-measure the long-prompt
    # study's TTFT on the same server. Its prompts carry a question of ~34 tokens after the prefix: from 1k tokens
    # up that is ≤ 3.3 % more work, below that (the CPU stand-in's 128 and 512) another condition.
    Quantity(
        "prefill-ttft-one-request",
        "TTFT of one request at a time whose prompt nothing on the server has seen, per prompt length and batched-token"
        " budget: the long-prompt study and the prefix study's caching-off server (hits and misses alike) measure it.",
        members=(
            Member("prefill.long_prompt", "ttft_ms"),
            Member("prefill.prefix_cache", "ttft_ms", {"caching": "off", "prefix_tokens": (1024, 2048, 4096, 16384)},
                   by_columns={"prompt_tokens": "prefix_tokens"}),
        ),
        by=("prompt_tokens", "max_num_batched_tokens"),
    ),
    Quantity(
        "lora-one-adapter-throughput",
        "Output tok/s of the LoRA load sent to one rank-8 adapter: the overhead study's adapter arm and the slots "
        "study's one-adapter point send the same requests, on servers that differ only in their adapter list and "
        "--max-loras (3 against 2, either holds the one adapter).",
        members=(
            Member("lora.overhead", "adapter_value", {"metric": "throughput", "rank": 8}),
            Member("lora.slots", "tokens_per_s", {"adapters": 1}),
        ),
        by=(),
    ),
)


@dataclass(frozen=True)
class CardFigure:
    """A figure two GPU cards measure under the same conditions (one dataset, one row key, the same plan): the
    cross-card check (measure/site/cards.py) compares it between cards ranked by their own measured bandwidth and
    compute. ``faster``: "higher" (a rate) or "lower" (a time). ``reason``: a measured cause, per language, for a
    weaker card being faster; without one such rows render 未确认 on both cards."""

    dataset: str
    column: str
    faster: str
    reason: dict = field(default_factory=dict)


CARD_FIGURES: tuple[CardFigure, ...] = (
    CardFigure("capacity.decode_floor", "tpot_ms", "lower"),
    CardFigure("capacity.knee", "output_tok_s", "higher"),
    CardFigure("api_servers.load", "tokens_per_s", "higher"),
    CardFigure("pooling_limits.roofline", "tokens_per_s", "higher"),
    CardFigure("pooling_limits.memory", "tokens_per_s", "higher"),
)
