"""The load generator: closed-loop HTTP load from several worker processes, timed as ``vllm bench serve`` times.

One Python event loop parsing streamed chunks saturates one core long before a GPU does (on one H200 the
SDK client capped chat at 0.73 of the bench's throughput). So the requests of a batch are split over worker
processes, as AIPerf and GuideLLM do; each runs its own event loop (uvloop where installed) and aiohttp
connection pool, with its share of the in-flight limit, and takes the batch's next request from an index
the workers share whenever one of its slots frees. The hot path is light: one timestamp per network
read, a ``\\n\\n`` split, orjson on each message. No SDK objects.

Definitions (those of ``vllm bench serve``, ``vllm/benchmarks/lib/endpoint_request_func.py``):

* the clock starts right before the POST, after the request got its in-flight slot;
* TTFT: the first SSE message whose ``choices`` is non-empty (vLLM's role-only chunk counts);
* ITL: the gap between consecutive such messages of one choice, one per message (a message with several
  tokens is not split), pooled over requests;
* end-to-end latency: up to the last message with choices (the usage message and ``[DONE]`` do not count;
  vLLM 0.26's bench still ended at the usage message, sent in the same engine step);
* not streamed (embeddings): the bench's latency ends when the response headers arrive, before the body;
  ours keeps that as ``ttft_s`` and ends the request when the body is read;
* output tokens: ``usage.completion_tokens``; TPOT per request: (end-to-end − TTFT) / (tokens − 1);
* ``n`` > 1 (several choices per request; the bench sends 1): ``usage.completion_tokens`` counts every choice, so
  a choice's tokens are known only when each runs to ``max_tokens`` (``ignore_eos``, required); TPOT is then each
  choice's (last − first message) / (its tokens − 1), averaged over the choices; throughput counts all tokens;
* throughput: tokens over the batch's duration, from the common start to the last completion;
* a request the server never read (it closed the kept-alive connection as the request went out) is sent once more,
  its clock still running from the first POST; the bench would count it failed (see ``_sent``).

Every worker reports its own CPU seconds over the batch: the busiest worker's share of a core is the
saturation signal (see ``SATURATED``).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field

import orjson

from measure.harness.lifetime import end_with_parent
from measure.schema import SATURATED  # noqa: F401 - the saturation rule, re-exported for experiments

# vLLM's uvicorn closes idle connections after 5 s (VLLM_HTTP_TIMEOUT_KEEP_ALIVE); drop ours well before.
CLIENT_KEEP_ALIVE_S = 2.5
START_DELAY_S = 0.3  # lets every worker reach the common start time before it passes


@dataclass(frozen=True)
class HttpRequest:
    """One request as it goes on the wire: a route under the server's base URL and a JSON body."""

    path: str  # "/v1/chat/completions", "/v1/embeddings", …
    body: bytes  # orjson-encoded JSON
    stream: bool = False
    choices: int = 1  # the request's ``n``

    @classmethod
    def chat(cls, messages: list[dict], model: str, max_tokens: int, **extra) -> HttpRequest:
        choices = extra.get("n", 1)
        if choices > 1 and not extra.get("ignore_eos"):
            raise ValueError(f"n={choices}: the stream's usage counts the tokens of all choices together, so each "
                             "choice's TPOT is known only when every choice runs to max_tokens; pass ignore_eos=True")
        if choices > 1 and not extra.get("temperature"):
            raise ValueError(f"n={choices}: vLLM refuses several choices under greedy sampling (temperature 0, the "
                             "default here); pass a temperature above 0")
        body = {"model": model, "messages": messages, "max_completion_tokens": max_tokens, "temperature": 0.0, "stream": True,
                "stream_options": {"include_usage": True}, **extra}
        return cls("/v1/chat/completions", orjson.dumps(body), stream=True, choices=choices)

    @classmethod
    def embedding(cls, inputs: list[str] | str, model: str, encoding_format: str = "float") -> HttpRequest:
        # truncate_prompt_tokens=-1: what the bench sends (inputs longer than the model's context are cut, not refused)
        return cls("/v1/embeddings", orjson.dumps({"model": model, "input": inputs, "encoding_format": encoding_format,
                                                   "truncate_prompt_tokens": -1}))


