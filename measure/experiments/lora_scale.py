"""LoRA at scale: how many adapter slots (``--max-loras``) a request mix of many adapters needs, what swapping an
adapter into a slot costs, what a larger ``--max-lora-rank`` costs a small adapter, and what the first request after
``/v1/load_lora_adapter`` pays.

All adapters are rank 8 unless said otherwise, random weights from the base model's shapes (measure/adapters.py).
``--max-cpu-loras`` is left at vLLM's default (equal to ``--max-loras``): an adapter that leaves its slot is read
from disk again when it comes back, as on a server started with the defaults.
"""

from __future__ import annotations

import statistics
import time

from measure.adapters import make_adapter
from measure.experiment import Experiment, ServerSpec, Step, register, spread
from measure.harness.loadgen import HttpRequest
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import random_words

# Workload sizes per profile (MEASURE_SIZES may replace them: '{"lora_scale": {...}}').
SIZES = {
    "cpu": {"max_loras": (1, 2), "adapters": (1, 2, 4), "ranks": (8, 16), "rank_max_loras": 2, "concurrency": 4,
            "requests": 8, "words": 32, "output_tokens": 8, "rounds": 2, "swap_requests": 6, "runtime_loads": 2},
    "gpu": {"max_loras": (1, 2, 4, 8), "adapters": (1, 2, 4, 8, 16), "ranks": (8, 16, 64), "rank_max_loras": 4,
            "concurrency": 16, "requests": 64, "words": 200, "output_tokens": 64, "rounds": 3, "swap_requests": 20,
            "runtime_loads": 5},
}
ADAPTER_RANK = 8  # every adapter of the request mixes
RUNTIME_ENV = (("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "True"),)

GRID = DatasetSchema(
    name="lora_scale.grid",
    title={"zh": "适配器槽位、请求中的适配器数与吞吐", "en": "Adapter slots, adapters in the mix, and throughput"},
    key=("max_loras", "max_lora_rank", "adapters"),
    doc="Requests take the adapters in turn; each round sends the same number of requests at a fixed concurrency; "
        "medians over the timed rounds (after one warm-up round).",
    columns=(
        Column("model", "str"),
        Column("weights", "str", doc="dummy | real"),
        Column("max_loras", "int", "slots", "--max-loras: adapters one batch can hold"),
        Column("max_lora_rank", "int", "", "--max-lora-rank of the server"),
        Column("adapters", "int", "adapters", "distinct rank-8 adapters the requests take in turn"),
        Column("concurrency", "int", "requests", "requests in flight"),
        Column("requests", "int", "requests", "per round"),
        Column("output_tokens", "int", "tokens", "per request (ignore_eos)"),
        Column("rounds", "int", "", "timed rounds"),
        Column("tokens_per_s", "float", "tok/s", "output tokens over the round's wall time, median over rounds"),
        Column("tokens_per_s_min", "float", "tok/s"),
        Column("tokens_per_s_max", "float", "tok/s"),
        Column("ttft_p50_ms", "float", "ms", "median TTFT of a round, median over rounds"),
        Column("tpot_p50_ms", "float", "ms", "median TPOT of a round, median over rounds", nullable=True),
        Column("client_cpu_max", "float", "cores", role=CLIENT_LOAD),
    ),
)
SWAP = DatasetSchema(
    name="lora_scale.swap",
    title={"zh": "换入适配器的代价", "en": "The cost of swapping an adapter in"},
    key=("max_loras",),
    doc="One request at a time on a server with one slot: the same adapter every time (it stays in its slot), then "
        "two adapters in turn (each request must bring its adapter back from disk).",
    columns=(
        Column("max_loras", "int", "slots"),
        Column("requests", "int", "requests", "timed per arm"),
        Column("resident_ttft_ms", "float", "ms", "the adapter already in its slot: median TTFT"),
        Column("resident_ttft_ms_min", "float", "ms"),
        Column("resident_ttft_ms_max", "float", "ms"),
        Column("swap_ttft_ms", "float", "ms", "the adapter swapped in for this request: median TTFT"),
        Column("swap_ttft_ms_min", "float", "ms"),
        Column("swap_ttft_ms_max", "float", "ms"),
        Column("swap_ms", "float", "ms", "swap TTFT − resident TTFT (medians); below zero where the two overlap",
               minimum=-60_000.0),
    ),
)
RUNTIME_LOAD = DatasetSchema(
    name="lora_scale.runtime_load",
    title={"zh": "运行时加载适配器后的第一个请求", "en": "The first request after loading an adapter at runtime"},
    key=("rank",),
    doc="On a server started with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True: POST /v1/load_lora_adapter with a new "
        "adapter, then requests through it one at a time; medians over the loads.",
    columns=(
        Column("rank", "int", "", "the loaded adapter's rank"),
        Column("max_lora_rank", "int", "", "--max-lora-rank of the server"),
        Column("loads", "int", "adapters", "adapters loaded (each a new name)"),
        Column("load_call_ms", "float", "ms", "the /v1/load_lora_adapter call, sent to answered"),
        Column("first_ttft_ms", "float", "ms", "TTFT of the first request through the new adapter"),
        Column("later_ttft_ms", "float", "ms", "TTFT of the requests after it (the second to the fourth)"),
        Column("base_ttft_ms", "float", "ms", "TTFT of the same request to the base model, same server"),
    ),
)


@register
class LoraScale(Experiment):
    name = "lora_scale"
    title = {"zh": "LoRA 规模：槽位、换入与运行时加载", "en": "LoRA at scale: slots, swaps and runtime loading"}
    datasets = (GRID, SWAP, RUNTIME_LOAD)
    attachable = False  # it sets --max-loras and --max-lora-rank

    def unavailable(self, profile, python):
        import importlib.util

        if importlib.util.find_spec("peft") is None:
            return "peft is not installed (it makes the random adapters): pip install peft"
        return None

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("lora_scale", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    @staticmethod
    def mix_names(count: int) -> list[str]:
        return [f"mix{i}" for i in range(count)]

    def spec(self, cache, max_loras: int, max_rank: int, adapters: int, runtime: bool = False) -> ServerSpec:
        """A server holding every adapter of the mixes; the one of the largest rank also loads adapters at runtime."""
        modules = tuple(f"{n}={cache / f'lora-scale-{n}'}" for n in self.mix_names(adapters))
        return ServerSpec("chat", ("--enable-lora", "--max-loras", str(max_loras), "--max-lora-rank", str(max_rank),
                                   "--lora-modules", *modules),
                          env=RUNTIME_ENV if runtime else (), label=f"lora-scale-{max_loras}x{max_rank}")

    def servers_and_points(self, profile, cache) -> list[tuple[ServerSpec, int, int, list[int]]]:
        """(server, max_loras, max_lora_rank, adapter counts measured on it): every slot count at rank 8 over every
        mix, then each larger rank at one slot count with a single adapter."""
        s = self.sizes(profile)
        top, every = max(s["ranks"]), max(s["adapters"])
        out = [(self.spec(cache, m, ADAPTER_RANK, every, runtime=top == ADAPTER_RANK and m == s["rank_max_loras"]), m,
                ADAPTER_RANK, list(s["adapters"])) for m in s["max_loras"]]
        out += [(self.spec(cache, s["rank_max_loras"], r, every, runtime=r == top), s["rank_max_loras"], r, [1])
                for r in s["ranks"] if r != ADAPTER_RANK]
        return out

    def plan(self, profile):
        from measure.harness.server import REPO_ROOT

        s = self.sizes(profile)
        per_round = s["requests"] * s["output_tokens"] / (2000 if profile.name != "cpu" else 300)
        points = self.servers_and_points(profile, REPO_ROOT / ".cache" / "models")
        steps = [Step(spec, f"--max-loras {m}, --max-lora-rank {r}: {s['rounds'] + 1} rounds of {s['requests']} "
                            f"requests taking {', '.join(map(str, mixes))} adapter(s) in turn",
                      len(mixes) * (s["rounds"] + 1) * s["requests"], len(mixes) * (s["rounds"] + 1) * per_round)
                 for spec, m, r, mixes in points]
        one_slot = next(spec for spec, m, r, _ in points if m == 1 and r == ADAPTER_RANK)
        runtime = next(spec for spec, *_ in points if dict(spec.env) == dict(RUNTIME_ENV))
        steps.append(Step(one_slot, f"swap: {2 * s['swap_requests']} requests one at a time", 2 * s["swap_requests"],
                          s["swap_requests"] / 2))
        steps.append(Step(runtime, f"runtime loads: {s['runtime_loads']} adapters of each rank "
                                   f"{s['ranks'][0]}, {max(s['ranks'])}", 10 * s["runtime_loads"], 4 * s["runtime_loads"]))
        return steps

    def adapter_folders(self, profile, cache) -> dict:
        """folder -> (rank, seed) of every adapter a run makes: the mixes', and the runtime loads' (new names)."""
        s = self.sizes(profile)
        found = {cache / f"lora-scale-{n}": (ADAPTER_RANK, 100 + i) for i, n in enumerate(self.mix_names(max(s["adapters"])))}
        for rank in sorted({s["ranks"][0], max(s["ranks"])}):
            found |= {cache / f"lora-scale-rt{rank}-{i}": (rank, 200 + 10 * rank + i) for i in range(s["runtime_loads"])}
        return found

    def prepare(self, pool):
        base = pool.model("chat")
        for folder, (rank, seed) in self.adapter_folders(pool.profile, pool.cache_dir).items():
            make_adapter(base.path, rank, folder, seed=seed)

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        model = ctx.model("chat")
        cache = ctx.pool.cache_dir
        for spec, max_loras, max_rank, mixes in self.servers_and_points(ctx.profile, cache):
            todo = [a for a in mixes if not ctx.done(GRID, max_loras=max_loras, max_lora_rank=max_rank, adapters=a)]
            swap = max_loras == 1 and max_rank == ADAPTER_RANK and not ctx.done(SWAP, max_loras=1)
            runtime = dict(spec.env) == dict(RUNTIME_ENV)
            runtime_todo = [r for r in sorted({s["ranks"][0], max(s["ranks"])}) if runtime and not ctx.done(RUNTIME_LOAD, rank=r)]
            if not (todo or swap or runtime_todo):
                continue
            server = ctx.server(spec)
            self.warm(ctx, server, self.mix_names(max(mixes)), s)
            for adapters in todo:
                row = self.measure_mix(ctx, server, adapters, s)
                ctx.record(GRID, {"model": model.name, "weights": model.weights, "max_loras": max_loras,
                                  "max_lora_rank": max_rank} | row)
            if swap:
                ctx.record(SWAP, self.measure_swap(ctx, server, s))
            for rank in runtime_todo:
                ctx.record(RUNTIME_LOAD, self.measure_runtime_load(ctx, server, cache, rank, max_rank, s))

    @staticmethod
    def prompt(s: dict, seed: str) -> list[dict]:
        import random

        return [{"role": "user", "content": random_words(s["words"], random.Random(seed))}]

    def warm(self, ctx, server, names: list[str], s: dict) -> None:
        """One untimed request per adapter, so the first timed round pays no first load of its own."""
        client = ctx.client(server)
        for name in names:
            ctx.run(client.chat_stream(self.prompt(s, "warm"), max_tokens=2, model_override=name))

    def measure_mix(self, ctx, server, adapters: int, s: dict) -> dict:
        names = self.mix_names(adapters)
        load = ctx.load(server)
        rates, ttfts, tpots, cpu = [], [], [], 0.0
        for r in range(s["rounds"] + 1):  # round 0 warms this load point up and is not kept
            requests = [HttpRequest.chat(self.prompt(s, f"mix-{adapters}-{r}-{i}"), names[i % adapters],
                                         s["output_tokens"], ignore_eos=True) for i in range(s["requests"])]
            batch = load.run(requests, s["concurrency"])
            if batch.errors:
                raise RuntimeError(f"LoRA requests failed ({adapters} adapters): {batch.errors[:2]}")
            summary = batch.summary()
            if r:
                rates.append(summary.output_tok_s)
                ttfts.append(summary.ttft_median_ms)
                tpots.append(summary.tpot_median_ms)
                cpu = max(cpu, summary.worker_cpu_max)
        rate = spread(rates)
        ctx.log(f"  {adapters} adapter(s) in turn: {rate[0]:,.0f} tok/s, TTFT p50 {statistics.median(ttfts):,.0f} ms")
        return {"adapters": adapters, "concurrency": s["concurrency"], "requests": s["requests"],
                "output_tokens": s["output_tokens"], "rounds": s["rounds"], "tokens_per_s": rate[0],
                "tokens_per_s_min": rate[1], "tokens_per_s_max": rate[2], "ttft_p50_ms": statistics.median(ttfts),
                "tpot_p50_ms": spread(tpots)[0], "client_cpu_max": cpu}

    def ttft_ms(self, ctx, client, name: str, s: dict, seed: str) -> float:
        r = ctx.run(client.chat_stream(self.prompt(s, seed), max_tokens=2, model_override=name))
        if not r.ok:
            raise RuntimeError(f"a request through {name} failed: {r.error[:300]}")
        return r.ttft_s * 1000

    def measure_swap(self, ctx, server, s: dict) -> dict:
        client = ctx.client(server)
        n = s["swap_requests"]
        resident = [self.ttft_ms(ctx, client, "mix0", s, f"resident-{i}") for i in range(n + 1)][1:]
        swapped = [self.ttft_ms(ctx, client, ("mix1", "mix0")[i % 2], s, f"swap-{i}") for i in range(n + 1)][1:]
        (res, res_lo, res_hi), (sw, sw_lo, sw_hi) = spread(resident), spread(swapped)
        ctx.log(f"  swap: resident {res:,.1f} ms, swapped in {sw:,.1f} ms")
        return {"max_loras": 1, "requests": n, "resident_ttft_ms": res, "resident_ttft_ms_min": res_lo,
                "resident_ttft_ms_max": res_hi, "swap_ttft_ms": sw, "swap_ttft_ms_min": sw_lo,
                "swap_ttft_ms_max": sw_hi, "swap_ms": sw - res}

    def measure_runtime_load(self, ctx, server, cache, rank: int, max_rank: int, s: dict) -> dict:
        client = ctx.client(server)
        base = [self.ttft_ms(ctx, client, server.model, s, f"base-{rank}-{i}") for i in range(3)]
        calls, firsts, laters = [], [], []
        for i in range(s["runtime_loads"]):
            name = f"runtime-{rank}-{i}"
            start = time.perf_counter()
            status, body, _ = ctx.run(client.post("/v1/load_lora_adapter", {
                "lora_name": name, "lora_path": str(cache / f"lora-scale-rt{rank}-{i}")}))
            calls.append((time.perf_counter() - start) * 1000)
            if status != 200:
                raise RuntimeError(f"/v1/load_lora_adapter answered HTTP {status}: {str(body)[:300]}")
            ttfts = [self.ttft_ms(ctx, client, name, s, f"rt-{rank}-{i}-{k}") for k in range(4)]
            firsts.append(ttfts[0])
            laters.extend(ttfts[1:])
        ctx.log(f"  runtime load, rank {rank}: call {statistics.median(calls):,.0f} ms, first request "
                f"{statistics.median(firsts):,.1f} ms, later {statistics.median(laters):,.1f} ms")
        return {"rank": rank, "max_lora_rank": max_rank, "loads": len(calls), "load_call_ms": statistics.median(calls),
                "first_ttft_ms": statistics.median(firsts), "later_ttft_ms": statistics.median(laters),
                "base_ttft_ms": statistics.median(base)}
