"""Front end against engine: what ``--api-server-count`` does for chat and for embeddings on one GPU.

Every server here is started through ``vllm serve`` (run as ``python -m vllm.entrypoints.cli.main serve``), the
only start command that acts on the flag in vLLM 0.26; the processes each start left are recorded by the names
vLLM's log gives them (``ApiServer_N``, ``EngineCore``, ``Worker``…), and while each round runs, the CPU share of the
API-server processes (together, and the busiest one) and of the engine core is sampled from ``/proc``.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter

from measure.experiment import POOLING, Experiment, ServerSpec, Step, register, spread
from measure.harness.loadgen import HttpRequest, default_workers
from measure.harness.procstat import CpuSampler, process_names
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import random_words

# Workload sizes per profile (MEASURE_SIZES may replace them: '{"api_servers": {...}}').
SIZES = {
    "cpu": {"roles": ("chat", "embedding"), "counts": (1, 2), "concurrency": (2, 8), "min_requests": 8, "rounds": 2,
            "words": 32, "output_tokens": 8},
    "gpu": {"roles": ("chat", "parallel", "embedding"), "counts": (1, 2, 4), "concurrency": (16, 64, 256),
            "min_requests": 128, "rounds": 3, "words": 200, "output_tokens": 128},
}
WORKLOAD = {"chat": "chat", "parallel": "chat", "embedding": "embeddings"}
# How the processes column names each kind: as vLLM's log names them; "other" is the launcher and helpers
SHOWN = {"api": "ApiServer", "engine": "EngineCore", "worker": "Worker", "other": "other"}
# Qwen3-8B beside the other servers: its weights take ~16 GiB beyond the shared KV cache
LARGE_MODEL_MEMORY = ("--gpu-memory-utilization", "0.3", "--kv-cache-memory-bytes", str(16 << 30))

LOAD = DatasetSchema(
    name="api_servers.load",
    title={"zh": "API 服务器进程数与吞吐、延迟和 CPU 占用", "en": "API-server processes, throughput, latency and CPU"},
    key=("model", "api_server_count", "concurrency"),
    doc="Each round sends max(2 × concurrency, min_requests) requests; medians over the timed rounds (after one "
        "warm-up round at each load point). CPU shares are CPU seconds ÷ the round's wall seconds, highest round.",
    columns=(
        Column("model", "str"),
        Column("weights", "str", doc="dummy | real"),
        Column("workload", "str", doc="chat | embeddings"),
        Column("api_server_count", "int", "processes", "--api-server-count"),
        Column("api_processes", "int", "processes", "API-server processes seen once the server was up"),
        Column("processes", "str", doc="every process of the server by the name its log lines carry, with counts; "
               "other: the launcher and multiprocessing's helper"),
        Column("concurrency", "int", "requests", "requests in flight"),
        Column("requests", "int", "requests", "per round"),
        Column("rounds", "int", "", "timed rounds"),
        Column("tokens_per_s", "float", "tok/s", "chat: output tokens; embeddings: prompt tokens; per second of a "
               "round, median over rounds"),
        Column("tokens_per_s_min", "float", "tok/s"),
        Column("tokens_per_s_max", "float", "tok/s"),
        Column("requests_per_s", "float", "req/s", "median over rounds"),
        Column("ttft_p50_ms", "float", "ms", "chat: median TTFT of a round, median over rounds", nullable=True),
        Column("itl_p50_ms", "float", "ms", "chat: median inter-token latency, median over rounds", nullable=True),
        Column("latency_p50_ms", "float", "ms", "a request sent to answered, median over rounds"),
        Column("api_cpu", "float", "cores", "the API-server processes together", nullable=True),
        Column("api_cpu_max", "float", "cores", "the busiest API-server process", nullable=True),
        Column("engine_cpu", "float", "cores", "the engine-core process", nullable=True),
        Column("client_cpu_max", "float", "cores", role=CLIENT_LOAD),
    ),
)


@register
class ApiServers(Experiment):
    name = "api_servers"
    title = {"zh": "API 服务器进程数", "en": "API-server processes"}
    datasets = (LOAD,)
    attachable = False  # it sets --api-server-count and the start command

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("api_servers", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    @staticmethod
    def spec(role: str, count: int) -> ServerSpec:
        args = ("--api-server-count", str(count)) + (POOLING if role == "embedding" else ())
        return ServerSpec(role, args, label=f"api-{count}x-{role}", front_end="vllm serve",
                          shared_memory=LARGE_MODEL_MEMORY if role == "parallel" else ())

    @staticmethod
    def requests(s: dict, concurrency: int) -> int:
        return max(2 * concurrency, s["min_requests"])

    def plan(self, profile):
        s = self.sizes(profile)
        steps = []
        for role in s["roles"]:
            for count in s["counts"]:
                n = sum((s["rounds"] + 1) * self.requests(s, c) for c in s["concurrency"])
                steps.append(Step(self.spec(role, count), f"{WORKLOAD[role]} through vllm serve, --api-server-count "
                                  f"{count}: {len(s['concurrency'])} load points ({', '.join(map(str, s['concurrency']))} "
                                  f"in flight) × {s['rounds'] + 1} rounds", n, self.seconds(profile, role, n, s)))
        return steps

    @staticmethod
    def seconds(profile, role: str, requests: int, s: dict) -> float:
        """A dry-run guess: chat at a rough output rate (tok/s), embeddings at a rough request rate (req/s)."""
        cpu = profile.name == "cpu"
        if role == "embedding":
            return requests / (100 if cpu else 1000)
        return requests * s["output_tokens"] / ((300 if cpu else 15_000) if role == "chat" else (300 if cpu else 4_000))

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        for role in s["roles"]:
            if not ctx.has(role):
                continue
            model = ctx.model(role)
            for count in s["counts"]:
                todo = [c for c in s["concurrency"]
                        if not ctx.done(LOAD, model=model.name, api_server_count=count, concurrency=c)]
                if not todo:
                    continue
                server = ctx.server(self.spec(role, count))
                names = process_names(server.log_text(), server.process.pid)
                seen = Counter(name.rstrip("0123456789") for name in names)
                shown = ", ".join(f"{SHOWN[kind]}×{n}" for kind, n in sorted(seen.items()))
                ctx.log(f"  {model.name}, --api-server-count {count}: processes {shown}")
                for concurrency in todo:
                    row = self.measure(ctx, server, WORKLOAD[role], concurrency, names, s)
                    ctx.record(LOAD, {"model": model.name, "weights": model.weights, "workload": WORKLOAD[role],
                                      "api_server_count": count, "api_processes": seen["api"],
                                      "processes": shown} | row)

    def measure(self, ctx, server, workload: str, concurrency: int, names: dict[str, int], s: dict) -> dict:
        load = ctx.load(server, workers=default_workers(concurrency))
        count = self.requests(s, concurrency)
        summaries, windows = [], []
        with CpuSampler(names) as sampler:
            for r in range(s["rounds"] + 1):  # round 0 warms this load point up and is not kept
                rng = random.Random(f"api-{workload}-{concurrency}-{r}")
                if workload == "chat":
                    requests = [HttpRequest.chat([{"role": "user", "content": random_words(s["words"], rng)}],
                                                 server.model, s["output_tokens"], ignore_eos=True) for _ in range(count)]
                else:
                    requests = [HttpRequest.embedding(random_words(s["words"], rng), server.model) for _ in range(count)]
                batch = load.run(requests, concurrency)
                if batch.errors:
                    raise RuntimeError(f"{workload} requests failed at {concurrency} in flight: {batch.errors[:2]}")
                if r:
                    summaries.append(batch.summary())
                    windows.append(batch.window)
        # read once the sampler has stopped: its last sample then lies past every round (read at once, a short
        # round's end could come before the sampling thread's next look, and the round had no share)
        cpu = [self.cpu_shares(sampler, names, window) for window in windows]
        row = self.summarise(workload, summaries, cpu)
        engine = f"{row['engine_cpu']:.2f} cores" if row["engine_cpu"] is not None else "not sampled"
        api = f"{row['api_cpu']:.2f} cores" if row["api_cpu"] is not None else "not sampled"
        ctx.log(f"    {concurrency} in flight: {row['tokens_per_s']:,.0f} tok/s, API servers {api}, engine {engine}")
        return {"concurrency": concurrency, "requests": count, "rounds": s["rounds"]} | row

    @staticmethod
    def cpu_shares(sampler: CpuSampler, names: dict[str, int], window: tuple[float, float]) -> dict:
        """One round's CPU shares: the API servers together and the busiest one, and the engine core; None where
        no process of that kind was sampled over the round."""
        shares = {name: sampler.share(name, *window) for name in names}
        api = [v for k, v in shares.items() if k.startswith("api") and v is not None]
        engine = [v for k, v in shares.items() if k.startswith("engine") and v is not None]
        return {"api": sum(api) if api else None, "api_max": max(api, default=None),
                "engine": sum(engine) if engine else None}

    @staticmethod
    def summarise(workload: str, summaries: list, cpu: list[dict]) -> dict:
        """The timed rounds of one load point as one row: medians, the rate's spread, and the highest CPU shares."""
        def highest(key: str) -> float | None:
            return max((c[key] for c in cpu if c[key] is not None), default=None)

        rate = spread([(x.output_tokens if workload == "chat" else x.prompt_tokens) / x.wall_s for x in summaries])
        chat = workload == "chat"
        return {"tokens_per_s": rate[0], "tokens_per_s_min": rate[1], "tokens_per_s_max": rate[2],
                "requests_per_s": statistics.median(x.request_per_s for x in summaries),
                "ttft_p50_ms": spread([x.ttft_median_ms for x in summaries])[0] if chat else None,
                "itl_p50_ms": spread([x.itl_median_ms for x in summaries])[0] if chat else None,
                "latency_p50_ms": statistics.median(x.e2e_median_ms for x in summaries),
                "api_cpu": highest("api"), "api_cpu_max": highest("api_max"), "engine_cpu": highest("engine"),
                "client_cpu_max": max(x.worker_cpu_max for x in summaries)}