@dataclass
class Timing:
    """One request's outcome; times in seconds on the host's monotonic clock (shared by all processes)."""

    ok: bool
    start: float
    end: float  # the last message with choices (streamed) or the whole body read (not streamed)
    ttft_s: float | None = None  # not streamed: the response headers (the bench's latency for pooling requests)
    itl_s: list[float] = field(default_factory=list)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    error: str = ""
    lag_s: list[float] = field(default_factory=list)  # synthetic server only: arrival − the server's send stamp
    # (first, last) message of each choice (several where the request's n > 1); empty: one choice, ttft_s to end
    choice_spans: list[tuple[float, float]] = field(default_factory=list)
    # the server closed a kept-alive connection as this request went out on it (see _sent); retried: it was sent again
    stale_connection: bool = False
    retried: bool = False

    @property
    def e2e_s(self) -> float:
        return self.end - self.start

    @property
    def tpot_s(self) -> float | None:
        if self.ttft_s is None or not self.output_tokens:
            return None
        spans = self.choice_spans or [(self.start + self.ttft_s, self.end)]
        per_choice, rest = divmod(self.output_tokens, len(spans))
        if rest or per_choice < 2:  # the choices' tokens are not known one by one (see n > 1 above)
            return None
        return statistics.mean((last - first) / (per_choice - 1) for first, last in spans)


@dataclass
class WorkerReport:
    timings: list[Timing]
    cpu_s: float
    wall_s: float

    @property
    def cpu_share(self) -> float:
        # A worker that found every request taken by the others sent nothing: it cannot have been saturated.
        return self.cpu_s / self.wall_s if self.timings and self.wall_s > 0 else 0.0


@dataclass
class Batch:
    timings: list[Timing]
    wall_s: float
    workers: list[WorkerReport]
    concurrency: int
    start: float = 0.0  # the first request's send, on the host's monotonic clock

    @property
    def window(self) -> tuple[float, float]:
        return self.start, self.start + self.wall_s

    @property
    def errors(self) -> list[str]:
        return [t.error for t in self.timings if not t.ok]

    @property
    def worker_cpu_max(self) -> float:
        """The busiest worker's CPU seconds over its wall seconds: the client's saturation signal."""
        return max(w.cpu_share for w in self.workers)

    @property
    def client_cpu_s(self) -> float:
        return sum(w.cpu_s for w in self.workers)

    def summary(self) -> LoadSummary:
        return summarise(self)


@dataclass(frozen=True)
class LoadSummary:
    requests: int
    concurrency: int
    workers: int
    wall_s: float
    prompt_tokens: int
    output_tokens: int
    output_tok_s: float
    request_per_s: float
    ttft_median_ms: float | None
    ttft_mean_ms: float | None
    itl_median_ms: float | None
    tpot_median_ms: float | None
    e2e_median_ms: float
    worker_cpu_max: float  # the busiest worker's share of one core
    client_cpu_cores: float  # all workers' CPU seconds over the wall: cores the client used

    def as_dict(self) -> dict:
        return asdict(self)


def _ms(values) -> list[float]:
    return [v * 1000 for v in values if v is not None]


def summarise(batch: Batch) -> LoadSummary:
    if batch.errors:
        raise RuntimeError(f"{len(batch.errors)} of {len(batch.timings)} requests failed, e.g. {batch.errors[0]}")
    timings = batch.timings
    ttft = _ms(t.ttft_s for t in timings)
    itl = _ms(gap for t in timings for gap in t.itl_s)
    tpot = _ms(t.tpot_s for t in timings)
    output = sum(t.output_tokens or 0 for t in timings)
    return LoadSummary(
        requests=len(timings), concurrency=batch.concurrency, workers=len(batch.workers), wall_s=batch.wall_s,
        prompt_tokens=sum(t.prompt_tokens or 0 for t in timings), output_tokens=output,
        output_tok_s=output / batch.wall_s, request_per_s=len(timings) / batch.wall_s,
        ttft_median_ms=statistics.median(ttft) if ttft else None,
        ttft_mean_ms=statistics.mean(ttft) if ttft else None,
        itl_median_ms=statistics.median(itl) if itl else None,
        tpot_median_ms=statistics.median(tpot) if tpot else None,
        e2e_median_ms=statistics.median(_ms(t.e2e_s for t in timings)),
        worker_cpu_max=batch.worker_cpu_max,
        client_cpu_cores=batch.client_cpu_s / batch.wall_s,
    )


