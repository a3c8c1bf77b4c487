"""Pooling limits: how far an embedding endpoint is from the device's matrix-multiply ceiling, where
a request's time goes, and what the memory setting changes for a pooling server."""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

from measure.experiment import POOLING, Experiment, ServerSpec, Step, register
from measure.harness.client import gather_limited
from measure.harness.gemm_peak import __file__ as GEMM_SCRIPT
from measure.models import TextDims
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import sentences

PEAK = DatasetSchema(
    name="pooling_limits.matmul_peak",
    title={"zh": "本设备的矩阵乘峰值（实测）", "en": "This device's matrix-multiply peak (measured)"},
    key=("device",),
    columns=(
        Column("device", "str"),
        Column("side", "int", "", "square matrices of this side"),
        Column("dtype", "str", doc="bfloat16 on a GPU; on a CPU the faster of bfloat16 and float32, timed briefly", nullable=True),
        Column("tflops", "float", "TFLOP/s", "dense torch matmul in that dtype, after warm-up"),
        Column("threads", "int", "", "torch CPU threads (CPU) or host threads (GPU)"),
        Column("torch", "str"),
    ),
)
ROOFLINE = DatasetSchema(
    name="pooling_limits.roofline",
    title={"zh": "嵌入端点离算力上限有多远，时间花在哪里", "en": "How far embeddings are from the compute ceiling, and where the time goes"},
    key=("model", "batch_size"),
    columns=(
        Column("model", "str"),
        Column("weights", "str"),
        Column("batch_size", "int", "inputs"),
        Column("tokens_per_s", "float", "tok/s", "prompt tokens / client latency, median"),
        Column("tokens_per_s_min", "float", "tok/s", "slowest timed repeat", nullable=True),
        Column("tokens_per_s_max", "float", "tok/s", "fastest timed repeat", nullable=True),
        Column("repeats", "int", "", "timed repeats", nullable=True),
        Column("matmul_params", "int", "params", "weights each token is multiplied through (no embedding table, no LM head)"),
        Column("achieved_tflops", "float", "TFLOP/s", "tokens/s × 2 × matmul_params"),
        Column("peak_share_pct", "float", "%", "achieved / measured matmul peak"),
        Column("client_ms", "float", "ms", "request latency seen by the client, mean over the timed repeats"),
        Column("engine_ms", "float", "ms", "vllm:e2e_request_latency_seconds, mean over the batch's requests", nullable=True),
        Column("queue_ms", "float", "ms", "vllm:request_queue_time_seconds, mean", nullable=True),
        Column("prefill_ms", "float", "ms", "vllm:request_prefill_time_seconds, mean", nullable=True),
        Column("outside_engine_ms", "float", "ms", "client − engine, both means over the same repeats: HTTP, JSON, "
               "tokenising, output encoding", nullable=True),
        Column("client_cpu_share", "float", "", "client CPU seconds / wall seconds", role=CLIENT_LOAD),
    ),
)
MEMORY = DatasetSchema(
    name="pooling_limits.memory",
    title={"zh": "池化服务器的内存设置", "en": "Memory settings of a pooling server"},
    key=("model", "setting"),
    columns=(
        Column("model", "str"),
        Column("setting", "str", doc="the flag or variable that sizes the KV cache, with its value"),
        Column("kv_cache_gib", "float", "GiB", nullable=True),
        Column("kv_cache_tokens", "int", "tokens", nullable=True),
        Column("batch_size", "int", "inputs"),
        Column("tokens_per_s", "float", "tok/s", "median over repeats"),
        Column("tokens_per_s_min", "float", "tok/s", "slowest timed repeat", nullable=True),
        Column("tokens_per_s_max", "float", "tok/s", "fastest timed repeat", nullable=True),
        Column("repeats", "int", "", "timed repeats", nullable=True),
    ),
)


def matmul_params(config: dict) -> int:
    """Parameters in the matrices every token passes through: attention q/k/v/o and the MLP."""
    d = TextDims.of(config)
    attention = 2 * d.hidden * d.heads * d.head_dim + 2 * d.hidden * d.kv_heads * d.head_dim
    return d.layers * (attention + (3 if d.gated_mlp else 2) * d.hidden * d.intermediate)


