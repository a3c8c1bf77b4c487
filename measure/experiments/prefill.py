"""Prefill: does prefix caching cut time to first token, what does it cost when nothing is shared, how slow is a long
prompt, and does one long prefill stall the requests beside it (``--max-num-batched-tokens``, chunked prefill)?

Three servers of the chat model: prefix caching on and off at one batched-token budget, and caching on at a larger
budget. Prompts are random common words (one token each for Qwen's tokenizer); every request that should miss the
cache gets a prefix of its own, every hit reuses a prefix sent once before the timed requests. Time to first token
is taken one request at a time (nothing else in flight); throughput from a batch at a fixed concurrency.
"""

from __future__ import annotations

import random
import statistics
import zlib

from measure.experiment import Experiment, ServerSpec, Step, register, spread
from measure.harness.definitions import percentile
from measure.harness.loadgen import HttpRequest, default_workers
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import random_words

# Workload sizes per profile (MEASURE_SIZES may replace them: '{"prefill": {...}}'). The CPU stand-in's context is
# 4,096 tokens; the GPU's Qwen3-0.6B has 40,960.
SIZES = {
    "cpu": {"prefix_tokens": (128, 512, 2048), "prompt_tokens": (128, 512, 1024, 2048, 3072), "batched_tokens": (256, 2048),
            "rounds": 3, "sequential": 4, "batch": 16, "concurrency": 8, "output_tokens": 16,
            "short": {"requests": 16, "concurrency": 8, "words": 64, "output_tokens": 32}, "long_tokens": 3072},
    "gpu": {"prefix_tokens": (1024, 4096, 16384), "prompt_tokens": (1024, 4096, 8192, 16384, 32768),
            "batched_tokens": (2048, 16384), "rounds": 3, "sequential": 8, "batch": 64, "concurrency": 16,
            "output_tokens": 16, "short": {"requests": 64, "concurrency": 32, "words": 200, "output_tokens": 128},
            "long_tokens": 32768},
}
QUESTION_WORDS = 24  # the distinct question after a shared prefix

PREFIX_CACHE = DatasetSchema(
    name="prefill.prefix_cache",
    title={"zh": "前缀缓存：命中、未命中与关闭缓存", "en": "Prefix caching: hits, misses and caching off"},
    key=("caching", "prefix_tokens", "case"),
    doc="case 'hit': every request starts with a prefix sent once before; 'miss': each request has a prefix of its "
        "own (nothing is shared, so this is also what caching costs when no prefix repeats).",
    columns=(
        Column("caching", "str", doc="on | off (--no-enable-prefix-caching)"),
        Column("prefix_tokens", "int", "tokens", "the shared prefix (nominal; one token per word)"),
        Column("case", "str", doc="hit | miss"),
        Column("prompt_tokens", "int", "tokens", "a whole prompt as vLLM counted it (median)"),
        Column("max_num_batched_tokens", "int", "tokens", "the server's --max-num-batched-tokens"),
        Column("rounds", "int", "", "rounds measured (after one warm-up)"),
        Column("ttft_ms", "float", "ms", "one request at a time: median over rounds of each round's median"),
        Column("ttft_ms_min", "float", "ms"),
        Column("ttft_ms_max", "float", "ms"),
        Column("concurrency", "int", "requests", "in flight for the throughput batch"),
        Column("request_per_s", "float", "req/s", "the throughput batch: median over rounds"),
        Column("request_per_s_min", "float", "req/s"),
        Column("request_per_s_max", "float", "req/s"),
        Column("client_cpu_max", "float", "cores", "the load client's busiest worker, share of one core",
               role=CLIENT_LOAD),
    ),
)
LONG_PROMPT = DatasetSchema(
    name="prefill.long_prompt",
    title={"zh": "长提示：首 token 时间随提示长度", "en": "Long prompts: time to first token against prompt length"},
    key=("max_num_batched_tokens", "prompt_tokens"),
    columns=(
        Column("max_num_batched_tokens", "int", "tokens", "the server's --max-num-batched-tokens"),
        Column("prompt_tokens", "int", "tokens", "nominal prompt length (one token per word)"),
        Column("measured_prompt_tokens", "int", "tokens", "as vLLM counted it (median)"),
        Column("rounds", "int", ""),
        Column("ttft_ms", "float", "ms", "one request at a time, each a prompt of its own: median over rounds"),
        Column("ttft_ms_min", "float", "ms"),
        Column("ttft_ms_max", "float", "ms"),
        Column("client_cpu_max", "float", "cores", role=CLIENT_LOAD),
    ),
)
INTERFERENCE = DatasetSchema(
    name="prefill.interference",
    title={"zh": "一个长提示对旁边短请求的影响", "en": "What one long prompt does to the short requests beside it"},
    key=("max_num_batched_tokens", "long_prompt"),
    doc="A batch of short chat requests at a fixed concurrency, alone or with one long prompt sent at its start.",
    columns=(
        Column("max_num_batched_tokens", "int", "tokens", "the server's --max-num-batched-tokens"),
        Column("long_prompt", "str", doc="none | beside: one long prompt sent with the batch"),
        Column("long_prompt_tokens", "int", "tokens", "the long prompt as vLLM counted it", nullable=True),
        Column("long_ttft_ms", "float", "ms", "the long prompt's time to first token (median over rounds)",
               nullable=True),
        Column("concurrency", "int", "requests", "short requests in flight"),
        Column("rounds", "int", ""),
        Column("itl_p50_ms", "float", "ms", "short requests' inter-token latency, median (median over rounds)"),
        Column("itl_p99_ms", "float", "ms", "99th percentile (median over rounds)"),
        Column("itl_max_ms", "float", "ms", "the longest gap any short request saw (highest round)"),
        Column("ttft_p99_ms", "float", "ms", "short requests' time to first token, 99th percentile"),
        Column("output_tok_s", "float", "tok/s", "the short requests' output throughput (median over rounds)"),
        Column("client_cpu_max", "float", "cores", role=CLIENT_LOAD),
    ),
)


