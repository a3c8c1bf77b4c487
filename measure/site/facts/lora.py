"""LoRA (docs/lora.*.md): what an adapter costs on the H200, its rank, adapters beyond --max-loras, slots against the
adapters in the mix, a swap, --max-lora-rank, runtime loading, speculation."""

from measure.site.facts import Chart, Question, Ratio, Table, Value, topic

H200 = "gpu-1x-nvidia-h200"


def overhead(column: str, rank: int, metric: str, digits: int = 0, **options) -> Value:
    return Value("lora.overhead", column, {"model": "Qwen3-0.6B", "rank": rank, "metric": metric},
                 {"env": H200, "digits": digits} | options)


def slots(adapters: int) -> Value:
    return Value("lora.slots", "tokens_per_s", {"adapters": adapters, "max_loras": 2},
                 {"env": H200, "digits": 0, "show_range": True})


def scale(max_loras: int, adapters: int, column: str = "tokens_per_s", rank: int = 8, **options) -> Value:
    """lora_scale.grid: --max-loras × distinct rank-8 adapters taken in turn (16 in flight, 64 requests a round)."""
    where = {"model": "Qwen3-0.6B", "max_loras": max_loras, "max_lora_rank": rank, "adapters": adapters}
    shown = {"digits": 0, "show_range": True} if column == "tokens_per_s" else {"digits": 0, "unit": "ms"}
    return Value("lora_scale.grid", column, where, {"env": H200} | shown | options)


def swap(column: str) -> Value:
    return Value("lora_scale.swap", column, {"max_loras": 1},
                 {"env": H200, "digits": 1} | ({"show_range": True} if column != "swap_ms" else {}))


def runtime(column: str, rank: int) -> Value:
    return Value("lora_scale.runtime_load", column, {"rank": rank}, {"env": H200, "digits": 1 if "ttft" in column else 0})


# The tables and charts the page shows, declared once: both languages cite them by name
FIGURES = {
    "overhead_table": Table("lora.overhead",
        columns=["model", "rank", "metric", "slowdown_pct", "base_value", "adapter_value", "repeats"]),
    "slots_chart_h200": Chart("lora.slots", env="gpu-1x-nvidia-h200", x="adapters", y="tokens_per_s",
        color="max_loras", spread=("tokens_per_s_min", "tokens_per_s_max")),
    "slots_table": Table("lora.slots", collapsed=True),
    "lora_scale_grid_chart": Chart("lora_scale.grid", x="adapters", y="tokens_per_s", color="max_loras",
        env="gpu-1x-nvidia-h200", where={"max_lora_rank": 8}, log_x=True,
        spread=("tokens_per_s_min", "tokens_per_s_max")),
    "lora_scale_grid_table": Table("lora_scale.grid", env="gpu-1x-nvidia-h200", collapsed=True,
        columns=["max_loras", "max_lora_rank", "adapters", "tokens_per_s", "tokens_per_s_min", "tokens_per_s_max",
            "ttft_p50_ms", "tpot_p50_ms"]),
    "lora_scale_swap_table": Table("lora_scale.swap", env="gpu-1x-nvidia-h200"),
    "lora_scale_runtime_load_table": Table("lora_scale.runtime_load", env="gpu-1x-nvidia-h200"),
    "security_lora_runtime_load_table": Table("security.lora_runtime_load"),
    "compat_table": Table("lora.compat"),
}

