"""Questions vLLM users ask (../shared/notes/user-questions.md; the issue threads there) that no experiment of ours
measures yet: the FAQ lists them, each saying what would settle it. A question an experiment takes up moves to its
topic's page (and its facts), where it reads 未实测 until that experiment has data."""

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
    pending("lora_scale", "需要按 --max-loras 1、2、4、8 与请求里不同适配器的个数（包括多于槽位的情形）测吞吐、TTFT 和 TPOT，"
            "再测一次适配器换入的代价、--max-lora-rank 8/16/64，以及刚用 /v1/load_lora_adapter 加载后第一个请求的 TTFT。",
            "Settling it takes --max-loras 1, 2, 4 and 8 against the number of distinct adapters in the requests (more "
            "than the slots included): throughput, TTFT and TPOT; the cost of one adapter swap; --max-lora-rank 8/16/64; "
            "and the TTFT of the first request after /v1/load_lora_adapter.",
            "一台服务器能同时带多少个 LoRA 适配器？换一次适配器要多少代价？",
            "How many LoRA adapters can one server juggle, and what does swapping one cost?"),
    pending("video", "需要用合成视频按帧数和分辨率测提示 token 数与 TTFT，并比较允许与不允许视频时启动后剩下的 KV 显存。",
            "Settling it takes synthetic videos by frame count and resolution: prompt tokens and TTFT, and the KV "
            "memory left at start-up with and without video allowed.",
            "一段视频算多少 token？允许视频输入要占多少显存？", "How many tokens is a video, and what does allowing video cost in memory?"),
]

topic("open", facts={key: fact for key, fact, _ in OPEN}, questions=tuple(q for _, _, q in OPEN),
      title={"zh": "尚未实测的问题", "en": "Questions not measured yet"}, has_page=False)
