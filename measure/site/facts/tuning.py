"""Where to start tuning (docs/tuning.*.md): the tuning ladder, --max-model-len, n-gram speculation, reranking under
concurrency and image size limits, on the H200; the CPU stand-in's figures in their own section."""

from measure.site.facts import Absent, Chart, NotMeasured, Question, Ratio, Table, Value, topic

H200 = "gpu-1x-nvidia-h200"
CPU = "cpu-2c-x86-64"


def on_h200(dataset: str, column: str, where: dict, digits: int | None = None, spread: bool = False,
            **more) -> Value:
    """A figure of the H200 (its loads and sizes are the GPU profile's, which the CPU stand-in's data lack)."""
    options = {"env": H200, "missing_ok": True} | ({"digits": digits} if digits is not None else {}) | ({"show_range": True} if spread else {})
    return Value(dataset, column, where, options | more)


def best(column: str, concurrency: int, digits: int | None = None) -> Value:
    """A cell of the ladder's verdict at one load; empty means no rung (its sentence drops itself, an Absent one
    says so)."""
    return on_h200("tuning_ladder.best", column, {"concurrency": concurrency}, digits, drops_if_empty=True)


def length(column: str, setting: str, digits: int = 0, spread: bool = False) -> Value:
    return on_h200("max_model_len.settings", column, {"max_model_len": setting}, digits, spread)


def speculation(column: str, mode: str, sampling: str, concurrency: int, digits: int = 2, spread: bool = True) -> Value:
    return on_h200("spec_ngram.compare", column, {"speculation": mode, "sampling": sampling, "concurrency": concurrency},
                   digits, spread)


def rerank(column: str, documents: int, concurrency: int, digits: int = 0) -> Value:
    return on_h200("rerank_concurrency.load", column, {"documents": documents, "concurrency": concurrency}, digits,
                   spread=True)


def layout(workload: str, name: str, concurrency: int, column: str = "tokens_per_s", digits: int = 0,
           spread: bool = True) -> Value:
    return on_h200("instances.load", column, {"workload": workload, "layout": name, "concurrency": concurrency},
                   digits, spread)


def image(column: str, set_in: str, max_pixels: str, digits: int = 0, spread: bool = False) -> Value:
    return on_h200("image_limits.tokens", column, {"set_in": set_in, "max_pixels": max_pixels, "side": 1344}, digits,
                   spread)


