"""Attach mode: measure a vLLM someone else runs. What it reports of itself is checked before anything is recorded.

A server is taken for vLLM only if ``/v1/models``, ``/version`` and ``/metrics`` answer as vLLM's do, and then, for
every model role the run's experiments use, one real request of that kind (a streamed chat, an embedding, a rerank)
comes back in the shape the experiment reads. A server that answers the discovery routes but not the work (a stub,
a proxy to something else) is refused with what failed: its figures would otherwise be published as vLLM's.
"""

from __future__ import annotations

import json
import math

import httpx

from measure.harness.server import Server, ServerFailed
from measure.schema import excerpt, invisible_character

# The request an experiment sends for a model role: chat for generating models (text or vision), embeddings and
# rerank for the pooling ones.
KINDS = ("chat", "embeddings", "rerank")


def kind_of(role: str) -> str:
    if role == "reranker":
        return "rerank"
    if role.startswith("embedding"):
        return "embeddings"
    return "chat"


# Hugging Face repository ids are at most 96 characters; a local path served as the model name can be longer.
MAX_MODEL_ID = 256


def attach(base_url: str, api_key: str | None = None, model: str | None = None) -> Server:
    """Use a server someone else runs; provenance comes from /version, /v1/models and /metrics. Anything that is
    not a vLLM (no vLLM version on /version, no vllm: counters on /metrics) is refused: its figures would be
    published as vLLM's. (``probe`` then checks that it does the work.)"""
    base_url = base_url.rstrip("/")
    headers = _auth(api_key)
    try:
        answer = httpx.get(base_url + "/v1/models", headers=headers, timeout=15)
    except httpx.HTTPError as exc:
        raise ServerFailed(f"cannot reach {base_url} ({type(exc).__name__}: {exc}); is the server up at that address?") from exc
    if answer.status_code in (401, 403):
        raise ServerFailed(f"{base_url}/v1/models answered HTTP {answer.status_code}: pass the server's key with --api-key")
    if answer.status_code != 200:
        raise ServerFailed(f"{base_url}/v1/models answered HTTP {answer.status_code}: not an OpenAI-compatible server "
                           "(expected the list of served models); check the URL (no /v1 at its end)")
    try:
        served = [m["id"] for m in answer.json()["data"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ServerFailed(f"{base_url}/v1/models answered {answer.text[:120]!r}: expected "
                           '{"data": [{"id": MODEL}, ...]}') from exc
    if not served:
        raise ServerFailed(f"{base_url}/v1/models lists no model: the server has nothing loaded to measure")
    if not all(isinstance(name, str) and name for name in served):
        raise ServerFailed(f"{base_url}/v1/models lists model ids that are not names: "
                           f"{excerpt(json.dumps(served[:3], default=repr))}")
    too_long = next((name for name in served if len(name) > MAX_MODEL_ID or invisible_character(name)), None)
    if too_long is not None:  # the id reaches provenance, tooltips and file names
        raise ServerFailed(f"{base_url}/v1/models lists a model id {excerpt(too_long)}: an id is at most "
                           f"{MAX_MODEL_ID} characters, none of them hiding or reordering text")
    if model and model not in served:
        raise ServerFailed(f"{base_url} serves {', '.join(excerpt(n) for n in served[:5])}, not {excerpt(model)}")
    server = Server(base_url, model or served[0], api_key=api_key, attached=True)
    server.facts.version = server.version()
    if not isinstance(server.facts.version, str) or not server.facts.version:
        raise ServerFailed(f"{base_url}/version gave no vLLM version: this does not look like vLLM, and attach mode "
                           "measures vLLM only")
    if len(server.facts.version) > 64 or invisible_character(server.facts.version):
        raise ServerFailed(f"{base_url}/version gave {excerpt(server.facts.version)}: a vLLM version is a short "
                           "release number (it names the environment and reaches every tooltip)")
    try:
        metrics = httpx.get(base_url + "/metrics", headers=headers, timeout=15).text
    except httpx.HTTPError as exc:
        raise ServerFailed(f"{base_url}/metrics did not answer ({exc}): vLLM serves its counters there") from exc
    if "vllm:" not in metrics:
        raise ServerFailed(f"{base_url}/metrics has no vllm: counters: this does not look like vLLM, and attach mode "
                           "measures vLLM only")
    return server


def probe(server: Server, kind: str) -> None:
    """Send one real request of ``kind`` and check the answer's shape; raise ServerFailed saying what failed."""
    if kind not in KINDS:
        raise ValueError(f"unknown request kind {kind!r}; known: {', '.join(KINDS)}")
    where = f"{server.base_url} ({server.model})"
    try:
        problem = {"chat": _chat, "embeddings": _embeddings, "rerank": _rerank}[kind](server)
    except httpx.HTTPError as exc:
        problem = f"the request failed ({type(exc).__name__}: {exc})"
    if problem:
        raise ServerFailed(f"attach: {where} did not answer a {kind} request as vLLM does: {problem}. Attach mode "
                           "records nothing from it; give the URL of a vLLM serving a model of that kind "
                           "(--base-url ROLE=URL per role)")


def _auth(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _post(server: Server, path: str, body: dict) -> tuple[httpx.Response, object]:
    answer = httpx.post(server.base_url + path, json={"model": server.model, **body}, headers=_auth(server.api_key),
                        timeout=120)
    try:
        return answer, answer.json()
    except ValueError:
        return answer, None


def _status(answer: httpx.Response) -> str | None:
    return None if answer.status_code == 200 else f"HTTP {answer.status_code}: {answer.text[:200]!r}"


def _is_count(value, low: int = 1, high: int | None = None) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low and (high is None or value <= high)


def _chat(server: Server) -> str | None:
    """A streamed chat of two tokens: messages with choices, then the usage the load generator counts."""
    body = {"model": server.model, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 2,
            "temperature": 0.0, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", server.base_url + "/v1/chat/completions", json=body, headers=_auth(server.api_key),
                      timeout=120) as answer:
        if answer.status_code != 200:
            answer.read()
            return _status(answer)
        with_choices, usage, done = 0, None, False
        for line in answer.iter_lines():
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                done = True
                continue
            try:
                chunk = json.loads(payload)
            except ValueError:
                return f"a streamed message is not JSON: {payload[:120]!r}"
            if not isinstance(chunk, dict):
                return f"a streamed message is not an object: {payload[:120]!r}"
            with_choices += bool(chunk.get("choices"))
            usage = chunk.get("usage") or usage
    if not with_choices:
        return "the stream carried no message with choices"
    if not done:
        return "the stream did not end with data: [DONE]"
    if not isinstance(usage, dict) or not _is_count(usage.get("prompt_tokens")) \
            or not _is_count(usage.get("completion_tokens"), 1, 2):
        return f"the stream's usage is {usage!r}, expected prompt_tokens ≥ 1 and completion_tokens 1–2 (max_tokens 2)"
    return None


def _embeddings(server: Server) -> str | None:
    answer, data = _post(server, "/v1/embeddings", {"input": ["first probe", "second probe"], "encoding_format": "float"})
    if _status(answer):
        return _status(answer)
    rows = data.get("data") if isinstance(data, dict) else None
    if not isinstance(rows, list) or len(rows) != 2:
        return f"expected 'data' with 2 embeddings for 2 inputs, got {str(data)[:160]!r}"
    vectors = [row.get("embedding") if isinstance(row, dict) else None for row in rows]
    if not all(isinstance(v, list) and v and all(isinstance(x, float | int) and math.isfinite(x) for x in v)
               for v in vectors) or len({len(v) for v in vectors}) != 1:
        return "the embeddings are not two finite vectors of one length"
    usage = data.get("usage")
    if not isinstance(usage, dict) or not _is_count(usage.get("prompt_tokens"), 2):
        return f"usage {usage!r}: expected prompt_tokens ≥ 2 for two inputs"
    return None


def _rerank(server: Server) -> str | None:
    answer, data = _post(server, "/v1/rerank", {"query": "probe", "documents": ["first document", "second document"]})
    if _status(answer):
        return _status(answer)
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list) or len(results) != 2:
        return f"expected 'results' with 2 entries for 2 documents, got {str(data)[:160]!r}"
    indexes = sorted(r.get("index") for r in results if isinstance(r, dict) and isinstance(r.get("index"), int))
    scores = [r.get("relevance_score") for r in results if isinstance(r, dict)]
    if indexes != [0, 1] or not all(isinstance(s, float | int) and math.isfinite(s) for s in scores):
        return "each result needs the document's index (0 and 1) and a finite relevance_score"
    return None
