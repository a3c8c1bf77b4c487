"""How close our load generator is to ``vllm bench serve``, as a ratio with a 95 % confidence interval.

The ``fidelity`` experiment compares the two tools' ranges over a few rounds; where one API-server process is the
bottleneck, rounds spread 10–15 % and a few of them cannot show agreement within 5 %. Here each load point gets a
warm-up round of each tool and then many rounds in pairs (ours then the bench's, the next pair the other way round),
so a slow stretch of the server falls on both tools of a pair. The ratio is the geometric mean of the pairs' ratios,
its interval Student's t on their logarithms. Two load points: one where the engine is the limit, and one at high
load with more API-server processes, where the CPU shares of every server process say where the spread comes from.
"""

from __future__ import annotations

import math
import shutil
import statistics
import tempfile
from pathlib import Path

from measure.experiment import Experiment, ServerSpec, Step, register
from measure.harness.bench import LIMITED_BY_DOC, bench_serve, limited_by
from measure.harness.loadgen import HttpRequest
from measure.harness.procstat import CpuSampler, process_names
from measure.schema import CLIENT_LOAD, SETTING, Column, DatasetSchema
from measure.workloads import sentences

# Workload sizes per profile (MEASURE_SIZES may replace them: '{"fidelity_interval": {...}}'). A point's
# api_server_count above 1 starts its server through `vllm serve`, the only start command that acts on it.
SIZES = {
    "cpu": {"points": ({"point": "engine-bound", "concurrency": 4, "api_server_count": 1, "requests": 16},
                       {"point": "high load", "concurrency": 16, "api_server_count": 2, "requests": 32}),
            "words": 60, "output_tokens": 16, "rounds": 8, "workers": 1},
    # engine-bound rounds of 64 requests (4 per slot, ~2 s) spread 27-36 % on the H200: rounds of 256 test whether length helps
    "gpu": {"points": ({"point": "engine-bound", "concurrency": 16, "api_server_count": 1, "requests": 256},
                       {"point": "high load", "concurrency": 256, "api_server_count": 4, "requests": 1024}),
            "words": 200, "output_tokens": 256, "rounds": 8, "workers": 4},
}
# metric -> (our summary's field, the bench JSON's key, unit)
METRICS = {
    "output throughput": ("output_tok_s", "output_throughput", "tok/s"),
    "TTFT median": ("ttft_median_ms", "median_ttft_ms", "ms"),
    "ITL median": ("itl_median_ms", "median_itl_ms", "ms"),
}
CONFIDENCE = 0.95

RATIO = DatasetSchema(
    name="fidelity_interval.ratio",
    title={"zh": "本项目客户端 / vllm bench serve：比值与 95% 置信区间",
           "en": "Our client / vllm bench serve: the ratio and its 95 % confidence interval"},
    key=("point", "metric"),
    doc="Rounds in pairs, ours and the bench's against one server with the same prompts and load, the order "
        "alternating from pair to pair, after a warm-up round of each tool. ratio: the geometric mean of the pairs' "
        "ratios; its interval: Student's t over the logarithms of the pairs' ratios. CPU shares: CPU seconds ÷ a "
        "round's wall seconds, the highest round of either tool.",
    columns=(
        Column("point", "str", doc="engine-bound | high load"),
        Column("workload", "str", doc="chat"),
        Column("model", "str"),
        Column("concurrency", "int", "requests", "in flight at most", role=SETTING),
        Column("api_server_count", "int", "processes", "--api-server-count (above 1: started through vllm serve)",
               role=SETTING),
        Column("requests", "int", "requests", "per round and tool", role=SETTING),
        Column("metric", "str"),
        Column("unit", "str"),
        Column("rounds", "int", "", "pairs of timed rounds in which both tools measured the metric", role=SETTING),
        Column("harness", "float", doc="our load generator, median over rounds"),
        Column("bench", "float", doc="vllm bench serve, median over rounds"),
        Column("harness_spread_pct", "float", "%", "(highest - lowest round) ÷ median × 100"),
        Column("bench_spread_pct", "float", "%", "(highest - lowest round) ÷ median × 100"),
        Column("ratio", "float", "×", "ours ÷ the bench's: geometric mean over pairs"),
        # an interval is published whatever its width: from few pairs of wildly spread rounds (a latency on two
        # shared cores) its upper end can pass any plausible ratio, so these columns have no ceiling
        Column("ratio_ci_low", "float", "×", "95 % confidence interval of the ratio, lower end"),
        Column("ratio_ci_high", "float", "×", "95 % confidence interval of the ratio, upper end", maximum=math.inf),
        Column("ci_max_gap_pct", "float", "%", "the interval's end farther from 1 (agreement), as |end - 1| × 100: "
               "the most the two tools could differ at 95 % confidence", maximum=math.inf),
        Column("harness_worker_cpu_max", "float", "cores", "our busiest worker, highest round", role=CLIENT_LOAD),
        Column("bench_cpu_share", "float", "cores", "the bench's one process, highest round", nullable=True,
               role=CLIENT_LOAD),
        Column("api_cpu_max", "float", "cores", "the busiest API-server process", nullable=True),
        Column("engine_cpu", "float", "cores", "the engine-core process", nullable=True),
        Column("limited_by", "str", doc=LIMITED_BY_DOC),
    ),
)