def measure_peak(python: str, side: int, dtype: str | None = None) -> dict:
    proc = subprocess.run([python, GEMM_SCRIPT, str(side), *([dtype] if dtype else [])], capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"matmul peak failed: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@register
class PoolingLimits(Experiment):
    name = "pooling_limits"
    title = {"zh": "池化的上限：算力与内存", "en": "Pooling limits: compute and memory"}
    datasets = (PEAK, ROOFLINE, MEMORY)
    attachable = False

    @staticmethod
    def roles(profile) -> list[str]:
        return [r for r in ("embedding", "embedding_real") if r in profile.models]

    @staticmethod
    def memory_settings(profile) -> dict[str, tuple[tuple, tuple]]:
        """setting label -> (extra args, extra env); the first is the profile's own default."""
        if profile.name == "cpu":
            default = profile.env.get("VLLM_CPU_KVCACHE_SPACE", "4")
            return {f"VLLM_CPU_KVCACHE_SPACE={gib}": ((), () if gib == default else (("VLLM_CPU_KVCACHE_SPACE", gib),))
                    for gib in dict.fromkeys((default, "1", "4"))}
        # Every setting as an explicit flag: the default share differs between vLLM versions (0.26.0: 0.92).
        return {f"--gpu-memory-utilization {u}": (("--gpu-memory-utilization", u), ())
                for u in profile.sizes.get("memory_utilizations", ("0.9", "0.5", "0.1"))}

    @staticmethod
    def spec(role: str, args=(), env=(), alone: bool = False) -> ServerSpec:
        return ServerSpec(role, POOLING + tuple(args), tuple(env), label=f"pooling-{role}", starts_alone=alone)

    @staticmethod
    def batches(profile) -> tuple[int, ...]:
        return profile.sizes.get("roofline_batches", (1, 16, max(profile.sizes["embedding_batches"])))

    def plan(self, profile):
        reps = profile.sizes["repeats"] + profile.sizes["warmup"]
        steps = [Step(self.spec(role), f"roofline: batches {self.batches(profile)} with /metrics deltas", reps * 3, 20)
                 for role in self.roles(profile)]
        steps += [Step(self.spec("embedding", a, e, alone=True), f"memory: {label}, batch {max(self.batches(profile))}", reps, 10)
                  for label, (a, e) in self.memory_settings(profile).items()]
        return steps

    def run(self, ctx):
        if not ctx.skipped(PEAK) and not ctx.staging.rows(PEAK):  # first, while no request runs on the device
            peak = measure_peak(ctx.pool.python, 8192 if ctx.profile.name == "gpu" else 2048)
            ctx.record(PEAK, {k: peak[k] for k in ("device", "side", "dtype", "tflops", "threads", "torch")})
        peak_rows = (PEAK.read(ctx.staging.published / PEAK.file_name).to_dict("records") if ctx.skipped(PEAK)
                     else ctx.staging.rows(PEAK))
        peak_tflops = peak_rows[0]["tflops"]
        texts = sentences(max(self.batches(ctx.profile)), ctx.sizes["words_per_sentence"])
        for role in self.roles(ctx.profile):
            model = ctx.model(role)
            todo = [b for b in self.batches(ctx.profile) if not ctx.done(ROOFLINE, model=model.name, batch_size=b)]
            if not todo:
                continue
            server = ctx.server(self.spec(role))
            client = ctx.client(server)
            params = matmul_params(json.loads((Path(model.path) / "config.json").read_text()))
            for batch in todo:
                ctx.record(ROOFLINE, self.roofline_row(ctx, server, client, model, texts[:batch], params, peak_tflops))
        model = ctx.model("embedding")
        batch = max(self.batches(ctx.profile))
        for label, (args, env) in self.memory_settings(ctx.profile).items():
            if ctx.done(MEMORY, model=model.name, setting=label):
                continue
            server = ctx.server(self.spec("embedding", args, env, alone=True))  # its memory budget is the point
            client = ctx.client(server)
            self.requests(ctx, client, texts[:batch], ctx.sizes["warmup"])
            timed = self.requests(ctx, client, texts[:batch], ctx.sizes["repeats"])
            ctx.record(MEMORY, {"model": model.name, "setting": label, "kv_cache_gib": server.facts.kv_cache_gib,
                                "kv_cache_tokens": server.facts.kv_cache_tokens, "batch_size": batch,
                                **self.rates(timed)})

    @staticmethod
    def rates(timed) -> dict:
        """The batch's tokens/s: median of the timed repeats, with the slowest and the fastest."""
        rates = [r.prompt_tokens / r.e2e_s for r in timed.results]
        return {"tokens_per_s": statistics.median(rates), "tokens_per_s_min": min(rates),
                "tokens_per_s_max": max(rates), "repeats": len(rates)}

    @staticmethod
    def requests(ctx, client, inputs, count: int):
        batch = ctx.run(gather_limited([lambda: client.embed(inputs)] * count, 1))
        if batch.errors:
            raise RuntimeError(f"/v1/embeddings failed: {batch.errors[:2]}")
        return batch

    def roofline_row(self, ctx, server, client, model, inputs, params, peak_tflops) -> dict:
        self.requests(ctx, client, inputs, ctx.sizes["warmup"])
        before = server.metrics()
        timed = self.requests(ctx, client, inputs, ctx.sizes["repeats"])
        delta = server.metrics() - before
        rates = self.rates(timed)
        tokens_per_s = rates["tokens_per_s"]
        # A mean, like the engine's histograms give: each repeat's latency covers its inputs' time in the engine, so
        # the difference of the means cannot go negative (a median against a mean did, when one repeat was slow).
        client_ms = statistics.fmean(r.e2e_s for r in timed.results) * 1000

        def mean_ms(name):
            count = delta.get(name + "_count", 0.0)
            return delta.get(name + "_sum", 0.0) / count * 1000 if count else None

        # The engine counts each input as a request: the histograms give the mean over the batch's inputs.
        engine = mean_ms("vllm:e2e_request_latency_seconds")
        achieved = tokens_per_s * 2 * params / 1e12
        return {"model": model.name, "weights": model.weights, "batch_size": len(inputs), **rates,
                "matmul_params": params, "achieved_tflops": achieved, "peak_share_pct": achieved / peak_tflops * 100,
                "client_ms": client_ms, "engine_ms": engine, "queue_ms": mean_ms("vllm:request_queue_time_seconds"),
                "prefill_ms": mean_ms("vllm:request_prefill_time_seconds"),
                "outside_engine_ms": client_ms - engine if engine is not None else None,
                "client_cpu_share": timed.client_cpu_s / timed.wall_s}
