"""LoRA multi-adapter serving. Datasets declared; runner pending (issue #7)."""

from __future__ import annotations

from measure.experiment import Experiment, register
from measure.schema import Column, DatasetSchema

OVERHEAD = DatasetSchema(
    name="lora.overhead",
    title={"zh": "使用适配器的速度损失", "en": "Slowdown from serving through an adapter"},
    key=("model", "rank", "metric"),
    columns=(
        Column("model", "str"),
        Column("rank", "int", nullable=True),
        Column("metric", "str", doc="what slowed down, e.g. throughput"),
        Column("slowdown_pct", "float", "%"),
    ),
)
SLOTS = DatasetSchema(
    name="lora.slots",
    title={"zh": "适配器数超过槽位时的吞吐量", "en": "Throughput when adapters outnumber slots"},
    key=("adapters", "max_loras"),
    columns=(
        Column("adapters", "int"),
        Column("max_loras", "int"),
        Column("tokens_per_s", "float", "tok/s"),
    ),
)


@register
class Lora(Experiment):
    name = "lora"
    title = {"zh": "LoRA 多适配器服务", "en": "LoRA multi-adapter serving"}
    datasets = (OVERHEAD, SLOTS)
    pending = "issue #7"
