"""TP / PP / DP / EP on several GPUs. Datasets declared; runner pending (issue #9, needs a multi-GPU host)."""

from __future__ import annotations

from measure.experiment import Experiment, register
from measure.schema import Column, DatasetSchema

SCALING = DatasetSchema(
    name="parallelism.scaling",
    title={"zh": "并行方式与吞吐量", "en": "Parallel layout and throughput"},
    key=("layout", "concurrency"),
    columns=(
        Column("layout", "str", doc="e.g. TP=2, PP=2, DP=2"),
        Column("concurrency", "int"),
        Column("tokens_per_s", "float", "tok/s"),
        Column("ttft_ms", "float", "ms", nullable=True),
        Column("kv_cache_tokens", "int", "tokens", nullable=True),
    ),
)
COMM_COST = DatasetSchema(
    name="parallelism.comm_cost",
    title={"zh": "TP 的通信代价", "en": "The communication cost of TP"},
    key=("layout",),
    columns=(
        Column("layout", "str"),
        Column("itl_ms", "float", "ms", "per-token latency at batch 1"),
        Column("interconnect", "str", nullable=True),
    ),
)
DP_ROUTING = DatasetSchema(
    name="parallelism.dp_routing",
    title={"zh": "DP 下的前缀缓存命中与路由", "en": "Prefix-cache hits under DP and routing"},
    key=("routing",),
    columns=(
        Column("routing", "str", doc="round-robin | pinned"),
        Column("prefix_hit_rate", "float", "%"),
    ),
)


@register
class Parallelism(Experiment):
    name = "parallelism"
    title = {"zh": "并行化：TP、PP、DP、EP", "en": "Parallelism: TP, PP, DP, EP"}
    datasets = (SCALING, COMM_COST, DP_ROUTING)
    pending = "issue #9: needs a host with 2-4 GPUs"
