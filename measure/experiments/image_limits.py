"""Image size limits: the same images under several ``max_pixels`` limits, set for the whole server
(``--mm-processor-kwargs``) or in one request (``mm_processor_kwargs``), and what each limit does to the image's
tokens, to TTFT and to the KV cache one image takes.

Every request carries an image never sent before, so TTFT includes preprocessing, the vision encoder and the prefill
(a repeated image would skip them). The KV memory an image takes is its prompt tokens × the KV bytes per token the
server's log gives (its KV cache size ÷ the tokens it holds).
"""

from __future__ import annotations

import json
import statistics

from measure.experiment import Experiment, ServerSpec, Step, register, spread
from measure.harness.profiles import vision_unavailable
from measure.harness.server import ServerFailed
from measure.schema import Column, DatasetSchema
from measure.workloads import QUESTION_DIGITS, draw, image_message

DEFAULT = "default"  # no limit: the model's processor decides
TRUSTED = "request, trusted server"  # a per-request limit sent to a server started with --trust-request-mm-kwargs
# Workload sizes per profile (MEASURE_SIZES may replace them: '{"image_limits": {...}}').
SIZES = {
    # context: --max-model-len of every server here (the largest image fits with room to spare; the CPU stand-in's
    # scaled-down model has 4096 positions)
    "cpu": {"limits": (DEFAULT, 262144, 65536), "sides": (448, 896), "images": 3, "warmup": 1, "context": "4096"},
    "gpu": {"limits": (DEFAULT, 1048576, 262144, 65536), "sides": (896, 1344), "images": 5, "warmup": 1,
            "context": "8192"},
}

TOKENS = DatasetSchema(
    name="image_limits.tokens",
    title={"zh": "像素上限下的图像 token、首 token 时间与 KV 占用",
           "en": "Image tokens, TTFT and KV memory under max_pixels limits"},
    key=("set_in", "max_pixels", "side"),
    doc="One request at a time, each with a new image; medians over the images, with the lowest and highest TTFT. "
        "The server-wide limits each have a server of their own; the per-request limits go to the server without one, "
        "and to one started with --trust-request-mm-kwargs.",
    columns=(
        Column("model", "str"),
        Column("weights", "str", doc="dummy | real"),
        Column("set_in", "str", doc="server (--mm-processor-kwargs) | request (mm_processor_kwargs) | request, "
               "trusted server (the same, to a server started with --trust-request-mm-kwargs) | none"),
        Column("max_pixels", "str", doc="the limit in pixels, or default (the processor's own)"),
        Column("side", "int", "px", "the square image's side"),
        Column("accepted", "bool", doc="false: the server refused the limit (the request's answer, or the server's "
               "start, in error)"),
        Column("images", "int", "", "timed requests, a new image each", nullable=True),
        Column("prompt_tokens", "int", "tokens", "per request, image and question, median over images",
               nullable=True),
        Column("ttft_ms", "float", "ms", "median over images", nullable=True),
        Column("ttft_ms_min", "float", "ms", nullable=True),
        Column("ttft_ms_max", "float", "ms", nullable=True),
        Column("kv_mib", "float", "MiB", "prompt tokens × the KV bytes per token of this server", nullable=True),
        Column("encoder_cache_budget_tokens", "int", "tokens", "the server's encoder budget, from its log",
               nullable=True),
        Column("kv_cache_tokens", "int", "tokens", "the server's KV cache, from its log", nullable=True),
        Column("error", "str", doc="why the limit was refused", nullable=True),
    ),
)


def kwargs(limit) -> dict:
    return {"max_pixels": int(limit)}


