"""TP / PP / DP on one host: the same model and load under each layout.

On a GPU host the layouts that fit its GPU count run with Qwen3-8B's architecture (dummy weights, CUDA graphs); on
the CPU backend, layouts of two ranks run with the tiny Qwen3 (one core per rank), which exercises the
same code paths and flags without saying anything about GPU interconnects.
"""

from __future__ import annotations

import json
import random
import re
import statistics
from dataclasses import dataclass

from measure.experiment import Experiment, ServerSpec, Step, register, spread
from measure.harness import provenance as prov
from measure.harness.client import gather_limited
from measure.harness.loadgen import HttpRequest
from measure.harness.metrics import histogram_mean_ms
from measure.harness.profiles import cpu_cores
from measure.harness.server import ServerFailed
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import random_words, sentences

SCALING = DatasetSchema(
    name="parallelism.scaling",
    title={"zh": "并行方式与吞吐量", "en": "Parallel layout and throughput"},
    key=("layout", "concurrency"),
    columns=(
        Column("layout", "str", doc="e.g. TP=2, PP=2, DP=2, TP=2×PP=2"),
        Column("ranks", "int", "", "GPUs (or CPU ranks) the layout uses"),
        Column("enforce_eager", "bool", doc="false where the layout needed --no-enforce-eager (see parallelism.layouts)"),
        Column("concurrency", "int", "requests", "in flight at most"),
        Column("requests", "int"),
        Column("rounds", "int", "", "times the batch was sent; each figure is the median over rounds"),
        Column("output_tok_s", "float", "tok/s", "generated tokens / wall time"),
        Column("output_tok_s_min", "float", "tok/s", "lowest round"),
        Column("output_tok_s_max", "float", "tok/s", "highest round"),
        Column("ttft_ms", "float", "ms", "median over requests", nullable=True),
        Column("tpot_ms", "float", "ms", "time per output token after the first as the client saw it, median over requests: "
               "(end-to-end − TTFT) / (tokens − 1)", nullable=True),
        Column("tpot_ms_min", "float", "ms", "lowest round", nullable=True),
        Column("tpot_ms_max", "float", "ms", "highest round", nullable=True),
        Column("engine_itl_ms", "float", "ms", "mean gap between a request's tokens as the engine stamped them (/metrics "
               "vllm:inter_token_latency_seconds): unlike the client's view, not shortened when a busy host delivers "
               "chunks in bursts", nullable=True),
        Column("kv_cache_tokens", "int", "tokens", "from the start-up log (summed over DP engines where logged per engine)", nullable=True),
        Column("max_concurrency", "float", "×", "from the start-up log", nullable=True),
        Column("client_cpu_max", "float", "", "the load generator's busiest worker, CPU seconds / wall seconds",
               role=CLIENT_LOAD),
    ),
)
COMM_COST = DatasetSchema(
    name="parallelism.comm_cost",
    title={"zh": "TP 的通信代价", "en": "The communication cost of TP"},
    key=("layout",),
    columns=(
        Column("layout", "str"),
        Column("enforce_eager", "bool"),
        Column("itl_ms", "float", "ms", "per-token latency at concurrency 1 as the client saw it: median gap between "
               "streamed messages (vllm bench serve's ITL), median over rounds"),
        Column("itl_ms_min", "float", "ms", "lowest round"),
        Column("itl_ms_max", "float", "ms", "highest round"),
        Column("itl_vs_single", "float", "×", "itl_ms / the single-rank layout's; empty where that was 0 ms (on a "
               "busy 2-core CI machine the client once read every chunk of a stream in a few network reads)",
               nullable=True),
        Column("engine_itl_ms", "float", "ms", "the same, by the engine's own timestamps (/metrics "
               "vllm:inter_token_latency_seconds, mean)", nullable=True),
        Column("engine_itl_vs_single", "float", "×", "engine_itl_ms / the single-rank layout's", nullable=True),
        Column("interconnect", "str", doc="nvidia-smi topo -m between rank 0 and 1, or the CPU backend's shared memory", nullable=True),
        Column("client_cpu_max", "float", "", "the load generator's busiest worker, CPU seconds / wall seconds",
               role=CLIENT_LOAD),
    ),
)
LAYOUTS = DatasetSchema(
    name="parallelism.layouts",
    title={"zh": "各布局能否启动并回答", "en": "Whether each layout starts and answers"},
    key=("layout", "enforce_eager"),
    columns=(
        Column("layout", "str"),
        Column("ranks", "int"),
        Column("enforce_eager", "bool", doc="--enforce-eager (the profile's default) or --no-enforce-eager"),
        Column("started", "bool", doc="/health answered"),
        Column("first_request_ok", "bool", doc="a chat request was answered", nullable=True),
        Column("startup_s", "float", "s", nullable=True),
        Column("error", "str", doc="why not: the log's reason or the request's error", nullable=True),
    ),
)
DP_ROUTING = DatasetSchema(
    name="parallelism.dp_routing",
    title={"zh": "DP 下的前缀缓存命中与路由", "en": "Prefix-cache hits under DP and routing"},
    key=("layout", "routing"),
    columns=(
        Column("layout", "str"),
        Column("routing", "str", doc="round-robin | pinned (X-data-parallel-rank by prefix)"),
        Column("requests", "int"),
        Column("prefix_cache_queries", "int", "tokens"),
        Column("prefix_cache_hits", "int", "tokens"),
        Column("prefix_hit_rate", "float", "%"),
        Column("ttft_ms", "float", "ms", "median", nullable=True),
    ),
)


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    pp: int = 1
    dp: int = 1

    @property
    def ranks(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def name(self) -> str:
        parts = [f"{k}={v}" for k, v in (("TP", self.tp), ("PP", self.pp), ("DP", self.dp)) if v > 1]
        return "×".join(parts) or "single"

    @property
    def args(self) -> tuple[str, ...]:
        args: tuple[str, ...] = ()
        for flag, value in (("--tensor-parallel-size", self.tp), ("--pipeline-parallel-size", self.pp),
                            ("--data-parallel-size", self.dp)):
            if value > 1:
                args += (flag, str(value))
        return args

    @classmethod
    def parse(cls, text: str) -> Layout:
        """'TP=2×PP=2' (or 'TP=2xPP=2', 'single') -> Layout."""
        if text == "single":
            return cls()
        values = {}
        for part in re.split(r"[×x*]", text):
            key, _, value = part.partition("=")
            if key.strip().upper() not in ("TP", "PP", "DP") or not value.strip().isdigit():
                raise ValueError(f"layout {text!r}: expected parts like TP=2, PP=2, DP=2 joined by ×")
            values[key.strip().lower()] = int(value)
        return cls(**values)


ROUNDS = 3  # each load point is sent this many times; its figures are the median, with the lowest and highest round


# vLLM 0.26.0 on the 4×H200 host (NVLink multicast off, as it must be there): with CUDA graphs its fused
# all-reduce + RMSNorm pass made TP=2 die in start-up profiling with an illegal memory access (3 of 3 starts,
# one without the custom all-reduce); with the pass off, TP=2 started and answered. Eager runs never use it.
NO_ALLREDUCE_FUSION = ("--compilation-config", json.dumps({"pass_config": {"fuse_allreduce_rms": False}}))


def cpu_bind(ranks: int, cores: list[int]) -> str:
    """VLLM_CPU_OMP_THREADS_BIND for ``ranks`` ranks: the cores split evenly, ranks joined by '|'."""
    if ranks > len(cores):
        raise ValueError(f"{ranks} CPU ranks need {ranks} cores; this machine offers {len(cores)}")
    share = len(cores) // ranks
    groups = [cores[i * share:(i + 1) * share] for i in range(ranks)]
    return "|".join(f"{g[0]}-{g[-1]}" if len(g) > 1 else str(g[0]) for g in groups)


def topo_link(matrix: str, a: int = 0, b: int = 1) -> str | None:
    """The link between GPU a and GPU b in ``nvidia-smi topo -m`` output (NV18, PIX, SYS…)."""
    rows = [line.split() for line in matrix.splitlines() if line.strip()]
    if not rows:
        return None
    columns = [c for c in rows[0] if c.startswith("GPU")]  # the header row names the GPU columns
    for cols in rows[1:]:
        if cols[0] == f"GPU{a}" and f"GPU{b}" in columns:
            return cols[1 + columns.index(f"GPU{b}")]
    return None


def first_exception(log: str) -> str:
    """The first exception line of a vLLM log ("AssertionError", "KeyError: 'x'"), without its prefix:
    a worker's error comes first, the engine's and the API server's consequences after it."""
    found = re.findall(r"\] ((?:\w+\.)*\w*(?:Error|Exception)(?::[^\n]*)?)$", log, flags=re.MULTILINE)
    ordinary = [f for f in found if not f.startswith(("EngineDeadError", "vllm.v1.engine.exceptions"))]
    return (ordinary or found or ["?"])[0].strip()[:150]


@register
class Parallelism(Experiment):
    name = "parallelism"
    title = {"zh": "并行化：TP、PP、DP", "en": "Parallelism: TP, PP, DP"}
    datasets = (LAYOUTS, SCALING, COMM_COST, DP_ROUTING)
    attachable = False

    @staticmethod
    def devices(profile) -> int:
        if profile.name == "cpu":
            return len(cpu_cores())
        return profile.sizes.get("gpu_count") or len(prov.gpus())

    def layouts(self, profile) -> list[Layout]:
        wanted = [Layout.parse(t) for t in profile.sizes.get("parallel_layouts", ("single", "TP=2", "PP=2", "DP=2"))]
        # Fewer ranks first: a run cut short (a device lease ends) still holds a whole two-GPU comparison.
        return sorted((lay for lay in wanted if lay.ranks <= self.devices(profile)), key=lambda lay: lay.ranks)

    def unavailable(self, profile, python):
        # One device still measures the single-rank baseline that every layout is later compared with.
        if not self.layouts(profile):
            unit = "CPU cores" if profile.name == "cpu" else "GPUs"
            return f"needs at least 1 of the {unit} its layouts use; this machine has {self.devices(profile)}"
        return None

    @staticmethod
    def starts_eager(profile) -> bool:
        """Whether a layout is tried with the profile's --enforce-eager first. GPU profiles say no
        (``parallel_eager``): without CUDA graphs, per-token latency at batch 1 is mostly the host
        launching kernels, which hides the interconnect cost this experiment is about."""
        return "--enforce-eager" in profile.server_args and profile.sizes.get("parallel_eager", True)

    def spec(self, profile, layout: Layout, eager: bool | None = None) -> ServerSpec:
        eager = self.starts_eager(profile) if eager is None else eager
        env: tuple = ()
        if profile.name == "cpu":
            env = (("VLLM_CPU_OMP_THREADS_BIND", cpu_bind(layout.ranks, cpu_cores())),)
        flags = () if eager else ("--no-enforce-eager",)  # overrides the profile's --enforce-eager
        if profile.name != "cpu" and not eager and layout.tp > 1:
            flags += NO_ALLREDUCE_FUSION
        # Alone on its GPUs: beside other servers its KV cache is capped (colocate_args), and at 256 in flight
        # the requests need more than that cap holds.
        return ServerSpec("parallel", ("--max-model-len", "4096", *layout.args, *flags), env,
                          label=f"par-{layout.name}" + ("" if eager else "-graphs"), starts_alone=True)

    @staticmethod
    def load(profile) -> dict:
        load = profile.sizes.get("parallel_load", {"concurrency": (1, 4), "requests": 8, "waves": 2, "words": 60,
                                                   "output_tokens": 16, "prefix_words": 200, "prefixes": 3,
                                                   "per_prefix": 4})
        return {"rounds": ROUNDS} | load

    @staticmethod
    def requests_at(load: dict, concurrency: int) -> int:
        """At least ``requests``, and enough for ``waves`` full batches: 256 requests one at a time
        would cost minutes and say no more than 16, while 256 in flight needs 256 to be busy at all."""
        return max(load["requests"], load.get("waves", 1) * concurrency)

    def plan(self, profile):
        load = self.load(profile)
        steps = []
        for layout in self.layouts(profile):
            counts = [self.requests_at(load, c) for c in load["concurrency"]]
            steps.append(Step(self.spec(profile, layout), f"{layout.name}: concurrency {load['concurrency']}, "
                              f"{load['rounds']} × {counts} requests × {load['output_tokens']} tokens",
                              load["rounds"] * sum(counts), 10 * load["rounds"] * len(load["concurrency"])))
            if layout.dp > 1:
                n = load["prefixes"] * load["per_prefix"]
                steps.append(Step(self.spec(profile, layout), f"{layout.name}: {n} requests sharing {load['prefixes']} "
                                  "prefixes, round-robin vs pinned", 2 * n, 20))
        return steps

    def run(self, ctx):
        load = self.load(ctx.profile)
        interconnect = ("shared memory (CPU backend, one host)" if ctx.profile.name == "cpu"
                        else topo_link(prov.gpu_topology()))
        # A resumed run may have measured the single rank before: its staged row is the baseline.
        single = next((r for r in ctx.staging.rows(COMM_COST) if r["layout"] == "single"), {})
        single_itl, single_engine_itl = single.get("itl_ms"), single.get("engine_itl_ms")
        for layout in self.layouts(ctx.profile):
            todo = [c for c in load["concurrency"] if not ctx.done(SCALING, layout=layout.name, concurrency=c)]
            routing = layout.dp > 1 and not all(ctx.done(DP_ROUTING, layout=layout.name, routing=r)
                                               for r in ("round-robin", "pinned"))
            comm = not ctx.done(COMM_COST, layout=layout.name)
            if not (todo or routing or comm):
                continue
            served = self.serve(ctx, layout)
            if served is None:
                continue
            server, client, eager = served
            prompts = sentences(max(self.requests_at(load, c) for c in load["concurrency"]), load["words"], seed=11)
            generator = ctx.load(server, workers=load.get("workers"))
            for conc in load["concurrency"]:
                batch = [HttpRequest.chat([{"role": "user", "content": p}], server.model, load["output_tokens"],
                                          ignore_eos=True) for p in prompts[:self.requests_at(load, conc)]]
                before = server.metrics()
                rounds = [generator.run(batch, conc).summary() for _ in range(load["rounds"])]
                delta = server.metrics() - before
                engine_itl = histogram_mean_ms(delta, "vllm:inter_token_latency_seconds")
                figures = {name: spread([getattr(r, attr) for r in rounds]) for name, attr in
                          (("output_tok_s", "output_tok_s"), ("ttft_ms", "ttft_median_ms"),
                           ("tpot_ms", "tpot_median_ms"), ("itl_ms", "itl_median_ms"))}
                busiest = max(r.worker_cpu_max for r in rounds)
                if conc == 1:
                    itl = figures["itl_ms"][0]
                    if layout.ranks == 1:
                        single_itl, single_engine_itl = itl, engine_itl
                    if comm and itl is not None and layout.dp == 1:
                        ctx.record(COMM_COST, {"layout": layout.name, "enforce_eager": eager, "itl_ms": itl,
                                               "itl_ms_min": figures["itl_ms"][1], "itl_ms_max": figures["itl_ms"][2],
                                               "itl_vs_single": itl / single_itl if single_itl else None,
                                               "engine_itl_ms": engine_itl,
                                               "engine_itl_vs_single": (engine_itl / single_engine_itl
                                                                        if engine_itl and single_engine_itl else None),
                                               "interconnect": interconnect if layout.ranks > 1 else None,
                                               "client_cpu_max": busiest})
                if conc in todo:
                    ctx.record(SCALING, {"layout": layout.name, "ranks": layout.ranks, "enforce_eager": eager,
                                         "concurrency": conc, "requests": rounds[0].requests, "rounds": len(rounds),
                                         "output_tok_s": figures["output_tok_s"][0],
                                         "output_tok_s_min": figures["output_tok_s"][1],
                                         "output_tok_s_max": figures["output_tok_s"][2],
                                         "ttft_ms": figures["ttft_ms"][0], "tpot_ms": figures["tpot_ms"][0],
                                         "tpot_ms_min": figures["tpot_ms"][1], "tpot_ms_max": figures["tpot_ms"][2],
                                         "engine_itl_ms": engine_itl,
                                         "kv_cache_tokens": server.facts.kv_cache_tokens,
                                         "max_concurrency": server.facts.max_concurrency,
                                         "client_cpu_max": busiest})
            if routing:
                self.run_routing(ctx, server, client, layout, load)

    def serve(self, ctx, layout):
        """Start ``layout`` eager where ``starts_eager``; if that fails, once more with CUDA graphs.
        Each attempt is a row of parallelism.layouts: a layout a backend cannot serve is a result too."""
        eager_default = self.starts_eager(ctx.profile)
        tried = {(r["layout"], bool(r["enforce_eager"])): r for r in ctx.staging.rows(LAYOUTS)}  # a resumed run
        for eager in (True, False) if eager_default else (False,):
            row = {"layout": layout.name, "ranks": layout.ranks, "enforce_eager": eager}
            before = tried.get((layout.name, eager))
            if before is not None and not before["first_request_ok"]:
                continue
            if before is not None:
                server = ctx.server(self.spec(ctx.profile, layout, eager))
                return server, ctx.client(server), eager
            try:
                server = ctx.server(self.spec(ctx.profile, layout, eager))
            except ServerFailed as exc:
                ctx.record(LAYOUTS, row | {"started": False, "error": exc.reason[:300]})
                continue
            client = ctx.client(server)
            first = ctx.run(client.chat_stream([{"role": "user", "content": "Say hello."}], max_tokens=4))
            error = first.error and f"{first.error[:150]} | log: {first_exception(server.log_text())}"
            ctx.record(LAYOUTS, row | {"started": True, "first_request_ok": first.ok, "startup_s": server.startup_s,
                                       "error": error[:300] if error else None})
            if first.ok:
                return server, client, eager
        return None

    def run_routing(self, ctx, server, client, layout, load):
        """The same shared prefixes, sent round-robin over the DP ranks, or pinned to one rank per prefix."""
        for routing in ("round-robin", "pinned"):
            if ctx.done(DP_ROUTING, layout=layout.name, routing=routing):
                continue
            rng = random.Random(f"{routing}-{layout.name}")  # fresh prefixes per routing: no hits carried over
            # Requests go prefix by prefix in turn; with a prefix count that the DP size does not divide,
            # round-robin sends each prefix to a different engine on each pass.
            if load["prefixes"] % layout.dp == 0:
                raise ValueError(f"parallel_load prefixes={load['prefixes']} must not be a multiple of DP={layout.dp}")
            prefixes = [random_words(load["prefix_words"], rng) for _ in range(load["prefixes"])]
            order = [(p, k) for k in range(load["per_prefix"]) for p in range(len(prefixes))]

            def request(i: int, p: int, k: int, routing=routing, prefixes=prefixes):
                rank = (i % layout.dp) if routing == "round-robin" else (p % layout.dp)
                message = [{"role": "user", "content": f"{prefixes[p]}\nQuestion {k}: summarise the text above."}]
                return lambda: client.chat_stream(message, max_tokens=1,
                                                  extra_headers={"X-data-parallel-rank": str(rank)})

            before = server.metrics()
            batch = ctx.run(gather_limited([request(i, p, k) for i, (p, k) in enumerate(order)], 1))
            delta = server.metrics() - before
            if batch.errors:
                raise RuntimeError(f"DP routing requests failed: {batch.errors[:2]}")
            queries, hits = int(delta.get("vllm:prefix_cache_queries", 0)), int(delta.get("vllm:prefix_cache_hits", 0))
            ctx.record(DP_ROUTING, {"layout": layout.name, "routing": routing, "requests": len(order),
                                    "prefix_cache_queries": queries, "prefix_cache_hits": hits,
                                    "prefix_hit_rate": hits / queries * 100 if queries else None,
                                    "ttft_ms": statistics.median(r.ttft_s * 1000 for r in batch.results if r.ttft_s)})
