"""Parallelism (docs/parallelism.*.md): Qwen3-8B on one H200 as the baseline; layouts over several GPUs are
declared and wait for a host that has them; DP routing on the CPU stand-in."""

from measure.site.facts import Chart, Question, Ratio, Table, Value, topic

H200 = "gpu-1x-nvidia-h200"
CPU = "cpu-2c-x86-64"


def scaling(column: str, layout: str, concurrency: int, digits: int, **options) -> Value:
    return Value("parallelism.scaling", column, {"layout": layout, "concurrency": concurrency},
                 {"env": H200, "digits": digits} | options)


def routing(column: str, routing_: str, digits: int = 1) -> Value:
    return Value("parallelism.dp_routing", column, {"layout": "DP=2", "routing": routing_}, {"env": CPU, "digits": digits})


# The tables and charts the page shows, declared once: both languages cite them by name
FIGURES = {
    "comm_cost_table": Table("parallelism.comm_cost"),
    "scaling_chart": Chart("parallelism.scaling", env="cpu-2c-x86-64",
        title={"zh": "CPU 后端：缩小版的 Qwen3 替身，不是 Qwen3-8B", "en": "CPU backend: the tiny Qwen3 stand-in, not Qwen3-8B"},
        x="concurrency", y="output_tok_s", color="layout", log_x=True, spread=("output_tok_s_min", "output_tok_s_max")),
    "scaling_table": Table("parallelism.scaling",
        columns=["layout", "ranks", "enforce_eager", "concurrency", "requests", "rounds", "output_tok_s", "ttft_ms",
            "tpot_ms", "engine_itl_ms", "kv_cache_tokens", "max_concurrency"]),
    "dp_routing_table": Table("parallelism.dp_routing"),
    "servers_startup_table": Table("servers.startup",
        columns=["server", "model", "weights", "kv_cache_tokens", "max_concurrency", "max_concurrency_tokens",
            "kv_cache_gib", "startup_s", "started_together"]),
    "layouts_table": Table("parallelism.layouts"),
}

topic("parallelism", facts=FIGURES | {
    "tok_s_1": scaling("output_tok_s", "single", 1, 0, show_range=True),
    "tok_s_256": scaling("output_tok_s", "single", 256, 0, show_range=True),
    "tok_s_256_vs_1": Ratio("tok_s_256", ">>", "tok_s_1", digits=0),
    "tpot_1": scaling("tpot_ms", "single", 1, 2, show_range=True),
    "tpot_256": scaling("tpot_ms", "single", 256, 1, show_range=True),
    "tp2_tpot_1": scaling("tpot_ms", "TP=2", 1, 2, missing_ok=True),
    "kv_tokens": scaling("kv_cache_tokens", "single", 1, 0),
    "max_concurrency": scaling("max_concurrency", "single", 1, 1, unit=""),
    "hit_rate_round_robin": routing("prefix_hit_rate", "round-robin"),
    "hit_rate_pinned": routing("prefix_hit_rate", "pinned"),
    "ttft_round_robin": routing("ttft_ms", "round-robin"),
    "ttft_pinned": routing("ttft_ms", "pinned"),
}, questions=(
    Question(
        ask={"zh": "拆分之前，一张 H200 跑 Qwen3-8B 有多快？", "en": "Before splitting anything: how fast is Qwen3-8B on one H200?"},
        answer={"zh": "默认模式、虚拟权重、每个请求约 400 个词输入和 128 个 token 输出：一次一个请求时输出吞吐 {tok_s_1}，"
                      "每个 token {tpot_1}；256 个请求在途时输出吞吐 {tok_s_256}（{tok_s_256_vs_1}），每个 token {tpot_256}。",
                "en": "In default mode with dummy weights, about 400 words in and 128 tokens out per request: one request "
                      "at a time produced {tok_s_1} at {tpot_1} a token; 256 in flight produced {tok_s_256} "
                      "({tok_s_256_vs_1}) at {tpot_256} a token."},
        figure="measured",
        unsettled={"zh": "需要在一张 GPU 上按并发测 Qwen3-8B。", "en": "Settling it takes Qwen3-8B by concurrency on one GPU."}),
    Question(
        ask={"zh": "TP=2 能让 8B 模型的每个 token 更快吗？", "en": "Does TP=2 make each token of an 8B model faster?"},
        answer={"zh": "两张 GPU、一个请求时每个 token 用 {tp2_tpot_1}，对比一张时的 {tpot_1}。",
                "en": "On two GPUs, one request at a time, a token took {tp2_tpot_1}, against {tpot_1} on one."},
        figure="measured",
        unsettled={"zh": "需要在多张 GPU 的主机上跑完一次：两次尝试都没有完成（见“本站能测什么”一节），多卡布局已经写好。",
                   "en": "Settling it takes a completed run on a host with several GPUs: the two tries did not finish "
                         "(see \"What this site can measure\"); the layouts are written."}),
    Question(
        ask={"zh": "一张 H200 的 KV 缓存能同时容纳多少请求？", "en": "How many requests fit in one H200's KV cache?"},
        answer={"zh": "vLLM 启动时报告 KV 缓存有 {kv_tokens}，按每个请求用满 4,096 个 token 的上下文（--max-model-len 4096）计，"
                      "最大并发是 {max_concurrency} 个请求（Qwen3-8B，--gpu-memory-utilization 用默认值）。",
                "en": "At start-up vLLM reported a KV cache of {kv_tokens}, a maximum concurrency of {max_concurrency} "
                      "requests each using its whole 4,096-token context (--max-model-len 4096; Qwen3-8B, "
                      "--gpu-memory-utilization at its default)."},
        figure="startup-log",
        unsettled={"zh": "需要读服务器的启动日志。", "en": "Settling it takes the server's start-up log."}),
    Question(
        ask={"zh": "数据并行时，把同一前缀的请求固定发给同一个副本有用吗？",
             "en": "With data parallelism, does pinning a prefix to one replica help?"},
        answer={"zh": "在 CPU 替身上（两个副本，只看规律，不看速度），前缀缓存命中率轮流分发时是 {hit_rate_round_robin}，"
                      "固定分发时是 {hit_rate_pinned}。首 token 时间的中位数，固定分发时 {ttft_pinned}，轮流分发时 {ttft_round_robin}："
                      "各只有一次 12 个请求的运行，没有重复测量，看不出这个差别有多少是波动。",
                "en": "On the CPU stand-in (two replicas; shape, not speed), the prefix-cache hit rate was "
                      "{hit_rate_round_robin} with round-robin routing and {hit_rate_pinned} with each prefix pinned. The median "
                      "first token came after {ttft_pinned} pinned and {ttft_round_robin} round-robin, from one run of 12 "
                      "requests each: with no repeats, how much of that gap is noise cannot be told."},
        figure="dp",
        unsettled={"zh": "需要两个数据并行副本和共享前缀的请求。", "en": "Settling it takes two data-parallel replicas and requests sharing prefixes."}),
), title={"zh": "并行化", "en": "Parallelism"})
