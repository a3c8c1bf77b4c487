"""Speculative decoding by n-gram lookup (``--speculative-config`` method ``ngram``): what it costs or gains against
no speculation — TPOT, TTFT and throughput at a low and a higher load, with the draft tokens vLLM proposed and the
share it accepted, read from ``/metrics``.

Dummy weights bracket what real text does. Under greedy decoding they repeat themselves, so the lookup finds the
next tokens in what came before and nearly every draft is taken: the best case. Sampled at temperature 1 they write
random tokens, so the lookup seldom finds a match and proposes little: the lookup's own overhead. What speculation
gains on real text with real weights lies between and stays unmeasured.
"""

from __future__ import annotations

import json
import random

from measure.experiment import Experiment, ServerSpec, Step, register, spread
from measure.harness.loadgen import HttpRequest, default_workers
from measure.harness.server import ServerFailed
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import random_words

ROLE = "parallel"  # Qwen3-8B on the GPU (the tiny stand-in on the CPU)
NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
MODES = {"none": (), "ngram": ("--speculative-config", json.dumps(NGRAM, separators=(",", ":")))}
# greedy: dummy weights repeat themselves, so drafts match; sampled: random tokens, so drafts seldom come
SAMPLINGS = {"greedy": 0.0, "sampled": 1.0}
# Workload sizes per profile (MEASURE_SIZES may replace them: '{"spec_ngram": {...}}').
SIZES = {
    "cpu": {"modes": ("none", "ngram"), "samplings": ("greedy", "sampled"), "words": 128, "output_tokens": 32, "concurrency": (1, 4), "min_requests": 4,
            "rounds": 2},
    "gpu": {"modes": ("none", "ngram"), "samplings": ("greedy", "sampled"), "words": 1024, "output_tokens": 256, "concurrency": (1, 16), "min_requests": 16,
            "rounds": 3},
}

SPEC = DatasetSchema(
    name="spec_ngram.compare",
    title={"zh": "n-gram 推测解码与不推测：TPOT、吞吐与接受率",
           "en": "n-gram speculative decoding against none: TPOT, throughput and acceptance"},
    key=("speculation", "sampling", "concurrency"),
    doc="The same requests to a server without speculation and to one with n-gram speculation (4 draft tokens). "
        "One warm-up round at each load point is not kept; medians, lowest and highest over the timed rounds. Draft "
        "and accepted tokens are vLLM's own counters over the timed rounds.",
    columns=(
        Column("model", "str"),
        Column("weights", "str", doc="dummy | real"),
        Column("speculation", "str", doc="none | ngram"),
        Column("config", "str", doc="--speculative-config (none: no speculation)", nullable=True),
        Column("sampling", "str", doc="greedy (temperature 0: dummy weights repeat themselves, so drafts match) | "
               "sampled (temperature 1: random tokens, so drafts seldom come)"),
        Column("started", "bool", doc="false: vLLM refused to start with this configuration"),
        Column("concurrency", "int", "requests", "requests in flight"),
        Column("requests", "int", "requests", "per round", nullable=True),
        Column("rounds", "int", "", "timed rounds", nullable=True),
        Column("output_tokens", "int", "tokens", "per request"),
        Column("tpot_p50_ms", "float", "ms", "a round's median TPOT, median over rounds", nullable=True),
        Column("tpot_p50_ms_min", "float", "ms", nullable=True),
        Column("tpot_p50_ms_max", "float", "ms", nullable=True),
        Column("ttft_p50_ms", "float", "ms", "a round's median TTFT, median over rounds", nullable=True),
        Column("output_tok_s", "float", "tok/s", "median over rounds", nullable=True),
        Column("output_tok_s_min", "float", "tok/s", nullable=True),
        Column("output_tok_s_max", "float", "tok/s", nullable=True),
        Column("draft_tokens_per_output", "float", "×", "draft tokens proposed ÷ output tokens", nullable=True),
        Column("acceptance", "float", "", "accepted draft tokens ÷ draft tokens", minimum=0, maximum=1,
               nullable=True),
        Column("client_cpu_max", "float", "cores", role=CLIENT_LOAD, nullable=True),
        Column("error", "str", doc="the last error line of the log when it did not start", nullable=True),
    ),
)


