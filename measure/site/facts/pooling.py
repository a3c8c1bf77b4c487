"""Pooling (docs/pooling.*.md): embedding throughput on the H200, its output format and batch size, a pooling
server's memory, and which rerank route an API key guards."""

from measure.site.facts import Chart, Product, Question, Ratio, Table, Unconfirmed, Value, topic

H200 = "gpu-1x-nvidia-h200"
CPU = "cpu-2c-x86-64"


def embed(batch: int, fmt: str) -> Value:
    return Value("pooling.embedding_throughput", "tokens_per_s",
                 {"model": "Qwen3-Embedding-0.6B", "batch_size": batch, "encoding_format": fmt},
                 {"env": H200, "digits": 0, "show_range": True})


def memory(column: str, utilization: str, **options) -> Value:
    return Value("pooling_limits.memory", column, {"setting": f"--gpu-memory-utilization {utilization}"},
                 {"env": H200} | options)


def single_requests(column: str) -> Value:
    """The fidelity check's embeddings load on the same server: single-input requests, 64 in flight (float output);
    ``column``: harness (ours), bench, or the workload's prompt_tokens_mean."""
    if column == "prompt_tokens_mean":
        return Value("fidelity.workloads", column, {"workload": "embeddings", "concurrency": 64}, {"env": H200, "digits": 0})
    return Value("fidelity.comparison", column, {"workload": "embeddings", "concurrency": 64, "metric": "request throughput"},
                 {"env": H200, "digits": 0, "unit": "req/s"})


def batching(env: str, words: int, per_request: int, concurrency: int, column: str = "tokens_per_s") -> Value:
    """The embedding_batching grid: N inputs in one request, or single-input requests in flight, on one server."""
    return Value("embedding_batching.grid", column,
                 {"input_words": words, "inputs_per_request": per_request, "concurrency": concurrency},
                 {"env": env, "digits": 0, "show_range": column == "tokens_per_s", "missing_ok": env == H200})


def rerank(words: int, documents: int, column: str) -> Value:
    return Value("rerank_documents.latency", column, {"document_words": words, "documents": documents},
                 {"env": H200, "digits": 0, "missing_ok": True, "show_range": column == "pairs_per_s"})


def status(path: str, key: str, expect: int) -> Value:
    # expect: the answer's "No" rests on these codes
    return Value("security.auth_routes", key, {"server": "pooling", "method": "POST", "path": path},
                 {"env": H200, "unit": "", "expect": expect})


# The tables and charts the page shows, declared once: both languages cite them by name
FIGURES = {
    "prefill_comparison_table": Table("pooling.prefill_comparison"),
    "pooling_limits_roofline_table": Table("pooling_limits.roofline",
        columns=["model", "batch_size", "tokens_per_s", "achieved_tflops", "peak_share_pct", "client_ms", "engine_ms",
            "outside_engine_ms", "client_cpu_share"]),
    "embedding_throughput_chart": Chart("pooling.embedding_throughput", x="batch_size", y="tokens_per_s",
        color="encoding_format", where={"weights": "dummy"}, log_x=True,
        spread=("tokens_per_s_min", "tokens_per_s_max")),
    "embedding_throughput_table": Table("pooling.embedding_throughput",
        columns=["model", "weights", "batch_size", "encoding_format", "tokens_per_input", "tokens_per_s", "latency_ms",
            "client_cpu_share"],
        collapsed=True),
    "embedding_batching_chart_h200_long": Chart("embedding_batching.grid", x="concurrency", y="tokens_per_s",
        color="inputs_per_request", env="gpu-1x-nvidia-h200", where={"input_words": 512}, log_x=True,
        spread=("tokens_per_s_min", "tokens_per_s_max"), missing_ok=True,
        title={"zh": "每条输入 512 个词", "en": "Inputs of 512 words"}),
    "embedding_batching_chart_h200_short": Chart("embedding_batching.grid", x="concurrency", y="tokens_per_s",
        color="inputs_per_request", env="gpu-1x-nvidia-h200", where={"input_words": 32}, log_x=True,
        spread=("tokens_per_s_min", "tokens_per_s_max"), missing_ok=True,
        title={"zh": "每条输入 32 个词", "en": "Inputs of 32 words"}, key="embedding_batching.grid:chart:short"),
    "embedding_batching_table_h200": Table("embedding_batching.grid", env="gpu-1x-nvidia-h200", collapsed=True,
        missing_ok=True,
        columns=["input_words", "tokens_per_input", "inputs_per_request", "concurrency", "inputs_per_s",
            "inputs_per_s_min", "inputs_per_s_max", "tokens_per_s", "tokens_per_s_min", "tokens_per_s_max",
            "latency_p50_ms"]),
    "embedding_batching_chart_cpu": Chart("embedding_batching.grid", x="concurrency", y="tokens_per_s",
        color="inputs_per_request", env="cpu-2c-x86-64", where={"input_words": 128}, log_x=True,
        key="embedding_batching.grid:chart:cpu", spread=("tokens_per_s_min", "tokens_per_s_max")),
    "rerank_latency_chart": Chart("pooling.rerank_latency", x="documents", y="latency_ms", color="route",
        spread=("latency_ms_min", "latency_ms_max")),
    "rerank_documents_latency_chart": Chart("rerank_documents.latency", x="document_words", y="pairs_per_s",
        color="documents", env="gpu-1x-nvidia-h200", log_x=True, spread=("pairs_per_s_min", "pairs_per_s_max"),
        missing_ok=True),
    "rerank_documents_latency_table": Table("rerank_documents.latency", missing_ok=True,
        columns=["model", "document_words", "document_tokens", "documents", "latency_p50_ms", "latency_p99_ms",
            "pairs_per_s", "pairs_per_s_min", "pairs_per_s_max"]),
    "pooling_limits_memory_table": Table("pooling_limits.memory"),
    "security_auth_routes_table": Table("security.auth_routes",
        columns=["server", "method", "path", "no_key", "wrong_key", "right_key", "note"],
        where={"requires_key": False}),
}