topic("lora", facts=FIGURES | {
    "base_tok_s": overhead("base_value", 8, "throughput", unit="tok/s"),
    "rank8_tok_s": overhead("adapter_value", 8, "throughput", unit="tok/s"),
    "rank64_tok_s": overhead("adapter_value", 64, "throughput", unit="tok/s"),
    "rank8_slowdown": overhead("slowdown_pct", 8, "throughput", digits=1),
    "rank8_vs_base": Ratio("rank8_tok_s", "<", "base_tok_s"),
    "rank64_vs_rank8": Ratio("rank64_tok_s", "~", "rank8_tok_s"),
    "base_ttft": overhead("base_value", 8, "ttft", digits=1, unit="ms"),
    "rank8_ttft": overhead("adapter_value", 8, "ttft", digits=1, unit="ms"),
    "base_ttft_slowest": overhead("base_max", 8, "ttft", digits=1, unit="ms"),
    "rank8_ttft_fastest": overhead("adapter_min", 8, "ttft", digits=1, unit="ms"),
    "ttft_repeats_overlap": Ratio("rank8_ttft_fastest", "<", "base_ttft_slowest", show=False),
    "one_adapter": slots(1),
    "eight_adapters": slots(8),
    "eight_vs_one": Ratio("eight_adapters", "<<", "one_adapter"),
    "one_slot_one": scale(1, 1),
    "one_slot_sixteen": scale(1, 16),
    "one_slot_sixteen_vs_one": Ratio("one_slot_sixteen", "<<", "one_slot_one"),
    "eight_slots_eight": scale(8, 8),
    "eight_slots_sixteen": scale(8, 16),
    "eight_slots_sixteen_vs_eight": Ratio("eight_slots_sixteen", "<<", "eight_slots_eight"),
    "eight_slots_eight_vs_one_slot_one": Ratio("eight_slots_eight", "≈", "one_slot_one", show=False),
    "four_slots_four": scale(4, 4),
    "four_slots_eight": scale(4, 8),
    "four_slots_eight_vs_four": Ratio("four_slots_eight", "<<", "four_slots_four"),
    "ttft_one_slot_sixteen": scale(1, 16, "ttft_p50_ms"),
    "ttft_eight_slots_sixteen": scale(8, 16, "ttft_p50_ms"),
    "ttft_eight_slots_eight": scale(8, 8, "ttft_p50_ms"),
    "resident_ttft": swap("resident_ttft_ms"),
    "swapped_ttft": swap("swap_ttft_ms"),
    "swap_ms": swap("swap_ms"),
    "swapped_vs_resident": Ratio("swapped_ttft", ">>", "resident_ttft", digits=1),
    "max_rank_8": scale(4, 1),
    "max_rank_16": scale(4, 1, rank=16),
    "max_rank_64": scale(4, 1, rank=64),
    "max_rank_64_vs_8": Ratio("max_rank_64", "~", "max_rank_8"),
    "max_rank_16_vs_8": Ratio("max_rank_16", "~", "max_rank_8", show=False),
    "max_rank_16_above_64": Ratio("max_rank_16", ">", "max_rank_64", show=False),
    "load_call_8": runtime("load_call_ms", 8),
    "load_call_64": runtime("load_call_ms", 64),
    "first_after_load_8": runtime("first_ttft_ms", 8),
    "later_after_load_8": runtime("later_ttft_ms", 8),
    "first_after_load_64": runtime("first_ttft_ms", 64),
    "later_after_load_64": runtime("later_ttft_ms", 64),
    "spec_started": Value("lora.compat", "started", {"feature": "speculative decoding (ngram)"}, {"env": H200}),
    "spec_adapter_ok": Value("lora.compat", "adapter_request_ok", {"feature": "speculative decoding (ngram)"},
                             {"env": H200}),
}, questions=(
    Question(
        ask={"zh": "通过 LoRA 适配器生成要付出多少代价？", "en": "What does generating through a LoRA adapter cost?"},
        answer={"zh": "吞吐慢了 {rank8_slowdown}：经过适配器 {rank8_tok_s}，基座模型 {base_tok_s}（{rank8_vs_base}）。首 token 时间看不出差别。容量按基座吞吐打个折来规划即可。",
                "en": "Throughput {rank8_slowdown} lower: {rank8_tok_s} through the adapter against {base_tok_s} for the base model ({rank8_vs_base}). No difference shows in the time to first token. Plan capacity on the base model's throughput less that share."},
        conditions={"zh": "H200 上的 Qwen3-0.6B，默认模式，虚拟权重，随机的 rank 8 适配器。",
                    "en": "Qwen3-0.6B on one H200, default mode, dummy weights, a random rank-8 adapter."},
        caveats={"zh": "首 token 时间的中位数从 {base_ttft} 变成 {rank8_ttft}，但各次重复互相重叠（适配器最快的一次 {rank8_ttft_fastest}，比基座最慢的一次 {base_ttft_slowest} 还快{ttft_repeats_overlap}），这个差别不算结论。",
                 "en": "The median time to first token went from {base_ttft} to {rank8_ttft}, but the repeats overlap (the adapter's fastest, {rank8_ttft_fastest}, beat the base model's slowest, {base_ttft_slowest}{ttft_repeats_overlap}), so that difference is not a finding."},
        figure="cost",
        unsettled={"zh": "需要在同一服务器上交替测基座模型和适配器。", "en": "Settling it takes the base model and an adapter measured in turn on one server."}),
    Question(
        ask={"zh": "适配器的 rank 影响速度吗？", "en": "Does the adapter's rank change the speed?"},
        answer={"zh": "看不出：rank 64 对 rank 8 的适配器吞吐{rank64_vs_rank8}。",
                "en": "Not measurably: a rank-64 adapter against a rank-8 one shows {rank64_vs_rank8}."},
        figure="cost",
        unsettled={"zh": "需要测几种 rank 的适配器。", "en": "Settling it takes adapters of several ranks."}),
    Question(
        ask={"zh": "请求用到的适配器多于 --max-loras 时会怎样？", "en": "What happens when requests use more adapters than --max-loras?"},
        answer={"zh": "--max-loras 2 时，请求轮流使用 1 个适配器的吞吐是 {one_adapter}，轮流使用 8 个时是 {eight_adapters}，"
                      "只有前者的 {eight_vs_one}。适配器多于槽位时，vLLM 要把它们换入换出，每次换入约 {swap_ms}（见下面关于换入的问题）。",
                "en": "With --max-loras 2, requests taking turns on one adapter ran at {one_adapter}, and on eight at "
                      "{eight_adapters}, {eight_vs_one} as fast. With more adapters than slots vLLM swaps them in and "
                      "out, at about {swap_ms} a swap (see the question on swaps below)."},
        figure="cost",
        unsettled={"zh": "需要让请求轮流使用不同数量的适配器。", "en": "Settling it takes requests rotating over different numbers of adapters."}),
    Question(
        ask={"zh": "请求里的适配器很多时，--max-loras 该设多大？",
             "en": "With many adapters in the requests, how large should --max-loras be?"},
        answer={"zh": "至少和同时在用的适配器一样多。H200 上 16 个请求同时在途、轮流使用 rank 8 适配器时：--max-loras 8 下 8 个适配器"
                      "的吞吐是 {eight_slots_eight}，和 1 个槽位只用 1 个适配器时（{one_slot_one}）相当；换成 16 个适配器就降到 "
                      "{eight_slots_sixteen}（{eight_slots_sixteen_vs_eight}），首 token 时间中位数从 {ttft_eight_slots_eight} 升到 "
                      "{ttft_eight_slots_sixteen}。只有 1 个槽位时，16 个适配器只剩 {one_slot_sixteen}（{one_slot_sixteen_vs_one}），"
                      "首 token 时间中位数 {ttft_one_slot_sixteen}；--max-loras 4 下从 4 个适配器（{four_slots_four}）到 8 个"
                      "（{four_slots_eight}）是 {four_slots_eight_vs_four}。",
                "en": "At least as large as the number of adapters in use at once. On the H200, 16 requests in flight "
                      "taking rank-8 adapters in turn: with --max-loras 8, eight adapters ran at {eight_slots_eight}, "
                      "on a par with one adapter in one slot ({one_slot_one}); sixteen adapters fell to "
                      "{eight_slots_sixteen} ({eight_slots_sixteen_vs_eight}) and the median time to first token rose "
                      "from {ttft_eight_slots_eight} to {ttft_eight_slots_sixteen}. With one slot, sixteen adapters ran at "
                      "{one_slot_sixteen} ({one_slot_sixteen_vs_one}), a median first token after "
                      "{ttft_one_slot_sixteen}; with --max-loras 4, going from four adapters ({four_slots_four}) to "
                      "eight ({four_slots_eight}) gave {four_slots_eight_vs_four}."},
        figure="slots",
        unsettled={"zh": "需要按 --max-loras 与请求中的适配器个数测吞吐与首 token 时间。",
                   "en": "Settling it takes throughput and TTFT by --max-loras and adapters in the mix."}),
    Question(
        ask={"zh": "把适配器换入槽位要多少代价？", "en": "What does swapping an adapter into its slot cost?"},
        answer={"zh": "只有 1 个槽位、每次只发一个请求时：适配器已在槽位里，首 token 时间是 {resident_ttft}；每个请求都要把适配器"
                      "从磁盘换回来时是 {swapped_ttft}（{swapped_vs_resident}），每次换入约多花 {swap_ms}。",
                "en": "With one slot and one request at a time: with the adapter already in its slot the first token "
                      "came after {resident_ttft}; with every request bringing its adapter back from disk, after "
                      "{swapped_ttft} ({swapped_vs_resident}), about {swap_ms} per swap."},
        figure="swap",
        unsettled={"zh": "需要比较适配器常驻与每次换入时的首 token 时间。",
                   "en": "Settling it takes TTFT with the adapter resident against swapped in for every request."}),
    Question(
        ask={"zh": "--max-lora-rank 设大了会拖慢小适配器吗？", "en": "Does a large --max-lora-rank slow down small adapters?"},
        answer={"zh": "看不出代价：同一个 rank 8 适配器（--max-loras 4），--max-lora-rank 64 对 8 的吞吐{max_rank_64_vs_8}。"
                      "--max-lora-rank 16 时是 {max_rank_16}{max_rank_16_vs_8}{max_rank_16_above_64}，各次重复与 8 的有重叠，"
                      "只比 64 快；上限更大不可能让它更快，只能当作不同服务器之间的波动。",
                "en": "No measurable cost: for the same rank-8 adapter (--max-loras 4), throughput at --max-lora-rank 64 "
                      "against 8 shows {max_rank_64_vs_8}. At 16 it ran at {max_rank_16}{max_rank_16_vs_8}"
                      "{max_rank_16_above_64}: its repeats overlap those at 8, and it was faster than at 64 only; a larger limit "
                      "cannot make it faster, so read that as the spread between servers."},
        figure="max-lora-rank",
        unsettled={"zh": "需要用几种 --max-lora-rank 启动服务器，测同一个小适配器。",
                   "en": "Settling it takes servers started at several --max-lora-rank values serving one small adapter."}),
    Question(
        ask={"zh": "用 /v1/load_lora_adapter 加载后，第一个请求会慢吗？",
             "en": "Is the first request after /v1/load_lora_adapter slower?"},
        answer={"zh": "只慢几毫秒。rank 8 适配器：加载调用本身 {load_call_8}，之后第一个请求的首 token 时间 {first_after_load_8}，"
                      "后面的请求 {later_after_load_8}；rank 64：加载 {load_call_64}，第一个 {first_after_load_64}，后面 "
                      "{later_after_load_64}（各 5 次加载的中位数）。",
                "en": "By a few milliseconds. A rank-8 adapter: the load call itself took {load_call_8}, the first request after it got "
                      "its first token after {first_after_load_8}, later ones after {later_after_load_8}; rank 64: "
                      "load {load_call_64}, first {first_after_load_64}, later {later_after_load_64} (medians over "
                      "five loads each)."},
        figure="runtime-load",
        unsettled={"zh": "需要在允许运行时加载的服务器上加载新适配器并计时。",
                   "en": "Settling it takes new adapters loaded into a server that allows it, timed."}),
    Question(
        ask={"zh": "LoRA 能和投机解码一起用吗？", "en": "Can LoRA be combined with speculative decoding?"},
        answer={"zh": "在 vLLM 0.26.0 上，带 ngram 投机解码和 LoRA 的服务器能否启动：{spec_started}；发往适配器的请求是否成功："
                      "{spec_adapter_ok}。",
                "en": "On vLLM 0.26.0, a server with ngram speculative decoding and LoRA started: {spec_started}; a "
                      "request to an adapter succeeded: {spec_adapter_ok}."},
        figure="speculative-decoding",
        unsettled={"zh": "需要启动一个同时开启两者的服务器。", "en": "Settling it takes a server started with both."}),
), title={"zh": "LoRA", "en": "LoRA"})
