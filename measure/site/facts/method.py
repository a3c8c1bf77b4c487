"""Method (docs/method.*.md): whether this site's load client keeps up with `vllm bench serve` on the H200."""

from measure.site.facts import Chart, Question, Ratio, Table, Value, topic

H200 = "gpu-1x-nvidia-h200"
H100 = "gpu-1x-nvidia-h100-80gb-hbm3"


def fidelity(column: str, metric: str, digits: int, concurrency: int = 32, **options) -> Value:
    return Value("fidelity.comparison", column, {"workload": "chat", "concurrency": concurrency, "metric": metric},
                 {"env": H200, "digits": digits} | options)


def interval(column: str, point: str, digits: int | None, env: str = H200, **options) -> Value:
    return Value("fidelity_interval.ratio", column, {"point": point, "metric": "output throughput"},
                 {"env": env, "digits": digits} | options)


# The tables and charts the page shows, declared once: both languages cite them by name
FIGURES = {
    "fidelity_client_ceiling_table": Table("fidelity.client_ceiling",
        columns=["workload", "mode", "workers", "concurrency", "chunk_gap_ms", "request_per_s", "chunks_per_s",
            "lag_median_ms", "worker_cpu_max", "limited_by"]),
    "fidelity_comparison_table": Table("fidelity.comparison",
        columns=["workload", "concurrency", "metric", "unit", "harness", "harness_min", "harness_max", "bench",
            "bench_min", "bench_max", "ratio"],
        tolerance={"ratio": [0.95, 1.05]}),
    "fidelity_who_was_busy_table": Table("fidelity.comparison", where={"metric": "request throughput"},
        columns=["workload", "concurrency", "harness_workers", "harness_worker_cpu_max", "bench_cpu_share",
            "api_server_cpu_share", "limited_by"],
        key="fidelity-who-was-busy"),
    "fidelity_engine_view_table": Table("fidelity.engine_view",
        columns=["workload", "concurrency", "tool", "engine_ttft_ms", "engine_itl_ms", "engine_e2e_ms",
            "engine_queue_ms", "client_cpu_share", "api_server_cpu_share"]),
    "fidelity_workloads_table": Table("fidelity.workloads",
        columns=["workload", "concurrency", "model", "endpoint", "requests", "prompt_tokens_mean", "output_tokens",
            "rounds", "harness_workers"],
        collapsed=True),
    "fidelity_interval_ratio_chart": Chart("fidelity_interval.ratio", x="metric", y="ratio", color="point",
        kind="scatter", log_y=True, spread=("ratio_ci_low", "ratio_ci_high"), line_at=1),
    "fidelity_interval_ratio_table": Table("fidelity_interval.ratio",
        columns=["point", "metric", "unit", "harness", "bench", "ratio", "ratio_ci_low", "ratio_ci_high",
            "ci_max_gap_pct", "requests", "rounds"],
        digits={"ratio": 3, "ratio_ci_low": 3, "ratio_ci_high": 3}),
    "fidelity_interval_who_was_busy_table": Table("fidelity_interval.ratio", where={"metric": "output throughput"},
        columns=["point", "concurrency", "api_server_count", "harness_spread_pct", "bench_spread_pct",
            "harness_worker_cpu_max", "bench_cpu_share", "api_cpu_max", "engine_cpu", "limited_by"],
        key="fidelity-interval-who-was-busy"),
    "loadgens_ceiling_table": Table("loadgens.ceiling"),
    "loadgens_vllm_server_table": Table("loadgens.vllm_server",
        columns=["tool", "version", "concurrency", "requests", "prompt_tokens", "output_tok_s", "output_tok_s_min",
            "output_tok_s_max", "ttft_median_ms", "itl_median_ms", "tpot_median_ms", "cpu_cores"],
        tolerance={"tpot_median_ms": [0.01, 100000]}),
}

