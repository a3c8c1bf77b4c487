"""Questions vLLM users ask (../shared/notes/user-questions.md; the issue threads there) that no experiment of ours
measures yet: the FAQ lists them, each saying what would settle it. A question an experiment takes up moves to its
topic's page (and its facts), where it reads 未实测 until that experiment has data."""

from measure.site.facts import NotMeasured, Question, topic


def pending(key: str, zh: str, en: str, ask_zh: str, ask_en: str) -> tuple[str, NotMeasured, Question]:
    return key, NotMeasured({"zh": zh, "en": en}), Question(
        ask={"zh": ask_zh, "en": ask_en}, answer={"zh": "{" + key + "}", "en": "{" + key + "}"}, figure="",
        unsettled={"zh": zh, "en": en})


OPEN = [
]

topic("open", facts={key: fact for key, fact, _ in OPEN}, questions=tuple(q for _, _, q in OPEN),
      title={"zh": "尚未实测的问题", "en": "Questions not measured yet"}, has_page=False)