# ---- one worker process ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Shard:
    base_url: str
    headers: dict[str, str]
    requests: list[HttpRequest]  # the whole batch: workers take the next one from the shared index
    concurrency: int  # this worker's slots
    start_at: float  # monotonic time at which every worker begins
    timeout_s: float


# A request whose server sends no byte for this long has stalled (a hung server, a lost engine): it fails with that
# said, instead of holding the run for the whole timeout. The slowest first byte measured here took seconds.
STALL_S = 120.0


def _failed(exc: BaseException, start: float, connection: dict, received: bool) -> Timing:
    """A request that raised: what failed, when, and on which connection (a reused one that the server had just
    closed, its keep-alive timer, fails before any byte comes back; a request dropped mid-answer after some)."""
    import aiohttp

    end = time.monotonic()
    where = connection.get("kind", "no connection yet")
    got = "after part of the answer" if received else "before any byte of the answer"
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        error = (f"the server sent nothing for {STALL_S:.0f} s {got} ({(end - start):.0f} s after the POST, on "
                 f"{where}): a stalled answer; is the server still working?")
    else:
        error = f"{type(exc).__name__}: {exc} ({(end - start) * 1000:.0f} ms after the POST, on {where}, {got})"[:500]
    return Timing(False, start, end, error=error, stale_connection=_stale(exc, connection, received))


def _stale(exc: BaseException, connection: dict, received: bool) -> bool:
    """The keep-alive race's signature: a reused connection closed before any byte of the answer, as when uvicorn's
    idle timer closes it just as the request goes out (the server then never reads it). A CI run with two vLLMs on
    two cores lost 7 of 64 requests with this error; that it was this race is likely, not confirmed."""
    import aiohttp

    return isinstance(exc, aiohttp.ServerDisconnectedError) and not received \
        and connection.get("kind") == "a reused connection"


def _connection_trace():
    """An aiohttp trace that notes in each request's context whether its connection was new or reused."""
    import aiohttp

    async def reused(session, context, params) -> None:
        context.trace_request_ctx["kind"] = "a reused connection"

    async def created(session, context, params) -> None:
        context.trace_request_ctx["kind"] = "a new connection"

    trace = aiohttp.TraceConfig()
    trace.on_connection_reuseconn.append(reused)
    trace.on_connection_create_end.append(created)
    return trace


async def _streamed(session, url: str, request: HttpRequest, headers: dict) -> Timing:
    start = time.monotonic()
    ttft = last = None
    itl: list[float] = []
    spans: dict[int, list[float]] = {}  # choice index -> [first, last] message
    lags: list[float] = []
    usage = None
    buffer = b""
    connection: dict = {}
    received = False
    try:
        async with session.post(url, data=request.body, headers=headers, trace_request_ctx=connection) as response:
            received = True
            if response.status != 200:
                body = await response.read()
                return Timing(False, start, time.monotonic(), error=f"HTTP {response.status}: {body[:300].decode(errors='replace')}")
            async for data in response.content.iter_any():
                now = time.monotonic()  # every message in one read arrived together
                buffer += data
                *messages, buffer = buffer.split(b"\n\n")
                for message in messages:
                    message = message.strip()
                    if not message.startswith(b"data:"):
                        continue
                    payload = message[5:].strip()
                    if payload == b"[DONE]":
                        continue
                    chunk = orjson.loads(payload)
                    sent = chunk.get("x_sent_ns")
                    if sent is not None:
                        lags.append(now - sent / 1e9)
                    if chunk.get("choices"):
                        if ttft is None:
                            ttft = now - start
                        for choice in chunk["choices"]:
                            index = choice.get("index", 0)
                            if index in spans:  # ITL: the gap since this choice's previous message
                                itl.append(now - spans[index][1])
                                spans[index][1] = now
                            else:
                                spans[index] = [now, now]
                        last = now
                    elif chunk.get("usage"):
                        usage = chunk["usage"]
                    elif "error" in chunk:
                        return Timing(False, start, now, error=f"stream error: {payload[:300].decode(errors='replace')}")
    except Exception as exc:  # a failed request is data; the caller decides whether it may fail
        return _failed(exc, start, connection, received)
    if last is None:
        return Timing(False, start, time.monotonic(), error="the stream ended without a message carrying choices")
    if len(spans) != request.choices:
        return Timing(False, start, last, error=f"asked for {request.choices} choices, the stream carried {len(spans)}")
    return Timing(True, start, last, ttft_s=ttft, itl_s=itl, lag_s=lags,
                  choice_spans=[tuple(span) for _, span in sorted(spans.items())] if request.choices > 1 else [],
                  prompt_tokens=(usage or {}).get("prompt_tokens"), output_tokens=(usage or {}).get("completion_tokens"))


