"""LoRA (docs/lora.*.md): what an adapter costs on the H200, its rank, adapters beyond --max-loras, speculation."""

from measure.site.facts import Question, Ratio, Value, topic

H200 = "gpu-1x-nvidia-h200"


def overhead(column: str, rank: int, metric: str, digits: int = 0, **options) -> Value:
    return Value("lora.overhead", column, {"model": "Qwen3-0.6B", "rank": rank, "metric": metric},
                 {"env": H200, "digits": digits} | options)


def slots(adapters: int) -> Value:
    return Value("lora.slots", "tokens_per_s", {"adapters": adapters, "max_loras": 2},
                 {"env": H200, "digits": 0, "show_range": True})


topic("lora", facts={
    "base_tok_s": overhead("base_value", 8, "throughput", unit="tok/s"),
    "rank8_tok_s": overhead("adapter_value", 8, "throughput", unit="tok/s"),
    "rank64_tok_s": overhead("adapter_value", 64, "throughput", unit="tok/s"),
    "rank8_slowdown": overhead("slowdown_pct", 8, "throughput", digits=1),
    "rank8_vs_base": Ratio("rank8_tok_s", "<", "base_tok_s"),
    "rank64_vs_rank8": Ratio("rank64_tok_s", "≈", "rank8_tok_s"),
    "base_ttft": overhead("base_value", 8, "ttft", digits=1, unit="ms"),
    "rank8_ttft": overhead("adapter_value", 8, "ttft", digits=1, unit="ms"),
    "one_adapter": slots(1),
    "eight_adapters": slots(8),
    "eight_vs_one": Ratio("eight_adapters", "<<", "one_adapter"),
    "spec_started": Value("lora.compat", "started", {"feature": "speculative decoding (ngram)"}, {"env": H200}),
    "spec_adapter_ok": Value("lora.compat", "adapter_request_ok", {"feature": "speculative decoding (ngram)"},
                             {"env": H200}),
}, questions=(
    Question(
        ask={"zh": "通过 LoRA 适配器生成要付出多少代价？", "en": "What does generating through a LoRA adapter cost?"},
        answer={"zh": "H200 上的 Qwen3-0.6B（默认模式，虚拟权重，随机的 rank 8 适配器），基座模型的生成吞吐是 {base_tok_s}，"
                      "经过适配器是 {rank8_tok_s}，即 {rank8_vs_base}，慢了 {rank8_slowdown}；首 token 时间从 {base_ttft} "
                      "变成 {rank8_ttft}。",
                "en": "For Qwen3-0.6B on one H200 (default mode, dummy weights, a random rank-8 adapter), generation "
                      "throughput was {base_tok_s} for the base model and {rank8_tok_s} through the adapter, "
                      "{rank8_vs_base}, {rank8_slowdown} slower; time to first token went from {base_ttft} to "
                      "{rank8_ttft}."},
        figure="cost",
        unsettled={"zh": "需要在同一服务器上交替测基座模型和适配器。", "en": "Settling it takes the base model and an adapter measured in turn on one server."}),
    Question(
        ask={"zh": "适配器的 rank 影响速度吗？", "en": "Does the adapter's rank change the speed?"},
        answer={"zh": "rank 64 的适配器吞吐 {rank64_tok_s}，是 rank 8（{rank8_tok_s}）的 {rank64_vs_rank8}。",
                "en": "A rank-64 adapter ran at {rank64_tok_s}, {rank64_vs_rank8} the rank-8 one's {rank8_tok_s}."},
        figure="cost",
        unsettled={"zh": "需要测几种 rank 的适配器。", "en": "Settling it takes adapters of several ranks."}),
    Question(
        ask={"zh": "请求用到的适配器多于 --max-loras 时会怎样？", "en": "What happens when requests use more adapters than --max-loras?"},
        answer={"zh": "--max-loras 2 时，请求轮流使用 1 个适配器的吞吐是 {one_adapter}，轮流使用 8 个时是 {eight_adapters}，"
                      "只有前者的 {eight_vs_one}。适配器多于槽位时，vLLM 要把它们换入换出（换入换出本身没有单独计时）。",
                "en": "With --max-loras 2, requests taking turns on one adapter ran at {one_adapter}, and on eight at "
                      "{eight_adapters}, {eight_vs_one} as fast. With more adapters than slots vLLM swaps them in and "
                      "out (the swaps themselves were not timed)."},
        figure="cost",
        unsettled={"zh": "需要让请求轮流使用不同数量的适配器。", "en": "Settling it takes requests rotating over different numbers of adapters."}),
    Question(
        ask={"zh": "LoRA 能和投机解码一起用吗？", "en": "Can LoRA be combined with speculative decoding?"},
        answer={"zh": "在 vLLM 0.26.0 上，带 ngram 投机解码和 LoRA 的服务器能否启动：{spec_started}；发往适配器的请求是否成功："
                      "{spec_adapter_ok}。",
                "en": "On vLLM 0.26.0, a server with ngram speculative decoding and LoRA started: {spec_started}; a "
                      "request to an adapter succeeded: {spec_adapter_ok}."},
        figure="speculative-decoding",
        unsettled={"zh": "需要启动一个同时开启两者的服务器。", "en": "Settling it takes a server started with both."}),
), title={"zh": "LoRA", "en": "LoRA"})