def seed_of(*parts) -> int:
    """A seed from a request group's name: the same requests on every machine (``hash`` differs per process)."""
    return zlib.crc32(repr(parts).encode())



@register
class Prefill(Experiment):
    name = "prefill"
    title = {"zh": "前缀缓存与长提示", "en": "Prefix caching and long prompts"}
    datasets = (PREFIX_CACHE, LONG_PROMPT, INTERFERENCE)
    attachable = False  # the servers' flags (caching, batched tokens) are the variables

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("prefill", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    @staticmethod
    def spec(caching: bool, batched: int) -> ServerSpec:
        args = ("--max-num-batched-tokens", str(batched)) + (() if caching else ("--no-enable-prefix-caching",))
        return ServerSpec("chat", args, label=f"prefill-caching-{'on' if caching else 'off'}-{batched}")

    def specs(self, profile) -> dict[tuple[bool, int], ServerSpec]:
        small, large = self.sizes(profile)["batched_tokens"]
        return {(True, small): self.spec(True, small), (False, small): self.spec(False, small),
                (True, large): self.spec(True, large)}

    def plan(self, profile):
        s = self.sizes(profile)
        small, large = s["batched_tokens"]
        per_case = (s["rounds"] + 1) * (s["sequential"] + s["batch"])
        return [
            Step(self.spec(True, small), f"prefix cache on: hit and miss at {list(s['prefix_tokens'])} prefix tokens",
                 2 * len(s["prefix_tokens"]) * per_case, 20 * len(s["prefix_tokens"])),
            Step(self.spec(False, small), f"prefix cache off: the same; TTFT at {list(s['prompt_tokens'])} prompt tokens; "
                 "short requests beside one long prompt", 2 * len(s["prefix_tokens"]) * per_case, 40),
            Step(self.spec(True, large), f"--max-num-batched-tokens {large}: long prompts, short requests beside one",
                 (s["rounds"] + 1) * (len(s["prompt_tokens"]) * s["sequential"] + 2 * s["short"]["requests"]), 40),
        ]

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        small, large = s["batched_tokens"]
        for caching in (True, False):
            spec = self.spec(caching, small)
            if not all(ctx.done(PREFIX_CACHE, caching="on" if caching else "off", prefix_tokens=p, case=c)
                       for p in s["prefix_tokens"] for c in ("hit", "miss")):
                self.prefix_cache(ctx, ctx.server(spec), caching, small, s)
        # Long prompts and interference where no prefix can repeat: caching off at the small budget, on at the large
        # one (each prompt is new there too)
        for spec, batched in ((self.spec(False, small), small), (self.spec(True, large), large)):
            needs_long = not all(ctx.done(LONG_PROMPT, max_num_batched_tokens=batched, prompt_tokens=n)
                                 for n in s["prompt_tokens"])
            needs_beside = not all(ctx.done(INTERFERENCE, max_num_batched_tokens=batched, long_prompt=w)
                                   for w in ("none", "beside"))
            if needs_long or needs_beside:
                server = ctx.server(spec)
                self.long_prompts(ctx, server, batched, s)
                self.interference(ctx, server, batched, s)

    # ---- prefix caching -------------------------------------------------------------------------
    @staticmethod
    def prompts(prefix_tokens: int, count: int, shared: bool, seed: int) -> list[list[dict]]:
        """``count`` chat prompts: a prefix of ``prefix_tokens`` words (the same one if ``shared``, else one each),
        then a question of their own."""
        rng = random.Random(seed)
        common = random_words(prefix_tokens, rng)
        return [[{"role": "user", "content": (common if shared else random_words(prefix_tokens, rng)) + "\n\n"
                  + random_words(QUESTION_WORDS, rng) + "?"}] for _ in range(count)]

    def prefix_cache(self, ctx, server, caching: bool, batched: int, s: dict) -> None:
        label = "on" if caching else "off"
        for prefix in s["prefix_tokens"]:
            for case in ("hit", "miss"):
                if ctx.done(PREFIX_CACHE, caching=label, prefix_tokens=prefix, case=case):
                    continue
                load = ctx.load(server, workers=default_workers(s["concurrency"]))
                ttfts, rates, tokens, cpu = [], [], [], 0.0
                for r in range(s["rounds"] + 1):  # round 0 warms this load point up and is not kept
                    seed = seed_of(label, prefix, case, r)
                    sequential = self.requests(server, prefix, s["sequential"], case == "hit", seed, s)
                    batch = self.requests(server, prefix, s["batch"], case == "hit", seed + 1, s)
                    if case == "hit":  # each shared prefix goes in once, with a question of its own, before the timed
                        load.run([sequential.pop(0), batch.pop(0)], 1)
                    else:
                        sequential, batch = sequential[1:], batch[1:]
                    one = load.run(sequential, 1)
                    many = load.run(batch, s["concurrency"])
                    if r == 0:
                        continue
                    ttfts.append(one.summary().ttft_median_ms)
                    rates.append(many.summary().request_per_s)
                    tokens += [t.prompt_tokens for t in one.timings if t.prompt_tokens]
                    cpu = max(cpu, one.worker_cpu_max, many.worker_cpu_max)
                ttft, rate = spread(ttfts), spread(rates)
                ctx.log(f"  caching {label}, {prefix} prefix tokens, {case}: TTFT {ttft[0]:.1f} ms, {rate[0]:.1f} req/s")
                ctx.record(PREFIX_CACHE, {
                    "caching": label, "prefix_tokens": prefix, "case": case,
                    "prompt_tokens": int(statistics.median(tokens)), "max_num_batched_tokens": batched,
                    "rounds": s["rounds"], "ttft_ms": ttft[0], "ttft_ms_min": ttft[1], "ttft_ms_max": ttft[2],
                    "concurrency": s["concurrency"], "request_per_s": rate[0], "request_per_s_min": rate[1],
                    "request_per_s_max": rate[2], "client_cpu_max": cpu})

    def requests(self, server, prefix: int, count: int, shared: bool, seed: int, s: dict) -> list[HttpRequest]:
        """``count`` timed requests and one more in front (a hit's warm-up; dropped for a miss)."""
        return [HttpRequest.chat(messages, server.model, s["output_tokens"], ignore_eos=True)
                for messages in self.prompts(prefix, count + 1, shared, seed)]

    # ---- long prompts ---------------------------------------------------------------------------
    def long_prompts(self, ctx, server, batched: int, s: dict) -> None:
        load = ctx.load(server, workers=1)
        for length in s["prompt_tokens"]:
            if ctx.done(LONG_PROMPT, max_num_batched_tokens=batched, prompt_tokens=length):
                continue
            medians, tokens, cpu = [], [], 0.0
            for r in range(s["rounds"] + 1):
                rng = random.Random(seed_of("long", batched, length, r))
                batch = load.run([HttpRequest.chat([{"role": "user", "content": random_words(length, rng)}],
                                                   server.model, 1) for _ in range(s["sequential"])], 1)
                if r == 0:
                    continue
                medians.append(batch.summary().ttft_median_ms)
                tokens += [t.prompt_tokens for t in batch.timings if t.prompt_tokens]
                cpu = max(cpu, batch.worker_cpu_max)
            ttft = spread(medians)
            ctx.log(f"  batched tokens {batched}, {length}-token prompt: TTFT {ttft[0]:.1f} ms")
            ctx.record(LONG_PROMPT, {"max_num_batched_tokens": batched, "prompt_tokens": length,
                                     "measured_prompt_tokens": int(statistics.median(tokens)), "rounds": s["rounds"],
                                     "ttft_ms": ttft[0], "ttft_ms_min": ttft[1], "ttft_ms_max": ttft[2],
                                     "client_cpu_max": cpu})

    # ---- one long prompt beside short requests ----------------------------------------------------
    def interference(self, ctx, server, batched: int, s: dict) -> None:
        short = s["short"]
        load = ctx.load(server, workers=default_workers(short["concurrency"] + 1))
        for beside in ("none", "beside"):
            if ctx.done(INTERFERENCE, max_num_batched_tokens=batched, long_prompt=beside):
                continue
            rounds = []
            for r in range(s["rounds"] + 1):
                rng = random.Random(seed_of("short", batched, beside, r))
                shorts = [HttpRequest.chat([{"role": "user", "content": random_words(short["words"], rng)}],
                                           server.model, short["output_tokens"], ignore_eos=True)
                          for _ in range(short["requests"])]
                long = [HttpRequest.chat([{"role": "user", "content": random_words(s["long_tokens"], rng)}],
                                         server.model, 1)] if beside == "beside" else []
                # the long prompt first, with one slot of its own: it enters while the first short ones decode
                batch = load.run(long + shorts, short["concurrency"] + len(long))
                if r:
                    rounds.append(batch)
            ctx.record(INTERFERENCE, self.interference_row(rounds, batched, beside, short, s))

    def interference_row(self, rounds, batched: int, beside: str, short: dict, s: dict) -> dict:
        itl_p50, itl_p99, itl_max, ttft_p99, tok_s, long_ttft, long_tokens = [], [], [], [], [], [], []
        for batch in rounds:
            shorts = [t for t in batch.timings if t.output_tokens and t.output_tokens > 1]
            longs = [t for t in batch.timings if t not in shorts]
            gaps = [g * 1000 for t in shorts for g in t.itl_s]
            itl_p50.append(statistics.median(gaps))
            itl_p99.append(percentile(gaps, 99))
            itl_max.append(max(gaps))
            ttft_p99.append(percentile([t.ttft_s * 1000 for t in shorts], 99))
            tok_s.append(sum(t.output_tokens for t in shorts) / batch.wall_s)
            long_ttft += [t.ttft_s * 1000 for t in longs]
            long_tokens += [t.prompt_tokens for t in longs if t.prompt_tokens]
        row = {"max_num_batched_tokens": batched, "long_prompt": beside,
               "long_prompt_tokens": int(statistics.median(long_tokens)) if long_tokens else None,
               "long_ttft_ms": statistics.median(long_ttft) if long_ttft else None,
               "concurrency": short["concurrency"], "rounds": s["rounds"], "itl_p50_ms": statistics.median(itl_p50),
               "itl_p99_ms": statistics.median(itl_p99), "itl_max_ms": max(itl_max),
               "ttft_p99_ms": statistics.median(ttft_p99), "output_tok_s": statistics.median(tok_s),
               "client_cpu_max": max(b.worker_cpu_max for b in rounds)}
        return row
