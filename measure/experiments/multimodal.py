"""Multimodal input (the article's sections 2 and 2-1). Datasets declared; runner pending (issue #5)."""

from __future__ import annotations

from measure.experiment import Experiment, register
from measure.schema import Column, DatasetSchema

STARTUP_MEMORY = DatasetSchema(
    name="multimodal.startup_memory",
    title={"zh": "启动时的编码器预算与 KV 空间", "en": "Encoder budget and KV space at start-up"},
    key=("memory_condition", "limit_mm"),
    columns=(
        Column("memory_condition", "str", doc="full card | 8 GB card emulated"),
        Column("limit_mm", "str", doc="--limit-mm-per-prompt value, or default"),
        Column("encoder_cache_budget_tokens", "int", "tokens", nullable=True),
        Column("kv_cache_tokens", "int", "tokens", nullable=True),
        Column("max_concurrency", "float", "×", nullable=True),
    ),
)
SIZE_HINT_GAIN = DatasetSchema(
    name="multimodal.size_hint_gain",
    title={"zh": "尺寸提示带来的 KV 空间", "en": "KV space gained by size hints"},
    key=("memory_condition",),
    columns=(
        Column("memory_condition", "str"),
        Column("kv_tokens_count_only", "int", "tokens", nullable=True),
        Column("kv_tokens_size_hints", "int", "tokens", nullable=True),
        Column("kv_ratio", "float", "×", "size hints / count only"),
    ),
)
IMAGE_TOKENS = DatasetSchema(
    name="multimodal.image_tokens",
    title={"zh": "图像边长、token 数与首 token 时间", "en": "Image side, tokens and TTFT"},
    key=("side",),
    columns=(
        Column("side", "int", "px"),
        Column("images", "int"),
        Column("prompt_tokens", "int", "tokens", "median over images"),
        Column("ttft_ms", "float", "ms", "median over images and repeats"),
    ),
)
SIDE_DOUBLING = DatasetSchema(
    name="multimodal.side_doubling",
    title={"zh": "边长翻倍时的倍数", "en": "Ratios when the side doubles"},
    key=("side_from", "side_to"),
    columns=(
        Column("side_from", "int", "px"),
        Column("side_to", "int", "px"),
        Column("token_ratio", "float", "×"),
        Column("ttft_ratio", "float", "×", nullable=True),
    ),
)
REPEAT_SUMMARY = DatasetSchema(
    name="multimodal.repeat_summary",
    title={"zh": "重复图像的处理器缓存命中", "en": "Processor-cache hits for repeated images"},
    key=("images", "asks"),
    columns=(
        Column("images", "int"),
        Column("asks", "int", "", "questions per image"),
        Column("mm_cache_queries", "int"),
        Column("mm_cache_hits", "int"),
    ),
)
ACCURACY = DatasetSchema(
    name="multimodal.accuracy",
    title={"zh": "读图正确率（仅真实权重）", "en": "Reading accuracy (real weights only)"},
    key=("question",),
    needs_real_weights=True,
    columns=(
        Column("question", "str", doc="colour | digits"),
        Column("correct", "int"),
        Column("total", "int"),
    ),
)


@register
class Multimodal(Experiment):
    name = "multimodal"
    title = {"zh": "多模态输入", "en": "Multimodal input"}
    datasets = (STARTUP_MEMORY, SIZE_HINT_GAIN, IMAGE_TOKENS, SIDE_DOUBLING, REPEAT_SUMMARY, ACCURACY)
    pending = "issue #5: needs a torchvision that loads beside torch 2.13.0+cpu"
