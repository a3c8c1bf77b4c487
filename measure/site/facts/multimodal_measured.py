"""Multimodal, measured (docs/multimodal-measured.*.md): Qwen3-VL-2B on the H200: image tokens, a repeated image,
several images per prompt, and whether image URLs reach internal hosts."""

from measure.site.facts import Chart, Question, Ratio, Table, Unconfirmed, Value, topic

H200 = "gpu-1x-nvidia-h200"


def side(column: str, px: int, digits: int = 0) -> Value:
    return Value("multimodal.image_tokens", column, {"side": px}, {"env": H200, "digits": digits})


def images(count: int) -> Value:
    return Value("multimodal.multi_image", "ttft_ms", {"images_per_prompt": count, "concurrency": 1},
                 {"env": H200, "digits": 1})


def fetch(column: str, setting: str, url_kind: str) -> Value:
    return Value("security.media_fetch", column, {"setting": setting, "url_kind": url_kind}, {"env": H200})


def clip(column: str, frames: int, px: int, digits: int = 0) -> Value:
    """video.frames: one new video of FRAMES frames of PX × PX at a time."""
    return Value("video.frames", column, {"frames": frames, "side": px},
                 {"env": H200, "digits": digits, "show_range": column == "ttft_ms"})


def kv_with(limit: str) -> Value:
    return Value("video.startup_memory", "kv_cache_tokens", {"limit_mm": limit}, {"env": H200, "digits": 0})


ALLOWED = "--allowed-media-domains localhost"

# The tables and charts the page shows, declared once: both languages cite them by name
FIGURES = {
    "size_hint_gain_table": Table("multimodal.size_hint_gain"),
    "startup_memory_table": Table("multimodal.startup_memory",
        columns=["memory_condition", "max_model_len", "limit_mm", "started", "encoder_cache_budget_tokens",
            "kv_cache_tokens", "max_concurrency"]),
    "side_doubling_table": Table("multimodal.side_doubling"),
    "image_tokens_chart_prompt_tokens": Chart("multimodal.image_tokens", x="side", y="prompt_tokens"),
    "image_tokens_chart_ttft": Chart("multimodal.image_tokens", x="side", y="ttft_ms"),
    "repeat_summary_table": Table("multimodal.repeat_summary"),
    "repeat_requests_chart": Chart("multimodal.repeat_requests", x="ask", y="ttft_ms", color="side", kind="scatter"),
    "repeat_requests_table": Table("multimodal.repeat_requests",
        columns=["image", "ask", "side", "ttft_ms", "prompt_tokens", "mm_cache_hits", "prefix_cache_queries",
            "prefix_cache_hits"],
        collapsed=True),
    "multi_image_chart": Chart("multimodal.multi_image", x="images_per_prompt", y="ttft_ms", color="concurrency",
        kind="scatter"),
    "multi_image_table": Table("multimodal.multi_image", collapsed=True),
    "video_frames_chart_h200_prompt_tokens": Chart("video.frames", x="frames", y="prompt_tokens", color="side",
        env="gpu-1x-nvidia-h200", log_x=True, log_y=True),
    "video_frames_chart_h200_ttft": Chart("video.frames", x="frames", y="ttft_ms", color="side",
        env="gpu-1x-nvidia-h200", log_x=True, log_y=True, spread=("ttft_ms_min", "ttft_ms_max"),
        key="video.frames:chart:ttft"),
    "video_frames_table": Table("video.frames", env="gpu-1x-nvidia-h200", collapsed=True,
        columns=["frames", "side", "prompt_tokens", "video_tokens", "tokens_per_frame", "ttft_ms", "ttft_ms_min",
            "ttft_ms_max", "requests"]),
    "video_startup_memory_table": Table("video.startup_memory", env="gpu-1x-nvidia-h200",
        columns=["limit_mm", "limit_mm_per_prompt", "max_model_len", "started", "kv_cache_tokens", "kv_cache_gib",
            "max_concurrency"]),
    "multi_image_open_list_table": Table("multimodal.multi_image", key="open-list:multi-image"),
}