@register
class SpecNgram(Experiment):
    name = "spec_ngram"
    title = {"zh": "n-gram 推测解码", "en": "n-gram speculative decoding"}
    datasets = (SPEC,)
    attachable = False  # the server's --speculative-config is the variable

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("spec_ngram", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    @staticmethod
    def spec(mode: str) -> ServerSpec:
        if mode not in MODES:
            raise ValueError(f"spec_ngram: unknown mode {mode!r}; known: {list(MODES)}")
        return ServerSpec(ROLE, MODES[mode], label=f"spec-{mode}", starts_alone=True)

    @staticmethod
    def requests(s: dict, concurrency: int) -> int:
        return max(2 * concurrency, s["min_requests"])

    def plan(self, profile):
        s = self.sizes(profile)
        n = sum((s["rounds"] + 1) * self.requests(s, c) for c in s["concurrency"]) * len(s["samplings"])
        rate = 100 if profile.name == "cpu" else 1_500  # a rough output rate at these loads (tok/s), for the estimate
        return [Step(self.spec(mode), f"speculation {mode}: {list(s['concurrency'])} in flight × {s['rounds'] + 1} "
                     f"rounds, {' and '.join(s['samplings'])}", n, n * s["output_tokens"] / rate) for mode in s["modes"]]

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        if not ctx.has(ROLE):
            return
        model = ctx.model(ROLE)
        for mode in s["modes"]:
            todo = [(sampling, c) for sampling in s["samplings"] for c in s["concurrency"]
                    if not ctx.done(SPEC, speculation=mode, sampling=sampling, concurrency=c)]
            if not todo:
                continue
            base = {"model": model.name, "weights": model.weights, "speculation": mode,
                    "config": " ".join(MODES[mode][1:]) or None, "output_tokens": s["output_tokens"]}
            try:
                server = ctx.server(self.spec(mode))
            except ServerFailed as exc:  # a backend without n-gram speculation is the finding
                for sampling, c in todo:
                    ctx.record(SPEC, base | {"started": False, "sampling": sampling, "concurrency": c,
                                             "error": exc.reason[:300]})
                continue
            for sampling, c in todo:
                ctx.record(SPEC, base | {"started": True} | self.measure(ctx, server, mode, sampling, c, s))

    def measure(self, ctx, server, mode: str, sampling: str, concurrency: int, s: dict) -> dict:
        load = ctx.load(server, workers=default_workers(concurrency))
        count = self.requests(s, concurrency)
        summaries, before = [], None
        for r in range(s["rounds"] + 1):  # round 0 warms this load point up and is not kept
            rng = random.Random(f"spec-{concurrency}-{r}")  # the same requests with and without speculation
            requests = [HttpRequest.chat([{"role": "user", "content": random_words(s["words"], rng)}], server.model,
                                         s["output_tokens"], ignore_eos=True, temperature=SAMPLINGS[sampling],
                                         seed=i) for i in range(count)]
            if r == 1:
                before = server.metrics()
            batch = load.run(requests, concurrency)
            if r:
                summaries.append(batch.summary())
        delta = server.metrics() - before
        drafted = delta.get("vllm:spec_decode_num_draft_tokens", 0.0)
        output = sum(x.output_tokens for x in summaries)
        tpot, rate = spread([x.tpot_median_ms for x in summaries]), spread([x.output_tok_s for x in summaries])
        row = {"sampling": sampling, "concurrency": concurrency, "requests": count, "rounds": s["rounds"],
               "tpot_p50_ms": tpot[0], "tpot_p50_ms_min": tpot[1], "tpot_p50_ms_max": tpot[2],
               "ttft_p50_ms": spread([x.ttft_median_ms for x in summaries])[0],
               "output_tok_s": rate[0], "output_tok_s_min": rate[1], "output_tok_s_max": rate[2],
               "draft_tokens_per_output": drafted / output if mode != "none" and output else None,
               "acceptance": delta.get("vllm:spec_decode_num_accepted_tokens", 0.0) / drafted if drafted else None,
               "client_cpu_max": max(x.worker_cpu_max for x in summaries)}
        accepted = f", {row['acceptance']:.0%} of drafts accepted" if row["acceptance"] is not None else ""
        ctx.log(f"  speculation {mode}, {sampling}, {concurrency} in flight: TPOT p50 {tpot[0]:.2f} ms, {rate[0]:,.0f} tok/s"
                + accepted)
        return row