@register
class ImageLimits(Experiment):
    name = "image_limits"
    title = {"zh": "图像尺寸限制", "en": "Image size limits"}
    datasets = (TOKENS,)
    attachable = False  # the server-wide limit is a server flag

    def unavailable(self, profile, python: str) -> str | None:
        return vision_unavailable(python)

    @staticmethod
    def sizes(profile) -> dict:
        return profile.sizes.get("image_limits", SIZES["cpu" if profile.name == "cpu" else "gpu"])

    @staticmethod
    def spec(where: str, limit, s: dict) -> ServerSpec:
        """The server a point is measured on: the limit in its flags (server), trusting requests' own kwargs
        (request, trusted server), or neither."""
        args = ("--max-model-len", s["context"])
        if where == "server":
            args += ("--mm-processor-kwargs", json.dumps(kwargs(limit), separators=(",", ":")))
            return ServerSpec("vl", args, label=f"vl-max-pixels-{limit}")
        if where == TRUSTED:
            return ServerSpec("vl", args + ("--trust-request-mm-kwargs",), label="vl-trusts-request-kwargs")
        return ServerSpec("vl", args, label="vl-max-pixels-default")

    @staticmethod
    def points(s: dict) -> list[tuple[str, object]]:
        """(set in, limit) of every point: the default, then each limit set on the server, in a request, and in a
        request to a server that trusts requests' processor kwargs."""
        limits = [lim for lim in s["limits"] if lim != DEFAULT]
        return [("none", DEFAULT)] + [(where, lim) for lim in limits for where in ("server", "request", TRUSTED)]

    def plan(self, profile):
        s = self.sizes(profile)
        per_point = len(s["sides"]) * (s["images"] + s["warmup"])
        return [Step(self.spec(where, limit, s), f"max_pixels {limit} set in the {where}: sides {list(s['sides'])} "
                     f"× {s['images']} new images", per_point, per_point * 1.0) for where, limit in self.points(s)]

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        if not ctx.has("vl"):
            return
        model = ctx.model("vl")
        for where, limit in self.points(s):
            todo = [side for side in s["sides"] if not ctx.done(TOKENS, set_in=where, max_pixels=str(limit), side=side)]
            if not todo:
                continue
            base = {"model": model.name, "weights": model.weights, "set_in": where, "max_pixels": str(limit)}
            try:
                server = ctx.server(self.spec(where, limit, s))
            except ServerFailed as exc:  # a release without the flag: the finding
                for side in todo:
                    ctx.record(TOKENS, base | {"side": side, "accepted": False, "error": exc.reason[:300]})
                continue
            for side in todo:
                ctx.record(TOKENS, base | self.measure(ctx, server, where, limit, side, s))

    @staticmethod
    def measure(ctx, server, where: str, limit, side: int, s: dict) -> dict:
        client = ctx.client(server)
        extra = {"extra_body": {"mm_processor_kwargs": kwargs(limit)}} if where in ("request", TRUSTED) else {}
        facts = server.facts
        kv_mib_per_token = (facts.kv_cache_gib * 1024 / facts.kv_cache_tokens
                            if facts.kv_cache_gib and facts.kv_cache_tokens else None)
        startup = {"encoder_cache_budget_tokens": facts.encoder_cache_budget_tokens,
                   "kv_cache_tokens": facts.kv_cache_tokens}
        tokens, ttfts = [], []
        for k in range(s["warmup"] + s["images"]):
            # a new image every time, the same images at every limit (indexed by side and k only)
            url, _, _ = draw(side, 1000 + k)
            r = ctx.run(client.chat_stream(image_message(url, QUESTION_DIGITS), max_tokens=1, **extra))
            if not r.ok and where == "request" and r.error.startswith("400"):
                # the server refuses a request's own processor kwargs: what this release does by default
                ctx.log(f"  max_pixels {limit} in a request, side {side}: refused ({r.error[:120]})")
                return {"side": side, "accepted": False, "error": r.error[:300]} | startup
            if not r.ok:
                raise RuntimeError(f"image request failed (max_pixels {limit} in the {where}, side {side}): {r.error}")
            if k >= s["warmup"]:
                tokens.append(r.prompt_tokens)
                ttfts.append(r.ttft_s * 1000)
        ttft = spread(ttfts)
        prompt = int(statistics.median(tokens))
        ctx.log(f"  max_pixels {limit} ({where}), side {side}: {prompt} tokens, TTFT {ttft[0]:,.1f} ms")
        return {"side": side, "accepted": True, "images": s["images"], "prompt_tokens": prompt, "ttft_ms": ttft[0],
                "ttft_ms_min": ttft[1], "ttft_ms_max": ttft[2],
                "kv_mib": prompt * kv_mib_per_token if kv_mib_per_token else None} | startup
