"""What ``--max-model-len`` changes for a text model: the KV cache it gets, the concurrency vLLM says that cache holds
at the longest request, the start-up time, and throughput and TTFT at one load whose requests fit every setting.

Each server has the device to itself (``starts_alone``), so its memory and start-up time are its own. The requests are
the same at every setting; only the longest request the server accepts changes.
"""

from __future__ import annotations

import random

from measure.experiment import Experiment, ServerSpec, Step, register, spread
from measure.harness.loadgen import HttpRequest, default_workers
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import random_words

ROLE = "parallel"  # Qwen3-8B on the GPU (the tiny stand-in on the CPU)
MODEL_OWN = "model's own"  # no flag: vLLM takes max_position_embeddings from the model's config
# Workload sizes per profile (MEASURE_SIZES may replace them: '{"max_model_len": {...}}').
SIZES = {
    "cpu": {"lengths": ("1024", "4096", MODEL_OWN), "words": 256, "output_tokens": 16, "concurrency": 8,
            "min_requests": 16, "rounds": 2},
    "gpu": {"lengths": ("4096", "16384", MODEL_OWN), "words": 1024, "output_tokens": 128, "concurrency": 64,
            "min_requests": 256, "rounds": 3},
}

LENGTHS = DatasetSchema(
    name="max_model_len.settings",
    title={"zh": "--max-model-len 的几个取值：KV 缓存、启动与吞吐",
           "en": "--max-model-len at several settings: KV cache, start-up and throughput"},
    key=("max_model_len",),
    doc="One server per setting, the device to itself. The KV-cache figures and the start-up time are read from vLLM's "
        "log; throughput, TTFT and TPOT come from the same requests at one load (one warm-up round not kept; "
        "medians, lowest and highest over the timed rounds).",
    columns=(
        Column("model", "str"),
        Column("weights", "str", doc="dummy | real"),
        Column("max_model_len", "str", doc="--max-model-len, or the model's own (no flag)"),
        Column("context_tokens", "int", "tokens", "the longest request the server accepts, as its log says",
               nullable=True),
        Column("kv_cache_gib", "float", "GiB", nullable=True),
        Column("kv_cache_tokens", "int", "tokens", nullable=True),
        Column("max_concurrency", "float", "×", "requests of context_tokens the KV cache holds, as vLLM logs it",
               nullable=True),
        Column("startup_s", "float", "s", "launch to /health ready", nullable=True),
        Column("prompt_tokens", "int", "tokens", "per request, as vLLM counted them", nullable=True),
        Column("output_tokens", "int", "tokens", "per request"),
        Column("concurrency", "int", "requests", "requests in flight"),
        Column("requests", "int", "requests", "per round"),
        Column("rounds", "int", "", "timed rounds"),
        Column("output_tok_s", "float", "tok/s", "median over rounds"),
        Column("output_tok_s_min", "float", "tok/s"),
        Column("output_tok_s_max", "float", "tok/s"),
        Column("ttft_p50_ms", "float", "ms", "a round's median TTFT, median over rounds"),
        Column("ttft_p50_ms_min", "float", "ms"),
        Column("ttft_p50_ms_max", "float", "ms"),
        Column("tpot_p50_ms", "float", "ms", "a round's median TPOT, median over rounds"),
        Column("tpot_p50_ms_min", "float", "ms"),
        Column("tpot_p50_ms_max", "float", "ms"),
        Column("client_cpu_max", "float", "cores", role=CLIENT_LOAD),
    ),
)


@register
class MaxModelLen(Experiment):
    name = "max_model_len"
    title = {"zh": "--max-model-len 改变了什么", "en": "What --max-model-len changes"}
    datasets = (LENGTHS,)
    attachable = False  # the server's --max-model-len is the variable

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("max_model_len", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    @staticmethod
    def spec(length: str) -> ServerSpec:
        args = () if length == MODEL_OWN else ("--max-model-len", length)
        return ServerSpec(ROLE, args, label=f"max-len-{'own' if length == MODEL_OWN else length}", starts_alone=True)

    def plan(self, profile):
        s = self.sizes(profile)
        n = (s["rounds"] + 1) * max(2 * s["concurrency"], s["min_requests"])
        rate = 300 if profile.name == "cpu" else 6_000  # a rough output rate (tok/s) for the estimate
        return [Step(self.spec(length), f"--max-model-len {length}: start-up facts, then {s['concurrency']} in flight "
                     f"× {s['rounds'] + 1} rounds", n, n * s["output_tokens"] / rate) for length in s["lengths"]]

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        if not ctx.has(ROLE):
            return
        model = ctx.model(ROLE)
        for length in s["lengths"]:
            if ctx.done(LENGTHS, max_model_len=length):
                continue
            server = ctx.server(self.spec(length))
            facts = server.facts
            ctx.record(LENGTHS, {"model": model.name, "weights": model.weights, "max_model_len": length,
                                 "context_tokens": facts.max_concurrency_tokens, "kv_cache_gib": facts.kv_cache_gib,
                                 "kv_cache_tokens": facts.kv_cache_tokens, "max_concurrency": facts.max_concurrency,
                                 "startup_s": server.startup_s} | self.measure(ctx, server, length, s))

    @staticmethod
    def measure(ctx, server, length: str, s: dict) -> dict:
        load = ctx.load(server, workers=default_workers(s["concurrency"]))
        count = max(2 * s["concurrency"], s["min_requests"])
        summaries = []
        for r in range(s["rounds"] + 1):  # round 0 warms the server up and is not kept
            rng = random.Random(f"max-model-len-{r}")  # the same requests at every setting
            batch = load.run([HttpRequest.chat([{"role": "user", "content": random_words(s["words"], rng)}],
                                               server.model, s["output_tokens"], ignore_eos=True)
                              for _ in range(count)], s["concurrency"])
            if r:
                summaries.append(batch.summary())
        rate = spread([x.output_tok_s for x in summaries])
        ttft = spread([x.ttft_median_ms for x in summaries])
        tpot = spread([x.tpot_median_ms for x in summaries])
        ctx.log(f"  --max-model-len {length}: {rate[0]:,.0f} tok/s, TTFT p50 {ttft[0]:,.1f} ms at "
                f"{s['concurrency']} in flight")
        return {"prompt_tokens": round(summaries[0].prompt_tokens / summaries[0].requests),
                "output_tokens": s["output_tokens"], "concurrency": s["concurrency"], "requests": count,
                "rounds": s["rounds"], "output_tok_s": rate[0], "output_tok_s_min": rate[1], "output_tok_s_max": rate[2],
                "ttft_p50_ms": ttft[0], "ttft_p50_ms_min": ttft[1], "ttft_p50_ms_max": ttft[2],
                "tpot_p50_ms": tpot[0], "tpot_p50_ms_min": tpot[1], "tpot_p50_ms_max": tpot[2],
                "client_cpu_max": max(x.worker_cpu_max for x in summaries)}