LADDER_COLUMNS = ["step", "added", "concurrency", "output_tok_s", "output_tok_s_min", "output_tok_s_max", "ttft_p50_ms",
                  "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "prefix_hit_share"]
# The tables and charts the page shows, declared once: both languages cite them by name
FIGURES = {
    "ladder_chart": Chart("tuning_ladder.rungs", x="step", y="output_tok_s", color="concurrency", kind="bar", env=H200,
        title={"zh": "每一级的输出吞吐（第 0 级为 vLLM 默认）", "en": "Output throughput per rung (step 0: vLLM's defaults)"},
        spread=("output_tok_s_min", "output_tok_s_max")),
    "ladder_table": Table("tuning_ladder.rungs", env=H200, columns=LADDER_COLUMNS),
    "gains_table": Table("tuning_ladder.gains", env=H200,
        columns=["step", "added", "concurrency", "metric", "ratio", "ratio_low", "ratio_high", "verdict"]),
    "length_table": Table("max_model_len.settings", env=H200,
        columns=["max_model_len", "context_tokens", "kv_cache_tokens", "max_concurrency", "startup_s", "output_tok_s",
                 "output_tok_s_min", "output_tok_s_max", "ttft_p50_ms", "tpot_p50_ms"]),
    "spec_table": Table("spec_ngram.compare", env=H200,
        columns=["speculation", "sampling", "concurrency", "tpot_p50_ms", "tpot_p50_ms_min", "tpot_p50_ms_max",
                 "output_tok_s", "draft_tokens_per_output", "acceptance", "started"]),
    "rerank_chart": Chart("rerank_concurrency.load", x="concurrency", y="pairs_per_s", color="documents", env=H200,
        kind="scatter", title={"zh": "并发下每秒打分的查询–文档对", "en": "Query–document pairs scored per second under concurrency"},
        spread=("pairs_per_s_min", "pairs_per_s_max")),
    "rerank_table": Table("rerank_concurrency.load", env=H200,
        columns=["documents", "concurrency", "pairs_per_s", "pairs_per_s_min", "pairs_per_s_max", "latency_p50_ms",
                 "latency_p99_ms", "pair_tokens"]),
    "image_table": Table("image_limits.tokens", env=H200,
        columns=["set_in", "max_pixels", "side", "accepted", "prompt_tokens", "ttft_ms", "ttft_ms_min", "ttft_ms_max",
                 "kv_mib", "encoder_cache_budget_tokens", "error"]),
    "ladder_table_cpu": Table("tuning_ladder.rungs", env=CPU, columns=LADDER_COLUMNS, collapsed=True,
        key="tuning_ladder.rungs:table:cpu"),
    "length_table_cpu": Table("max_model_len.settings", env=CPU, collapsed=True, key="max_model_len.settings:table:cpu",
        columns=["max_model_len", "context_tokens", "kv_cache_tokens", "max_concurrency", "startup_s", "output_tok_s"]),
    "spec_table_cpu": Table("spec_ngram.compare", env=CPU, collapsed=True, key="spec_ngram.compare:table:cpu",
        columns=["speculation", "sampling", "concurrency", "tpot_p50_ms", "output_tok_s", "draft_tokens_per_output",
                 "acceptance", "started", "error"]),
    "rerank_table_cpu": Table("rerank_concurrency.load", env=CPU, collapsed=True, key="rerank_concurrency.load:table:cpu",
        columns=["documents", "concurrency", "pairs_per_s", "latency_p50_ms", "latency_p99_ms"]),
    "instances_chart": Chart("instances.load", x="concurrency", y="tokens_per_s", color="layout", env=H200,
        kind="bar", where={"workload": "chat"}, spread=("tokens_per_s_min", "tokens_per_s_max"),
        title={"zh": "对话：各种布局的合计输出吞吐", "en": "Chat: total output throughput per layout"}),
    "instances_table": Table("instances.load", env=H200,
        columns=["workload", "layout", "concurrency", "tokens_per_s", "tokens_per_s_min", "tokens_per_s_max",
                 "ttft_p50_ms", "ttft_p99_ms", "latency_p50_ms", "api_cpu", "engine_cpu", "engine_cpu_max"]),
    "instances_table_cpu": Table("instances.load", env=CPU, collapsed=True, key="instances.load:table:cpu",
        columns=["workload", "layout", "concurrency", "tokens_per_s", "ttft_p50_ms", "api_cpu", "engine_cpu"]),
    "image_table_cpu": Table("image_limits.tokens", env=CPU, collapsed=True, key="image_limits.tokens:table:cpu",
        columns=["set_in", "max_pixels", "side", "accepted", "prompt_tokens", "ttft_ms", "kv_mib", "error"]),
}

topic("tuning", facts=FIGURES | {
    "best_256": best("best_added", 256),
    "gain_256": best("best_gain", 256, 2),
    "unchanged_256": best("unchanged", 256),
    "worse_256": best("worse", 256),
    "no_best_256": Absent("best_256"),
    "best_64": best("best_added", 64),
    "gain_64": best("best_gain", 64, 2),
    "no_best_64": Absent("best_64"),
    "kv_4k": length("kv_cache_tokens", "4096"),
    "kv_own": length("kv_cache_tokens", "model's own"),
    "kv_4k_vs_own": Ratio("kv_4k", "~", "kv_own"),
    "concurrency_4k": length("max_concurrency", "4096", 1),
    "concurrency_own": length("max_concurrency", "model's own", 1),
    "tok_s_4k": length("output_tok_s", "4096", spread=True),
    "tok_s_own": length("output_tok_s", "model's own", spread=True),
    "tok_s_4k_vs_own": Ratio("tok_s_4k", "~", "tok_s_own"),
    "start_4k": length("startup_s", "4096"),
    "start_own": length("startup_s", "model's own"),
    "accepted_greedy": speculation("acceptance", "ngram", "greedy", 1, spread=False),
    "tpot_ngram_greedy": speculation("tpot_p50_ms", "ngram", "greedy", 1),
    "tpot_none_greedy": speculation("tpot_p50_ms", "none", "greedy", 1),
    "tpot_greedy_ratio": Ratio("tpot_ngram_greedy", "<", "tpot_none_greedy"),
    "drafts_sampled": speculation("draft_tokens_per_output", "ngram", "sampled", 1, spread=False),
    "tpot_ngram_sampled": speculation("tpot_p50_ms", "ngram", "sampled", 1),
    "tpot_none_sampled": speculation("tpot_p50_ms", "none", "sampled", 1),
    "tpot_sampled_ratio": Ratio("tpot_ngram_sampled", "~", "tpot_none_sampled"),
    "tpot_ngram_greedy_16": speculation("tpot_p50_ms", "ngram", "greedy", 16),
    "tpot_none_greedy_16": speculation("tpot_p50_ms", "none", "greedy", 16),
    "tpot_ngram_sampled_16": speculation("tpot_p50_ms", "ngram", "sampled", 16),
    "tpot_none_sampled_16": speculation("tpot_p50_ms", "none", "sampled", 16),
    "gain_with_real_weights": NotMeasured({
        "zh": "真实权重下 n-gram 推测能省多少：虚拟权重写出的是噪声，草稿被接受的比例说明不了真实文本",
        "en": "what n-gram speculation saves with real weights: dummy weights write noise, so the share of drafts "
              "accepted says nothing about real text"}),
    "pairs_100_1": rerank("pairs_per_s", 100, 1),
    "pairs_100_32": rerank("pairs_per_s", 100, 32),
    "pairs_100_32_vs_1": Ratio("pairs_100_32", ">", "pairs_100_1"),
    "p99_100_1": rerank("latency_p99_ms", 100, 1),
    "p99_100_32": rerank("latency_p99_ms", 100, 32),
    "pairs_10_1": rerank("pairs_per_s", 10, 1),
    "pairs_10_32": rerank("pairs_per_s", 10, 32),
    "pairs_10_32_vs_1": Ratio("pairs_10_32", ">", "pairs_10_1"),
    "image_tokens_default": image("prompt_tokens", "none", "default"),
    "image_tokens_server": image("prompt_tokens", "server", "262144"),
    "image_tokens_request": image("prompt_tokens", "request, trusted server", "262144"),
    "image_tokens_cut": Ratio("image_tokens_server", "<<", "image_tokens_default"),
    "image_ttft_default": image("ttft_ms", "none", "default", 1, spread=True),
    "image_ttft_server": image("ttft_ms", "server", "262144", 1, spread=True),
    "image_ttft_cut": Ratio("image_ttft_server", "<", "image_ttft_default"),
    "image_kv_default": image("kv_mib", "none", "default", 1),
    "image_kv_server": image("kv_mib", "server", "262144", 1),
    "chat_one_256": layout("chat", "1 instance", 256),
    "chat_four_256": layout("chat", "4 instances", 256),
    "chat_api4_256": layout("chat", "1 server, 4 API servers", 256),
    "chat_four_vs_one": Ratio("chat_four_256", ">", "chat_one_256"),
    "chat_api4_vs_one": Ratio("chat_api4_256", ">", "chat_one_256"),
    "embed_one_256": layout("embeddings", "1 instance", 256),
    "embed_four_256": layout("embeddings", "4 instances", 256),
    "embed_four_vs_one": Ratio("embed_four_256", ">", "embed_one_256"),
    "chat_ttft99_one_256": layout("chat", "1 instance", 256, "ttft_p99_ms", spread=False),
    "chat_ttft99_four_256": layout("chat", "4 instances", 256, "ttft_p99_ms", spread=False),
    "engine_one_256": layout("chat", "1 instance", 256, "engine_cpu", digits=2, spread=False),
    # the CPU stand-in: one server configuration started twice (its own context is 4,096 tokens)
    "cpu_len_4096": Value("max_model_len.settings", "output_tok_s", {"max_model_len": "4096"},
                          {"env": CPU, "digits": 0, "show_range": True}),
    "cpu_len_own": Value("max_model_len.settings", "output_tok_s", {"max_model_len": "model's own"},
                         {"env": CPU, "digits": 0, "show_range": True}),
    "cpu_context_4096": Value("max_model_len.settings", "context_tokens", {"max_model_len": "4096"}, {"env": CPU}),
    "cpu_context_own": Value("max_model_len.settings", "context_tokens", {"max_model_len": "model's own"},
                             {"env": CPU}),
    "cpu_same_config_twice": Ratio("cpu_len_4096", "<", "cpu_len_own"),
}, questions=(
    Question(
        ask={"zh": "从 vLLM 的默认设置出发，先改哪一项收获最大？",
             "en": "Starting from vLLM's defaults, which change buys the most?"},
        answer={"zh": "256 个请求在途时收获最大的一级是 {best_256}：输出吞吐是上一级的 {gain_256}，先试这一项。{no_best_256}256 个在途时没有哪一级让输出吞吐可测地升高。{unchanged_256} 在那里分不出变化。{worse_256} 让吞吐变低。64 个在途时收获最大的是 {best_64}（{gain_64}）。{no_best_64}64 个在途时没有哪一级让吞吐可测地升高。",
                "en": "At 256 requests in flight the rung that bought most was {best_256}: {gain_256} the output throughput of the rung before; try it first. {no_best_256}No rung raised output throughput measurably at 256 in flight. {unchanged_256} made no measurable difference there. {worse_256} lowered throughput. At 64 in flight the most came from {best_64} ({gain_64}). {no_best_64}At 64 in flight no rung raised it measurably."},
        conditions={"zh": "H200 上的 Qwen3-8B，默认模式，虚拟权重；每个请求约 1k token 输入（其中一半是共享的系统提示）、256 个输出 token，每个负载三轮。",
                    "en": "Qwen3-8B on one H200, default mode, dummy weights; about 1k tokens in per request (half of them a shared system prompt), 256 out, three rounds at each load."},
        figure="ladder",
        unsettled={"zh": "需要在同一块 GPU 上依次启动阶梯的每一级，用同一组请求测两个负载。",
                   "en": "Settling it takes every rung of the ladder started in turn on one GPU, with the same requests at two loads."}),
    Question(
        ask={"zh": "把 --max-model-len 调小，能放下更多请求、跑得更快吗？",
             "en": "Does a smaller --max-model-len fit more requests or run faster?"},
        answer={"zh": "KV 缓存不变：--max-model-len 4096 时 {kv_4k} 个 token，用模型自己的上限时 {kv_own}（{kv_4k_vs_own}）。同样的请求，64 个在途时吞吐 {tok_s_4k} 对 {tok_s_own}（{tok_s_4k_vs_own}）。变的只是 vLLM 日志里按最长请求算出的并发数（{concurrency_4k} 对 {concurrency_own}），所以只在需要拒绝过长的请求时才调小它。",
                "en": "The KV cache stays the same: {kv_4k} tokens at --max-model-len 4096 and {kv_own} at the model's own limit ({kv_4k_vs_own}). With the same requests at 64 in flight, throughput was {tok_s_4k} against {tok_s_own} ({tok_s_4k_vs_own}). What changes is the concurrency vLLM's log works out for the longest request ({concurrency_4k} against {concurrency_own}), so lower it only to refuse requests longer than yours."},
        conditions={"zh": "H200 上的 Qwen3-8B，默认模式，虚拟权重，每个服务器独占 GPU；每个请求约 1k token 输入、128 个输出 token，三轮。",
                    "en": "Qwen3-8B on one H200, default mode, dummy weights, each server with the GPU to itself; about 1k tokens in and 128 out per request, three rounds."},
        caveats={"zh": "启动时间：4096 时 {start_4k}，模型自己的上限时 {start_own}，各只启动一次。",
                 "en": "Start-up: {start_4k} at 4096 and {start_own} at the model's own limit, one start each."},
        figure="max-model-len",
        unsettled={"zh": "需要在同一块 GPU 上用三种 --max-model-len 各启动一次，发同一组请求。",
                   "en": "Settling it takes one start at each of three --max-model-len settings on one GPU, with the same requests."}),
    Question(
        ask={"zh": "n-gram 推测解码能省多少时间，又要付出多少？",
             "en": "What does n-gram speculative decoding gain, and what does it cost?"},
        answer={"zh": "看草稿被接受得多不多：虚拟权重在贪心解码下会重复自己，vLLM 接受了 {accepted_greedy} 的草稿，1 个请求在途时每个输出 token 用 {tpot_ngram_greedy}，不开推测 {tpot_none_greedy}（{tpot_greedy_ratio}）。按温度 1 采样时写出随机 token，草稿很少出现（每个输出 token {drafts_sampled} 个草稿 token），每个输出 token 用 {tpot_ngram_sampled} 对 {tpot_none_sampled}（{tpot_sampled_ratio}）。真实文本在两者之间：{gain_with_real_weights}。",
                "en": "It depends on how many drafts are taken: under greedy decoding dummy weights repeat themselves, vLLM accepted {accepted_greedy} of the drafts, and at 1 request in flight each output token took {tpot_ngram_greedy} against {tpot_none_greedy} without speculation ({tpot_greedy_ratio}). Sampled at temperature 1 they write random tokens and drafts seldom come ({drafts_sampled} draft tokens per output token): {tpot_ngram_sampled} against {tpot_none_sampled} ({tpot_sampled_ratio}). Real text lies between: {gain_with_real_weights}."},
        conditions={"zh": "H200 上的 Qwen3-8B，默认模式，虚拟权重；每步最多猜 4 个 token，同一组请求，三轮。",
                    "en": "Qwen3-8B on one H200, default mode, dummy weights; up to 4 draft tokens a step, the same requests, three rounds."},
        caveats={"zh": "16 个在途时：贪心 {tpot_ngram_greedy_16} 对 {tpot_none_greedy_16}，采样 {tpot_ngram_sampled_16} 对 {tpot_none_sampled_16}。",
                 "en": "At 16 in flight: greedy {tpot_ngram_greedy_16} against {tpot_none_greedy_16}, sampled {tpot_ngram_sampled_16} against {tpot_none_sampled_16}."},
        figure="speculative-decoding",
        unsettled={"zh": "需要同一组请求分别发给开、关 n-gram 推测的服务器，贪心和采样各一次，并读 vLLM 的草稿计数。",
                   "en": "Settling it takes the same requests, greedy and sampled, sent to servers with and without n-gram speculation, with vLLM's draft counters read."}),
    Question(
        ask={"zh": "重排服务在并发下每秒能打多少对？",
             "en": "How many pairs per second does a reranker score under concurrency?"},
        answer={"zh": "每个请求 100 篇文档时，32 个在途每秒打 {pairs_100_32} 对，一次一个时 {pairs_100_1}（{pairs_100_32_vs_1}）；代价是第 99 百分位延迟从 {p99_100_1} 升到 {p99_100_32}。每个请求 10 篇文档时是 {pairs_10_32} 对 {pairs_10_1}（{pairs_10_32_vs_1}）。",
                "en": "With 100 documents a request, 32 in flight scored {pairs_100_32} against {pairs_100_1} one request at a time ({pairs_100_32_vs_1}), and the 99th-percentile latency rose from {p99_100_1} to {p99_100_32}. With 10 documents a request it was {pairs_10_32} against {pairs_10_1} ({pairs_10_32_vs_1})."},
        conditions={"zh": "H200 上的 Qwen3-Reranker-0.6B，默认模式，虚拟权重；每篇文档约 256 个 token，三轮。",
                    "en": "Qwen3-Reranker-0.6B on one H200, default mode, dummy weights; about 256 tokens a document, three rounds."},
        figure="rerank-concurrency",
        unsettled={"zh": "需要在 1、8、32 个在途时，发 10 篇和 100 篇文档的重排请求。",
                   "en": "Settling it takes rerank requests of 10 and 100 documents at 1, 8 and 32 in flight."}),
    Question(
        ask={"zh": "给图像设像素上限，能减少图像 token 和首 token 时间吗？",
             "en": "Does limiting max_pixels cut image tokens and time to first token?"},
        answer={"zh": "能：1344×1344 的图不设限时占 {image_tokens_default} 个 token，服务器上把像素上限设为 262144 后只占 {image_tokens_server}（{image_tokens_cut}），首 token 时间从 {image_ttft_default} 降到 {image_ttft_server}（{image_ttft_cut}）。服务器用 --trust-request-mm-kwargs 启动时，在单个请求里设同样的限制，得到 {image_tokens_request} 个 token。",
                "en": "Yes: a 1344×1344 image took {image_tokens_default} tokens with no limit and {image_tokens_server} with max_pixels 262144 set on the server ({image_tokens_cut}); its first token came after {image_ttft_server} instead of {image_ttft_default} ({image_ttft_cut}). Set in one request to a server started with --trust-request-mm-kwargs, the same limit gave {image_tokens_request} tokens."},
        conditions={"zh": "H200 上的 Qwen3-VL-2B-Instruct，默认模式，虚拟权重；每次一个请求、一张没发过的图。",
                    "en": "Qwen3-VL-2B-Instruct on one H200, default mode, dummy weights; one request at a time, each with an image not sent before."},
        caveats={"zh": "这张图占用的 KV 缓存：不设限 {image_kv_default}，限制后 {image_kv_server}。",
                 "en": "The KV cache the image takes: {image_kv_default} with no limit, {image_kv_server} with it."},
        figure="image-limits",
        unsettled={"zh": "需要把同样的图分别发给不设限、服务器设限和请求里设限的三种情形。",
                   "en": "Settling it takes the same images sent with no limit, with a server-wide limit and with a per-request limit."}),
    Question(
        ask={"zh": "一块 GPU 上跑一个服务器好，还是跑几个小实例好？",
             "en": "One server or several small instances on one GPU?"},
        answer={"zh": "对话请求 256 个在途时，4 个实例合计输出 {chat_four_256}，1 个实例 {chat_one_256}（{chat_four_vs_one}）；1 个服务器开 4 个 API 进程是 {chat_api4_256}（{chat_api4_vs_one}）。嵌入请求：4 个实例 {embed_four_256}，1 个 {embed_one_256}（{embed_four_vs_one}）。",
                "en": "With 256 chat requests in flight, 4 instances together delivered {chat_four_256} against {chat_one_256} from one ({chat_four_vs_one}); one server with 4 API processes delivered {chat_api4_256} ({chat_api4_vs_one}). Embeddings: {embed_four_256} from 4 instances against {embed_one_256} from one ({embed_four_vs_one})."},
        conditions={"zh": "H200 上的 Qwen3-0.6B 和 Qwen3-Embedding-0.6B，默认模式，虚拟权重；所有实例共用 0.8 的显存份额，在途请求平均分给各实例，三轮。",
                    "en": "Qwen3-0.6B and Qwen3-Embedding-0.6B on one H200, default mode, dummy weights; the instances share 0.8 of the memory, requests in flight split evenly over them, three rounds."},
        caveats={"zh": "对话首 token 时间的第 99 百分位：1 个实例 {chat_ttft99_one_256}，4 个实例 {chat_ttft99_four_256}。1 个实例时，它的引擎核心进程用了 {engine_one_256} 个核。",
                 "en": "Chat's 99th-percentile time to first token: {chat_ttft99_one_256} with one instance, {chat_ttft99_four_256} with four. With one instance its engine core used {engine_one_256} cores."},
        figure="instances",
        unsettled={"zh": "需要在同一块 GPU 上同时启动多个实例，由同一个客户端一起加载。",
                   "en": "Settling it takes several instances started together on one GPU and loaded together by one client."}),
), title={"zh": "从哪里开始调", "en": "Where to start tuning"})
