"""Multimodal input (the article's sections 2 and 2-1): start-up memory, image tokens and TTFT vs
side, repeated images and the caches, accuracy (real weights only).

Images are drawn with Pillow — white background, one coloured rectangle, four digits, fixed seed —
and sent as data URLs, so no outside address is ever fetched.
"""

from __future__ import annotations

import base64
import json
import statistics

import pandas as pd

from measure.experiment import Experiment, ServerSpec, Step, register
from measure.harness.loadgen import HttpRequest
from measure.harness.logparse import parse_startup
from measure.harness.profiles import vision_unavailable
from measure.harness.server import ServerFailed
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import QUESTION_COLOUR, QUESTION_DIGITS, UNTRUSTED_PAYLOADS, draw, image_message

ARTICLE_CARD_GIB = 8  # the article's laptop card; emulated on larger GPUs
SERVING_CONTEXT = "4096"  # --max-model-len of every serving VL server here
MODEL_CONTEXT = "model's own"  # no --max-model-len: the model's config decides (262,144 for Qwen3-VL)

STARTUP_MEMORY = DatasetSchema(
    name="multimodal.startup_memory",
    title={"zh": "启动时的编码器预算与 KV 空间", "en": "Encoder budget and KV space at start-up"},
    key=("memory_condition", "max_model_len", "limit_mm"),
    columns=(
        Column("memory_condition", "str", doc="whole device | 8 GB card emulated"),
        Column("max_model_len", "str", doc="--max-model-len: 4096, or the model's own (no flag)"),
        Column("limit_mm", "str", doc="--limit-mm-per-prompt value, or default"),
        Column("started", "bool", doc="false: vLLM refused to start (e.g. no memory left for the KV cache)"),
        Column("encoder_cache_budget_tokens", "int", "tokens", nullable=True),
        Column("kv_cache_tokens", "int", "tokens", nullable=True),
        Column("max_concurrency", "float", "×", nullable=True),
        Column("error", "str", doc="the last error line of the log when it did not start", nullable=True),
    ),
)
SIZE_HINT_GAIN = DatasetSchema(
    name="multimodal.size_hint_gain",
    title={"zh": "尺寸提示带来的 KV 空间", "en": "KV space gained by size hints"},
    key=("memory_condition", "max_model_len"),
    columns=(
        Column("memory_condition", "str"),
        Column("max_model_len", "str"),
        Column("kv_tokens_count_only", "int", "tokens", nullable=True),
        Column("kv_tokens_size_hints", "int", "tokens", nullable=True),
        Column("kv_ratio", "float", "×", "size hints / count only"),
    ),
)
IMAGE_TOKENS = DatasetSchema(
    name="multimodal.image_tokens",
    title={"zh": "图像边长、token 数与首 token 时间", "en": "Image side, tokens and TTFT"},
    key=("side",),
    columns=(
        Column("side", "int", "px"),
        Column("images", "int"),
        Column("prompt_tokens", "int", "tokens", "median over images"),
        Column("ttft_ms", "float", "ms", "median over images and repeats"),
    ),
)
SIDE_DOUBLING = DatasetSchema(
    name="multimodal.side_doubling",
    title={"zh": "边长翻倍时的倍数", "en": "Ratios when the side doubles"},
    key=("side_from", "side_to"),
    columns=(
        Column("side_from", "int", "px"),
        Column("side_to", "int", "px"),
        Column("token_ratio", "float", "×"),
        Column("ttft_ratio", "float", "×", nullable=True),
    ),
)
REPEAT_REQUESTS = DatasetSchema(
    name="multimodal.repeat_requests",
    title={"zh": "同一张图问三次：每个请求的缓存命中", "en": "One image asked three times: cache hits per request"},
    key=("image", "ask"),
    columns=(
        Column("image", "int"),
        Column("ask", "int", "", "1: digits, 2: digits again, 3: colour"),
        Column("side", "int", "px"),
        Column("ttft_ms", "float", "ms"),
        Column("prompt_tokens", "int", "tokens"),
        Column("mm_cache_queries", "int", "", "delta of vllm:mm_cache_queries"),
        Column("mm_cache_hits", "int", "", "delta of vllm:mm_cache_hits"),
        Column("prefix_cache_queries", "int", "tokens", "delta of vllm:prefix_cache_queries"),
        Column("prefix_cache_hits", "int", "tokens", "delta of vllm:prefix_cache_hits"),
    ),
)
REPEAT_SUMMARY = DatasetSchema(
    name="multimodal.repeat_summary",
    title={"zh": "重复图像的处理器缓存命中", "en": "Processor-cache hits for repeated images"},
    key=("images", "asks"),
    columns=(
        Column("images", "int"),
        Column("asks", "int", "", "questions per image"),
        Column("mm_cache_queries", "int"),
        Column("mm_cache_hits", "int"),
    ),
)
PROCESSOR_CACHE = DatasetSchema(
    name="multimodal.processor_cache",
    title={"zh": "处理器缓存开与关", "en": "Processor cache on and off"},
    key=("mm_processor_cache_gb",),
    columns=(
        Column("mm_processor_cache_gb", "int", "GiB", "--mm-processor-cache-gb"),
        Column("server_rss_mib", "float", "MiB", "resident memory of every process of the server, after the requests"),
        Column("first_ttft_ms", "float", "ms", "median TTFT of an image's first request"),
        Column("repeat_ttft_ms", "float", "ms", "median TTFT when the same image is sent again"),
        Column("images", "int"),
    ),
)
MULTI_IMAGE = DatasetSchema(
    name="multimodal.multi_image",
    title={"zh": "一次多张图与并发请求", "en": "Several images per prompt, and concurrent requests"},
    key=("images_per_prompt", "concurrency"),
    columns=(
        Column("images_per_prompt", "int"),
        Column("concurrency", "int", "", "requests in flight at once"),
        Column("prompt_tokens", "int", "tokens", "median"),
        Column("ttft_ms", "float", "ms", "median over requests (new images each time)"),
        Column("requests", "int"),
        Column("client_cpu_max", "float", "", "the load generator's busiest worker, CPU seconds / wall seconds",
               role=CLIENT_LOAD),
    ),
)
UNTRUSTED = DatasetSchema(
    name="multimodal.untrusted_formats",
    title={"zh": "非光栅格式的图像", "en": "Images in non-raster formats"},
    key=("format",),
    columns=(
        Column("format", "str", doc="what the bytes are; the data URL always claims image/png"),
        Column("status", "int", "HTTP status"),
        Column("accepted", "bool", doc="the server answered 200"),
        Column("answer", "str", doc="error text, truncated", nullable=True),
    ),
)
ACCURACY = DatasetSchema(
    name="multimodal.accuracy",
    title={"zh": "读图正确率（仅真实权重）", "en": "Reading accuracy (real weights only)"},
    key=("question",),
    needs_real_weights=True,
    columns=(
        Column("question", "str", doc="colour | digits"),
        Column("correct", "int"),
        Column("total", "int"),
    ),
)


