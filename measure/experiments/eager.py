"""What ``--enforce-eager`` costs: vLLM's default mode (torch.compile + CUDA graphs) against eager mode.

The common question "start-up is slow; should I serve eager?" answered with one model on one GPU: start-up with
empty caches, with the caches an earlier start left, and in eager mode; output throughput and per-token latency
at 1 and at 32 requests in flight; and one multimodal time to first token. This is the only place the GPU
profile serves with ``--enforce-eager``: every other figure of the site is measured in vLLM's default mode.
"""

from __future__ import annotations

import re
import shutil
import statistics

from measure.experiment import Experiment, ServerSpec, Step, register, spread
from measure.harness.loadgen import HttpRequest, default_workers
from measure.harness.server import STATE_DIR, ServerFailed
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import draw, image_message, sentences

MODES = ("default", "eager")
IMAGE_0_LIMIT = '{"image":0,"video":0}'

STARTUP = DatasetSchema(
    name="eager.startup",
    title={"zh": "启动时间：默认模式（冷缓存、热缓存）与 eager 模式", "en": "Start-up: default mode (cold, warm caches) and eager mode"},
    key=("mode", "caches"),
    columns=(
        Column("mode", "str", doc="default (torch.compile + CUDA graphs) | eager (--enforce-eager)"),
        Column("caches", "str", doc="cold: empty compile and kernel caches | warm: the caches an earlier start left"),
        Column("startup_s", "float", "s", "launch to /health ready, the device to itself"),
        Column("compile_s", "float", "s", "vLLM's 'torch.compile took' line", nullable=True),
        Column("engine_init_s", "float", "s", "vLLM's 'init engine (profile, create kv cache, warmup model) took'",
               nullable=True),
        Column("graph_capture_s", "float", "s", "vLLM's 'Graph capturing finished in' line", nullable=True),
    ),
)
DECODE = DatasetSchema(
    name="eager.decode",
    title={"zh": "生成：吞吐与每 token 延迟", "en": "Generation: throughput and per-token latency"},
    key=("mode", "concurrency"),
    columns=(
        Column("mode", "str"),
        Column("concurrency", "int", "requests", "requests in flight"),
        Column("requests", "int", "requests", "per round"),
        Column("output_tokens", "int", "tokens", "per request (ignore_eos)"),
        Column("rounds", "int", "", "rounds measured (after one warm-up)"),
        Column("output_tok_s", "float", "tok/s", "median over rounds"),
        Column("output_tok_s_min", "float", "tok/s", "slowest round"),
        Column("output_tok_s_max", "float", "tok/s", "fastest round"),
        Column("tpot_ms", "float", "ms", "time per output token, median over rounds of each round's median"),
        Column("tpot_ms_min", "float", "ms"),
        Column("tpot_ms_max", "float", "ms"),
        Column("ttft_ms", "float", "ms", "median over rounds of each round's median"),
        Column("client_cpu_max", "float", "cores", "the load client's busiest worker, share of one core",
               role=CLIENT_LOAD),
    ),
)
MULTIMODAL = DatasetSchema(
    name="eager.multimodal_ttft",
    title={"zh": "多模态首 token 时间", "en": "Multimodal time to first token"},
    key=("mode",),
    columns=(
        Column("mode", "str"),
        Column("side", "int", "px", "square test image"),
        Column("requests", "int", "requests", "per round, one at a time, each a new image"),
        Column("rounds", "int", ""),
        Column("ttft_ms", "float", "ms", "median over rounds of each round's median"),
        Column("ttft_ms_min", "float", "ms"),
        Column("ttft_ms_max", "float", "ms"),
        Column("client_cpu_max", "float", "cores", role=CLIENT_LOAD),
    ),
)
IMAGE_0 = DatasetSchema(
    name="eager.image_0_start",
    title={"zh": "图像数限为 0 的服务器能否启动：默认模式与 eager 模式", "en": "Whether a server with images limited to 0 starts: default and eager mode"},
    key=("mode",),
    doc="The multimodal experiment's {\"image\": 0} server failed to start on vLLM 0.26.0 in default mode; the same "
        "start in both modes, one after the other, says whether the mode is the cause.",
    columns=(
        Column("mode", "str"),
        Column("limit_mm", "str", doc="--limit-mm-per-prompt"),
        Column("started", "bool", doc="the start-up reached the KV-cache sizing (the server is then stopped)"),
        Column("kv_cache_tokens", "int", "tokens", nullable=True),
        Column("error", "str", doc="the log's root cause when it did not start", nullable=True),
    ),
)
SUMMARY = DatasetSchema(
    name="eager.summary",
    title={"zh": "eager 模式的代价（默认模式 ÷ eager 模式）", "en": "What eager mode costs (default ÷ eager)"},
    key=("metric",),
    columns=(
        Column("metric", "str"),
        Column("unit", "str"),
        Column("default", "float", doc="default mode"),
        Column("eager", "float", doc="eager mode"),
        Column("eager_vs_default", "float", "×", "eager ÷ default: above 1, eager is larger (slower start, "
                                                  "longer latency, or more throughput)"),
    ),
)

