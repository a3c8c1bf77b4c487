"""One server or several instances on one GPU: 1, 2 and 4 instances of a small model, each with its share of the
memory, loaded together by one client, against one server with ``--api-server-count 4``.

The requests in flight are the same in total at every layout, split evenly over the instances. Every server starts
through ``vllm serve``, so the front end is the same kind everywhere; the instances start one after another, each
ready before the next (vLLM sizes its memory from what is free when it starts). While each round runs, the CPU share
of every API-server process and engine core is sampled from ``/proc``.
"""

from __future__ import annotations

import random
import statistics
from concurrent.futures import ThreadPoolExecutor

from measure.experiment import POOLING, Experiment, ServerSpec, Step, register, spread
from measure.harness.definitions import percentile
from measure.harness.loadgen import HttpRequest, default_workers
from measure.harness.procstat import CpuSampler, process_names
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import random_words

WORKLOAD = {"chat": "chat", "embedding": "embeddings"}
# layout name: (instances, --api-server-count of each)
LAYOUTS = {"1 instance": (1, 1), "2 instances": (2, 1), "4 instances": (4, 1), "1 server, 4 API servers": (1, 4)}
# Workload sizes per profile (MEASURE_SIZES may replace them: '{"instances": {...}}'). memory_share: the device
# memory all instances of a layout share (None: no flag, as on the CPU backend, whose cache has a set size).
SIZES = {
    "cpu": {"roles": ("chat", "embedding"), "layouts": tuple(LAYOUTS), "concurrency": (4, 16), "min_requests": 16,
            "rounds": 2, "words": 32, "output_tokens": 8, "memory_share": None},
    "gpu": {"roles": ("chat", "embedding"), "layouts": tuple(LAYOUTS), "concurrency": (64, 256), "min_requests": 256,
            "rounds": 3, "words": 200, "output_tokens": 128, "memory_share": 0.8},
}

LOAD = DatasetSchema(
    name="instances.load",
    title={"zh": "一个服务器还是几个实例：吞吐、延迟与 CPU", "en": "One server or several instances: throughput, latency and CPU"},
    key=("workload", "layout", "concurrency"),
    doc="Each round sends max(2 × concurrency, min_requests) requests in total, split evenly over the instances, all "
        "at once; one warm-up round at each load point is not kept; medians, lowest and highest over the timed rounds. "
        "CPU shares are CPU seconds ÷ the round's wall seconds, highest round.",
    columns=(
        Column("model", "str"),
        Column("weights", "str", doc="dummy | real"),
        Column("workload", "str", doc="chat | embeddings"),
        Column("layout", "str", doc="1 instance | 2 instances | 4 instances | 1 server, 4 API servers"),
        Column("instances", "int", "processes", "vLLM servers, each with its own engine"),
        Column("api_server_count", "int", "processes", "--api-server-count of each"),
        Column("memory_share", "float", "", "--gpu-memory-utilization of each instance (none: no flag)",
               minimum=0, maximum=1, nullable=True),
        Column("concurrency", "int", "requests", "requests in flight, all instances together"),
        Column("requests", "int", "requests", "per round, all instances together"),
        Column("rounds", "int", "", "timed rounds"),
        Column("tokens_per_s", "float", "tok/s", "chat: output tokens; embeddings: prompt tokens; all instances "
               "together, per second of a round, median over rounds"),
        Column("tokens_per_s_min", "float", "tok/s"),
        Column("tokens_per_s_max", "float", "tok/s"),
        Column("ttft_p50_ms", "float", "ms", "chat: a round's median TTFT, median over rounds", nullable=True),
        Column("ttft_p99_ms", "float", "ms", "chat: a round's 99th-percentile TTFT, median over rounds",
               nullable=True),
        Column("latency_p50_ms", "float", "ms", "a request sent to answered, a round's median, median over rounds"),
        Column("api_cpu", "float", "cores", "every API-server process together", nullable=True),
        Column("engine_cpu", "float", "cores", "every engine core together", nullable=True),
        Column("engine_cpu_max", "float", "cores", "the busiest engine core", nullable=True),
        Column("client_cpu_max", "float", "cores", role=CLIENT_LOAD),
    ),
)