topic("multimodal-measured", facts=FIGURES | {
    "tokens_448": side("prompt_tokens", 448),
    "tokens_1344": side("prompt_tokens", 1344),
    "ttft_448": side("ttft_ms", 448, 1),
    "ttft_1344": side("ttft_ms", 1344, 1),
    # no printed ratio: the 448-pixel time is one of several runs that disagree (its mark says so)
    "ttft_1344_vs_448": Ratio("ttft_1344", ">>", "ttft_448", show=False),
    "first_cached": Value("multimodal.processor_cache", "first_ttft_ms", {"mm_processor_cache_gb": 4},
                          {"env": H200, "digits": 1}),
    "repeat_cached": Value("multimodal.processor_cache", "repeat_ttft_ms", {"mm_processor_cache_gb": 4},
                           {"env": H200, "digits": 1}),
    "repeat_uncached": Value("multimodal.processor_cache", "repeat_ttft_ms", {"mm_processor_cache_gb": 0},
                             {"env": H200, "digits": 1}),
    "repeat_vs_first": Ratio("repeat_cached", "<<", "first_cached"),
    "uncached_vs_cached": Ratio("repeat_uncached", "≈", "repeat_cached"),
    "one_image": images(1),
    "four_images": images(4),
    "four_vs_one": Ratio("four_images", ">>", "one_image", digits=1),
    "loopback_default": fetch("service_hit", "default", "loopback, open port"),
    "loopback_allowed": fetch("service_hit", ALLOWED, "loopback, open port"),
    "redirect_allowed": fetch("paths_requested", ALLOWED, "allowed name redirecting to loopback"),
    "redirect_off": fetch("paths_requested", f"{ALLOWED} + VLLM_MEDIA_URL_ALLOW_REDIRECTS=0",
                          "allowed name redirecting to loopback"),
    "frame_224": clip("tokens_per_frame", 8, 224, 1),
    "frame_448": clip("tokens_per_frame", 8, 448, 1),
    "frame_896": clip("tokens_per_frame", 8, 896, 1),
    "frame_896_vs_224": Ratio("frame_896", ">>", "frame_224", digits=1),
    "frame_896_at_32": clip("tokens_per_frame", 32, 896, 1),
    "frame_896_at_32_fewer": Ratio("frame_896_at_32", "<", "frame_896", show=False),
    "frame_896_at_32_why": Unconfirmed({
        "zh": "32 帧 896 像素时每帧的 token 变少，可能是处理器为整段视频的像素总量设了上限而把帧缩小了；没有单独验证",
        "en": "fewer tokens a frame at 32 frames of 896 px may be the processor scaling frames down to a cap on the "
              "whole video's pixels; not checked on its own"}),
    "video_tokens_32_896": clip("prompt_tokens", 32, 896),
    "video_ttft_4_224": clip("ttft_ms", 4, 224),
    "video_ttft_32_896": clip("ttft_ms", 32, 896),
    "video_ttft_32_896_vs_4_224": Ratio("video_ttft_32_896", ">>", "video_ttft_4_224", digits=0),
    "kv_no_video": kv_with("video 0"),
    "kv_video": kv_with("video 1"),
    "kv_video_vs_none": Ratio("kv_video", "≈", "kv_no_video", digits=3),
}, questions=(
    Question(
        ask={"zh": "一张图像算多少 token？", "en": "How many tokens is an image?"},
        answer={"zh": "448 像素见方的图像加一句提问是 {tokens_448}，1344 像素时 {tokens_1344}：token 数大致随面积增长。要省 token 和首 token 时间，先把图缩小再发。",
                "en": "A 448-pixel square image and a one-line question made {tokens_448}, a 1344-pixel one {tokens_1344}: tokens grow roughly with the area. To save tokens and time to first token, scale images down before sending them."},
        conditions={"zh": "H200 上的 Qwen3-VL-2B-Instruct，虚拟权重，vLLM 0.26.0；首 token 时间从 {ttft_448} 升到 {ttft_1344}{ttft_1344_vs_448}。",
                    "en": "Qwen3-VL-2B-Instruct on one H200, dummy weights, vLLM 0.26.0; the first token came after {ttft_448} and {ttft_1344}{ttft_1344_vs_448}."},
        figure="image-tokens",
        unsettled={"zh": "需要按图像边长测提示 token 数和首 token 时间。", "en": "Settling it takes prompt tokens and TTFT by image side."}),
    Question(
        ask={"zh": "同一张图再发一次会更快吗？", "en": "Is the same image faster the second time?"},
        answer={"zh": "处理器缓存为 4 GiB（默认）时，一张图第一次的首 token 时间是 {first_cached}，再发一次是 {repeat_cached}"
                      "（{repeat_vs_first}）；缓存关闭时再发一次是 {repeat_uncached}，和开着缓存时差不多（{uncached_vs_cached}）。",
                "en": "With the processor cache at 4 GiB (the default), an image's first request got its first token "
                      "after {first_cached} and the same image again after {repeat_cached} ({repeat_vs_first}); with the "
                      "cache off, the repeat took {repeat_uncached}, about as long as with it ({uncached_vs_cached})."},
        figure="same-image",
        unsettled={"zh": "需要把同一张图连发两次。", "en": "Settling it takes the same image sent twice."}),
    Question(
        ask={"zh": "一个提示里放几张图，首 token 要等多久？", "en": "How does the wait grow with images per prompt?"},
        answer={"zh": "一次一个请求时，1 张图的首 token 时间是 {one_image}，4 张图是 {four_images}（{four_vs_one}）。",
                "en": "One request at a time, one image took {one_image} to the first token and four images "
                      "{four_images} ({four_vs_one})."},
        figure="several-images",
        unsettled={"zh": "需要按每个提示的图像数测首 token 时间。", "en": "Settling it takes TTFT by images per prompt."}),
    Question(
        ask={"zh": "image_url 能让服务器去访问内网地址吗？", "en": "Can image_url make the server fetch from internal hosts?"},
        answer={"zh": "默认设置下，指向本机开放端口的 image_url 让本机服务收到了请求：{loopback_default}；设了 --allowed-media-domains localhost 后："
                      "{loopback_allowed}。但允许的域名重定向到本机时，本机服务收到的路径是 {redirect_allowed}；"
                      "再关掉重定向（VLLM_MEDIA_URL_ALLOW_REDIRECTS=0）后是 {redirect_off}。",
                "en": "With default settings, an image_url pointing at an open loopback port reached the local service: "
                      "{loopback_default}; with --allowed-media-domains localhost: {loopback_allowed}. But when an allowed name redirected to "
                      "loopback, the local service was asked for {redirect_allowed}; with redirects also off "
                      "(VLLM_MEDIA_URL_ALLOW_REDIRECTS=0), for {redirect_off}."},
        figure="ssrf",
        unsettled={"zh": "需要在本机起一个服务，再让 vLLM 去取指向它的 URL。",
                   "en": "Settling it takes a local service and vLLM asked to fetch URLs pointing at it."}),
    Question(
        ask={"zh": "一段视频算多少 token？允许视频输入要占多少显存？",
             "en": "How many tokens is a video, and what does allowing video cost in memory?"},
        answer={"zh": "H200 上的 Qwen3-VL-2B-Instruct（虚拟权重，vLLM 0.26.0），8 帧的视频每帧约 {frame_224}（224 像素见方）、"
                      "{frame_448}（448 像素）、{frame_896}（896 像素，{frame_896_vs_224}）。32 帧 896 像素的视频连同提问共 "
                      "{video_tokens_32_896}，首 token 要等 {video_ttft_32_896}，4 帧 224 像素时只要 {video_ttft_4_224}。"
                      "显存方面几乎不占：--max-model-len 32768、整张卡时，允许每个提示带一段视频，KV 缓存是 {kv_video}，"
                      "不允许时是 {kv_no_video}（{kv_video_vs_none}）。",
                "en": "For Qwen3-VL-2B-Instruct on one H200 (dummy weights, vLLM 0.26.0), a frame of an 8-frame video "
                      "was about {frame_224} at 224 pixels square, {frame_448} at 448 and {frame_896} at 896 "
                      "({frame_896_vs_224}). 32 frames of 896 pixels and a question made {video_tokens_32_896}, and "
                      "the first token took {video_ttft_32_896}, against {video_ttft_4_224} for 4 frames of 224. In "
                      "memory it costs next to nothing: at --max-model-len 32768 on the whole device, allowing one "
                      "video per prompt left a KV cache of {kv_video}, against {kv_no_video} with videos off "
                      "({kv_video_vs_none})."},
        figure="video",
        unsettled={"zh": "需要用合成视频按帧数和分辨率测提示 token 数与 TTFT，并比较允许与不允许视频时启动后剩下的 KV 空间。",
                   "en": "Settling it takes synthetic videos by frame count and resolution: prompt tokens and TTFT, "
                         "and the KV cache left at start-up with and without video allowed."}),
), title={"zh": "多模态实测", "en": "Multimodal, measured"})
