"""Facts vLLM prints while starting, read from its log.

vLLM wraps long lines with its logger prefix, so a fact may be split over two lines; the parser joins
each line with the next before matching. Every pattern was taken from real 0.26 / 0.32 logs
(tests/fixtures/logs/).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

_PREFIX = re.compile(r"^(?:\(\w+ pid=\d+\) )?(?:INFO|WARNING|DEBUG|ERROR) \d\d-\d\d [\d:]+ \[[^\]]+\] ?")
_NUM = r"([\d,]+(?:\.\d+)?)"

PATTERNS = {
    "kv_cache_tokens": re.compile(r"(?:GPU|CPU|XPU|TPU)? ?KV cache size:\s*" + _NUM + r"\s*tokens"),
    "max_concurrency": re.compile(r"Maximum concurrency for\s*" + _NUM + r"\s*tokens per request:\s*" + _NUM + r"\s*x"),
    # GPU: "Available KV cache memory: X GiB"; CPU: "Explicitly set (X/Y) GiB for KV cache".
    # GPU with --kv-cache-memory-bytes: "reserved X GiB memory for KV Cache".
    "kv_cache_gib": re.compile(r"(?:Available KV cache memory:\s*|Explicitly set \(|reserved\s*)" + _NUM
                               + r"(?:/[\d.]+\))?\s*GiB"),
    "model_load_gib": re.compile(r"Model loading took\s*" + _NUM + r"\s*GiB"),
    "encoder_cache_budget_tokens": re.compile(r"Encoder cache will be initialized with a budget of\s*" + _NUM + r"\s*tokens"),
    "version": re.compile(r"vLLM API server version\s*([\w.+-]+)|version\s+(\d+\.\d+\.\d+[\w.+-]*)"),
}


@dataclass
class StartupFacts:
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens: int | None = None
    kv_cache_gib: float | None = None
    model_load_gib: float | None = None
    encoder_cache_budget_tokens: int | None = None
    version: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _strip(line: str) -> str:
    return _PREFIX.sub("", line.rstrip("\n"))


def parse_startup(log_text: str) -> StartupFacts:
    facts = StartupFacts()
    lines = [_strip(line) for line in log_text.splitlines()]
    # Each line, and each line joined to the next (the two-line form), is tried.
    candidates = []
    for i, line in enumerate(lines):
        candidates.append(line)
        if i + 1 < len(lines):
            candidates.append(line + " " + lines[i + 1])
    for text in candidates:
        if facts.kv_cache_tokens is None and (m := PATTERNS["kv_cache_tokens"].search(text)):
            facts.kv_cache_tokens = int(_num(m.group(1)))
        if facts.max_concurrency is None and (m := PATTERNS["max_concurrency"].search(text)):
            facts.max_concurrency_tokens = int(_num(m.group(1)))
            facts.max_concurrency = _num(m.group(2))
        if facts.kv_cache_gib is None and (m := PATTERNS["kv_cache_gib"].search(text)):
            facts.kv_cache_gib = _num(m.group(1))
        if facts.model_load_gib is None and (m := PATTERNS["model_load_gib"].search(text)):
            facts.model_load_gib = _num(m.group(1))
        if facts.encoder_cache_budget_tokens is None and (m := PATTERNS["encoder_cache_budget_tokens"].search(text)):
            facts.encoder_cache_budget_tokens = int(_num(m.group(1)))
        if facts.version is None and (m := PATTERNS["version"].search(text)):
            facts.version = m.group(1) or m.group(2)
    return facts