topic("pooling", facts=FIGURES | {
    "float_1024": embed(1024, "float"),
    "base64_1024": embed(1024, "base64"),
    "base64_vs_float_1024": Ratio("base64_1024", ">>", "float_1024", digits=1),
    "float_1": embed(1, "float"),
    "base64_1": embed(1, "base64"),
    "base64_vs_float_1": Ratio("base64_1", ">", "float_1"),
    "float_1024_vs_1": Ratio("float_1024", ">>", "float_1", digits=1),
    "tokens_per_input": Value("pooling.embedding_throughput", "tokens_per_input",
                              {"model": "Qwen3-Embedding-0.6B", "batch_size": 1024, "encoding_format": "float"},
                              {"env": H200, "digits": 0}),
    # Many single-input requests in flight on the same server (the fidelity check, method page), in tok/s beside the
    # batches: requests per second × the measured prompt tokens per request.
    "single_req_s": single_requests("harness"),
    "single_tokens": single_requests("prompt_tokens_mean"),
    "single_tok_s": Product("single_req_s", "single_tokens", "tok/s"),
    "single_vs_batch": Ratio("single_tok_s", ">>", "float_1024", digits=1),
    "single_req_s_bench": single_requests("bench"),
    "single_tok_s_bench": Product("single_req_s_bench", "single_tokens", "tok/s"),
    "single_vs_batch_bench": Ratio("single_tok_s_bench", ">>", "float_1024", show=False),  # the bench read it too
    "single_vs_batch_why": Unconfirmed({
        "zh": "两次测量同时改变了每个请求的输入条数、在途请求数和输入长度。下一节在 H200 上把前两者分开测了：输入长时，"
              "请求在途确实比塞进一个请求快；同一个 1,024 条的请求改用 base64 输出时快了好几倍（见 encoding_format 那个问题），说明把 1,024 个向量写成 JSON "
              "数字占了这一批的大半时间。为什么 64 个单条请求为同样的 JSON 付出的少，没有测",
        "en": "the two runs change inputs per request, requests in flight and input length at once. The next section "
              "takes the first two apart on the H200: with long inputs, requests in flight are indeed faster than one "
              "request; and the same 1,024-input request with base64 output ran several times as fast (see the question on "
              "encoding_format), so writing 1,024 "
              "vectors as JSON numbers is most of that batch's time. Why 64 single-input requests pay less for the "
              "same JSON is not measured"}),
    "h200_one": batching(H200, 512, 1, 1),
    "h200_in_one_request": batching(H200, 512, 64, 1),
    "h200_in_flight": batching(H200, 512, 1, 64),
    "h200_flight_vs_request": Ratio("h200_in_flight", ">", "h200_in_one_request", digits=2,
                                    varies=("concurrency", "inputs_per_request")),
    "h200_request_vs_one": Ratio("h200_in_one_request", ">>", "h200_one", digits=1),
    "h200_both": batching(H200, 512, 16, 16),
    "h200_both_vs_flight": Ratio("h200_both", ">", "h200_in_flight", digits=2,
                                 varies=("concurrency", "inputs_per_request")),
    "h200_short_in_one_request": batching(H200, 32, 64, 1),
    "h200_short_in_flight": batching(H200, 32, 1, 64),
    "h200_short_flight_vs_request": Ratio("h200_short_in_flight", "<<", "h200_short_in_one_request", digits=2,
                                          varies=("concurrency", "inputs_per_request")),
    "h200_short_tokens": batching(H200, 32, 1, 64, "tokens_per_input"),
    "h200_short_req_s_16": batching(H200, 32, 1, 16, "inputs_per_s"),
    "h200_short_req_s_64": batching(H200, 32, 1, 64, "inputs_per_s"),
    "h200_short_req_s_64_vs_16": Ratio("h200_short_req_s_64", "≈", "h200_short_req_s_16"),
    "h200_tokens_512": batching(H200, 512, 1, 64, "tokens_per_input"),
    "cpu_one": batching(CPU, 128, 1, 1),
    "cpu_in_one_request": batching(CPU, 128, 32, 1),
    "cpu_in_flight": batching(CPU, 128, 1, 4),
    "cpu_request_vs_one": Ratio("cpu_in_one_request", ">>", "cpu_one", digits=1),
    "cpu_flight_vs_one": Ratio("cpu_in_flight", ">", "cpu_one", digits=1),
    "cpu_request_vs_flight": Ratio("cpu_in_one_request", ">>", "cpu_in_flight", show=False,
                                   varies=("concurrency", "inputs_per_request")),
    "rerank_100_1k_p50": rerank(1024, 100, "latency_p50_ms"),
    "rerank_100_1k_p99": rerank(1024, 100, "latency_p99_ms"),
    "rerank_100_1k_pairs": rerank(1024, 100, "pairs_per_s"),
    "rerank_100_4k_p50": rerank(4096, 100, "latency_p50_ms"),
    "rerank_100_4k_pairs": rerank(4096, 100, "pairs_per_s"),
    "rerank_10_4k_p50": rerank(4096, 10, "latency_p50_ms"),
    "kv_gib_01": memory("kv_cache_gib", "0.1", digits=1),
    "kv_tokens_01": memory("kv_cache_tokens", "0.1", digits=0),
    "memory_tok_s_01": memory("tokens_per_s", "0.1", digits=0, show_range=True),
    "memory_tok_s_09": memory("tokens_per_s", "0.9", digits=0, show_range=True),
    "v1_rerank_no_key": status("/v1/rerank", "no_key", 401),
    "rerank_no_key": status("/rerank", "no_key", 400),
    "rerank_right_key": status("/rerank", "right_key", 400),
}, questions=(
    Question(
        ask={"zh": "一张 H200 上，嵌入能跑多快？", "en": "How fast are embeddings on one H200?"},
        answer={"zh": "一个请求带 1,024 条输入时，Qwen3-Embedding-0.6B 用 float 输出 {float_1024}，用 base64 输出 {base64_1024}（{base64_vs_float_1024}）。大批量时请用 base64。",
                "en": "With 1,024 inputs in one request, Qwen3-Embedding-0.6B embedded {float_1024} with float output and {base64_1024} with base64 ({base64_vs_float_1024}). Ask for base64 when you send large batches."},
        conditions={"zh": "每条输入约 {tokens_per_input}，一次一个请求；虚拟权重，vLLM 0.26.0。",
                    "en": "About {tokens_per_input} an input, one request at a time; dummy weights, vLLM 0.26.0."},
        caveats={"zh": "改成每个请求一条输入（每条约 {single_tokens}）、64 个请求同时在途（float 输出）时，处理速度为 {single_req_s}，即 {single_tok_s}，是上面 float 整批的 {single_vs_batch}（另一次运行、另一种输入长度：按 token 计的吞吐才可比）。",
                 "en": "Sent as single-input requests of about {single_tokens} each, 64 in flight (float output), it handled {single_req_s}, that is {single_tok_s}: {single_vs_batch} the float batch's (another run with longer inputs: only the rate in tokens compares)."},
        figure="batch-size",
        unsettled={"zh": "需要在 H200 上按批大小和输出格式测嵌入吞吐。",
                   "en": "Settling it takes embedding throughput by batch size and output format on the H200."}),
    Question(
        ask={"zh": "encoding_format 选 base64 还是 float，差别大吗？", "en": "Does encoding_format (base64 or float) matter?"},
        answer={"zh": "批很大时差别很大：1,024 条一批时，base64 的吞吐是 float 的 {base64_vs_float_1024}；一次一条时 base64 只快一点"
                      "（{base64_1} 对 {float_1}，{base64_vs_float_1}）。把向量写成 JSON 数字、再由客户端解析回来，"
                      "在大批量时成了主要开销。",
                "en": "At large batches, a lot: with 1,024 inputs a batch, base64 delivered {base64_vs_float_1024} "
                      "float's throughput; one input at a time base64 was only a little faster ({base64_1} against {float_1}, "
                      "{base64_vs_float_1}). Writing vectors as JSON numbers, and parsing them back in the client, "
                      "becomes the main cost at large batches."},
        figure="batch-size",
        unsettled={"zh": "需要在同一服务器上用两种格式取同样的批。", "en": "Settling it takes the same batches fetched in both formats."}),
    Question(
        ask={"zh": "嵌入请求要不要攒批？", "en": "Should embedding requests be batched?"},
        answer={"zh": "比一条一条地串行发送要快：float 输出时，一个请求带 1,024 条输入，吞吐是每个请求一条、"
                      "一次只有一个请求在途时（{float_1}）的 {float_1024_vs_1}。但不必把输入塞进一个请求："
                      "每个请求一条输入、64 个请求同时在途时达到 {single_tok_s}，是整批的 {single_vs_batch}。"
                      "这两种负载在每个请求的输入条数、在途请求数和输入长度（约 {single_tokens} 对 {tokens_per_input}）"
                      "上都不同，差距由哪一个造成：{single_vs_batch_why}。",
                "en": "Against one input at a time, yes: with float output, one request of 1,024 inputs reached "
                      "{float_1024_vs_1} the throughput of one input per request with one request in flight "
                      "({float_1}). But the inputs need not share a request: single-input requests, 64 in flight, "
                      "reached {single_tok_s}, {single_vs_batch} the batch's. The two loads differ in inputs per "
                      "request, requests in flight and input length (about {single_tokens} against "
                      "{tokens_per_input}); which of these makes the gap: {single_vs_batch_why}."},
        figure="batch-size",
        unsettled={"zh": "需要按批大小测嵌入吞吐。", "en": "Settling it takes embedding throughput by batch size."}),
    Question(
        ask={"zh": "一个请求带很多条输入，和很多个单条请求同时在途，哪个更快？",
             "en": "Many inputs in one request, or many single-input requests in flight: which is faster?"},
        answer={"zh": "取决于输入长度。同一台服务器、每条 512 个词（约 {h200_tokens_512}）的输入：一个请求带 64 条、一次一个请求时"
                      "是 {h200_in_one_request}（一次只发一条时 {h200_one} 的 {h200_request_vs_one}）；每个请求一条、64 个同时在途"
                      "时是 {h200_in_flight}，是前者的 {h200_flight_vs_request}；两者结合，16 个请求各带 16 条时是 {h200_both}"
                      "（单条请求的 {h200_both_vs_flight}）。输入很短时（32 个词，约 {h200_short_tokens}）顺序反过来：一个请求带 64 条"
                      "是 {h200_short_in_one_request}，64 个单条请求同时在途只有 {h200_short_in_flight}（{h200_short_flight_vs_request}）。"
                      "这时在这台服务器上，单条请求碰到的是请求数的上限，而不是 token 的上限：16 个在途时 {h200_short_req_s_16}，64 个在途时 "
                      "{h200_short_req_s_64}（{h200_short_req_s_64_vs_16}）。这个上限不是 H200 的一个固定数：一致性检查里另外启动的"
                      "嵌入服务器（输入更长）64 个在途时处理了 {single_req_s}。",
                "en": "It depends on the input length. On one server, with inputs of 512 words (about "
                      "{h200_tokens_512} each): one request of 64 inputs at a time embedded {h200_in_one_request} "
                      "({h200_request_vs_one} one input at a time, {h200_one}); single-input requests, 64 in flight, "
                      "{h200_in_flight}, {h200_flight_vs_request} the single request's; and both at once, 16 requests "
                      "of 16 inputs, {h200_both} ({h200_both_vs_flight} the single-input requests'). With short inputs "
                      "of 32 words (about {h200_short_tokens}) the order turns: one request of 64 inputs "
                      "{h200_short_in_one_request}, 64 single-input requests in flight {h200_short_in_flight} "
                      "({h200_short_flight_vs_request}). There, on this server, the single-input requests met a ceiling in "
                      "requests, not in tokens: {h200_short_req_s_16} with 16 in flight and {h200_short_req_s_64} with "
                      "64 ({h200_short_req_s_64_vs_16}). That ceiling is not one figure for the H200: the fidelity "
                      "check's embeddings server, started on its own with longer inputs, handled {single_req_s} at 64 "
                      "in flight."},
        figure="inputs-per-request",
        unsettled={"zh": "需要在 H200 上把同样的输入按两种方式（一个请求多条、多个请求在途）发给同一台服务器。",
                   "en": "Settling it takes the same inputs sent both ways (many per request, many requests in "
                         "flight) to one server on the H200."}),
    Question(
        ask={"zh": "给 100 篇长文档重排要多久？", "en": "How long does reranking 100 long documents take?"},
        answer={"zh": "一个查询、100 篇各 1,024 个词的文档放在一个 /rerank 请求里，Qwen3-Reranker-0.6B（虚拟权重）"
                      "的延迟中位数是 {rerank_100_1k_p50}，p99 是 {rerank_100_1k_p99}，打分速度为 {rerank_100_1k_pairs}；"
                      "文档加长到 4,096 个词时是 {rerank_100_4k_p50}（{rerank_100_4k_pairs}），只有 10 篇时是 "
                      "{rerank_10_4k_p50}。",
                "en": "One query and 100 documents of 1,024 words each in one /rerank request took Qwen3-Reranker-0.6B "
                      "(dummy weights) {rerank_100_1k_p50} at the median and {rerank_100_1k_p99} at p99, scoring "
                      "{rerank_100_1k_pairs}; with documents of 4,096 words, {rerank_100_4k_p50} "
                      "({rerank_100_4k_pairs}), and with only 10 of them, {rerank_10_4k_p50}."},
        figure="long-documents",
        unsettled={"zh": "需要在 H200 上按文档长度和篇数测 /rerank 的延迟。",
                   "en": "Settling it takes /rerank latency by document length and count on the H200."}),
    Question(
        ask={"zh": "池化服务器要占多少显存？把 --gpu-memory-utilization 调低行吗？",
             "en": "How much GPU memory does a pooling server need; can --gpu-memory-utilization go low?"},
        answer={"zh": "可以：设为 0.1 时，KV 缓存只分到 {kv_gib_01}（{kv_tokens_01}），1,024 条一批照样跑完，吞吐 {memory_tok_s_01}；"
                      "设为 0.9 时是 {memory_tok_s_09}。",
                "en": "Yes: at 0.1 the KV cache got only {kv_gib_01} ({kv_tokens_01}), and a batch of 1,024 inputs still ran "
                      "whole, at {memory_tok_s_01}; at 0.9, {memory_tok_s_09}."},
        figure="kv-cache",
        unsettled={"zh": "需要在两种显存设置下启动池化服务器并测同一批。",
                   "en": "Settling it takes the same batch on pooling servers started at both settings."}),
    Question(
        ask={"zh": "--api-key 能保护 /rerank 吗？", "en": "Does --api-key protect /rerank?"},
        answer={"zh": "不能：不带密钥时，POST /v1/rerank 返回 HTTP {v1_rerank_no_key}，而 POST /rerank 返回 HTTP {rerank_no_key}，"
                      "和带正确密钥时（HTTP {rerank_right_key}）一样：请求没有因为缺少密钥被拒绝（vLLM 0.26.0）。",
                "en": "No: without a key, POST /v1/rerank answered HTTP {v1_rerank_no_key}, while POST /rerank answered "
                      "HTTP {rerank_no_key}, as it did with the right key (HTTP {rerank_right_key}): the missing key "
                      "did not stop the request (vLLM 0.26.0)."},
        figure="authentication",
        unsettled={"zh": "需要带与不带密钥各请求一次每个路由。", "en": "Settling it takes each route with and without the key."}),
), title={"zh": "池化：嵌入与重排", "en": "Pooling: embeddings and rerank"})
