"""Questions vLLM users ask (../shared/notes/user-questions.md; the issue threads there) that no experiment of ours
measures yet: the FAQ lists them, each saying what would settle it."""

from measure.site.facts import NotMeasured, Question, topic


def pending(key: str, zh: str, en: str, ask_zh: str, ask_en: str) -> tuple[str, NotMeasured, Question]:
    return key, NotMeasured({"zh": zh, "en": en}), Question(
        ask={"zh": ask_zh, "en": ask_en}, answer={"zh": "{" + key + "}", "en": "{" + key + "}"}, figure="",
        unsettled={"zh": zh, "en": en})


OPEN = [
    pending("api_server_count", "需要用 vllm serve 以 --api-server-count 1、2、4 分别跑对话和嵌入，记录吞吐、TTFT 和各进程的 CPU 占用。",
            "Settling it takes chat and embeddings served through `vllm serve` at --api-server-count 1, 2 and 4, "
            "with throughput, TTFT and each process's CPU share.",
            "一张 GPU 上该不该设 --api-server-count？", "Should I set --api-server-count on one GPU?"),
    pending("kv_cache_fp8", "需要在 Qwen3-8B 上比较 --kv-cache-dtype auto 与 fp8：KV token 数、TTFT、TPOT 和吞吐，输入 1k 与 16k 以上。",
            "Settling it takes --kv-cache-dtype auto against fp8 on Qwen3-8B: KV tokens, TTFT, TPOT and throughput at "
            "1k and at 16k+ input tokens.",
            "fp8 的 KV 缓存是更快，还是只是能装更多？", "Does an fp8 KV cache speed things up, or only add room?"),
    pending("batch_limits", "需要在 1k 输入、256 输出下，网格式地测 --max-num-seqs 与 --max-num-batched-tokens：吞吐和 TTFT、TPOT 的 p50/p99。",
            "Settling it takes a grid of --max-num-seqs by --max-num-batched-tokens at 1k in / 256 out: throughput, "
            "TTFT and TPOT p50/p99.",
            "--max-num-seqs 和 --max-num-batched-tokens 该怎么设？", "How should --max-num-seqs and --max-num-batched-tokens be set?"),
    pending("memory_capacity", "需要按几种 --gpu-memory-utilization 启动，记录权重、KV 大小和 vLLM 报告的最大并发，并测出 KV 满时的拐点。",
            "Settling it takes starts at several --gpu-memory-utilization settings: weights, KV size, the maximum "
            "concurrency vLLM logs, and the knee measured where the KV cache fills.",
            "vLLM 为什么给小模型也占 90% 显存？它能同时装下多少请求？",
            "Why does vLLM take 90 % of GPU memory even for a small model, and how many requests can it hold?"),
    pending("decode_floor", "需要测 H200 的显存带宽，再对比 Qwen3-0.6B 和 Qwen3-8B 单请求时每个 token 的时间与“权重 ÷ 带宽”的下限。",
            "Settling it takes the H200's memory bandwidth and, for Qwen3-0.6B and Qwen3-8B, the time per token at "
            "one request against the floor of weights ÷ bandwidth.",
            "单请求解码离显存带宽的下限有多远？", "How close does single-request decoding come to the memory-bandwidth floor?"),
    pending("embedding_units", "需要在同一服务器上比较“一个请求带 N 条输入”与“N 个单条请求同时在途”，按输入长度和并发测每秒输入数和 token 数。",
            "Settling it takes one request carrying N inputs against N single requests in flight on one server, by "
            "input length and concurrency: inputs and tokens per second.",
            "嵌入是一个请求带很多条输入快，还是很多个单条请求快？",
            "Are embeddings faster as one request with many inputs or as many single requests?"),
    pending("video", "需要用合成视频按帧数和分辨率测提示 token 数与 TTFT，并比较允许与不允许视频时启动后剩下的 KV 显存。",
            "Settling it takes synthetic videos by frame count and resolution: prompt tokens and TTFT, and the KV "
            "memory left at start-up with and without video allowed.",
            "一段视频算多少 token？允许视频输入要占多少显存？", "How many tokens is a video, and what does allowing video cost in memory?"),
    pending("rerank_long", "需要按文档长度（256 到 4k token）和每个查询的文档数（10、100）测重排延迟 p50/p99 与每秒文档对数。",
            "Settling it takes rerank latency p50/p99 and pairs per second by document length (256 to 4k tokens) and "
            "documents per query (10, 100).",
            "文档很长、很多时，重排有多慢？", "How slow is rerank with many or long documents?"),
]

topic("open", facts={key: fact for key, fact, _ in OPEN}, questions=tuple(q for _, _, q in OPEN),
      title={"zh": "尚未实测的问题", "en": "Questions not measured yet"}, has_page=False)
