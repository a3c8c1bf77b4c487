"""Default mode against --enforce-eager (docs/eager.*.md): start-up, decoding speed, image TTFT, images limited to 0."""

from measure.site.facts import Chart, Question, Ratio, Table, Value, topic


def decode_with_range(column: str, mode: str, concurrency: int, digits: int) -> Value:
    """A median over the rounds, the rounds' range printed beside it."""
    return Value("eager.decode", column, {"mode": mode, "concurrency": concurrency},
                 {"digits": digits, "show_range": True})


def startup(mode: str, caches: str) -> Value:
    return Value("eager.startup", "startup_s", {"mode": mode, "caches": caches}, {"digits": 0})


# The tables and charts the page shows, declared once: both languages cite them by name
FIGURES = {
    "startup_chart": Chart("eager.startup", x="caches", y="startup_s", color="mode", kind="bar"),
    "startup_table": Table("eager.startup", collapsed=True),
    "decode_chart": Chart("eager.decode", x="concurrency", y="output_tok_s", color="mode", kind="scatter", log_y=True,
        spread=("output_tok_s_min", "output_tok_s_max")),
    "decode_table": Table("eager.decode",
        columns=["mode", "concurrency", "output_tok_s", "output_tok_s_min", "output_tok_s_max", "tpot_ms",
            "tpot_ms_min", "tpot_ms_max", "ttft_ms", "client_cpu_max"],
        collapsed=True),
    "multimodal_ttft_table": Table("eager.multimodal_ttft"),
    "summary_table": Table("eager.summary"),
    "image_0_start_table": Table("eager.image_0_start"),
}

topic("eager", facts=FIGURES | {
    "tok_s_32_default": decode_with_range("output_tok_s", "default", 32, 0),
    "tok_s_32_eager": decode_with_range("output_tok_s", "eager", 32, 0),
    "tok_s_32_ratio": Ratio("tok_s_32_eager", "<<", "tok_s_32_default"),
    "tpot_1_default": decode_with_range("tpot_ms", "default", 1, 2),
    "tpot_1_eager": decode_with_range("tpot_ms", "eager", 1, 1),
    "tpot_1_ratio": Ratio("tpot_1_eager", ">>", "tpot_1_default", digits=1),
    "start_cold_default": startup("default", "cold"),
    "start_warm_default": startup("default", "warm"),
    "start_warm_eager": startup("eager", "warm"),
    "start_cold_vs_warm": Ratio("start_cold_default", ">>", "start_warm_default", digits=1),
    "start_eager_vs_default": Ratio("start_warm_eager", "<", "start_warm_default"),
    "image_ttft_default": Value("eager.multimodal_ttft", "ttft_ms", {"mode": "default"}, {"digits": 1, "show_range": True}),
    "image_ttft_eager": Value("eager.multimodal_ttft", "ttft_ms", {"mode": "eager"}, {"digits": 1, "show_range": True}),
    "image_ttft_ratio": Ratio("image_ttft_eager", ">", "image_ttft_default"),
    "image_0_default": Value("eager.image_0_start", "started", {"mode": "default"}),
    "image_0_eager": Value("eager.image_0_start", "started", {"mode": "eager"}),
}, questions=(
    Question(
        ask={"zh": "加上 --enforce-eager，高负载下的吞吐会损失多少？",
             "en": "How much throughput does --enforce-eager cost under load?"},
        answer={"zh": "很大一部分：32 个请求同时在途时，eager 模式只有默认模式吞吐的 {tok_s_32_ratio}（{tok_s_32_eager} 对 {tok_s_32_default}）。除非调试需要，生产环境不要加 --enforce-eager。",
                "en": "Much of it: with 32 requests in flight, eager mode delivered {tok_s_32_ratio} the default mode's throughput ({tok_s_32_eager} against {tok_s_32_default}). Leave --enforce-eager off in production unless you are debugging."},
        conditions={"zh": "H200 上的 Qwen3-0.6B，虚拟权重，每个请求 64 个输出 token，三轮取中位数。",
                    "en": "Qwen3-0.6B on one H200, dummy weights, 64 output tokens per request, median of three rounds."},
        figure="generation-speed",
        unsettled={"zh": "需要在同一 GPU 上分别用两种模式跑同一组请求。",
                   "en": "Settling it takes the same requests served in both modes on one GPU."}),
    Question(
        ask={"zh": "只有一个请求时，eager 模式每个 token 慢多少？",
             "en": "With a single request, how much slower is each token in eager mode?"},
        answer={"zh": "每个输出 token 在默认模式下用 {tpot_1_default}，在 eager 模式下用 {tpot_1_eager}，"
                      "是默认模式的 {tpot_1_ratio}。",
                "en": "A token took {tpot_1_default} in the default mode and {tpot_1_eager} in eager mode, "
                      "{tpot_1_ratio} as long."},
        figure="generation-speed",
        unsettled={"zh": "需要在两种模式下各测一次单请求的解码。", "en": "Settling it takes one-request decoding in both modes."}),
    Question(
        ask={"zh": "默认模式启动慢，值得在意吗？", "en": "Does the default mode's slow start matter?"},
        answer={"zh": "缓存为空时默认模式启动用了 {start_cold_default}，是缓存保留时（{start_warm_default}）的 "
                      "{start_cold_vs_warm}；缓存保留时 eager 模式用 {start_warm_eager}，是默认模式的 {start_eager_vs_default}。"
                      "把编译缓存放在能留存的卷上，剩下的差距就只有缓存保留时的这一点。",
                "en": "From empty caches the default mode took {start_cold_default} to start, {start_cold_vs_warm} "
                      "its {start_warm_default} with warm caches; with warm caches eager mode took {start_warm_eager}, "
                      "{start_eager_vs_default} the default mode's time. Keep the compile caches on a volume that "
                      "lasts, and the warm-cache gap is all that remains."},
        figure="start-up-time",
        unsettled={"zh": "需要在缓存为空和缓存保留两种情况下分别启动。", "en": "Settling it takes starts with empty and with kept caches."}),
    Question(
        ask={"zh": "eager 模式会改变图像请求的首 token 时间吗？", "en": "Does eager mode change an image request's time to first token?"},
        answer={"zh": "一张新的 448 像素图像，默认模式 {image_ttft_default}，eager 模式 {image_ttft_eager}，"
                      "是默认模式的 {image_ttft_ratio}（Qwen3-VL-2B，每次一个请求）。",
                "en": "For one new 448-pixel image the default mode took {image_ttft_default} and eager mode "
                      "{image_ttft_eager}, {image_ttft_ratio} as long (Qwen3-VL-2B, one request at a time)."},
        figure="multimodal-time-to-first-token",
        unsettled={"zh": "需要在两种模式下各发同样的图像请求。", "en": "Settling it takes the same image requests in both modes."}),
    Question(
        ask={"zh": "视觉语言模型能否把图像数限为 0、只当文本模型用？",
             "en": "Can a vision-language model be served with images limited to 0 (text only)?"},
        answer={"zh": "在 vLLM 0.26.0 上，默认模式能否启动：{image_0_default}；eager 模式：{image_0_eager}。",
                "en": "On vLLM 0.26.0, started in the default mode: {image_0_default}; in eager mode: {image_0_eager}."},
        figure="images-limited-to-0",
        unsettled={"zh": "需要在两种模式下各启动一次这样的服务器。", "en": "Settling it takes such a start in each mode."}),
), title={"zh": "默认模式与 eager", "en": "Default vs eager mode"})
