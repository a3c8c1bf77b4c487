"""Method (docs/method.*.md): whether this site's load client keeps up with `vllm bench serve` on the H200."""

from measure.site.facts import Question, Ratio, Value, topic

H200 = "gpu-1x-nvidia-h200"


def fidelity(column: str, metric: str, digits: int, **options) -> Value:
    return Value("fidelity.comparison", column, {"workload": "chat", "concurrency": 32, "metric": metric},
                 {"env": H200, "digits": digits} | options)


def interval(column: str, point: str, digits: int | None, **options) -> Value:
    return Value("fidelity_interval.ratio", column, {"point": point, "metric": "output throughput"},
                 {"env": H200, "digits": digits} | options)


topic("method", facts={
    "ours_tok_s": fidelity("harness", "output throughput", 0, unit="tok/s"),
    "bench_tok_s": fidelity("bench", "output throughput", 0, unit="tok/s"),
    "ours_min": fidelity("harness_min", "output throughput", 0, unit="tok/s"),
    "ours_max": fidelity("harness_max", "output throughput", 0, unit="tok/s"),
    "bench_min": fidelity("bench_min", "output throughput", 0, unit="tok/s"),
    "bench_max": fidelity("bench_max", "output throughput", 0, unit="tok/s"),
    "api_server_cpu": fidelity("api_server_cpu_share", "output throughput", 2, unit=""),
    # the two ranges overlap: each one's slowest round is below the other's fastest
    "overlap_ours": Ratio("ours_min", "<", "bench_max", show=False),
    "overlap_bench": Ratio("bench_min", "<", "ours_max", show=False),
    # the ratio with a confidence interval: engine-bound, and at high load with several API-server processes
    "iv_concurrency": interval("concurrency", "engine-bound", 0, unit=""),
    "iv_rounds": interval("rounds", "engine-bound", 0, unit=""),
    "iv_ratio": interval("ratio", "engine-bound", 3),
    "iv_low": interval("ratio_ci_low", "engine-bound", 3),
    "iv_high": interval("ratio_ci_high", "engine-bound", 3),
    "iv_gap": interval("ci_max_gap_pct", "engine-bound", 1),
    "hl_concurrency": interval("concurrency", "high load", 0, unit=""),
    "hl_api_servers": interval("api_server_count", "high load", 0, unit=""),
    "hl_ratio": interval("ratio", "high load", 3),
    "hl_low": interval("ratio_ci_low", "high load", 3),
    "hl_high": interval("ratio_ci_high", "high load", 3),
    "hl_spread_ours": interval("harness_spread_pct", "high load", 1),
    "hl_spread_bench": interval("bench_spread_pct", "high load", 1),
    "hl_api_cpu": interval("api_cpu_max", "high load", 2, unit=""),
    "hl_engine_cpu": interval("engine_cpu", "high load", 2, unit=""),
    "hl_limited_by": interval("limited_by", "high load", None),
}, questions=(
    Question(
        ask={"zh": "本站的负载客户端测出的数字，和 vllm bench serve 一致吗？",
             "en": "Does this site's load client measure what vllm bench serve measures?"},
        answer={"zh": "H200 上 32 个对话请求在途时，本站客户端测得输出吞吐 {ours_tok_s}（各轮 {ours_min}–{ours_max}），"
                      "vllm bench serve 测得 {bench_tok_s}（{bench_min}–{bench_max}），两者各轮的范围重叠"
                      "{overlap_ours}{overlap_bench}。同时 vLLM 的 API 服务器进程用了 {api_server_cpu} 个核。",
                "en": "With 32 chat requests in flight on the H200, our client measured {ours_tok_s} of output "
                      "(rounds {ours_min}–{ours_max}) and vllm bench serve {bench_tok_s} ({bench_min}–{bench_max}); "
                      "the two ranges overlap{overlap_ours}{overlap_bench}. vLLM's API-server process used "
                      "{api_server_cpu} of a core meanwhile."},
        figure="bench-check",
        unsettled={"zh": "需要在同一服务器上交替跑两个客户端。", "en": "Settling it takes both clients in turn against one server."}),
    Question(
        ask={"zh": "本站客户端和 vllm bench serve 最多可能差多少？",
             "en": "How far apart could our client and vllm bench serve be?"},
        answer={"zh": "H200 上 {iv_concurrency} 个对话请求在途、引擎决定速度时，{iv_rounds} 对交替的轮次给出"
                      "本站 / bench 的输出吞吐比 {iv_ratio}（95% 置信区间 {iv_low}–{iv_high}），即两者相差最多 "
                      "{iv_gap}。{hl_concurrency} 个请求在途、{hl_api_servers} 个 API 服务器进程时，比值为 "
                      "{hl_ratio}（{hl_low}–{hl_high}）；各轮之间相差 {hl_spread_ours}（本站）和 "
                      "{hl_spread_bench}（bench），其间最忙的 API 服务器进程用了 {hl_api_cpu} 个核，引擎核心 "
                      "{hl_engine_cpu} 个核（达到饱和的：{hl_limited_by}）。",
                "en": "With {iv_concurrency} chat requests in flight on the H200, where the engine sets the pace, "
                      "{iv_rounds} alternating pairs of rounds put ours / the bench's output throughput at {iv_ratio} "
                      "(95 % confidence interval {iv_low}–{iv_high}): the two differ by at most {iv_gap}. At "
                      "{hl_concurrency} in flight with {hl_api_servers} API-server processes the ratio was "
                      "{hl_ratio} ({hl_low}–{hl_high}); rounds spread {hl_spread_ours} (ours) and "
                      "{hl_spread_bench} (the bench's), while the busiest API-server process used {hl_api_cpu} of a "
                      "core and the engine core {hl_engine_cpu} (saturated: {hl_limited_by})."},
        figure="fidelity-interval",
        unsettled={"zh": "需要在 H200 上运行这个置信区间实验（尚未运行）；CPU 替身上的结果在所链接的小节里。",
                   "en": "Settling it takes the fidelity_interval run on the H200 (not run yet); the CPU stand-in's "
                         "rows are in the section linked here."}),
), title={"zh": "方法", "en": "Method"})
