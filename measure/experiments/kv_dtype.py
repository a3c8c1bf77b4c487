"""KV-cache dtype: what ``--kv-cache-dtype fp8`` changes against the model's own dtype (``auto``) — the tokens a KV
budget holds, time to first token and per output token, and throughput — at a short and a long prompt.

Both servers get the same KV budget in bytes (on the GPU they run side by side, each with its own), so the tokens
each holds compare directly. Dummy weights: an fp8 cache's effect on answers is not measured here.
"""

from __future__ import annotations

import random

from measure.experiment import Experiment, ServerSpec, Step, register, spread
from measure.harness.loadgen import HttpRequest, default_workers
from measure.harness.server import ServerFailed
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import random_words

ROLE = "parallel"  # Qwen3-8B on the GPU (the tiny stand-in on the CPU)
# Workload sizes per profile (MEASURE_SIZES may replace them: '{"kv_dtype": {...}}').
SIZES = {
    "cpu": {"dtypes": ("auto", "fp8"), "prompt_tokens": (128, 2048), "output_tokens": 32, "sequential": 3, "rounds": 3,
            "concurrency": 8, "requests": 16, "shared_memory": ()},
    # two 8B servers side by side, each with 36 GiB of KV cache
    "gpu": {"dtypes": ("auto", "fp8"), "prompt_tokens": (1024, 16384), "output_tokens": 128, "sequential": 3,
            "rounds": 2, "concurrency": 16, "requests": 32,
            "shared_memory": ("--gpu-memory-utilization", "0.4", "--kv-cache-memory-bytes", str(36 << 30))},
}

KV_DTYPE = DatasetSchema(
    name="kv_dtype.compare",
    title={"zh": "KV 缓存的数据类型：auto 与 fp8", "en": "KV-cache dtype: auto and fp8"},
    key=("kv_cache_dtype", "prompt_tokens"),
    doc="Both servers get the same KV budget in bytes. TTFT and TPOT: one request at a time; throughput: a batch at "
        "a fixed concurrency.",
    columns=(
        Column("kv_cache_dtype", "str", doc="--kv-cache-dtype"),
        Column("prompt_tokens", "int", "tokens", "nominal (one token per word)"),
        Column("started", "bool", doc="false: vLLM refused to start with this dtype"),
        Column("kv_cache_gib", "float", "GiB", nullable=True),
        Column("kv_cache_tokens", "int", "tokens", nullable=True),
        Column("rounds", "int", "", nullable=True),
        Column("ttft_ms", "float", "ms", "median over rounds", nullable=True),
        Column("ttft_ms_min", "float", "ms", nullable=True),
        Column("ttft_ms_max", "float", "ms", nullable=True),
        Column("tpot_ms", "float", "ms", "median over rounds", nullable=True),
        Column("tpot_ms_min", "float", "ms", nullable=True),
        Column("tpot_ms_max", "float", "ms", nullable=True),
        Column("concurrency", "int", "requests", "in flight for the throughput batch"),
        Column("output_tok_s", "float", "tok/s", "median over rounds", nullable=True),
        Column("output_tok_s_min", "float", "tok/s", nullable=True),
        Column("output_tok_s_max", "float", "tok/s", nullable=True),
        Column("client_cpu_max", "float", "cores", role=CLIENT_LOAD, nullable=True),
        Column("error", "str", doc="the last error line of the log when it did not start", nullable=True),
    ),
)


def chat(server, words: int, output_tokens: int, rng: random.Random) -> HttpRequest:
    return HttpRequest.chat([{"role": "user", "content": random_words(words, rng)}], server.model, output_tokens,
                            ignore_eos=True)


@register
class KvDtype(Experiment):
    name = "kv_dtype"
    title = {"zh": "KV 缓存的数据类型", "en": "KV-cache dtype"}
    datasets = (KV_DTYPE,)
    attachable = False  # the server's --kv-cache-dtype is the variable

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("kv_dtype", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    def spec(self, profile, dtype: str) -> ServerSpec:
        return ServerSpec(ROLE, ("--kv-cache-dtype", dtype), label=f"kv-{dtype}",
                          shared_memory=tuple(self.sizes(profile)["shared_memory"]))

    def plan(self, profile):
        kv = self.sizes(profile)
        return [Step(self.spec(profile, d), f"--kv-cache-dtype {d}: TTFT, TPOT at {list(kv['prompt_tokens'])} prompt "
                     f"tokens, throughput at {kv['concurrency']} in flight",
                     len(kv["prompt_tokens"]) * (kv["rounds"] + 1) * (kv["sequential"] + kv["requests"]), 60)
                for d in kv["dtypes"]]

    def run(self, ctx):
        for dtype in self.sizes(ctx.profile)["dtypes"]:
            self.measure(ctx, dtype)

    def measure(self, ctx, dtype: str) -> None:
        kv = self.sizes(ctx.profile)
        todo = [n for n in kv["prompt_tokens"] if not ctx.done(KV_DTYPE, kv_cache_dtype=dtype, prompt_tokens=n)]
        if not todo:
            return
        try:
            server = ctx.server(self.spec(ctx.profile, dtype))
        except ServerFailed as exc:  # an fp8 cache this build cannot run is the finding
            for n in todo:
                ctx.record(KV_DTYPE, {"kv_cache_dtype": dtype, "prompt_tokens": n, "started": False,
                                      "concurrency": kv["concurrency"], "error": exc.reason[:300]})
            return
        for n in todo:
            ctx.record(KV_DTYPE, self.row(ctx, server, dtype, n, kv))

    @staticmethod
    def row(ctx, server, dtype: str, prompt_tokens: int, kv: dict) -> dict:
        one_at_a_time = ctx.load(server, workers=1)
        batched = ctx.load(server, workers=default_workers(kv["concurrency"]))
        ttfts, tpots, rates, cpu = [], [], [], 0.0
        for r in range(kv["rounds"] + 1):
            rng = random.Random(f"kv-{dtype}-{prompt_tokens}-{r}")
            one = one_at_a_time.run([chat(server, prompt_tokens, kv["output_tokens"], rng)
                                     for _ in range(kv["sequential"])], 1)
            many = batched.run([chat(server, prompt_tokens, kv["output_tokens"], rng)
                                for _ in range(kv["requests"])], kv["concurrency"])
            if not r:
                continue
            ttfts.append(one.summary().ttft_median_ms)
            tpots.append(one.summary().tpot_median_ms)
            rates.append(many.summary().output_tok_s)
            cpu = max(cpu, one.worker_cpu_max, many.worker_cpu_max)
        ttft, tpot, rate = spread(ttfts), spread(tpots), spread(rates)
        ctx.log(f"  --kv-cache-dtype {dtype}, {prompt_tokens}-token prompts: TTFT {ttft[0]:,.1f} ms, "
                f"TPOT {tpot[0]:.2f} ms, {rate[0]:,.0f} tok/s at {kv['concurrency']} in flight")
        return {"kv_cache_dtype": dtype, "prompt_tokens": prompt_tokens, "started": True,
                "kv_cache_gib": server.facts.kv_cache_gib, "kv_cache_tokens": server.facts.kv_cache_tokens,
                "rounds": kv["rounds"], "ttft_ms": ttft[0], "ttft_ms_min": ttft[1], "ttft_ms_max": ttft[2],
                "tpot_ms": tpot[0], "tpot_ms_min": tpot[1], "tpot_ms_max": tpot[2], "concurrency": kv["concurrency"],
                "output_tok_s": rate[0], "output_tok_s_min": rate[1], "output_tok_s_max": rate[2],
                "client_cpu_max": cpu}
