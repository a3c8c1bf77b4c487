"""LoRA multi-adapter serving: the cost of an adapter, adapters outnumbering slots, and what the
server says to LoRA together with speculative decoding.

Adapters are made here with peft from the base model's own config (random weights, fixed seed), so
speed and memory are real while outputs are not.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from measure.adapters import make_adapter
from measure.experiment import Experiment, ServerSpec, Step, register
from measure.harness.loadgen import HttpRequest
from measure.harness.server import ServerFailed
from measure.schema import CLIENT_LOAD, Column, DatasetSchema

RANKS = (8, 16, 64)
SLOT_ADAPTERS = (1, 2, 4, 8)
SLOTS = 2
PROMPT = "Write a short note about serving many adapters on one base model."
# Repeated phrases give the ngram proposer matches to draft from, so speculation has something to do.
REPEATING_PROMPT = "Repeat after me: one adapter, two adapters, one adapter, two adapters, one adapter, two adapters,"

OVERHEAD = DatasetSchema(
    name="lora.overhead",
    title={"zh": "使用适配器的速度损失", "en": "Slowdown from serving through an adapter"},
    key=("model", "rank", "metric"),
    columns=(
        Column("model", "str"),
        Column("rank", "int", nullable=True),
        Column("metric", "str", doc="what slowed down: generation throughput, or TTFT"),
        Column("slowdown_pct", "float", "%", "how much worse than without an adapter"),
        Column("base_value", "float", doc="without an adapter (tok/s or ms)", nullable=True),
        Column("adapter_value", "float", doc="through the adapter (tok/s or ms)", nullable=True),
        Column("base_min", "float", doc="without an adapter, worst repeat", nullable=True),
        Column("base_max", "float", doc="without an adapter, best repeat", nullable=True),
        Column("adapter_min", "float", doc="through the adapter, worst repeat", nullable=True),
        Column("adapter_max", "float", doc="through the adapter, best repeat", nullable=True),
        Column("repeats", "int", "", "timed repeats per arm (the values are their medians)", nullable=True),
        Column("client_cpu_max", "float", "", "the load generator's busiest worker, CPU seconds / wall seconds, "
               "highest batch", nullable=True, role=CLIENT_LOAD),
    ),
)
SLOTS_DATASET = DatasetSchema(
    name="lora.slots",
    title={"zh": "适配器数超过槽位时的吞吐量", "en": "Throughput when adapters outnumber slots"},
    key=("adapters", "max_loras"),
    columns=(
        Column("adapters", "int", "", "adapters requested in turn"),
        Column("max_loras", "int", "", "--max-loras slots"),
        Column("tokens_per_s", "float", "tok/s", "generated tokens / wall time, median of the repeats"),
        Column("tokens_per_s_min", "float", "tok/s", "slowest timed repeat", nullable=True),
        Column("tokens_per_s_max", "float", "tok/s", "fastest timed repeat", nullable=True),
        Column("repeats", "int", "", "timed repeats", nullable=True),
        Column("client_cpu_max", "float", "", "the load generator's busiest worker, CPU seconds / wall seconds, "
               "highest batch", nullable=True, role=CLIENT_LOAD),
    ),
)
COMPAT = DatasetSchema(
    name="lora.compat",
    title={"zh": "LoRA 与其他功能同时开启", "en": "LoRA together with other features"},
    key=("feature",),
    columns=(
        Column("feature", "str"),
        Column("started", "bool", doc="the server came up"),
        Column("adapter_request_ok", "bool", doc="a request through an adapter was answered", nullable=True),
        Column("draft_tokens", "int", "tokens", "speculative tokens proposed during that request (/metrics)", nullable=True),
        Column("accepted_tokens", "int", "tokens", "of those, accepted", nullable=True),
        Column("error", "str", doc="the log's last error line, or the request's error", nullable=True),
    ),
)


@register
class Lora(Experiment):
    name = "lora"
    title = {"zh": "LoRA 多适配器服务", "en": "LoRA multi-adapter serving"}
    datasets = (OVERHEAD, SLOTS_DATASET, COMPAT)

    def unavailable(self, profile, python):
        import importlib.util

        if importlib.util.find_spec("peft") is None:
            return "peft is not installed (it makes the random adapters): pip install peft"
        return None

    @staticmethod
    def adapters(profile, cache: Path) -> dict[str, tuple[int, Path]]:
        """name -> (rank, folder); made in prepare(), named here so server specs are stable."""
        found = {f"rank{r}": (r, cache / f"lora-rank{r}") for r in RANKS}
        found |= {f"slot{i}": (8, cache / f"lora-slot{i}") for i in range(max(SLOT_ADAPTERS))}
        return found

    def spec(self, profile, cache: Path, names, max_loras: int, label: str, extra=()) -> ServerSpec:
        modules = tuple(f"{n}={self.adapters(profile, cache)[n][1]}" for n in names)
        return ServerSpec("chat", ("--enable-lora", "--max-loras", str(max_loras), "--max-lora-rank", str(max(RANKS)),
                                   "--lora-modules", *modules, *extra), label=label)

    def specs(self, profile, cache: Path):
        overhead = self.spec(profile, cache, [f"rank{r}" for r in RANKS], len(RANKS), "lora-overhead")
        slots = self.spec(profile, cache, [f"slot{i}" for i in range(max(SLOT_ADAPTERS))], SLOTS, "lora-slots")
        spec_decode = self.spec(profile, cache, ["rank8"], 1, "lora-specdec", (
            "--speculative-config", '{"method":"ngram","num_speculative_tokens":2,"prompt_lookup_max":2}'))
        return overhead, slots, spec_decode

    def plan(self, profile):
        from measure.harness.server import REPO_ROOT

        overhead, slots, spec_decode = self.specs(profile, REPO_ROOT / ".cache" / "models")
        n, reps = profile.sizes.get("lora_requests", 16), profile.sizes["repeats"]
        return [Step(overhead, f"base vs rank {RANKS}: {reps} × {n} requests each", reps * n * (len(RANKS) + 1), 20 * reps),
                Step(slots, f"{SLOT_ADAPTERS} adapters in turn over {SLOTS} slots", reps * n * len(SLOT_ADAPTERS), 20 * reps),
                Step(spec_decode, "start with LoRA + ngram speculative decoding", 0, 5)]

    def prepare(self, pool):
        base = pool.model("chat")
        for i, (_, (rank, folder)) in enumerate(sorted(self.adapters(pool.profile, pool.cache_dir).items())):
            make_adapter(base.path, rank, folder, seed=i)

    def run(self, ctx):
        cache = ctx.pool.cache_dir
        base = ctx.model("chat")
        overhead, slots, spec_decode = self.specs(ctx.profile, cache)
        n = ctx.sizes.get("lora_requests", 16)
        repeats = ctx.sizes["repeats"]
        if not all(ctx.done(OVERHEAD, model=base.name, rank=r, metric=m) for r in RANKS for m in ("throughput", "ttft")):
            server = ctx.server(overhead)
            names = [base.name] + [f"rank{r}" for r in RANKS]
            self.warm(ctx, ctx.client(server), names)
            tps: dict[str, list[float]] = {m: [] for m in names}
            ttft: dict[str, list[float]] = {m: [] for m in names}
            busiest = 0.0
            for rep in range(repeats):  # interleaved, rotating order: drift hits every arm alike
                for name in names[rep % len(names):] + names[:rep % len(names)]:
                    t, f, cpu = self.load(ctx, server, [name] * n)
                    tps[name].append(t)
                    ttft[name].append(f)
                    busiest = max(busiest, cpu)
            for r in RANKS:
                arm = f"rank{r}"
                for metric, values, worse in (("throughput", tps, lambda b, a: (b - a) / b), ("ttft", ttft, lambda b, a: (a - b) / b)):
                    base_v, adapter_v = statistics.median(values[base.name]), statistics.median(values[arm])
                    ctx.record(OVERHEAD, {"model": base.name, "rank": r, "metric": metric, "base_value": base_v,
                                          "adapter_value": adapter_v, "slowdown_pct": worse(base_v, adapter_v) * 100,
                                          "base_min": min(values[base.name]), "base_max": max(values[base.name]),
                                          "adapter_min": min(values[arm]), "adapter_max": max(values[arm]),
                                          "repeats": repeats, "client_cpu_max": busiest})
        if not all(ctx.done(SLOTS_DATASET, adapters=a, max_loras=SLOTS) for a in SLOT_ADAPTERS):
            server = ctx.server(slots)
            self.warm(ctx, ctx.client(server), [f"slot{i}" for i in range(max(SLOT_ADAPTERS))])
            for a in SLOT_ADAPTERS:
                names = [f"slot{i % a}" for i in range(n)]
                runs = [self.load(ctx, server, names) for _ in range(repeats)]
                rates = [r[0] for r in runs]
                ctx.record(SLOTS_DATASET, {"adapters": a, "max_loras": SLOTS, "tokens_per_s": statistics.median(rates),
                                           "tokens_per_s_min": min(rates), "tokens_per_s_max": max(rates),
                                           "repeats": len(rates),
                                           "client_cpu_max": max(r[2] for r in runs)})
        if not ctx.done(COMPAT, feature="speculative decoding (ngram)"):
            row = {"feature": "speculative decoding (ngram)"}
            try:
                server = ctx.server(spec_decode)
                client = ctx.client(server)
                before = server.metrics()
                r = ctx.run(client.chat_stream([{"role": "user", "content": REPEATING_PROMPT}], max_tokens=32,
                                               model_override="rank8", extra_body={"ignore_eos": True}))
                delta = server.metrics() - before
                row |= {"started": True, "adapter_request_ok": r.ok, "error": r.error[:300] or None,
                        "draft_tokens": int(delta.get("vllm:spec_decode_num_draft_tokens", 0)),
                        "accepted_tokens": int(delta.get("vllm:spec_decode_num_accepted_tokens", 0))}
            except ServerFailed as exc:
                row |= {"started": False, "error": exc.reason[:300]}
            ctx.record(COMPAT, row)

    @staticmethod
    def warm(ctx, client, names: list[str]) -> None:
        """One untimed request per served name, so no timed batch pays for a first load."""
        for name in names:
            ctx.run(client.chat_stream([{"role": "user", "content": PROMPT}], max_tokens=4, model_override=name))

    @staticmethod
    def load(ctx, server, models: list[str]) -> tuple[float, float, float]:
        """Requests with the given model names, 8 in flight: (generated tok/s, median TTFT ms, the load generator's
        busiest worker's share of a core)."""
        requests = [HttpRequest.chat([{"role": "user", "content": PROMPT}], model, 32, ignore_eos=True) for model in models]
        batch = ctx.load(server).run(requests, 8)
        if batch.errors:
            raise RuntimeError(f"LoRA requests failed: {batch.errors[:2]}")
        summary = batch.summary()
        return summary.output_tok_s, summary.ttft_median_ms, summary.worker_cpu_max