# Log lines of vLLM 0.26's start-up (tests/fixtures/logs/).
PHASES = {
    "compile_s": re.compile(r"torch\.compile took ([\d.]+) s in total"),
    "engine_init_s": re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
    "graph_capture_s": re.compile(r"Graph capturing finished in ([\d.]+) secs"),
}


def startup_phases(log: str) -> dict[str, float | None]:
    found = {name: pattern.search(log) for name, pattern in PHASES.items()}
    return {name: float(m.group(1)) if m else None for name, m in found.items()}


@register
class Eager(Experiment):
    name = "eager"
    title = {"zh": "eager 模式的代价", "en": "What eager mode costs"}
    datasets = (STARTUP, DECODE, MULTIMODAL, IMAGE_0, SUMMARY)
    attachable = False

    @staticmethod
    def cache_dir():
        """Compile and kernel caches of this experiment's chat servers: emptied before the cold start."""
        return STATE_DIR / "eager-caches"

    def cache_env(self, state: str) -> tuple[tuple[str, str], ...]:
        root = self.cache_dir()
        # Every cache a start fills: vLLM's compile cache, Inductor's, Triton's, FlashInfer's JIT and CUDA's PTX cache.
        return (("VLLM_CACHE_ROOT", str(root / "vllm")), ("TORCHINDUCTOR_CACHE_DIR", str(root / "inductor")),
                ("TRITON_CACHE_DIR", str(root / "triton")), ("FLASHINFER_WORKSPACE_BASE", str(root)),
                ("CUDA_CACHE_PATH", str(root / "nv")), ("MEASURE_CACHES", state))

    def chat_specs(self) -> dict[tuple[str, str], ServerSpec]:
        return {
            ("default", "cold"): ServerSpec("chat", (), self.cache_env("cold"), label="generate-cold-caches", starts_alone=True),
            ("default", "warm"): ServerSpec("chat", (), self.cache_env("warm"), label="generate-warm-caches", starts_alone=True),
            ("eager", "warm"): ServerSpec("chat", ("--enforce-eager",), self.cache_env("warm"), label="generate-eager",
                                          starts_alone=True),
        }

    @staticmethod
    def vl_spec(mode: str) -> ServerSpec:
        return ServerSpec("vl", ("--max-model-len", "4096") + (("--enforce-eager",) if mode == "eager" else ()),
                          label=f"vl-{mode}-mode")

    @staticmethod
    def image_0_spec(mode: str) -> ServerSpec:
        return ServerSpec("vl", ("--max-model-len", "4096", "--limit-mm-per-prompt", IMAGE_0_LIMIT)
                          + (("--enforce-eager",) if mode == "eager" else ()),
                          label=f"vl-image-0-{mode}-mode", starts_alone=True, facts_only=True)

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("eager", {"points": ((1, 8), (32, 128)), "output_tokens": 64, "rounds": 3, "words": 200,
                                           "image_side": 448, "image_requests": 8})

    def unavailable(self, profile, python: str) -> str | None:
        if "--enforce-eager" in profile.server_args:
            return "this profile serves every model in eager mode already (vLLM's CPU backend); nothing to contrast"
        return None

    def plan(self, profile):
        s = self.sizes(profile)
        steps = []
        for (mode, caches), spec in self.chat_specs().items():
            steps.append(Step(spec, f"start-up, {mode} mode, {caches} caches; then " + (
                "no load" if caches == "cold" else f"{s['rounds']} rounds at {[c for c, _ in s['points']]} in flight"),
                0 if caches == "cold" else (s["rounds"] + 1) * sum(n for _, n in s["points"]), 60))
        for mode in MODES:
            steps.append(Step(self.vl_spec(mode), f"multimodal TTFT, {mode} mode: {s['rounds']} × {s['image_requests']} "
                                                  f"images of {s['image_side']} px", s["rounds"] * s["image_requests"], 15))
        steps += [Step(self.image_0_spec(mode), f"start-up with images limited to 0, {mode} mode (facts only)", 0, 5)
                  for mode in MODES]
        return steps

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        shutil.rmtree(self.cache_dir(), ignore_errors=True)  # cold means cold: nothing from an earlier run
        for (mode, caches), spec in self.chat_specs().items():
            if ctx.done(STARTUP, mode=mode, caches=caches) and (caches == "cold" or all(
                    ctx.done(DECODE, mode=mode, concurrency=c) for c, _ in s["points"])):
                continue
            server = ctx.server(spec)
            if not ctx.done(STARTUP, mode=mode, caches=caches):
                ctx.record(STARTUP, {"mode": mode, "caches": caches, "startup_s": server.startup_s,
                                     **startup_phases(server.log_text())})
            if caches != "cold":
                self.decode(ctx, server, mode, s)
        for mode in MODES:
            if not ctx.done(MULTIMODAL, mode=mode):
                self.multimodal(ctx, ctx.server(self.vl_spec(mode)), mode, s)
        for mode in MODES:
            if not ctx.done(IMAGE_0, mode=mode):
                self.image_0(ctx, mode)
        self.summarise(ctx)

    def image_0(self, ctx, mode: str) -> None:
        row = {"mode": mode, "limit_mm": IMAGE_0_LIMIT}
        try:
            facts = ctx.server(self.image_0_spec(mode)).facts
        except ServerFailed as exc:  # not starting is the finding
            ctx.record(IMAGE_0, row | {"started": False, "error": exc.reason[:300]})
            return
        ctx.record(IMAGE_0, row | {"started": True, "kv_cache_tokens": facts.kv_cache_tokens})

    def decode(self, ctx, server, mode: str, s: dict) -> None:
        prompts = sentences(max(n for _, n in s["points"]), s["words"], seed=11)
        for concurrency, n in s["points"]:
            if ctx.done(DECODE, mode=mode, concurrency=concurrency):
                continue
            requests = [HttpRequest.chat([{"role": "user", "content": p}], server.model, s["output_tokens"], ignore_eos=True)
                        for p in prompts[:n]]
            load = ctx.load(server, workers=default_workers(concurrency))
            load.run(requests, concurrency)  # warm-up: the first requests pay for lazy initialisation
            rounds = [load.run(requests, concurrency) for _ in range(s["rounds"])]
            summaries = [r.summary() for r in rounds]
            tok_s = spread([x.output_tok_s for x in summaries])
            tpot = spread([x.tpot_median_ms for x in summaries])
            ctx.log(f"  {mode}, {concurrency} in flight: {tok_s[0]:,.0f} output tok/s, {tpot[0]:.2f} ms per token")
            ctx.record(DECODE, {"mode": mode, "concurrency": concurrency, "requests": n, "output_tokens": s["output_tokens"],
                                "rounds": s["rounds"], "output_tok_s": tok_s[0], "output_tok_s_min": tok_s[1],
                                "output_tok_s_max": tok_s[2], "tpot_ms": tpot[0], "tpot_ms_min": tpot[1],
                                "tpot_ms_max": tpot[2], "ttft_ms": statistics.median(x.ttft_median_ms for x in summaries),
                                "client_cpu_max": max(x.worker_cpu_max for x in summaries)})

    def multimodal(self, ctx, server, mode: str, s: dict) -> None:
        side, n = s["image_side"], s["image_requests"]
        load = ctx.load(server, workers=1)
        warm = [HttpRequest.chat(image_message(draw(side, 900 + i)[0], "What colour is the shape?"), server.model, 1)
                for i in range(2)]
        load.run(warm, 1)
        medians, cpu = [], 0.0
        for r in range(s["rounds"]):  # a new image every request: the processor cache never answers
            batch = load.run([HttpRequest.chat(image_message(draw(side, 1000 * (r + 1) + i)[0], "What colour is the shape?"),
                                               server.model, 1) for i in range(n)], 1)
            medians.append(statistics.median(t.ttft_s * 1000 for t in batch.timings))
            cpu = max(cpu, batch.worker_cpu_max)
        ttft = spread(medians)
        ctx.log(f"  multimodal TTFT, {mode} mode: {ttft[0]:.1f} ms")
        ctx.record(MULTIMODAL, {"mode": mode, "side": side, "requests": n, "rounds": s["rounds"], "ttft_ms": ttft[0],
                                "ttft_ms_min": ttft[1], "ttft_ms_max": ttft[2], "client_cpu_max": cpu})

    def summarise(self, ctx) -> None:
        startup = {(r["mode"], r["caches"]): r for r in ctx.staging.rows(STARTUP)}
        decode = {(r["mode"], r["concurrency"]): r for r in ctx.staging.rows(DECODE)}
        mm = {r["mode"]: r for r in ctx.staging.rows(MULTIMODAL)}
        points = [c for c, _ in self.sizes(ctx.profile)["points"]]
        pairs = {
            "start-up, warm caches": ("s", startup.get(("default", "warm")), startup.get(("eager", "warm")), "startup_s"),
            f"output throughput at {max(points)} in flight": ("tok/s", decode.get(("default", max(points))),
                                                              decode.get(("eager", max(points))), "output_tok_s"),
            f"time per output token at {min(points)} in flight": ("ms", decode.get(("default", min(points))),
                                                                  decode.get(("eager", min(points))), "tpot_ms"),
            "multimodal time to first token": ("ms", mm.get("default"), mm.get("eager"), "ttft_ms"),
        }
        for metric, (unit, default, eager, column) in pairs.items():
            if default and eager and not ctx.done(SUMMARY, metric=metric):
                ctx.record(SUMMARY, {"metric": metric, "unit": unit, "default": default[column], "eager": eager[column],
                                     "eager_vs_default": eager[column] / default[column]},
                           derived_from=(STARTUP, DECODE, MULTIMODAL))