topic("method", facts=FIGURES | {
    "ours_tok_s": fidelity("harness", "output throughput", 0, unit="tok/s"),
    "bench_tok_s": fidelity("bench", "output throughput", 0, unit="tok/s"),
    "api_server_cpu": fidelity("api_server_cpu_share", "output throughput", 2, unit=""),
    "ours_vs_bench": Ratio("ours_tok_s", "~", "bench_tok_s"),
    "ratio_128": fidelity("ratio", "output throughput", 3, concurrency=128),
    "ours_tok_s_128": fidelity("harness", "output throughput", 0, concurrency=128, unit="tok/s"),
    "bench_tok_s_128": fidelity("bench", "output throughput", 0, concurrency=128, unit="tok/s"),
    "agree_128": Ratio("ours_tok_s_128", "≈", "bench_tok_s_128", show=False),
    # the ratio with a confidence interval on the H200, engine-bound ...
    "iv_concurrency": interval("concurrency", "engine-bound", 0, unit=""),
    "iv_requests": interval("requests", "engine-bound", 0, unit=""),
    "iv_rounds": interval("rounds", "engine-bound", 0, unit=""),
    "iv_ratio": interval("ratio", "engine-bound", 3),
    "iv_low": interval("ratio_ci_low", "engine-bound", 3),
    "iv_high": interval("ratio_ci_high", "engine-bound", 3),
    "iv_gap": interval("ci_max_gap_pct", "engine-bound", 1),
    "iv_spread_ours": interval("harness_spread_pct", "engine-bound", 0),
    "iv_spread_bench": interval("bench_spread_pct", "engine-bound", 0),
    "iv_engine_cpu": interval("engine_cpu", "engine-bound", 2, unit=""),
    "iv_api_cpu": interval("api_cpu_max", "engine-bound", 2, unit=""),
    "iv_bench_cpu": interval("bench_cpu_share", "engine-bound", 2, unit=""),
    "iv_worker_cpu": interval("harness_worker_cpu_max", "engine-bound", 2, unit=""),
    "iv_engine_over_api": Ratio("iv_engine_cpu", "≥", "iv_api_cpu", show=False),
    "iv_engine_over_bench": Ratio("iv_engine_cpu", "≥", "iv_bench_cpu", show=False),
    # ... and at high load with several API-server processes
    "hl_concurrency": interval("concurrency", "high load", 0, unit=""),
    "hl_api_servers": interval("api_server_count", "high load", 0, unit=""),
    "hl_ratio": interval("ratio", "high load", 3),
    "hl_ours_tok_s": interval("harness", "high load", 0, unit="tok/s"),
    "hl_bench_tok_s": interval("bench", "high load", 0, unit="tok/s"),
    "hl_bench_less": Ratio("hl_bench_tok_s", "<", "hl_ours_tok_s", show=False),
    "hl_bench_cpu": interval("bench_cpu_share", "high load", 2, unit=""),
    "hl_worker_cpu": interval("harness_worker_cpu_max", "high load", 2, unit=""),
    "hl_low": interval("ratio_ci_low", "high load", 3),
    "hl_high": interval("ratio_ci_high", "high load", 3),
    "hl_limited_by": interval("limited_by", "high load", None),
    "hl_workers_idle": Ratio("hl_worker_cpu", "<", "hl_bench_cpu", show=False),
    # an H100 lease's run of the same experiment at the code's later sizes (the page's "On other GPUs" paragraph)
    "h100_iv_requests": interval("requests", "engine-bound", 0, env=H100, unit=""),
    "h100_iv_gap": interval("ci_max_gap_pct", "engine-bound", 1, env=H100),
    "h100_iv_low": interval("ratio_ci_low", "engine-bound", 3, env=H100),
    "h100_iv_high": interval("ratio_ci_high", "engine-bound", 3, env=H100),
    "h100_hl_limited_by": interval("limited_by", "high load", None, env=H100),
    "h100_hl_bench_cpu": interval("bench_cpu_share", "high load", 2, env=H100, unit=""),
    "h100_hl_worker_cpu": interval("harness_worker_cpu_max", "high load", 2, env=H100, unit=""),
}, questions=(
    Question(
        ask={"zh": "本站的负载客户端测出的数字，和 vllm bench serve 一致吗？",
             "en": "Does this site's load client measure what vllm bench serve measures?"},
        answer={"zh": "32 个对话请求在途时分辨不出：在 H200 上，本站客户端与 vllm bench serve 测得的输出吞吐{ours_vs_bench}。"
                      "这时定节奏的是 vLLM 唯一的 API 服务器进程（用了 {api_server_cpu} 个核），两个客户端都没有饱和，"
                      "所以这几轮既不能说明两个工具有差别，也不能说明它们有多接近。128 个在途时（一个 API 服务器进程），同一次运行里两者一致："
                      "{ours_tok_s_128} 对 {bench_tok_s_128}（比值 {ratio_128}{agree_128}）。",
                "en": "Not shown at 32 chat requests in flight: on the H200, the output throughput our client and vllm "
                      "bench serve measured shows {ours_vs_bench}. The pace was set by vLLM's one API-server process "
                      "({api_server_cpu} of a core), not by either client, so these rounds show neither that the tools "
                      "differ nor how close they are. At 128 in flight (one API-server process) the two agreed within that run: "
                      "{ours_tok_s_128} against {bench_tok_s_128} (ratio {ratio_128}{agree_128})."},
        figure="bench-check",
        unsettled={"zh": "需要在同一服务器上交替跑两个客户端。", "en": "Settling it takes both clients in turn against one server."}),
    Question(
        ask={"zh": "本站客户端和 vllm bench serve 最多可能差多少？",
             "en": "How far apart could our client and vllm bench serve be?"},
        answer={"zh": "低负载时（{iv_concurrency} 个在途、一个 API 服务器进程）不能排除两者相差多达 {iv_gap}，超出本项目百分之三的目标；高负载时（{hl_concurrency} 个在途、{hl_api_servers} 个 API 服务器进程）bench 测得的吞吐比本站少{hl_bench_less}，差距多半出在 bench 自己已经饱和。",
                "en": "At low load ({iv_concurrency} in flight, one API-server process) a gap of up to {iv_gap} cannot be ruled out, more than the three per cent this project aims at; at high load ({hl_concurrency} in flight, {hl_api_servers} API-server processes) the bench measured less throughput than ours{hl_bench_less}, most likely because the bench itself was saturated."},
        conditions={"zh": "H200，对话请求，每轮 {iv_requests} 个请求，{iv_rounds} 对交替进行的轮次。",
                    "en": "On the H200, chat requests, {iv_requests} requests a round, {iv_rounds} alternating pairs of rounds."},
        caveats={"zh": "低负载时本站 / bench 的输出吞吐之比为 {iv_ratio}（95% 置信区间 {iv_low}–{iv_high}）。区间这么宽，是因为同一服务器、同样的请求下，每个工具自己的各轮之间就相差 {iv_spread_ours}（本站）和 {iv_spread_bench}（bench）；两个客户端都不忙（最忙的进程分别用了 {iv_worker_cpu} 和 {iv_bench_cpu} 个核），最忙的是引擎核心，{iv_engine_cpu} 个核{iv_engine_over_api}{iv_engine_over_bench}。高负载时各轮中位数 bench 为 {hl_bench_tok_s}，本站为 {hl_ours_tok_s}；逐对相比，本站 / bench 的平均比值为 {hl_ratio}（区间 {hl_low}–{hl_high}）。bench 唯一的进程用了 {hl_bench_cpu} 个核，超过了判为饱和的占用，本站最忙的工作进程只用了 {hl_worker_cpu} 个核{hl_workers_idle}，这些数字因此标为未确认。",
                 "en": "At low load ours / the bench's output throughput was {iv_ratio} (95 % confidence interval {iv_low}–{iv_high}). The interval is that wide because each tool's own rounds spread by {iv_spread_ours} (ours) and {iv_spread_bench} (the bench's) on one server with the same requests; neither client was busy (their busiest processes used {iv_worker_cpu} and {iv_bench_cpu} of a core), and the busiest process was the engine core at {iv_engine_cpu} of a core{iv_engine_over_api}{iv_engine_over_bench}. At high load the rounds' medians were {hl_bench_tok_s} for the bench against {hl_ours_tok_s} for ours; pair by pair, ours / the bench's averaged {hl_ratio} (interval {hl_low}–{hl_high}). The bench's one process used {hl_bench_cpu} of a core, past the saturation share, while our busiest worker used {hl_worker_cpu}{hl_workers_idle}, which is why these figures are marked unconfirmed."},
        figure="fidelity-interval",
        unsettled={"zh": "需要在 H200 上运行这个置信区间实验。",
                   "en": "Settling it takes the fidelity_interval run on the H200."},
        elsewhere="fidelity-interval-other-gpus"),
), title={"zh": "方法", "en": "Method"})