@register
class Instances(Experiment):
    name = "instances"
    title = {"zh": "一个服务器还是几个实例", "en": "One server or several instances"}
    datasets = (LOAD,)
    attachable = False  # it starts several servers of its own

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("instances", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    @staticmethod
    def specs(role: str, layout: str, s: dict) -> list[ServerSpec]:
        if layout not in LAYOUTS:
            raise ValueError(f"instances: unknown layout {layout!r}; known: {list(LAYOUTS)}")
        count, api = LAYOUTS[layout]
        args = ("--api-server-count", str(api)) + (POOLING if role == "embedding" else ())
        if s["memory_share"] is not None:
            args += ("--gpu-memory-utilization", f"{s['memory_share'] / count:.3g}")
        # the instance number in the environment tells otherwise equal servers apart (and names each in provenance)
        return [ServerSpec(role, args, env=(("MEASURE_INSTANCE", str(i)),), front_end="vllm serve",
                           label=f"inst-{count}x{api}-{role}-{i}") for i in range(count)]

    @staticmethod
    def requests(s: dict, concurrency: int) -> int:
        return max(2 * concurrency, s["min_requests"])

    def plan(self, profile):
        s = self.sizes(profile)
        steps = []
        for role in s["roles"]:
            for layout in s["layouts"]:
                n = sum((s["rounds"] + 1) * self.requests(s, c) for c in s["concurrency"])
                rate = (100 if role == "embedding" else 300 / s["output_tokens"]) if profile.name == "cpu" else \
                    (1000 if role == "embedding" else 15_000 / s["output_tokens"])  # rough requests per second
                for i, spec in enumerate(self.specs(role, layout, s)):
                    steps.append(Step(spec, f"{WORKLOAD[role]}, {layout}" + (
                        f": {list(s['concurrency'])} in flight in total × {s['rounds'] + 1} rounds" if i == 0
                        else f" (instance {i + 1})"), n if i == 0 else 0, n / rate if i == 0 else 0))
        return steps

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        for role in s["roles"]:
            if not ctx.has(role):
                continue
            model = ctx.model(role)
            for layout in s["layouts"]:
                todo = [c for c in s["concurrency"]
                        if not ctx.done(LOAD, workload=WORKLOAD[role], layout=layout, concurrency=c)]
                if not todo:
                    continue
                specs = self.specs(role, layout, s)
                servers = ctx.servers(specs)
                names = {f"{i}:{name}": pid for i, server in enumerate(servers)
                         for name, pid in process_names(server.log_text(), server.process.pid).items()}
                count, api = LAYOUTS[layout]
                for c in todo:
                    row = self.measure(ctx, servers, WORKLOAD[role], c, names, s)
                    ctx.log(f"  {WORKLOAD[role]}, {layout}, {c} in flight: {row['tokens_per_s']:,.0f} tok/s")
                    ctx.record(LOAD, {"model": model.name, "weights": model.weights, "workload": WORKLOAD[role],
                                      "layout": layout, "instances": count, "api_server_count": api,
                                      "memory_share": s["memory_share"] / count if s["memory_share"] else None}
                               | row, servers=tuple(specs))

    def measure(self, ctx, servers, workload: str, concurrency: int, names: dict[str, int], s: dict) -> dict:
        share = concurrency // len(servers)
        count = self.requests(s, concurrency) // len(servers)
        loads = [ctx.load(server, workers=default_workers(share)) for server in servers]
        rounds, windows = [], []
        with CpuSampler(names) as sampler, ThreadPoolExecutor(len(servers)) as pool:
            for r in range(s["rounds"] + 1):
                requests = [self.batch(server, workload, count, s, f"{concurrency}-{r}-{i}")
                            for i, server in enumerate(servers)]
                if r == 0:
                    # the warm-up round, not kept, one instance after another from this thread: it starts each load
                    # generator's worker processes here, since they end with the thread that started them
                    # (PR_SET_PDEATHSIG) and the pool's threads end with this load point
                    batches = [load.run(batch, share) for load, batch in zip(loads, requests, strict=True)]
                else:
                    batches = list(pool.map(lambda load, batch: load.run(batch, share), loads, requests))
                failed = [e for b in batches for e in b.errors]
                if failed:
                    raise RuntimeError(f"{workload} requests failed at {concurrency} in flight: {failed[:2]}")
                if r:
                    start = min(b.start for b in batches)
                    end = max(b.start + b.wall_s for b in batches)
                    rounds.append((batches, end - start))
                    windows.append((start, end))
        cpu = [self.cpu_shares(sampler, names, window) for window in windows]
        return {"concurrency": concurrency, "requests": count * len(servers), "rounds": s["rounds"]} \
            | self.summarise(workload, rounds, cpu)

    @staticmethod
    def batch(server, workload: str, count: int, s: dict, seed: str) -> list[HttpRequest]:
        rng = random.Random(f"instances-{workload}-{seed}")
        if workload == "chat":
            return [HttpRequest.chat([{"role": "user", "content": random_words(s["words"], rng)}], server.model,
                                     s["output_tokens"], ignore_eos=True) for _ in range(count)]
        return [HttpRequest.embedding(random_words(s["words"], rng), server.model) for _ in range(count)]

    @staticmethod
    def cpu_shares(sampler: CpuSampler, names: dict[str, int], window: tuple[float, float]) -> dict:
        shares = {name: sampler.share(name, *window) for name in names}
        api = [v for k, v in shares.items() if k.split(":")[1].startswith("api") and v is not None]
        engine = [v for k, v in shares.items() if k.split(":")[1].startswith("engine") and v is not None]
        return {"api": sum(api) if api else None, "engine": sum(engine) if engine else None,
                "engine_max": max(engine, default=None)}

    @staticmethod
    def summarise(workload: str, rounds: list, cpu: list[dict]) -> dict:
        """The timed rounds of one load point: all instances' requests of a round together."""
        def highest(key: str) -> float | None:
            return max((c[key] for c in cpu if c[key] is not None), default=None)

        def ms(values) -> list[float]:
            return [v * 1000 for v in values if v is not None]

        chat = workload == "chat"
        timings = [[t for b in batches for t in b.timings] for batches, _ in rounds]
        rate = spread([sum((t.output_tokens if chat else t.prompt_tokens) or 0 for t in ts) / wall
                       for ts, (_, wall) in zip(timings, rounds, strict=True)])
        ttfts = [ms(t.ttft_s for t in ts) for ts in timings] if chat else []
        return {"tokens_per_s": rate[0], "tokens_per_s_min": rate[1], "tokens_per_s_max": rate[2],
                "ttft_p50_ms": spread([percentile(v, 50) for v in ttfts])[0] if chat else None,
                "ttft_p99_ms": spread([percentile(v, 99) for v in ttfts])[0] if chat else None,
                "latency_p50_ms": statistics.median(percentile(ms(t.e2e_s for t in ts), 50) for ts in timings),
                "api_cpu": highest("api"), "engine_cpu": highest("engine"), "engine_cpu_max": highest("engine_max"),
                "client_cpu_max": max(b.worker_cpu_max for batches, _ in rounds for b in batches)}
