"""Method (docs/method.*.md): whether this site's load client keeps up with `vllm bench serve` on the H200."""

from measure.site.facts import Question, Ratio, Value, topic

H200 = "gpu-1x-nvidia-h200"


def fidelity(column: str, metric: str, digits: int, **options) -> Value:
    return Value("fidelity.comparison", column, {"workload": "chat", "concurrency": 32, "metric": metric},
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
), title={"zh": "方法", "en": "Method"})
