"""The load client: the ``openai`` SDK against the server's OpenAI-compatible API.

First-token rule (stated on the site): TTFT is the time from sending the request to the first
streamed chunk whose delta carries content or reasoning text. Chunks with only a role, only usage,
or empty text do not count. ITL is the gap between later such chunks.

Client CPU time is recorded with every batch of requests, so a saturated client is never mistaken
for the server's limit.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import dataclass, field

from openai import AsyncOpenAI


@dataclass
class RequestResult:
    ok: bool
    e2e_s: float
    ttft_s: float | None = None
    first_chunk_s: float | None = None  # first chunk with any choice, text or not (vllm bench serve's TTFT)
    itl_s: list[float] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    text: str = ""
    error: str = ""


@dataclass
class BatchResult:
    results: list[RequestResult]
    wall_s: float
    client_cpu_s: float

    @property
    def ok(self) -> list[RequestResult]:
        return [r for r in self.results if r.ok]

    @property
    def errors(self) -> list[str]:
        return [r.error for r in self.results if not r.ok]


def median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _delta_text(chunk) -> str:
    if not chunk.choices:
        return ""
    delta = chunk.choices[0].delta
    text = delta.content or ""
    # vLLM streams reasoning as `reasoning` (newer) or `reasoning_content` (older); both count.
    for attr in ("reasoning", "reasoning_content"):
        text += getattr(delta, attr, None) or (delta.model_extra or {}).get(attr) or ""
    return text


# vLLM's API server (uvicorn) closes a connection idle for VLLM_HTTP_TIMEOUT_KEEP_ALIVE (5 s). A client
# that keeps idle connections as long may send a request down one the server is closing: aiohttp then
# reports ServerDisconnectedError, which the SDK calls "Request timed out" (seen on the H200s after a
# 256-in-flight phase). Dropping idle connections well before the server does avoids the race.
SERVER_KEEP_ALIVE_S = 5.0
CLIENT_KEEP_ALIVE_S = SERVER_KEEP_ALIVE_S / 2


def http_transport():
    """The SDK over aiohttp where it can be had: on a small host shared with the server, the default
    httpx transport costs the client enough CPU per request to lower the throughput it measures
    (see the fidelity experiment). Older SDKs without the aiohttp client fall back to httpx."""
    try:
        from openai import DefaultAioHttpClient
        from openai._constants import DEFAULT_CONNECTION_LIMITS as sdk_limits

        limits = type(sdk_limits)(max_connections=sdk_limits.max_connections,
                                  max_keepalive_connections=sdk_limits.max_keepalive_connections,
                                  keepalive_expiry=CLIENT_KEEP_ALIVE_S)
        return "aiohttp", DefaultAioHttpClient(limits=limits)
    except Exception:  # ImportError on old SDKs; the SDK raises when aiohttp itself is missing
        return "httpx", None


class Client:
    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 600.0):
        self.model = model
        self.transport, http_client = http_transport()
        # One event loop per experiment (RunContext.run) keeps this async client valid across calls.
        self.openai = AsyncOpenAI(base_url=base_url, api_key=api_key or "unused", timeout=timeout, max_retries=0,
                                  http_client=http_client)

    async def chat_stream(self, messages: list[dict], max_tokens: int = 16, model_override: str | None = None,
                          **extra) -> RequestResult:
        """One streamed chat request; ``model_override`` picks another served name (e.g. a LoRA adapter)."""
        if extra.get("n", 1) > 1:
            raise ValueError("chat_stream times one choice; for n > 1 use the load generator (HttpRequest.chat with "
                             "ignore_eos=True), which times each choice")
        start = time.perf_counter()
        first = last = first_chunk = None
        itl: list[float] = []
        pieces: list[str] = []
        usage = None
        try:
            stream = await self.openai.chat.completions.create(
                model=model_override or self.model,
                messages=messages,
                max_tokens=max_tokens,
                temperature=0.0,
                stream=True,
                stream_options={"include_usage": True},
                **extra,
            )
            async for chunk in stream:
                now = time.perf_counter()
                if chunk.usage is not None:
                    usage = chunk.usage
                if first_chunk is None and chunk.choices:
                    first_chunk = now
                text = _delta_text(chunk)
                if not text:
                    continue
                pieces.append(text)
                if first is None:
                    first = now
                else:
                    itl.append(now - last)
                last = now
        except Exception as exc:  # the server's answer is data here (e.g. a 400 for a bad image)
            return RequestResult(False, time.perf_counter() - start, error=_error_text(exc))
        return RequestResult(
            True,
            time.perf_counter() - start,
            ttft_s=None if first is None else first - start,
            first_chunk_s=None if first_chunk is None else first_chunk - start,
            itl_s=itl,
            prompt_tokens=_count(usage.prompt_tokens, "prompt_tokens", "/v1/chat/completions") if usage else None,
            completion_tokens=_count(usage.completion_tokens, "completion_tokens", "/v1/chat/completions")
            if usage else None,
            text="".join(pieces),
        )

    async def completion(self, prompt, max_tokens: int = 1) -> RequestResult:
        start = time.perf_counter()
        try:
            out = await self.openai.completions.create(model=self.model, prompt=prompt, max_tokens=max_tokens, temperature=0.0)
        except Exception as exc:
            return RequestResult(False, time.perf_counter() - start, error=_error_text(exc))
        return RequestResult(True, time.perf_counter() - start,
                             prompt_tokens=_count(out.usage.prompt_tokens, "prompt_tokens", "/v1/completions"),
                             completion_tokens=_count(out.usage.completion_tokens, "completion_tokens", "/v1/completions"))

    async def embed(self, inputs: list[str], encoding_format: str = "float") -> RequestResult:
        start = time.perf_counter()
        try:
            out = await self.openai.embeddings.create(model=self.model, input=inputs, encoding_format=encoding_format)
        except Exception as exc:
            return RequestResult(False, time.perf_counter() - start, error=_error_text(exc))
        return RequestResult(True, time.perf_counter() - start,
                             prompt_tokens=_count(out.usage.prompt_tokens, "prompt_tokens", "/v1/embeddings"))

    async def post(self, path: str, body: dict) -> tuple[int, dict | str, float]:
        """A raw POST to a route outside the SDK (``/rerank``, ``/score``…): status, JSON or text, seconds."""
        start = time.perf_counter()
        response = await self.openai._client.post(str(self.openai.base_url).rstrip("/").removesuffix("/v1") + path,
                                                  json=body, headers={"Authorization": f"Bearer {self.openai.api_key}"})
        elapsed = time.perf_counter() - start
        try:
            answer = json.loads(response.text, parse_constant=_not_a_number(path))
        except ValueError:
            return response.status_code, response.text, elapsed
        return response.status_code, answer, elapsed

    async def close(self) -> None:
        await self.openai.close()


def _error_text(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    return f"{status or type(exc).__name__}: {message or exc}"[:500]


async def gather_limited(factories, concurrency: int) -> BatchResult:
    """Run request coroutines (given as zero-argument factories) with at most ``concurrency`` in flight."""
    semaphore = asyncio.Semaphore(concurrency)

    async def one(factory):
        async with semaphore:
            return await factory()

    cpu0, wall0 = time.process_time(), time.perf_counter()
    results = await asyncio.gather(*(one(f) for f in factories))
    return BatchResult(list(results), time.perf_counter() - wall0, time.process_time() - cpu0)


class ServerAnswerInvalid(RuntimeError):
    """A server's answer holds a figure no measurement gives (NaN, a negative or fractional token count)."""


def _count(value, field: str, route: str):
    """A token count from the server's usage, checked like a measured cell: a whole number, 0 or more (None stays
    None: the server did not say)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ServerAnswerInvalid(f"{route}: the server reported {field}={value!r}; a token count is a whole number, "
                                  "0 or more, so its figures would be no measurement")
    return value


def _not_a_number(route: str):
    def refuse(name: str):
        raise ServerAnswerInvalid(f"{route}: the server's answer holds {name}, which is no JSON number; a figure "
                                  "read from it would be no measurement")
    return refuse