def t_quantile(confidence: float, degrees: int) -> float:
    """The two-sided critical value of Student's t (scipy: the harness's one statistics dependency)."""
    from scipy.stats import t

    return float(t.ppf(0.5 + confidence / 2, degrees))


def ratio_interval(ours: list[float], theirs: list[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(geometric mean, low, high) of the pairs' ratios ours[i] / theirs[i]: a t interval on their logarithms."""
    if len(ours) != len(theirs) or len(ours) < 2:
        raise ValueError(f"a confidence interval needs two or more pairs of rounds; got {len(ours)} and {len(theirs)}")
    logs = [math.log(a / b) for a, b in zip(ours, theirs, strict=True)]
    mean, n = statistics.fmean(logs), len(logs)
    half = t_quantile(confidence, n - 1) * statistics.stdev(logs) / math.sqrt(n)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def spread_pct(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values) * 100


@register
class FidelityInterval(Experiment):
    name = "fidelity_interval"
    title = {"zh": "测量工具的保真度：置信区间", "en": "Harness fidelity: a confidence interval"}
    datasets = (RATIO,)
    attachable = False  # a point may set --api-server-count, which only a server started here can have

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("fidelity_interval", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    @staticmethod
    def spec(count: int) -> ServerSpec:
        """One API server: the plain chat server other experiments start too; more: as api_servers starts them."""
        if count == 1:
            return ServerSpec("chat", (), label="generate")
        return ServerSpec("chat", ("--api-server-count", str(count)), label=f"api-{count}x-chat", front_end="vllm serve")

    def plan(self, profile):
        s = self.sizes(profile)
        rounds = 2 * (s["rounds"] + 1)
        return [Step(self.spec(p["api_server_count"]),
                     f"{p['point']}: {p['requests']} chat requests × {s['output_tokens']} tokens, {p['concurrency']} in "
                     f"flight, --api-server-count {p['api_server_count']}; ours and vllm bench serve × "
                     f"{s['rounds']} pairs of rounds + a warm-up each",
                     rounds * p["requests"], rounds * (15 if profile.name == "cpu" else 20))
                for p in s["points"]]

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        if s["rounds"] < 2:
            raise ValueError(f"fidelity_interval needs two or more pairs of rounds for an interval; sizes ask {s['rounds']}")
        t_quantile(CONFIDENCE, s["rounds"] - 1)  # scipy missing fails here, before any server starts
        work = Path(tempfile.mkdtemp(prefix="fidelity-interval-"))
        try:
            prompts = sentences(max(p["requests"] for p in s["points"]), s["words"], seed=11)
            for point in s["points"]:
                if not ctx.done(RATIO, point=point["point"]):
                    self.measure(ctx, point, prompts[:point["requests"]], s, work / point["point"].replace(" ", "-"))
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def measure(self, ctx, point: dict, prompts: list[str], s: dict, workdir: Path) -> None:
        server = ctx.server(self.spec(point["api_server_count"]))
        model = ctx.model("chat")
        concurrency = point["concurrency"]
        requests = [HttpRequest.chat([{"role": "user", "content": p}], server.model, s["output_tokens"],
                                     ignore_eos=True) for p in prompts]
        generator = ctx.load(server, workers=s["workers"])
        names = process_names(server.log_text(), server.process.pid)

        def bench(sampler=None):
            return bench_serve(ctx.pool.python, server.base_url, server.model, model.path, prompts,
                               backend="openai-chat", endpoint="/v1/chat/completions", concurrency=concurrency,
                               output_len=s["output_tokens"], workdir=workdir, sampler=sampler)

        generator.run(requests, concurrency)  # warm-up: the first round at a new load point is slow in any tool
        bench()
        ours, theirs = [], []
        with CpuSampler(names) as sampler:
            for r in range(s["rounds"]):
                for tool in ("harness", "bench") if r % 2 == 0 else ("bench", "harness"):
                    if tool == "harness":
                        batch = generator.run(requests, concurrency)
                        if batch.errors:
                            raise RuntimeError(f"{len(batch.errors)} requests failed at {point['point']}: {batch.errors[:2]}")
                        ours.append((batch.summary(), batch.window))
                    else:
                        run = bench(sampler)
                        theirs.append((run, run.window))
                ctx.log(f"  {point['point']}, pair {r + 1}/{s['rounds']}: ours {ours[-1][0].output_tok_s:,.0f} tok/s, "
                        f"bench {theirs[-1][0].result.get('output_throughput', 0):,.0f} tok/s")
        # shares read once the sampler stopped: its last sample lies past every round
        windows = [window for _, window in ours + theirs if window is not None]  # None: the bench printed no mark

        def highest(kind: str) -> float | None:
            shares = [sampler.share(name, *window) for window in windows for name in names if name.startswith(kind)]
            return max((v for v in shares if v is not None), default=None)

        self.record(ctx, point, model.name, len(prompts), ours, theirs, highest("api"), highest("engine"))

    @staticmethod
    def record(ctx, point, model, requests, ours, theirs, api_cpu, engine_cpu) -> None:
        worker_cpu = max(summary.worker_cpu_max for summary, _ in ours)
        bench_cpus = [run.cpu_share for run, _ in theirs if run.cpu_share is not None]
        bench_cpu = max(bench_cpus, default=None)
        for metric, (field, key, unit) in METRICS.items():
            # a pair counts where both tools measured the metric: the bench reports an ITL of 0 for a round in
            # which every answer came in one message (a busy API server merges a stream's tokens)
            pairs = [(x, y) for x, y in zip((getattr(summary, field) for summary, _ in ours),
                                            (run.result.get(key) for run, _ in theirs), strict=True)
                     if x is not None and y is not None and x > 0 and y > 0]
            if len(pairs) < 2:
                ctx.log(f"  {point['point']}, {metric}: measured by both tools in {len(pairs)} pair(s), fewer than "
                        f"the two an interval needs: no row")
                continue
            a, b = [x for x, _ in pairs], [y for _, y in pairs]
            ratio, low, high = ratio_interval(a, b)
            ctx.log(f"  {point['point']}, {metric}: ours/bench {ratio:.3f} (95 % CI {low:.3f}–{high:.3f}); rounds "
                    f"spread {spread_pct(a):.1f} % (ours) and {spread_pct(b):.1f} % (bench)")
            ctx.record(RATIO, {
                "point": point["point"], "workload": "chat", "model": model, "concurrency": point["concurrency"],
                "api_server_count": point["api_server_count"], "requests": requests, "metric": metric, "unit": unit,
                "rounds": len(a), "harness": statistics.median(a), "bench": statistics.median(b),
                "harness_spread_pct": spread_pct(a), "bench_spread_pct": spread_pct(b),
                "ratio": ratio, "ratio_ci_low": low, "ratio_ci_high": high,
                "ci_max_gap_pct": max(abs(low - 1), abs(high - 1)) * 100,
                "harness_worker_cpu_max": worker_cpu, "bench_cpu_share": bench_cpu, "api_cpu_max": api_cpu,
                "engine_cpu": engine_cpu, "limited_by": limited_by(worker_cpu, bench_cpu, api_cpu),
            })
