"""Pooling (docs/pooling.*.md): embedding throughput on the H200, its output format and batch size, a pooling
server's memory, and which rerank route an API key guards."""

from measure.site.facts import Question, Ratio, Value, topic

H200 = "gpu-1x-nvidia-h200"


def embed(batch: int, fmt: str) -> Value:
    return Value("pooling.embedding_throughput", "tokens_per_s",
                 {"model": "Qwen3-Embedding-0.6B", "batch_size": batch, "encoding_format": fmt},
                 {"env": H200, "digits": 0, "show_range": True})


def memory(column: str, utilization: str, **options) -> Value:
    return Value("pooling_limits.memory", column, {"setting": f"--gpu-memory-utilization {utilization}"},
                 {"env": H200} | options)


def status(path: str, key: str) -> Value:
    return Value("security.auth_routes", key, {"server": "pooling", "method": "POST", "path": path},
                 {"env": H200, "unit": ""})


topic("pooling", facts={
    "float_1024": embed(1024, "float"),
    "base64_1024": embed(1024, "base64"),
    "base64_vs_float_1024": Ratio("base64_1024", ">>", "float_1024", digits=1),
    "float_1": embed(1, "float"),
    "base64_1": embed(1, "base64"),
    "base64_vs_float_1": Ratio("base64_1", "≈", "float_1"),
    "float_1024_vs_1": Ratio("float_1024", ">>", "float_1", digits=1),
    "tokens_per_input": Value("pooling.embedding_throughput", "tokens_per_input",
                              {"model": "Qwen3-Embedding-0.6B", "batch_size": 1024, "encoding_format": "float"},
                              {"env": H200, "digits": 0}),
    "kv_gib_01": memory("kv_cache_gib", "0.1", digits=1),
    "kv_tokens_01": memory("kv_cache_tokens", "0.1", digits=0),
    "memory_tok_s_01": memory("tokens_per_s", "0.1", digits=0, show_range=True),
    "memory_tok_s_09": memory("tokens_per_s", "0.9", digits=0, show_range=True),
    "v1_rerank_no_key": status("/v1/rerank", "no_key"),
    "rerank_no_key": status("/rerank", "no_key"),
    "rerank_right_key": status("/rerank", "right_key"),
}, questions=(
    Question(
        ask={"zh": "一张 H200 上，嵌入能跑多快？", "en": "How fast are embeddings on one H200?"},
        answer={"zh": "每批 1,024 条、每条约 {tokens_per_input} 的输入，Qwen3-Embedding-0.6B（虚拟权重，vLLM 0.26.0）"
                      "float 输出时吞吐为 {float_1024}，base64 输出时为 {base64_1024}。",
                "en": "In batches of 1,024 inputs of about {tokens_per_input} each, Qwen3-Embedding-0.6B (dummy "
                      "weights, vLLM 0.26.0) embedded {float_1024} with float output and {base64_1024} with base64."},
        figure="batch-size",
        unsettled={"zh": "需要在 H200 上按批大小和输出格式测嵌入吞吐。",
                   "en": "Settling it takes embedding throughput by batch size and output format on the H200."}),
    Question(
        ask={"zh": "encoding_format 选 base64 还是 float，差别大吗？", "en": "Does encoding_format (base64 or float) matter?"},
        answer={"zh": "批很大时差别很大：1,024 条一批时，base64 的吞吐是 float 的 {base64_vs_float_1024}；一次一条时两者接近"
                      "（{base64_1} 对 {float_1}，{base64_vs_float_1}）。把向量写成 JSON 数字、再由客户端解析回来，"
                      "在大批量时成了主要开销。",
                "en": "At large batches, a lot: with 1,024 inputs a batch, base64 delivered {base64_vs_float_1024} "
                      "float's throughput; one input at a time the two were close ({base64_1} against {float_1}, "
                      "{base64_vs_float_1}). Writing vectors as JSON numbers, and parsing them back in the client, "
                      "becomes the main cost at large batches."},
        figure="batch-size",
        unsettled={"zh": "需要在同一服务器上用两种格式取同样的批。", "en": "Settling it takes the same batches fetched in both formats."}),
    Question(
        ask={"zh": "嵌入请求要不要攒批？", "en": "Should embedding requests be batched?"},
        answer={"zh": "要：float 输出时，1,024 条一批的吞吐是一次一条（{float_1}）的 {float_1024_vs_1}。",
                "en": "Yes: with float output, batches of 1,024 inputs reached {float_1024_vs_1} the throughput of one "
                      "input at a time ({float_1})."},
        figure="batch-size",
        unsettled={"zh": "需要按批大小测嵌入吞吐。", "en": "Settling it takes embedding throughput by batch size."}),
    Question(
        ask={"zh": "池化服务器要占多少显存？把 --gpu-memory-utilization 调低行吗？",
             "en": "How much GPU memory does a pooling server need; can --gpu-memory-utilization go low?"},
        answer={"zh": "设为 0.1 时，KV 缓存只分到 {kv_gib_01}（{kv_tokens_01}），1,024 条一批照样跑完，吞吐 {memory_tok_s_01}；"
                      "设为 0.9 时是 {memory_tok_s_09}。",
                "en": "At 0.1 the KV cache got only {kv_gib_01} ({kv_tokens_01}), and a batch of 1,024 inputs still ran "
                      "whole, at {memory_tok_s_01}; at 0.9, {memory_tok_s_09}."},
        figure="kv-cache",
        unsettled={"zh": "需要在两种显存设置下启动池化服务器并测同一批。",
                   "en": "Settling it takes the same batch on pooling servers started at both settings."}),
    Question(
        ask={"zh": "--api-key 能保护 /rerank 吗？", "en": "Does --api-key protect /rerank?"},
        answer={"zh": "不带密钥时，POST /v1/rerank 返回 HTTP {v1_rerank_no_key}，而 POST /rerank 返回 HTTP {rerank_no_key}，"
                      "和带正确密钥时（HTTP {rerank_right_key}）一样：请求没有因为缺少密钥被拒绝（vLLM 0.26.0）。",
                "en": "Without a key, POST /v1/rerank answered HTTP {v1_rerank_no_key}, while POST /rerank answered "
                      "HTTP {rerank_no_key}, as it did with the right key (HTTP {rerank_right_key}): the missing key "
                      "did not stop the request (vLLM 0.26.0)."},
        figure="authentication",
        unsettled={"zh": "需要带与不带密钥各请求一次每个路由。", "en": "Settling it takes each route with and without the key."}),
), title={"zh": "池化：嵌入与重排", "en": "Pooling: embeddings and rerank"})
