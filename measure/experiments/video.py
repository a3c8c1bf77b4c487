"""Video input: how many prompt tokens a video of N frames at a given size becomes, how long its first token takes,
and what allowing videos at all costs the KV cache at start-up (``--limit-mm-per-prompt``).

Videos are drawn with Pillow (a rectangle crossing the frame) and sent as vLLM's ``video/jpeg`` data URLs, every
request a new video, so the processor cache never answers for the encoder. Frames are sent as they are: vLLM takes
the frames it is given, it samples none.
"""

from __future__ import annotations

import json
import statistics

from measure.experiment import Experiment, ServerSpec, Step, register, spread
from measure.harness.profiles import vision_unavailable
from measure.harness.server import ServerFailed
from measure.schema import Column, DatasetSchema
from measure.workloads import QUESTION_VIDEO, video, video_message

# Workload sizes per profile (MEASURE_SIZES may replace them: '{"video": {...}}').
SIZES = {
    "cpu": {"frames": (2, 4, 8), "sides": (112, 224), "repeats": 2, "warmup": 1, "max_model_len": 4096},  # tiny model's own
    "gpu": {"frames": (4, 8, 16, 32), "sides": (224, 448, 896), "repeats": 5, "warmup": 1, "max_model_len": 32768},
}
LIMITS = {"video 0": {"image": 1, "video": 0}, "video 1": {"image": 1, "video": 1}}

FRAMES = DatasetSchema(
    name="video.frames",
    title={"zh": "视频帧数、尺寸与 token 数", "en": "Video frames, size and tokens"},
    key=("frames", "side"),
    doc="One request at a time, each with a new video; TTFT median over the timed requests (after the warm-up).",
    columns=(
        Column("model", "str"),
        Column("weights", "str", doc="dummy | real"),
        Column("frames", "int", "frames", "frames sent in the video"),
        Column("side", "int", "px", "width and height of every frame"),
        Column("prompt_tokens", "int", "tokens", "the whole prompt (video, question, chat template)"),
        Column("video_tokens", "int", "tokens", "prompt tokens beyond the same question without a video"),
        Column("tokens_per_frame", "float", "tokens", "video tokens ÷ frames"),
        Column("ttft_ms", "float", "ms", "median"),
        Column("ttft_ms_min", "float", "ms"),
        Column("ttft_ms_max", "float", "ms"),
        Column("requests", "int", "requests", "timed"),
    ),
)
STARTUP = DatasetSchema(
    name="video.startup_memory",
    title={"zh": "允许视频时启动留给 KV 缓存的空间", "en": "KV cache at start-up with and without videos allowed"},
    key=("limit_mm",),
    doc="Two starts of the same server, each with the device to itself, differing only in whether one video per "
        "prompt is allowed: vLLM sizes its encoder budget and its memory profiling by the largest item allowed.",
    columns=(
        Column("limit_mm", "str", doc="video 0 | video 1 (one image allowed in both)"),
        Column("limit_mm_per_prompt", "str", doc="the --limit-mm-per-prompt value"),
        Column("max_model_len", "int", "tokens"),
        Column("started", "bool"),
        Column("kv_cache_tokens", "int", "tokens", nullable=True),
        Column("kv_cache_gib", "float", "GiB", nullable=True),
        Column("encoder_cache_budget_tokens", "int", "tokens", nullable=True),
        Column("max_concurrency", "float", "×", nullable=True),
        Column("error", "str", doc="the last error line when it did not start", nullable=True),
    ),
)


