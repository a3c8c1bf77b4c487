"""Memory and capacity: how close decode comes to the device's memory-bandwidth floor, and what
``--gpu-memory-utilization`` buys in KV-cache tokens and in requests served at once.

The bandwidth is a torch copy on the device (no vLLM). Decode time per token is taken one request at a time with
a short prompt, against the floor: the weight bytes one step must read ÷ that bandwidth; for the chat model and a
larger one (role ``chat_large``): what a step spends beyond reading its weights shows in how the gap changes with
the weights' size. Capacity: servers alone on the device at several memory settings, each with vLLM's own KV sizing, and a sweep of concurrency at a fixed request
shape until the cache is full (preemptions, time to first token).
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
from pathlib import Path

from measure.experiment import Experiment, ServerSpec, Step, register, spread
from measure.harness.copy_bandwidth import __file__ as BANDWIDTH_SCRIPT
from measure.harness.definitions import percentile
from measure.harness.loadgen import HttpRequest, default_workers
from measure.harness.metrics import histogram_mean_ms
from measure.harness.server import ServerFailed
from measure.models import decode_weight_bytes
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import random_words

# Workload sizes per profile (MEASURE_SIZES may replace them: '{"capacity": {...}}'). The CPU stand-in's KV cache is
# set in bytes (VLLM_CPU_KVCACHE_SPACE cleared): a tiny model's cache of the profile's 2 GiB would never fill.
SIZES = {
    "cpu": {"bandwidth_mib": 512,
            # the full-size model's 40k-token context would not fit the CPU profile's KV cache
            "floor": {"prompt_words": 32, "output_tokens": 64, "requests": 4, "rounds": 3,
                      "roles": ("chat", "chat_large"), "large_args": ("--max-model-len", "2048")},
            "memory": {"flag": "--kv-cache-memory-bytes", "full": (str(4 << 20), str(8 << 20), str(16 << 20)),
                       "facts_only": ()},
            "knee": {"prompt_words": 512, "output_tokens": 32, "concurrency": (8, 32, 64), "rounds": 2}},
    "gpu": {"bandwidth_mib": 4096,
            "floor": {"prompt_words": 32, "output_tokens": 256, "requests": 4, "rounds": 3,
                      "roles": ("chat", "chat_large"), "large_args": (),
                      # it idles beside other servers while they measure: a KV cache far beyond one request
                      "large_memory": ("--gpu-memory-utilization", "0.3", "--kv-cache-memory-bytes", str(8 << 30))},
            "memory": {"flag": "--gpu-memory-utilization", "full": ("0.06", "0.1", "0.2"), "facts_only": ("0.9",)},
            "knee": {"prompt_words": 1024, "output_tokens": 256, "concurrency": (16, 32, 64, 128), "rounds": 2}},
}

BANDWIDTH = DatasetSchema(
    name="capacity.bandwidth",
    title={"zh": "本设备的内存带宽（实测）", "en": "This device's memory bandwidth (measured)"},
    key=("device",),
    columns=(
        Column("device", "str"),
        Column("buffer_mib", "int", "MiB", "bytes copied per pass"),
        Column("bandwidth_gb_s", "float", "GB/s", "a torch copy: bytes read + bytes written per second, after warm-up; "
               "the best of eight short windows (before 2026-12-06: one window of two seconds)"),
        Column("threads", "int", "", "torch CPU threads (CPU) or host threads (GPU)"),
        Column("torch", "str"),
    ),
)
DECODE_FLOOR = DatasetSchema(
    name="capacity.decode_floor",
    title={"zh": "单请求解码与带宽下限", "en": "One request's decode against the bandwidth floor"},
    key=("model",),
    doc="floor_ms: the weight bytes one decode step reads ÷ the measured bandwidth; no server decodes faster.",
    columns=(
        Column("model", "str"),
        Column("weights", "str", doc="dummy | real"),
        Column("weight_gb", "float", "GB", "weight bytes one decode step reads (bf16; layers and output projection)"),
        Column("bandwidth_gb_s", "float", "GB/s", "capacity.bandwidth of this device"),
        Column("floor_ms", "float", "ms", "weight_gb ÷ bandwidth_gb_s"),
        Column("output_tokens", "int", "tokens", "per request, ignore_eos"),
        Column("rounds", "int", "", "rounds that timed a step (after one warm-up): a round whose answers each came "
               "in one message times none"),
        Column("tpot_ms", "float", "ms", "one request at a time: median over rounds of each round's median"),
        Column("tpot_ms_min", "float", "ms"),
        Column("tpot_ms_max", "float", "ms"),
        Column("floor_share_pct", "float", "%", "floor_ms ÷ tpot_ms: how much of a step the weights' reading explains"),
        Column("beyond_floor_ms", "float", "ms", "tpot_ms − floor_ms: the part of a step not spent reading weights "
               "(kernel launches, attention, sampling, the scheduler and the API server)", nullable=True),
        Column("client_cpu_max", "float", "cores", "the load client's busiest worker, share of one core",
               role=CLIENT_LOAD),
    ),
)
MEMORY = DatasetSchema(
    name="capacity.memory",
    title={"zh": "显存设置与 KV 缓存容量", "en": "Memory setting and KV-cache capacity"},
    key=("setting",),
    doc="What vLLM logged at start-up, alone on the device; requests_fit divides its KV tokens by the knee's request "
        "shape (prompt + output tokens).",
    columns=(
        Column("setting", "str", doc="the flag that sizes the KV cache, with its value"),
        Column("gpu_memory_utilization", "float", "", "--gpu-memory-utilization (GPU only)", nullable=True),
        Column("started", "bool", doc="false: vLLM refused to start"),
        Column("model_load_gib", "float", "GiB", "weights as vLLM loaded them", nullable=True),
        Column("kv_cache_gib", "float", "GiB", nullable=True),
        Column("kv_cache_tokens", "int", "tokens", nullable=True),
        Column("max_concurrency", "float", "×", "the 'maximum concurrency' vLLM logs", nullable=True),
        Column("max_concurrency_tokens", "int", "tokens", "the tokens per request vLLM's figure assumes (the model's "
               "context)", nullable=True),
        Column("request_tokens", "int", "tokens", "one knee request: prompt + output, as vLLM counted them",
               nullable=True),
        Column("requests_fit", "float", "requests", "kv_cache_tokens ÷ request_tokens", nullable=True),
        Column("error", "str", doc="the last error line of the log when it did not start", nullable=True),
    ),
)
KNEE = DatasetSchema(
    name="capacity.knee",
    title={"zh": "并发加到 KV 缓存装满", "en": "Concurrency up to a full KV cache"},
    key=("setting", "concurrency"),
    columns=(
        Column("setting", "str", doc="as in capacity.memory"),
        Column("concurrency", "int", "requests", "in flight"),
        Column("requests", "int", "requests", "per round"),
        Column("rounds", "int", "", "rounds measured (after one warm-up)"),
        Column("output_tok_s", "float", "tok/s", "median over rounds"),
        Column("output_tok_s_min", "float", "tok/s"),
        Column("output_tok_s_max", "float", "tok/s"),
        Column("ttft_p50_ms", "float", "ms", "median over rounds of each round's median"),
        Column("ttft_p99_ms", "float", "ms", "99th percentile, median over rounds"),
        Column("tpot_p50_ms", "float", "ms", "median over rounds of each round's median"),
        Column("preemptions", "int", "", "vllm:num_preemptions over the measured rounds"),
        Column("queue_ms", "float", "ms", "vllm:request_queue_time_seconds: a request's mean wait to be scheduled "
               "(for room in the KV cache or the batch), median over rounds",
               nullable=True),  # absent from data measured before it (schema.COLUMNS_ADDED)
        Column("client_cpu_max", "float", "cores", role=CLIENT_LOAD),
    ),
)



def measure_bandwidth(python: str, mib: int) -> dict:
    proc = subprocess.run([python, BANDWIDTH_SCRIPT, str(mib)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"the bandwidth copy failed: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def chat(server, words: int, output_tokens: int, rng: random.Random) -> HttpRequest:
    return HttpRequest.chat([{"role": "user", "content": random_words(words, rng)}], server.model, output_tokens,
                            ignore_eos=True)


def stream_tpot_ms(timings) -> float | None:
    """The median TPOT of the requests whose stream carried at least half their tokens as messages of their own,
    or None where none did. A starved API server merges a stream's tokens into a few messages: the first and last
    then arrive together, and (last - first) / (tokens - 1) reads a step far shorter than any (CI: 0.02 ms against a
    4 ms floor)."""
    timed = [t.tpot_s * 1000 for t in timings
             if t.tpot_s is not None and t.output_tokens and len(t.itl_s) + 1 >= t.output_tokens / 2]
    return statistics.median(timed) if timed else None


@register
class Capacity(Experiment):
    name = "capacity"
    title = {"zh": "带宽下限、显存与 KV 容量", "en": "Bandwidth floor, memory and KV capacity"}
    datasets = (BANDWIDTH, DECODE_FLOOR, MEMORY, KNEE)
    attachable = False  # the servers' memory flags are the variables

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("capacity", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    # ---- servers ----------------------------------------------------------------------------------
    def memory_spec(self, profile, value: str, facts_only: bool = False) -> ServerSpec:
        flag = self.sizes(profile)["memory"]["flag"]
        env = (("VLLM_CPU_KVCACHE_SPACE", ""),) if profile.name == "cpu" else ()  # else it overrides the flag
        readable = f"{int(value) >> 20}MiB" if flag == "--kv-cache-memory-bytes" else value
        return ServerSpec("chat", (flag, value), env, label=f"capacity-{readable}", starts_alone=True,
                          facts_only=facts_only)

    def floor_spec(self, profile) -> ServerSpec:
        """The larger chat model's server, for its decode floor only (the chat model's is taken on a memory
        setting's server)."""
        floor = self.sizes(profile)["floor"]
        return ServerSpec("chat_large", tuple(floor.get("large_args", ())), label="capacity-floor",
                          shared_memory=tuple(floor.get("large_memory", ())))

    def plan(self, profile):
        s = self.sizes(profile)
        knee, floor = s["knee"], s["floor"]
        per_sweep = sum((knee["rounds"] + 1) * self.knee_requests(c) for c in knee["concurrency"])
        per_floor = (floor["rounds"] + 1) * floor["requests"]
        steps = [Step(None, f"memory bandwidth: a torch copy of {s['bandwidth_mib']} MiB", 0, 10)]
        full = s["memory"]["full"]
        chat_floor = "chat" in self.floor_roles(s)
        steps += [Step(self.memory_spec(profile, v), f"{s['memory']['flag']} {v}: concurrency {list(knee['concurrency'])}"
                       + ("; the chat model's decode floor" if chat_floor and v == full[-1] else ""),
                       per_sweep + (per_floor if chat_floor and v == full[-1] else 0), 60) for v in full]
        steps += [Step(self.memory_spec(profile, v, facts_only=True), f"{s['memory']['flag']} {v}: start-up facts", 0, 0)
                  for v in s["memory"]["facts_only"]]
        if "chat_large" in self.floor_roles(s):
            steps.append(Step(self.floor_spec(profile), "the larger chat model's decode floor", per_floor, 30))
        return steps

    @staticmethod
    def floor_roles(s: dict) -> tuple[str, ...]:
        """Whose decode floor is measured (sizes that predate the larger model name none: the chat model's)."""
        return tuple(s["floor"].get("roles", ("chat",)))

    @staticmethod
    def knee_requests(concurrency: int) -> int:
        return max(2 * concurrency, 32)

    # ---- the run ----------------------------------------------------------------------------------
    def run(self, ctx):
        s = self.sizes(ctx.profile)
        if not ctx.skipped(BANDWIDTH) and not ctx.staging.rows(BANDWIDTH):  # first, while the device is idle
            measured = measure_bandwidth(ctx.pool.python, s["bandwidth_mib"])
            ctx.record(BANDWIDTH, {k: measured[k] for k in ("device", "buffer_mib", "bandwidth_gb_s", "threads", "torch")},
                       servers=())
        bandwidth = self.bandwidth(ctx)
        roles = self.floor_roles(s)
        for value in s["memory"]["full"]:
            server = self.memory(ctx, value, s)
            if server is not None:
                self.knee(ctx, server, value, s)
                if value == s["memory"]["full"][-1] and "chat" in roles:
                    self.decode_floor(ctx, server, "chat", s, bandwidth)
        for value in s["memory"]["facts_only"]:
            self.memory(ctx, value, s, facts_only=True)
        if "chat_large" in roles and not ctx.done(DECODE_FLOOR, model=ctx.model("chat_large").name):
            self.decode_floor(ctx, ctx.server(self.floor_spec(ctx.profile)), "chat_large", s, bandwidth)

    def bandwidth(self, ctx) -> float:
        rows = (BANDWIDTH.read(ctx.staging.published / BANDWIDTH.file_name).to_dict("records") if ctx.skipped(BANDWIDTH)
                else ctx.staging.rows(BANDWIDTH))
        return rows[0]["bandwidth_gb_s"]

    # ---- decode against the bandwidth floor ----------------------------------------------------------
    def decode_floor(self, ctx, server, role: str, s: dict, bandwidth: float) -> None:
        model = ctx.model(role)
        if ctx.done(DECODE_FLOOR, model=model.name):
            return
        f = s["floor"]
        load = ctx.load(server, workers=1)
        tpots, cpu, merged = [], 0.0, 0
        for r in range(f["rounds"] + 1):
            rng = random.Random(f"floor-{model.name}-{r}")
            batch = load.run([chat(server, f["prompt_words"], f["output_tokens"], rng) for _ in range(f["requests"])], 1)
            if r:
                tpot_ms = stream_tpot_ms(batch.timings)
                merged += tpot_ms is None
                tpots += [tpot_ms] if tpot_ms is not None else []
                cpu = max(cpu, batch.worker_cpu_max)
        if merged:
            ctx.log(f"  {model.name}: in {merged} of {f['rounds']} rounds the API server merged each answer's tokens "
                    "into a few messages (it fell behind the engine: a CPU busy with other work?); those rounds time "
                    "no step")
        if not tpots:
            ctx.log(f"  {model.name}: no round timed a decode step: no row (rerun capacity on an idle host)")
            return
        weight_gb = decode_weight_bytes(json.loads((Path(model.path) / "config.json").read_text())) / 1e9
        floor_ms = weight_gb / bandwidth * 1000
        tpot = spread(tpots)
        ctx.log(f"  {model.name}: {tpot[0]:.2f} ms per token at one request; floor {floor_ms:.2f} ms")
        if tpot[0] < floor_ms:  # the copy understated the device: the row shows it (floor share over 100 %)
            ctx.log(f"  {model.name}: a step took less than the floor, so the copy's {bandwidth:.1f} GB/s understated "
                    "this device (another process's memory traffic during the copy, or a model small enough to be "
                    "read from the CPU's cache); no time beyond the floor is recorded: rerun capacity on an idle host")
        ctx.record(DECODE_FLOOR, {"model": model.name, "weights": model.weights, "weight_gb": weight_gb,
                                  "bandwidth_gb_s": bandwidth, "floor_ms": floor_ms, "output_tokens": f["output_tokens"],
                                  "rounds": len(tpots), "tpot_ms": tpot[0], "tpot_ms_min": tpot[1],
                                  "tpot_ms_max": tpot[2], "floor_share_pct": 100 * floor_ms / tpot[0],
                                  "beyond_floor_ms": tpot[0] - floor_ms if tpot[0] >= floor_ms else None,
                                  "client_cpu_max": cpu}, derived_from=(BANDWIDTH,))

    # ---- memory setting, KV tokens and the knee --------------------------------------------------------
    def memory(self, ctx, value: str, s: dict, facts_only: bool = False):
        """Start the server of this memory setting and record what vLLM logged; the server, or None if it did not
        start (or was started for its facts only)."""
        flag, knee = s["memory"]["flag"], s["knee"]
        todo = not ctx.done(MEMORY, setting=f"{flag} {value}") or (not facts_only and not all(
            ctx.done(KNEE, setting=f"{flag} {value}", concurrency=c) for c in knee["concurrency"]))
        if not todo:
            return None
        row = {"setting": f"{flag} {value}",
               "gpu_memory_utilization": float(value) if flag == "--gpu-memory-utilization" else None}
        try:
            server = ctx.server(self.memory_spec(ctx.profile, value, facts_only))
        except ServerFailed as exc:  # too little memory for the weights and a KV cache is the finding here
            ctx.record(MEMORY, row | {"started": False, "error": exc.reason[:300]})
            return None
        facts = server.facts
        if not ctx.done(MEMORY, setting=row["setting"]):
            request_tokens = None if facts_only else self.request_tokens(ctx, server, knee)
            ctx.record(MEMORY, row | {
                "started": True, "model_load_gib": facts.model_load_gib, "kv_cache_gib": facts.kv_cache_gib,
                "kv_cache_tokens": facts.kv_cache_tokens, "max_concurrency": facts.max_concurrency,
                "max_concurrency_tokens": facts.max_concurrency_tokens, "request_tokens": request_tokens,
                "requests_fit": facts.kv_cache_tokens / request_tokens
                if request_tokens and facts.kv_cache_tokens else None})
        return None if facts_only else server

    @staticmethod
    def request_tokens(ctx, server, knee: dict) -> int:
        """One knee request's tokens as vLLM counts them (prompt with the chat template, and the output)."""
        batch = ctx.load(server, workers=1).run([chat(server, knee["prompt_words"], knee["output_tokens"],
                                                      random.Random("knee-shape"))], 1)
        timing = batch.timings[0]
        return timing.prompt_tokens + timing.output_tokens

    def knee(self, ctx, server, value: str, s: dict) -> None:
        flag, knee = s["memory"]["flag"], s["knee"]
        setting = f"{flag} {value}"
        for concurrency in knee["concurrency"]:
            if ctx.done(KNEE, setting=setting, concurrency=concurrency):
                continue
            load = ctx.load(server, workers=default_workers(concurrency))
            count = self.knee_requests(concurrency)
            rates, ttft50, ttft99, tpot50, queued, preempted, cpu = [], [], [], [], [], 0, 0.0
            for r in range(knee["rounds"] + 1):  # round 0 warms this load point up and is not kept
                rng = random.Random(f"knee-{setting}-{concurrency}-{r}")
                before = server.metrics()
                batch = load.run([chat(server, knee["prompt_words"], knee["output_tokens"], rng)
                                  for _ in range(count)], concurrency)
                delta = server.metrics() - before
                if not r:
                    continue
                summary = batch.summary()
                rates.append(summary.output_tok_s)
                ttft50.append(summary.ttft_median_ms)
                ttft99.append(percentile([t.ttft_s * 1000 for t in batch.timings], 99))
                tpot50.append(summary.tpot_median_ms)
                queued.append(histogram_mean_ms(delta, "vllm:request_queue_time_seconds"))
                preempted += round(delta.get("vllm:num_preemptions", 0.0))
                cpu = max(cpu, batch.worker_cpu_max)
            rate = spread(rates)
            ctx.log(f"  {setting}, {concurrency} in flight: {rate[0]:,.0f} tok/s, TTFT p50 "
                    f"{statistics.median(ttft50):,.0f} ms, {preempted} preemptions")
            ctx.record(KNEE, {"setting": setting, "concurrency": concurrency, "requests": count,
                              "rounds": knee["rounds"], "output_tok_s": rate[0], "output_tok_s_min": rate[1],
                              "output_tok_s_max": rate[2], "ttft_p50_ms": statistics.median(ttft50),
                              "ttft_p99_ms": statistics.median(ttft99), "tpot_p50_ms": statistics.median(tpot50),
                              "preemptions": preempted, "queue_ms": statistics.median(queued),
                              "client_cpu_max": cpu})
