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
]

topic("open", facts={key: fact for key, fact, _ in OPEN}, questions=tuple(q for _, _, q in OPEN),
      title={"zh": "尚未实测的问题", "en": "Questions not measured yet"}, has_page=False)