@register
class Video(Experiment):
    name = "video"
    title = {"zh": "视频输入", "en": "Video input"}
    datasets = (FRAMES, STARTUP)
    attachable = False  # it sets --limit-mm-per-prompt

    def unavailable(self, profile, python):
        return vision_unavailable(python)

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("video", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    def spec(self, profile, limit_name: str) -> ServerSpec:
        """The serving server allows one video and measures; the other only reports its start-up facts."""
        value = json.dumps(LIMITS[limit_name], separators=(",", ":"))
        serving = limit_name == "video 1"
        return ServerSpec("vl", ("--max-model-len", str(self.sizes(profile)["max_model_len"]),
                                 "--limit-mm-per-prompt", value),
                          label=f"vl-{limit_name.replace(' ', '-')}", starts_alone=True, facts_only=not serving)

    def plan(self, profile):
        s = self.sizes(profile)
        points = len(s["frames"]) * len(s["sides"])
        per = s["warmup"] + s["repeats"]
        return [Step(self.spec(profile, "video 0"), "start-up facts only: no video allowed", 0, 5),
                Step(self.spec(profile, "video 1"), f"{points} video sizes ({', '.join(map(str, s['frames']))} "
                     f"frames × {', '.join(map(str, s['sides']))} px) × {per} new videos, one at a time",
                     points * per, points * per * (0.5 if profile.name != "cpu" else 3))]

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        for name in ("video 0", "video 1"):
            if ctx.done(STARTUP, limit_mm=name) and (name == "video 0" or self.frames_done(ctx, s)):
                continue
            spec = self.spec(ctx.profile, name)
            row = {"limit_mm": name, "limit_mm_per_prompt": json.dumps(LIMITS[name], separators=(",", ":")),
                   "max_model_len": s["max_model_len"]}
            try:
                server = ctx.server(spec)
            except ServerFailed as exc:  # a server that cannot start is this row's answer
                ctx.record(STARTUP, row | {"started": False, "error": exc.reason[:300]})
                if name == "video 1":
                    raise  # and no video was measured: the run must say so
                continue
            if not ctx.done(STARTUP, limit_mm=name):
                f = server.facts
                ctx.record(STARTUP, row | {"started": True, "kv_cache_tokens": f.kv_cache_tokens,
                                           "kv_cache_gib": f.kv_cache_gib, "max_concurrency": f.max_concurrency,
                                           "encoder_cache_budget_tokens": f.encoder_cache_budget_tokens})
            if name == "video 1":
                self.run_frames(ctx, server, s)

    @staticmethod
    def frames_done(ctx, s) -> bool:
        return all(ctx.done(FRAMES, frames=f, side=side) for f in s["frames"] for side in s["sides"])

    def run_frames(self, ctx, server, s):
        client = ctx.client(server)
        model = ctx.model("vl")
        text_only = ctx.run(client.chat_stream([{"role": "user", "content": QUESTION_VIDEO}], max_tokens=1))
        if not text_only.ok:
            raise RuntimeError(f"a text-only request failed: {text_only.error[:300]}")
        index = 0
        for side in s["sides"]:
            for frames in s["frames"]:
                if ctx.done(FRAMES, frames=frames, side=side):
                    index += s["warmup"] + s["repeats"]
                    continue
                ttfts, tokens = [], set()
                for k in range(s["warmup"] + s["repeats"]):
                    index += 1  # a new video every request: the encoder runs every time
                    r = ctx.run(client.chat_stream(video_message(video(side, frames, index), QUESTION_VIDEO),
                                                   max_tokens=1))
                    if not r.ok:
                        raise RuntimeError(f"a video of {frames} frames at {side} px failed: {r.error[:300]}")
                    if k >= s["warmup"]:
                        ttfts.append(r.ttft_s * 1000)
                        tokens.add(r.prompt_tokens)
                prompt = statistics.median(tokens)
                video_tokens = int(prompt - text_only.prompt_tokens)
                ttft = spread(ttfts)
                ctx.log(f"  {frames} frames × {side} px: {prompt:,.0f} prompt tokens, TTFT {ttft[0]:,.0f} ms")
                ctx.record(FRAMES, {"model": model.name, "weights": model.weights, "frames": frames, "side": side,
                                    "prompt_tokens": int(prompt), "video_tokens": video_tokens,
                                    "tokens_per_frame": video_tokens / frames, "ttft_ms": ttft[0],
                                    "ttft_ms_min": ttft[1], "ttft_ms_max": ttft[2], "requests": len(ttfts)})
