"""Where to start tuning: one chat workload served by vLLM's defaults, then with one change added at a time in the
order an operator tries them, each rung's throughput, TTFT and TPOT (p50 and p99) at two loads.

Every request opens with the same system prompt (a chat application's instructions) and then a question of its own,
so prefix caching, on by default, has something to reuse; the last rung switches it off to show what the default is
worth. Every server starts through ``vllm serve`` (the only start command that acts on ``--api-server-count``), so
the front end is the same on every rung. Dummy weights: fixed input and output lengths (``ignore_eos``).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from measure.experiment import Experiment, ServerSpec, Step, register, spread
from measure.harness.definitions import percentile
from measure.harness.loadgen import HttpRequest, default_workers
from measure.harness.server import ServerFailed
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import SEED, random_words

ROLE = "parallel"  # Qwen3-8B on the GPU (the tiny stand-in on the CPU)


@dataclass(frozen=True)
class Rung:
    name: str
    added: tuple[str, ...]  # the flags this rung adds to the one before


# In the order an operator tries them; each rung keeps every flag of the rungs before it.
RUNGS = (
    Rung("defaults", ()),
    Rung("api-servers", ("--api-server-count", "4")),
    Rung("batched-tokens", ("--max-num-batched-tokens", "16384")),
    Rung("fp8-kv", ("--kv-cache-dtype", "fp8")),
    Rung("no-prefix-cache", ("--no-enable-prefix-caching",)),
)

# Workload sizes per profile (MEASURE_SIZES may replace them: '{"tuning_ladder": {...}}').
SIZES = {
    # the CPU backend caches prefixes in blocks of 128 tokens: a shorter system prompt would fill none
    "cpu": {"rungs": tuple(r.name for r in RUNGS), "system_words": 256, "question_words": 64, "output_tokens": 16,
            "concurrency": (4, 16), "min_requests": 16, "rounds": 2},
    "gpu": {"rungs": tuple(r.name for r in RUNGS), "system_words": 512, "question_words": 512, "output_tokens": 256,
            "concurrency": (64, 256), "min_requests": 256, "rounds": 3},
}

LADDER = DatasetSchema(
    name="tuning_ladder.rungs",
    title={"zh": "调优阶梯：每一级的吞吐与延迟", "en": "The tuning ladder: throughput and latency per rung"},
    key=("rung", "concurrency"),
    doc="Each rung keeps the flags of the rungs before it and adds its own. Each round sends max(2 × concurrency, "
        "min_requests) requests; one warm-up round at each load point is not kept; medians, lowest and highest "
        "over the timed rounds.",
    columns=(
        Column("model", "str"),
        Column("weights", "str", doc="dummy | real"),
        Column("step", "int", "", "the rung's place on the ladder, 0 = vLLM's defaults", minimum=0),
        Column("rung", "str", doc="the rung's name"),
        Column("added", "str", doc="the flags this rung adds to the one before (none: vLLM's defaults)", nullable=True),
        Column("flags", "str", doc="every flag the ladder has added by this rung (none: vLLM's defaults)",
               nullable=True),
        Column("started", "bool", doc="false: vLLM refused to start with these flags"),
        Column("prompt_tokens", "int", "tokens", "per request, as vLLM counted them (system prompt included)",
               nullable=True),
        Column("shared_tokens", "int", "tokens", "nominal length of the system prompt every request shares"),
        Column("output_tokens", "int", "tokens", "per request"),
        Column("concurrency", "int", "requests", "requests in flight"),
        Column("requests", "int", "requests", "per round", nullable=True),
        Column("rounds", "int", "", "timed rounds", nullable=True),
        Column("output_tok_s", "float", "tok/s", "output tokens per second of a round, median over rounds",
               nullable=True),
        Column("output_tok_s_min", "float", "tok/s", nullable=True),
        Column("output_tok_s_max", "float", "tok/s", nullable=True),
        Column("ttft_p50_ms", "float", "ms", "a round's median TTFT, median over rounds", nullable=True),
        Column("ttft_p50_ms_min", "float", "ms", nullable=True),
        Column("ttft_p50_ms_max", "float", "ms", nullable=True),
        Column("ttft_p99_ms", "float", "ms", "a round's 99th-percentile TTFT, median over rounds", nullable=True),
        Column("ttft_p99_ms_min", "float", "ms", nullable=True),
        Column("ttft_p99_ms_max", "float", "ms", nullable=True),
        Column("tpot_p50_ms", "float", "ms", "a round's median TPOT, median over rounds", nullable=True),
        Column("tpot_p50_ms_min", "float", "ms", nullable=True),
        Column("tpot_p50_ms_max", "float", "ms", nullable=True),
        Column("tpot_p99_ms", "float", "ms", "a round's 99th-percentile TPOT, median over rounds", nullable=True),
        Column("tpot_p99_ms_min", "float", "ms", nullable=True),
        Column("tpot_p99_ms_max", "float", "ms", nullable=True),
        Column("prefix_hit_share", "float", "", "prompt tokens served from the prefix cache ÷ prompt tokens, over "
               "the timed rounds", minimum=0, maximum=1, nullable=True),
        Column("kv_cache_tokens", "int", "tokens", nullable=True),
        Column("client_cpu_max", "float", "cores", role=CLIENT_LOAD, nullable=True),
        Column("error", "str", doc="the last error line of the log when it did not start", nullable=True),
    ),
)


# The figures each rung is compared on with the rung before, and whether higher is better
COMPARED = {"output_tok_s": ("output throughput", True), "ttft_p50_ms": ("TTFT p50", False),
            "ttft_p99_ms": ("TTFT p99", False), "tpot_p50_ms": ("TPOT p50", False), "tpot_p99_ms": ("TPOT p99", False)}
NO_CHANGE = "no measurable change"

GAINS = DatasetSchema(
    name="tuning_ladder.gains",
    title={"zh": "每一级比上一级：变好、变差还是分不出", "en": "Each rung against the one before: better, worse or no telling"},
    key=("step", "concurrency", "metric"),
    doc="Computed from tuning_ladder.rungs. ratio: this rung's median ÷ the rung before's; its range divides the lowest "
        "round by the other's highest and the highest by the other's lowest. Where the two rungs' rounds overlap, "
        "no change is measurable, whatever the medians say.",
    columns=(
        Column("step", "int", "", minimum=1),
        Column("rung", "str"),
        Column("added", "str", doc="the flags this rung adds"),
        Column("previous", "str", doc="the rung before"),
        Column("concurrency", "int", "requests"),
        Column("metric", "str", doc="the figure compared: output throughput, TTFT p50 or p99, TPOT p50 or p99"),
        Column("ratio", "float", "×"),
        Column("ratio_low", "float", "×"),
        Column("ratio_high", "float", "×"),
        Column("verdict", "str", doc=f"better | worse | {NO_CHANGE}"),
    ),
)
BEST = DatasetSchema(
    name="tuning_ladder.best",
    title={"zh": "每个负载下收获最大的一级", "en": "The rung that bought most at each load"},
    key=("concurrency",),
    doc="Computed from tuning_ladder.gains: the rung whose output throughput rose most over the rung before, among "
        "those whose rise is measurable, and the rungs that changed throughput measurably in neither direction, or "
        "lowered it.",
    columns=(
        Column("concurrency", "int", "requests"),
        Column("best_step", "int", "", nullable=True),
        Column("best_added", "str", doc="its flags; empty where no rung raised throughput measurably", nullable=True),
        Column("best_gain", "float", "×", "its throughput ÷ the rung before's", nullable=True),
        Column("unchanged", "str", doc="flags of the rungs with no measurable throughput change, '; ' between them",
               nullable=True),
        Column("worse", "str", doc="flags of the rungs that lowered throughput measurably, '; ' between them",
               nullable=True),
    ),
)


def verdict(mine: tuple, before: tuple, higher_better: bool) -> tuple[float, float, float, str]:
    """(ratio, low, high, verdict) of a rung's (median, lowest, highest) against the rung before's: a change is
    measurable only where the two sets of rounds do not overlap (the site's noise rule)."""
    ratio, low, high = mine[0] / before[0], mine[1] / before[2], mine[2] / before[1]
    if low <= 1 <= high:
        return ratio, low, high, NO_CHANGE
    return ratio, low, high, "better" if (ratio > 1) == higher_better else "worse"


def rungs(names) -> list[tuple[int, Rung, tuple[str, ...]]]:
    """(step, rung, every flag added by then) for the named rungs, in ladder order."""
    by_name = {r.name: r for r in RUNGS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"tuning_ladder: unknown rung(s) {unknown}; the ladder has {list(by_name)}")
    out, flags = [], ()
    for step, rung in enumerate(RUNGS):
        flags += rung.added
        if rung.name in names:
            out.append((step, rung, flags))
    return out


@register
class TuningLadder(Experiment):
    name = "tuning_ladder"
    title = {"zh": "从哪里开始调", "en": "Where to start tuning"}
    datasets = (LADDER, GAINS, BEST)
    attachable = False  # the server's flags are the variable

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("tuning_ladder", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    @staticmethod
    def spec(rung: Rung, flags: tuple[str, ...]) -> ServerSpec:
        # alone: each rung's throughput needs the device to itself
        return ServerSpec(ROLE, flags, label=f"ladder-{rung.name}", front_end="vllm serve", starts_alone=True)

    @staticmethod
    def requests(s: dict, concurrency: int) -> int:
        return max(2 * concurrency, s["min_requests"])

    def plan(self, profile):
        s = self.sizes(profile)
        rate = 300 if profile.name == "cpu" else 6_000  # a rough output rate (tok/s) for the estimate
        n = sum((s["rounds"] + 1) * self.requests(s, c) for c in s["concurrency"])
        return [Step(self.spec(rung, flags), f"ladder step {step} ({rung.name}: {' '.join(flags) or 'defaults'}): "
                     f"{list(s['concurrency'])} in flight × {s['rounds'] + 1} rounds", n,
                     n * s["output_tokens"] / rate)
                for step, rung, flags in rungs(s["rungs"])]

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        if not ctx.has(ROLE):
            return
        model = ctx.model(ROLE)
        for step, rung, flags in rungs(s["rungs"]):
            todo = [c for c in s["concurrency"] if not ctx.done(LADDER, rung=rung.name, concurrency=c)]
            if not todo:
                continue
            base = {"model": model.name, "weights": model.weights, "step": step, "rung": rung.name,
                    "added": " ".join(rung.added) or None, "flags": " ".join(flags) or None,
                    "shared_tokens": s["system_words"], "output_tokens": s["output_tokens"]}
            try:
                server = ctx.server(self.spec(rung, flags))
            except ServerFailed as exc:  # a flag this build refuses is the rung's finding
                for c in todo:
                    ctx.record(LADDER, base | {"started": False, "concurrency": c, "error": exc.reason[:300]})
                continue
            for c in todo:
                ctx.record(LADDER, base | {"started": True, "kv_cache_tokens": server.facts.kv_cache_tokens}
                           | self.measure(ctx, server, c, s))
        self.compare(ctx, s)

    @staticmethod
    def compare(ctx, s: dict) -> None:
        """Each measured rung against the one before it, and at each load the rung that bought most."""
        rows = {(r["step"], r["concurrency"]): r for r in ctx.staging.rows(LADDER) if r["started"]}
        steps = sorted({step for step, _ in rows})
        for c in s["concurrency"]:
            best, unchanged, worse = None, [], []
            for before, step in itertools.pairwise(steps):
                mine, prev = rows.get((step, c)), rows.get((before, c))
                if mine is None or prev is None:
                    continue
                for column, (metric, higher_better) in COMPARED.items():
                    ratio, low, high, said = verdict(tuple(mine[column + k] for k in ("", "_min", "_max")),
                                                     tuple(prev[column + k] for k in ("", "_min", "_max")),
                                                     higher_better)
                    if column == "output_tok_s":
                        if said == "better" and (best is None or ratio > best[1]):
                            best = (mine, ratio)
                        (unchanged if said == NO_CHANGE else worse if said == "worse" else []).append(mine["added"])
                    if not ctx.done(GAINS, step=step, concurrency=c, metric=metric):
                        ctx.record(GAINS, {"step": step, "rung": mine["rung"], "added": mine["added"],
                                           "previous": prev["rung"], "concurrency": c, "metric": metric,
                                           "ratio": ratio, "ratio_low": low, "ratio_high": high, "verdict": said},
                                   derived_from=(LADDER,))
            if len(steps) > 1 and not ctx.done(BEST, concurrency=c):
                ctx.record(BEST, {"concurrency": c, "best_step": best[0]["step"] if best else None,
                                  "best_added": best[0]["added"] if best else None,
                                  "best_gain": best[1] if best else None,
                                  "unchanged": "; ".join(unchanged) or None, "worse": "; ".join(worse) or None},
                           derived_from=(LADDER,))

    def measure(self, ctx, server, concurrency: int, s: dict) -> dict:
        system = random_words(s["system_words"], random.Random(f"{SEED}-ladder-system"))
        load = ctx.load(server, workers=default_workers(concurrency))
        count = self.requests(s, concurrency)
        rounds, before = [], None
        for r in range(s["rounds"] + 1):  # round 0 warms this load point up and is not kept
            rng = random.Random(f"ladder-{concurrency}-{r}")
            requests = [HttpRequest.chat([{"role": "system", "content": system},
                                          {"role": "user", "content": random_words(s["question_words"], rng)}],
                                         server.model, s["output_tokens"], ignore_eos=True) for _ in range(count)]
            if r == 1:
                before = server.metrics()
            batch = load.run(requests, concurrency)
            if batch.errors:
                raise RuntimeError(f"chat requests failed at {concurrency} in flight: {batch.errors[:2]}")
            if r:
                rounds.append(batch)
        delta = server.metrics() - before
        queried = delta.get("vllm:prefix_cache_queries", 0.0)
        row = self.summarise(rounds)
        row |= {"concurrency": concurrency, "requests": count, "rounds": s["rounds"],
                "prefix_hit_share": delta.get("vllm:prefix_cache_hits", 0.0) / queried if queried else None}
        ctx.log(f"    {concurrency} in flight: {row['output_tok_s']:,.0f} tok/s, TTFT p50 {row['ttft_p50_ms']:,.1f} "
                f"ms, TPOT p50 {row['tpot_p50_ms']:.2f} ms")
        return row

    @staticmethod
    def summarise(rounds: list) -> dict:
        """The timed rounds of one load point: each figure's median over rounds, with its lowest and highest."""
        def ms(values) -> list[float]:
            return [v * 1000 for v in values if v is not None]

        figures = {"output_tok_s": [b.summary().output_tok_s for b in rounds]}
        for name, attr in (("ttft", "ttft_s"), ("tpot", "tpot_s")):
            per_round = [ms(getattr(t, attr) for t in b.timings) for b in rounds]
            figures[f"{name}_p50_ms"] = [percentile(v, 50) for v in per_round]
            figures[f"{name}_p99_ms"] = [percentile(v, 99) for v in per_round]
        row = {}
        for name, values in figures.items():
            row[name], row[f"{name}_min"], row[f"{name}_max"] = spread(values)
        prompt = {t.prompt_tokens for b in rounds for t in b.timings if t.prompt_tokens}
        row["prompt_tokens"] = max(prompt) if prompt else None
        row["client_cpu_max"] = max(b.worker_cpu_max for b in rounds)
        return row