async def _whole(session, url: str, request: HttpRequest, headers: dict) -> Timing:
    start = time.monotonic()
    connection: dict = {}
    received = False
    try:
        async with session.post(url, data=request.body, headers=headers, trace_request_ctx=connection) as response:
            received = True
            first = time.monotonic()  # the bench's latency for pooling requests ends here, at the headers
            body = await response.read()
            end = time.monotonic()
            if response.status != 200:
                return Timing(False, start, end, error=f"HTTP {response.status}: {body[:300].decode(errors='replace')}")
        usage = orjson.loads(body).get("usage") or {}
    except Exception as exc:
        return _failed(exc, start, connection, received)
    return Timing(True, start, end, ttft_s=first - start, prompt_tokens=usage.get("prompt_tokens"),
                  output_tokens=usage.get("completion_tokens"))


async def _sent(session, url: str, request: HttpRequest, headers: dict) -> Timing:
    """One request, sent once more where the server closed its kept-alive connection before reading it (the server
    never saw it; browsers and HTTP libraries retry such requests too). The retry keeps the first attempt's start:
    the time lost is part of what the client waited."""
    send = _streamed if request.stream else _whole
    timing = await send(session, url, request, headers)
    if not timing.stale_connection:
        return timing
    again = await send(session, url, request, headers)
    lost = again.start - timing.start
    again.start, again.retried = timing.start, True
    if again.ttft_s is not None:
        again.ttft_s += lost
    return again


# The index of the next request of the batch, shared by every worker process (given to each at its start):
# a worker whose slot frees takes the next request, so all slots stay busy until the batch runs out, as with
# the bench's one semaphore. Dealing requests out beforehand left the workers with smaller shares running
# alone at the end (seen on the H200: 32 in flight over 7 workers).
_NEXT = None


def _init_worker(next_index, parent: int) -> None:
    """A worker's start: the shared request index, and an end with the run that started it (a run killed with
    SIGKILL left its workers, and multiprocessing's resource tracker with them, alive for minutes)."""
    global _NEXT
    end_with_parent(signal.SIGKILL, parent)
    _NEXT = next_index


def _take() -> int:
    with _NEXT.get_lock():
        index = _NEXT.value
        _NEXT.value = index + 1
    return index


async def _run_shard(shard: Shard) -> list[Timing]:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=shard.concurrency, keepalive_timeout=CLIENT_KEEP_ALIVE_S)
    timeout = aiohttp.ClientTimeout(total=shard.timeout_s, sock_read=STALL_S)
    headers = {"Content-Type": "application/json", **shard.headers}
    base = shard.base_url.rstrip("/")
    done: list[Timing] = []
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, trace_configs=[_connection_trace()]) as session:

        async def slot() -> None:
            while (index := _take()) < len(shard.requests):
                request = shard.requests[index]
                done.append(await _sent(session, base + request.path, request, headers))

        await asyncio.sleep(max(0.0, shard.start_at - time.monotonic()))
        await asyncio.gather(*(slot() for _ in range(shard.concurrency)))
    return done


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