MULTI_MAX = 4
MULTI_POINTS = [(k, 1) for k in range(1, MULTI_MAX + 1)] + [(1, c) for c in (4, 16)]
def limit(count: int, side: int | None = None) -> str:
    image = {"count": count, "width": side, "height": side} if side else count
    return json.dumps({"image": image, "video": 0}, separators=(",", ":"))


@register
class Multimodal(Experiment):
    name = "multimodal"
    title = {"zh": "多模态输入", "en": "Multimodal input"}
    datasets = (STARTUP_MEMORY, SIZE_HINT_GAIN, IMAGE_TOKENS, SIDE_DOUBLING, REPEAT_REQUESTS, REPEAT_SUMMARY, ACCURACY,
                PROCESSOR_CACHE, MULTI_IMAGE, UNTRUSTED)

    def unavailable(self, profile, python: str) -> str | None:
        return vision_unavailable(python)

    @staticmethod
    def sides(profile) -> tuple[int, ...]:
        return profile.sizes.get("image_sides", (224, 448, 672, 896, 1344))

    def limits(self, profile) -> dict[str, str | None]:
        biggest = max(self.sides(profile))
        return {"default": None, "count only": limit(1), "size hints": limit(1, biggest), "image 0": limit(0)}

    def memory_conditions(self, profile) -> dict[str, tuple[str, ...]]:
        """Whole device, plus the article's 8 GB card emulated where the GPU is larger."""
        conditions = {"whole device": ()}
        total = profile.sizes.get("gpu_memory_gib")
        if total and total > ARTICLE_CARD_GIB * 1.5:
            util = round(ARTICLE_CARD_GIB * 0.9 / total, 4)  # the laptop's 0.9 of 8 GB, as a share of this GPU
            conditions[f"{ARTICLE_CARD_GIB} GB card emulated"] = ("--gpu-memory-utilization", str(util))
        return conditions

    @staticmethod
    def context_lengths(profile) -> tuple[str, ...]:
        """--max-model-len values the start-up study tries: vLLM sizes its multimodal profiling by the context as
        well as by the limit, so the model's own context (262,144 tokens) is tried where memory allows."""
        return profile.sizes.get("vl_context_lengths", (SERVING_CONTEXT,))

    def spec(self, limit_value: str | None, memory_args: tuple[str, ...] = (), label: str = "vl",
             max_len: str = SERVING_CONTEXT, facts_only: bool = False) -> ServerSpec:
        args = (("--max-model-len", max_len) if max_len != MODEL_CONTEXT else ()) + memory_args
        if limit_value is not None:
            args += ("--limit-mm-per-prompt", limit_value)
        return ServerSpec("vl", args, label=label, starts_alone=facts_only, facts_only=facts_only)

    def startup_conditions(self, profile):
        """(memory condition, memory flags, context length, limit name, limit value) of every start-up-only
        server: every limit at the serving context; the limits the size-hint gain compares at the model's own
        context too (on the whole device only: an emulated 8 GB card cannot hold that context)."""
        memory = self.memory_conditions(profile)
        for cond, mem in memory.items():
            for max_len in self.context_lengths(profile):
                if max_len != SERVING_CONTEXT and cond != "whole device":
                    continue
                for name, lim in self.limits(profile).items():
                    if max_len != SERVING_CONTEXT and name not in ("count only", "size hints"):
                        continue
                    yield cond, mem, max_len, name, lim

    def startup_spec(self, mem, max_len, name, lim) -> ServerSpec:
        suffix = "" if max_len == SERVING_CONTEXT else "-full-context"
        return self.spec(lim, mem, label=f"vl-{name.replace(' ', '-')}{suffix}", max_len=max_len, facts_only=True)

    def serving_spec(self, profile) -> ServerSpec:
        return self.spec(self.limits(profile)["size hints"], label="vl-size-hints")

    def plan(self, profile):
        steps = [Step(self.startup_spec(mem, max_len, name, lim), f"start-up facts only: {cond}, context {max_len}, "
                      f"limit {name}", 0, 5) for cond, mem, max_len, name, lim in self.startup_conditions(profile)]
        serving = self.serving_spec(profile)
        n = profile.sizes.get("images_per_side", 3)
        repeats = profile.sizes["repeats"]
        steps.append(Step(serving, f"image tokens and TTFT: sides {self.sides(profile)} × {n * repeats} new images",
                          len(self.sides(profile)) * n * repeats, 0.5 * len(self.sides(profile)) * n * repeats))
        steps.append(Step(serving, f"repeat images: {n * 2} images × 3 asks", n * 6, n * 6 * 0.5))
        steps.append(Step(serving, f"untrusted formats: {len(UNTRUSTED_PAYLOADS)} payloads", len(UNTRUSTED_PAYLOADS), 5))
        for gb in (4, 0):
            steps.append(Step(self.cache_spec(gb), f"processor cache {gb} GiB: {n} images × 2" +
                              ("; 1-4 images per prompt; concurrency 1/4/16" if gb == 4 else ""), n * 2 + 40, 30))
        return steps

    def cache_spec(self, gb: int) -> ServerSpec:
        """Serving with up to MULTI_MAX images per prompt, and a given processor cache size."""
        side = 448
        lim = json.dumps({"image": {"count": MULTI_MAX, "width": side, "height": side}, "video": 0}, separators=(",", ":"))
        return self.spec(lim, ("--mm-processor-cache-gb", str(gb)), label=f"vl-cache-{gb}gb")

    def run(self, ctx):
        self.run_startup_memory(ctx)
        if not all(ctx.skipped(d) for d in (IMAGE_TOKENS, REPEAT_REQUESTS, UNTRUSTED)):
            server = ctx.server(self.serving_spec(ctx.profile))
            client = ctx.client(server)
            if not ctx.skipped(IMAGE_TOKENS):
                self.run_image_tokens(ctx, client)
            if not ctx.skipped(REPEAT_REQUESTS):
                self.run_repeats(ctx, server, client)
            self.run_untrusted(ctx, client)
        for gb in (4, 0):
            if ctx.done(PROCESSOR_CACHE, mm_processor_cache_gb=gb) and (gb == 0 or self.multi_done(ctx)):
                continue
            server = ctx.server(self.cache_spec(gb))
            client = ctx.client(server)
            self.run_processor_cache(ctx, server, client, gb)
            if gb == 4:
                self.run_multi_image(ctx, server)

    def run_untrusted(self, ctx, client):
        for fmt, payload in UNTRUSTED_PAYLOADS.items():
            if ctx.done(UNTRUSTED, format=fmt):
                continue
            url = "data:image/png;base64," + base64.b64encode(payload).decode()
            r = ctx.run(client.chat_stream(image_message(url, QUESTION_COLOUR), max_tokens=1))
            status = 200 if r.ok else int(r.error.split(":")[0]) if r.error.split(":")[0].isdigit() else 0
            ctx.record(UNTRUSTED, {"format": fmt, "status": status, "accepted": r.ok,
                                   "answer": None if r.ok else r.error.split(":", 1)[-1].strip()[:300]})

    def run_processor_cache(self, ctx, server, client, gb):
        if ctx.done(PROCESSOR_CACHE, mm_processor_cache_gb=gb):
            return
        n = ctx.sizes.get("images_per_side", 3)
        first, repeat = [], []
        for i in range(ctx.sizes["warmup"] + n):
            url, _, _ = draw(448, 20_000 + i)  # same images for both cache sizes
            a = ctx.run(client.chat_stream(image_message(url, QUESTION_DIGITS), max_tokens=1))
            b = ctx.run(client.chat_stream(image_message(url, QUESTION_COLOUR), max_tokens=1))
            if not (a.ok and b.ok):
                raise RuntimeError(f"processor-cache request failed: {a.error or b.error}")
            if i >= ctx.sizes["warmup"]:
                first.append(a.ttft_s * 1000)
                repeat.append(b.ttft_s * 1000)
        ctx.record(PROCESSOR_CACHE, {"mm_processor_cache_gb": gb, "server_rss_mib": server.rss_mib(),
                                     "first_ttft_ms": statistics.median(first),
                                     "repeat_ttft_ms": statistics.median(repeat), "images": n})

    def multi_done(self, ctx) -> bool:
        return all(ctx.done(MULTI_IMAGE, images_per_prompt=k, concurrency=c) for k, c in MULTI_POINTS)

    def run_multi_image(self, ctx, server):
        base = 30_000
        for k, conc in MULTI_POINTS:
            if ctx.done(MULTI_IMAGE, images_per_prompt=k, concurrency=conc):
                continue
            requests = max(conc, ctx.sizes["repeats"])

            def request(first: int, k=k) -> HttpRequest:
                content = [{"type": "image_url", "image_url": {"url": draw(448, first + m)[0]}} for m in range(k)]
                content.append({"type": "text", "text": QUESTION_COLOUR})
                return HttpRequest.chat([{"role": "user", "content": content}], server.model, 1)

            batch = ctx.load(server).run([request(base + i * MULTI_MAX) for i in range(requests)], conc)
            base += requests * MULTI_MAX  # never resend an image: each TTFT includes the encoder
            if batch.errors:
                raise RuntimeError(f"multi-image requests failed: {batch.errors[:2]}")
            ctx.record(MULTI_IMAGE, {"images_per_prompt": k, "concurrency": conc, "requests": requests,
                                     "prompt_tokens": int(statistics.median(t.prompt_tokens for t in batch.timings)),
                                     "ttft_ms": statistics.median(t.ttft_s * 1000 for t in batch.timings),
                                     "client_cpu_max": batch.worker_cpu_max})

    def run_startup_memory(self, ctx):
        for cond, mem, max_len, name, lim in self.startup_conditions(ctx.profile):
            key = {"memory_condition": cond, "max_model_len": max_len, "limit_mm": name}
            if ctx.done(STARTUP_MEMORY, **key):
                continue
            try:
                facts = ctx.server(self.startup_spec(mem, max_len, name, lim)).facts
            except ServerFailed as exc:  # not starting at all is the result on a small card
                ctx.record(STARTUP_MEMORY, key | {"started": False,
                                                  "encoder_cache_budget_tokens": parse_startup(exc.log).encoder_cache_budget_tokens,
                                                  "error": exc.reason[:300]})
                continue
            ctx.record(STARTUP_MEMORY, key | {"started": True, "encoder_cache_budget_tokens": facts.encoder_cache_budget_tokens,
                                              "kv_cache_tokens": facts.kv_cache_tokens,
                                              "max_concurrency": facts.max_concurrency})
        # Derived from the staged rows, so a resumed run (rows from two processes) still gets it.
        kv = {(r["memory_condition"], r["max_model_len"], r["limit_mm"]): r["kv_cache_tokens"]
              for r in ctx.staging.rows(STARTUP_MEMORY)}
        compared = {(cond, max_len, name): self.startup_spec(mem, max_len, name, lim)
                    for cond, mem, max_len, name, lim in self.startup_conditions(ctx.profile)}
        for cond, max_len in dict.fromkeys((c, m) for c, m, _ in compared):
            count_only, hints = kv.get((cond, max_len, "count only")), kv.get((cond, max_len, "size hints"))
            if pd.notna(count_only) and pd.notna(hints) and count_only and \
                    not ctx.done(SIZE_HINT_GAIN, memory_condition=cond, max_model_len=max_len):
                ctx.record(SIZE_HINT_GAIN, {"memory_condition": cond, "max_model_len": max_len,
                                            "kv_tokens_count_only": int(count_only), "kv_tokens_size_hints": int(hints),
                                            "kv_ratio": hints / count_only},
                           servers=(compared[cond, max_len, "count only"], compared[cond, max_len, "size hints"]))

    def run_image_tokens(self, ctx, client):
        n = ctx.sizes.get("images_per_side", 3)
        per_side: dict[int, tuple[int, float]] = {}
        with ctx.progress() as bar:
            task = bar.add_task("image tokens × side", total=len(self.sides(ctx.profile)))
            for side in self.sides(ctx.profile):
                tokens, ttfts = [], []
                # Every request gets an image never sent before: TTFT then includes the encoder and
                # the prefill, which a repeated image would skip (that is the repeat experiment).
                for k in range(ctx.sizes["warmup"] + n * ctx.sizes["repeats"]):
                    url, _, _ = draw(side, k)
                    r = ctx.run(client.chat_stream(image_message(url, QUESTION_DIGITS), max_tokens=4))
                    if not r.ok:
                        raise RuntimeError(f"image request failed at side {side}: {r.error}")
                    if k >= ctx.sizes["warmup"]:
                        tokens.append(r.prompt_tokens)
                        ttfts.append(r.ttft_s * 1000)
                per_side[side] = (int(statistics.median(tokens)), statistics.median(ttfts))
                if not ctx.done(IMAGE_TOKENS, side=side):
                    ctx.record(IMAGE_TOKENS, {"side": side, "images": n * ctx.sizes["repeats"], "prompt_tokens": per_side[side][0],
                                              "ttft_ms": per_side[side][1]})
                bar.advance(task)
        for side in self.sides(ctx.profile):
            if side * 2 in per_side and not ctx.done(SIDE_DOUBLING, side_from=side, side_to=side * 2):
                (t1, l1), (t2, l2) = per_side[side], per_side[side * 2]
                ctx.record(SIDE_DOUBLING, {"side_from": side, "side_to": side * 2, "token_ratio": t2 / t1,
                                           "ttft_ratio": l2 / l1})

    def run_repeats(self, ctx, server, client):
        n = ctx.sizes.get("images_per_side", 3)
        sides = sorted(self.sides(ctx.profile))[1:3] or self.sides(ctx.profile)[:1]  # the article's 448 and 896
        questions = (QUESTION_DIGITS, QUESTION_DIGITS, QUESTION_COLOUR)
        scored = {"digits": [0, 0], "colour": [0, 0]}
        totals = {"q": 0, "h": 0, "images": 0}
        image = 0
        for side in sides:
            for i in range(n):
                image += 1
                url, colour, digits = draw(side, 10_000 + i)  # images the token runs never sent
                totals["images"] += 1
                for ask, question in enumerate(questions, start=1):
                    before = server.metrics()
                    r = ctx.run(client.chat_stream(image_message(url, question), max_tokens=8))
                    delta = server.metrics() - before
                    if not r.ok:
                        raise RuntimeError(f"repeat-image request failed: {r.error}")
                    row = {"image": image, "ask": ask, "side": side, "ttft_ms": r.ttft_s * 1000,
                           "prompt_tokens": r.prompt_tokens,
                           "mm_cache_queries": int(delta.get("vllm:mm_cache_queries", 0)),
                           "mm_cache_hits": int(delta.get("vllm:mm_cache_hits", 0)),
                           "prefix_cache_queries": int(delta.get("vllm:prefix_cache_queries", 0)),
                           "prefix_cache_hits": int(delta.get("vllm:prefix_cache_hits", 0))}
                    totals["q"] += row["mm_cache_queries"]
                    totals["h"] += row["mm_cache_hits"]
                    if not ctx.done(REPEAT_REQUESTS, image=image, ask=ask):
                        ctx.record(REPEAT_REQUESTS, row)
                    kind = "colour" if question == QUESTION_COLOUR else "digits"
                    if ask != 2:
                        scored[kind][1] += 1
                        answer = r.text.strip().lower()
                        scored[kind][0] += int((colour in answer) if kind == "colour" else (digits in answer))
        if not ctx.done(REPEAT_SUMMARY, images=totals["images"], asks=len(questions)):
            ctx.record(REPEAT_SUMMARY, {"images": totals["images"], "asks": len(questions),
                                        "mm_cache_queries": totals["q"], "mm_cache_hits": totals["h"]})
        if ctx.model("vl").weights == "real":  # dummy weights answer noise: no accuracy row at all
            for kind, (correct, total) in scored.items():
                if not ctx.done(ACCURACY, question=kind):
                    ctx.record(ACCURACY, {"question": kind, "correct": correct, "total": total})