def run_shard(shard: Shard) -> WorkerReport:
    """A worker's whole part of one batch (runs in the worker process)."""
    loop = _new_loop()
    try:
        cpu0 = time.process_time()
        timings = loop.run_until_complete(_run_shard(shard))
        cpu = time.process_time() - cpu0
    finally:
        loop.close()
    begin = max(shard.start_at, min((t.start for t in timings), default=shard.start_at))
    end = max((t.end for t in timings), default=begin)
    # The CPU spent waiting for the start is negligible (a sleep); the share is over the active window.
    return WorkerReport(timings, cpu, max(end - begin, 1e-9))


def _warm() -> int:
    import aiohttp  # noqa: F401 - imported once per worker, before any batch is timed

    return os.getpid()


# ---- the generator ---------------------------------------------------------------------------------------

def shares(concurrency: int, workers: int, requests: int) -> list[int]:
    """Each worker's part of the in-flight limit (never more workers than that limit or than requests); the
    parts differ by one at most."""
    workers = max(1, min(workers, concurrency, requests))
    return [concurrency // workers + (1 if i < concurrency % workers else 0) for i in range(workers)]


def default_workers(concurrency: int, cores: int | None = None) -> int:
    """Enough processes that none nears saturation at GPU speeds, leaving cores to vLLM's own processes
    (its API server and engine core are each one busy process)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(concurrency, 8, (cores - 2) // 2))


class LoadGenerator:
    """Worker processes that send batches of requests to one server; reuse it for every batch of a server."""

    def __init__(self, base_url: str, api_key: str | None = None, workers: int | None = None,
                 timeout_s: float = 900.0):
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.workers = workers
        self.timeout_s = timeout_s
        self._pool: ProcessPoolExecutor | None = None
        self._pool_size = 0
        self._next = None  # the shared index of the next request (made with the pool)

    def _executor(self, size: int) -> ProcessPoolExecutor:
        if self._pool is None or self._pool_size < size:
            self.close()
            # spawn: the parent may hold threads and an event loop that a fork would copy half-way
            spawn = multiprocessing.get_context("spawn")
            self._next = spawn.Value("q", 0)
            self._pool = ProcessPoolExecutor(size, mp_context=spawn, initializer=_init_worker,
                                             initargs=(self._next, os.getpid()))
            self._pool_size = size
            list(self._pool.map(_wait_and_warm, [0.2] * size))  # start every process before timing anything
        return self._pool

    def run(self, requests: list[HttpRequest], concurrency: int, workers: int | None = None) -> Batch:
        """Send every request with at most ``concurrency`` in flight over all workers; block until done."""
        if not requests:
            raise ValueError("a batch needs at least one request")
        n = workers or self.workers or default_workers(concurrency)
        parts = shares(concurrency, n, len(requests))
        pool = self._executor(len(parts))
        self._next.value = 0
        start_at = time.monotonic() + START_DELAY_S + 0.05 * len(parts)  # the batch's bodies travel to each worker
        shards = [Shard(self.base_url, self.headers, requests, share, start_at, self.timeout_s) for share in parts]
        reports = list(pool.map(run_shard, shards))
        timings = [t for r in reports for t in r.timings]
        # timed from the first request sent, as the bench times its run: a worker that woke after start_at (its
        # batch still travelling to it on starved cores) adds nothing the server did
        first = min(t.start for t in timings)
        wall = max(t.end for t in timings) - first
        retried = sum(t.retried for t in timings)
        if retried:  # rare and harmless to the figures, but not silent
            print(f"load generator: {retried} of {len(timings)} requests sent again: the server closed their kept-alive "
                  "connection before any byte of an answer", file=sys.stderr)
        return Batch(timings, wall, reports, concurrency, first)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool, self._pool_size = None, 0

    def __enter__(self) -> LoadGenerator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _wait_and_warm(seconds: float) -> int:
    # Each task holds its process a moment, so the pool's tasks land on distinct processes.
    time.sleep(seconds)
    return _warm()
