"""Memory and capacity (docs/capacity.*.md): decode against the bandwidth floor, what the memory setting buys in KV
tokens and requests, what a full cache does, the fp8 KV cache, batch limits, and --api-server-count. Answers cite the
H200 (full-size Qwen3, dummy weights, default mode); an H100 lease's figures sit in the page's "On other GPUs" section."""

from measure.site.facts import Chart, Product, Question, Ratio, Table, Unconfirmed, Value, topic

H200 = "gpu-1x-nvidia-h200"


def on(env: str, dataset: str, column: str, digits: int = 1, spread: bool = False, round_down: bool = False,
       missing_ok: bool = False, **where) -> Value:
    return Value(dataset, column, where, {"env": env, "digits": digits, "show_range": spread, "missing_ok": missing_ok,
                                          "round_down": round_down})


def h200(dataset: str, column: str, digits: int = 1, spread: bool = False, round_down: bool = False,
         **where) -> Value:
    # missing_ok: some H200 rows of these experiments are still to come; until then they render 未实测, with what
    # would settle each answer
    return on(H200, dataset, column, digits, spread, round_down, missing_ok=True, **where)


def memory(column: str, utilization: str, digits: int = 1, round_down: bool = False) -> Value:
    return h200("capacity.memory", column, digits, round_down=round_down,
                setting=f"--gpu-memory-utilization {utilization}")


def knee(column: str, utilization: str, concurrency: int, digits: int = 0) -> Value:
    return h200("capacity.knee", column, digits, setting=f"--gpu-memory-utilization {utilization}",
                concurrency=concurrency)


def batch(column: str, seqs: int, tokens: int, digits: int = 1, spread: bool = False) -> Value:
    return h200("batch_limits.grid", column, digits, spread, max_num_seqs=seqs, max_num_batched_tokens=tokens)


def kv(column: str, dtype: str, prompt: int, digits: int = 1) -> Value:
    return h200("kv_dtype.compare", column, digits, kv_cache_dtype=dtype, prompt_tokens=prompt)


def front(column: str, model: str, count: int, concurrency: int, digits: int = 0, spread: bool = False) -> Value:
    return h200("api_servers.load", column, digits, spread, model=model, api_server_count=count,
                concurrency=concurrency)


CPU = "cpu-2c-x86-64"

# The tables and charts the page shows, declared once: both languages cite them by name
FIGURES = {
    "decode_floor_table_h200": Table("capacity.decode_floor", env="gpu-1x-nvidia-h200",
        columns=["model", "weight_gb", "bandwidth_gb_s", "floor_ms", "tpot_ms", "tpot_ms_min", "tpot_ms_max",
            "floor_share_pct"]),
    "memory_table_h200": Table("capacity.memory", env="gpu-1x-nvidia-h200",
        columns=["setting", "model_load_gib", "kv_cache_gib", "kv_cache_tokens", "requests_fit", "max_concurrency",
            "max_concurrency_tokens"]),
    "knee_chart_h200": Chart("capacity.knee", x="concurrency", y="ttft_p99_ms", color="setting",
        env="gpu-1x-nvidia-h200", log_x=True),
    "knee_table_h200": Table("capacity.knee", env="gpu-1x-nvidia-h200", collapsed=True,
        columns=["setting", "concurrency", "output_tok_s", "output_tok_s_min", "output_tok_s_max", "ttft_p50_ms",
            "ttft_p99_ms", "tpot_p50_ms", "preemptions"]),
    "kv_dtype_compare_table_h200": Table("kv_dtype.compare", env="gpu-1x-nvidia-h200",
        columns=["kv_cache_dtype", "prompt_tokens", "kv_cache_tokens", "ttft_ms", "tpot_ms", "output_tok_s",
            "output_tok_s_min", "output_tok_s_max", "concurrency"]),
    "batch_limits_grid_table_h200": Table("batch_limits.grid", env="gpu-1x-nvidia-h200",
        columns=["max_num_seqs", "max_num_batched_tokens", "output_tok_s", "output_tok_s_min", "output_tok_s_max",
            "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "preemptions", "concurrency"]),
    "api_servers_load_chart_h200": Chart("api_servers.load", key="api_servers.load:chart:h200", x="concurrency",
        y="tokens_per_s", color="api_server_count", env="gpu-1x-nvidia-h200", where={"model": "Qwen3-0.6B"},
        log_x=True, spread=("tokens_per_s_min", "tokens_per_s_max")),
    "api_servers_load_table_h200_256": Table("api_servers.load", env="gpu-1x-nvidia-h200", where={"concurrency": 256},
        key="api_servers.load:table:256:h200",
        columns=["model", "api_server_count", "api_processes", "tokens_per_s", "ttft_p50_ms", "api_cpu_max",
            "engine_cpu"]),
    "api_servers_load_table_h200_all": Table("api_servers.load", key="api_servers.load:table:all:h200",
        env="gpu-1x-nvidia-h200", collapsed=True,
        columns=["model", "api_server_count", "api_processes", "concurrency", "tokens_per_s", "tokens_per_s_min",
            "tokens_per_s_max", "ttft_p50_ms", "itl_p50_ms", "api_cpu", "api_cpu_max", "engine_cpu"]),
    "api_servers_load_table_cpu": Table("api_servers.load", env="cpu-2c-x86-64", key="api_servers.load:table:cpu",
        columns=["workload", "api_server_count", "processes", "concurrency", "tokens_per_s", "api_cpu", "engine_cpu"]),
    "decode_floor_table_h100": Table("capacity.decode_floor", env="gpu-1x-nvidia-h100-80gb-hbm3",
        key="capacity.decode_floor:table:h100",
        columns=["model", "weight_gb", "bandwidth_gb_s", "floor_ms", "tpot_ms", "tpot_ms_min", "tpot_ms_max",
            "floor_share_pct", "beyond_floor_ms"]),
    "memory_table_h100": Table("capacity.memory", env="gpu-1x-nvidia-h100-80gb-hbm3",
        key="capacity.memory:table:h100",
        columns=["setting", "started", "kv_cache_gib", "kv_cache_tokens", "requests_fit", "max_concurrency", "error"]),
    "api_servers_load_chart_h100": Chart("api_servers.load", x="concurrency", y="tokens_per_s",
        color="api_server_count", env="gpu-1x-nvidia-h100-80gb-hbm3", where={"model": "Qwen3-0.6B"}, log_x=True,
        spread=("tokens_per_s_min", "tokens_per_s_max")),
    "api_servers_load_table_h100_256": Table("api_servers.load", env="gpu-1x-nvidia-h100-80gb-hbm3",
        where={"concurrency": 256}, key="api_servers.load:table:256",
        columns=["model", "api_server_count", "api_processes", "tokens_per_s", "ttft_p50_ms", "api_cpu_max",
            "engine_cpu"]),
    "api_servers_load_table_h100_all": Table("api_servers.load", env="gpu-1x-nvidia-h100-80gb-hbm3", collapsed=True,
        columns=["model", "api_server_count", "api_processes", "concurrency", "tokens_per_s", "tokens_per_s_min",
            "tokens_per_s_max", "ttft_p50_ms", "itl_p50_ms", "api_cpu", "api_cpu_max", "engine_cpu"]),
    "knee_chart_cpu": Chart("capacity.knee", x="concurrency", y="ttft_p50_ms", color="setting", env="cpu-2c-x86-64",
        log_x=True, key="capacity.knee:chart:cpu"),
    "kv_dtype_compare_table_cpu": Table("kv_dtype.compare", env="cpu-2c-x86-64", key="kv_dtype.compare:table:cpu",
        columns=["kv_cache_dtype", "prompt_tokens", "kv_cache_tokens", "ttft_ms", "tpot_ms", "output_tok_s",
            "concurrency"]),
    "batch_limits_grid_table_cpu": Table("batch_limits.grid", env="cpu-2c-x86-64", key="batch_limits.grid:table:cpu",
        columns=["max_num_seqs", "max_num_batched_tokens", "output_tok_s", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms",
            "concurrency"]),
}

topic("capacity", facts=FIGURES | {
    "api_chat_1": front("tokens_per_s", "Qwen3-0.6B", 1, 256, spread=True),
    "api_chat_4": front("tokens_per_s", "Qwen3-0.6B", 4, 256, spread=True),
    "api_chat_4_vs_1": Ratio("api_chat_4", ">>", "api_chat_1", digits=1),
    "api_chat_cpu_1": front("api_cpu", "Qwen3-0.6B", 1, 256, digits=2),
    "api_engine_cpu_1": front("engine_cpu", "Qwen3-0.6B", 1, 256, digits=2),
    "api_engine_cpu_4": front("engine_cpu", "Qwen3-0.6B", 4, 256, digits=2),
    "api_engine_busier_4": Ratio("api_engine_cpu_4", ">", "api_engine_cpu_1", show=False),
    "api_chat_ttft_1": front("ttft_p50_ms", "Qwen3-0.6B", 1, 256),
    "api_chat_ttft_4": front("ttft_p50_ms", "Qwen3-0.6B", 4, 256),
    "api_chat_ttft_4_vs_1": Ratio("api_chat_ttft_4", "<<", "api_chat_ttft_1", show=False),
    "api_chat_16_1": front("tokens_per_s", "Qwen3-0.6B", 1, 16),
    "api_chat_16_4": front("tokens_per_s", "Qwen3-0.6B", 4, 16),
    "api_chat_16_4_vs_1": Ratio("api_chat_16_4", ">", "api_chat_16_1"),
    "api_gain_small_at_16": Ratio("api_chat_16_4", "≈", "api_chat_16_1", show=False),
    "api_chat_16_engine_cpu_1": front("engine_cpu", "Qwen3-0.6B", 1, 16, digits=2),
    "api_8b_1": front("tokens_per_s", "Qwen3-8B", 1, 256),
    "api_8b_4": front("tokens_per_s", "Qwen3-8B", 4, 256),
    "api_8b_4_vs_1": Ratio("api_8b_4", ">", "api_8b_1"),
    "api_8b_cpu_1": front("api_cpu", "Qwen3-8B", 1, 256, digits=2),
    "api_8b_cpu_below_06b": Ratio("api_8b_cpu_1", "<", "api_chat_cpu_1", show=False),
    "api_embed_1": front("tokens_per_s", "Qwen3-Embedding-0.6B", 1, 256),
    "api_embed_4": front("tokens_per_s", "Qwen3-Embedding-0.6B", 4, 256),
    "api_embed_4_vs_1": Ratio("api_embed_4", ">>", "api_embed_1", digits=1),
    "api_embed_cpu_1": front("api_cpu", "Qwen3-Embedding-0.6B", 1, 256, digits=2),
    "api_processes_cpu": Value("api_servers.load", "api_processes",
                               {"model": "tiny-Qwen3-0.6B", "api_server_count": 2, "concurrency": 8},
                               {"env": CPU, "unit": ""}),
    "tpot_06b": h200("capacity.decode_floor", "tpot_ms", 2, spread=True, model="Qwen3-0.6B"),
    "floor_06b": h200("capacity.decode_floor", "floor_ms", 2, model="Qwen3-0.6B"),
    "floor_share_06b": h200("capacity.decode_floor", "floor_share_pct", 0, model="Qwen3-0.6B"),
    "floor_far_below_06b": Ratio("floor_06b", "<<", "tpot_06b", show=False),
    "bandwidth": h200("capacity.bandwidth", "bandwidth_gb_s", 0),
    "weight_gb_06b": h200("capacity.decode_floor", "weight_gb", 2, model="Qwen3-0.6B"),
    "tpot_8b": h200("capacity.decode_floor", "tpot_ms", 2, model="Qwen3-8B"),
    "floor_8b": h200("capacity.decode_floor", "floor_ms", 2, model="Qwen3-8B"),
    "floor_share_8b": h200("capacity.decode_floor", "floor_share_pct", 0, model="Qwen3-8B"),
    "floor_share_8b_vs_06b": Ratio("floor_share_8b", ">>", "floor_share_06b", show=False),
    "weight_gb_8b": h200("capacity.decode_floor", "weight_gb", 1, model="Qwen3-8B"),
    "kv_gib_09": memory("kv_cache_gib", "0.9"),
    "kv_tokens_09": memory("kv_cache_tokens", "0.9", 0),
    # the 0.9 server was started for its start-up facts only: its KV tokens ÷ the knee request's tokens
    "fit_09": Product("kv_tokens_09", "request_tokens", "requests", divide=True),
    "vllm_concurrency_09": memory("max_concurrency", "0.9"),
    "context_tokens": memory("max_concurrency_tokens", "0.9", 0),
    "request_tokens": memory("request_tokens", "0.06", 0),
    "kv_gib_006": memory("kv_cache_gib", "0.06"),
    "fit_006": memory("requests_fit", "0.06", 0, round_down=True),
    "fit_02": memory("requests_fit", "0.2", 0, round_down=True),
    # the wait shows in the tail (p99): the median request still starts at once while the last ones queue
    "ttft99_006_32": knee("ttft_p99_ms", "0.06", 32),
    "ttft99_006_64": knee("ttft_p99_ms", "0.06", 64),
    "ttft99_006_growth": Ratio("ttft99_006_64", ">>", "ttft99_006_32", digits=1),
    "preempt_006_64": knee("preemptions", "0.06", 64),
    "ttft_006_64": knee("ttft_p50_ms", "0.06", 64),
    "ttft_02_64": knee("ttft_p50_ms", "0.2", 64),
    "median_hides_wait": Ratio("ttft_006_64", "<", "ttft_02_64", show=False),
    # ... until far more requests are in flight than fit: then the median waits too
    "ttft_006_128": knee("ttft_p50_ms", "0.06", 128),
    "ttft_02_128": knee("ttft_p50_ms", "0.2", 128),
    "median_waits_far_past": Ratio("ttft_006_128", ">>", "ttft_02_128", digits=1),
    "ttft99_02_128": knee("ttft_p99_ms", "0.2", 128),
    "preempt_02_128": knee("preemptions", "0.2", 128),
    "tok_s_006_128": knee("output_tok_s", "0.06", 128),
    "tok_s_02_128": knee("output_tok_s", "0.2", 128),
    "tok_s_02_vs_006": Ratio("tok_s_02_128", ">", "tok_s_006_128"),
    "kv_tokens_auto": kv("kv_cache_tokens", "auto", 1024, 0),
    "kv_tokens_fp8": kv("kv_cache_tokens", "fp8", 1024, 0),
    "kv_tokens_fp8_vs_auto": Ratio("kv_tokens_fp8", ">", "kv_tokens_auto", digits=1),
    "tpot_auto_16k": kv("tpot_ms", "auto", 16384, 2),
    "tpot_fp8_16k": kv("tpot_ms", "fp8", 16384, 2),
    "tpot_fp8_vs_auto_16k": Ratio("tpot_fp8_16k", "≈", "tpot_auto_16k", show=False),
    "tok_s_auto_16k": kv("output_tok_s", "auto", 16384, 0),
    "tok_s_fp8_16k": kv("output_tok_s", "fp8", 16384, 0),
    "tok_s_fp8_vs_auto_16k": Ratio("tok_s_fp8_16k", ">", "tok_s_auto_16k"),
    "kv_concurrency_16k": kv("concurrency", "auto", 16384, 0),
    "kv_prompt_16k": kv("prompt_tokens", "auto", 16384, 0),
    "kv_need_16k": Product("kv_concurrency_16k", "kv_prompt_16k", "tokens"),
    "kv_need_fills_auto": Ratio("kv_need_16k", "≥", "kv_tokens_auto", show=False),
    "kv_fp8_holds_all": Ratio("kv_tokens_fp8", ">>", "kv_need_16k", show=False),
    "fp8_gap_cause": Unconfirmed({"zh": "KV 缓存类型这项实验既不记录抢占次数，也不记录请求为等待 KV 空间等了多久",
                                  "en": "the KV-cache dtype measurement counts neither preemptions nor how long requests "
                                        "waited for room"}),
    "ttft_auto_16k": kv("ttft_ms", "auto", 16384, 0),
    "ttft_fp8_16k": kv("ttft_ms", "fp8", 16384, 0),
    "batch_prompt": batch("prompt_tokens", 128, 8192, 0),
    "batch_tok_s_8": batch("output_tok_s", 8, 8192, 0, spread=True),
    "batch_tok_s_128": batch("output_tok_s", 128, 8192, 0, spread=True),
    "batch_tok_s_128_vs_8": Ratio("batch_tok_s_128", ">>", "batch_tok_s_8", digits=1),
    "batch_ttft99_8": batch("ttft_p99_ms", 8, 8192, 0),
    "batch_ttft99_128": batch("ttft_p99_ms", 128, 8192, 0),
    "batch_tpot50_8": batch("tpot_p50_ms", 8, 8192, 2),
    "batch_tpot50_128": batch("tpot_p50_ms", 128, 8192, 2),
    "batch_ttft50_128_2048": batch("ttft_p50_ms", 128, 2048, 0),
    "batch_ttft50_128_8192": batch("ttft_p50_ms", 128, 8192, 0),
    "batch_tpot50_128_2048": batch("tpot_p50_ms", 128, 2048, 2),
    "batch_tok_s_128_2048": batch("output_tok_s", 128, 2048, 0, spread=True),
    # at 128 in flight a smaller token budget made all three worse
    "batch_2048_ttft_worse": Ratio("batch_ttft50_128_2048", ">", "batch_ttft50_128_8192", show=False),
    "batch_2048_tpot_worse": Ratio("batch_tpot50_128_2048", ">", "batch_tpot50_128", show=False),
    "batch_2048_tok_s_worse": Ratio("batch_tok_s_128_2048", "<", "batch_tok_s_128", show=False),
}, questions=(
    Question(
        ask={"zh": "小模型在大 GPU 上解码很慢，是 GPU 的问题还是服务器的问题？",
             "en": "A small model decodes slowly on a big GPU: is it the GPU or the server?"},
        answer={"zh": "不是显存带宽：在 H200 上，Qwen3-0.6B 每个输出 token 用 {tpot_06b}，读一遍权重的下限只占其中 {floor_share_06b}。换带宽更高的卡帮不了它；让更多请求同时在途，分摊每步的固定开销。",
                "en": "Not the memory bandwidth: on the H200, Qwen3-0.6B took {tpot_06b} per output token, of which reading its weights once accounts for only {floor_share_06b}. A card with more bandwidth will not speed it up; more requests in flight share each step's fixed costs."},
        conditions={"zh": "一次一个请求，默认模式，虚拟权重；下限 = {weight_gb_06b} 权重 ÷ 实测带宽 {bandwidth} = {floor_06b}{floor_far_below_06b}。",
                    "en": "One request at a time, default mode, dummy weights; floor = {weight_gb_06b} of weights ÷ measured bandwidth {bandwidth} = {floor_06b}{floor_far_below_06b}."},
        caveats={"zh": "其余时间花在启动内核、注意力、采样、调度器和步与步之间的 API 服务器上（这里没有分开测）。Qwen3-8B 每步要读 {weight_gb_8b} 权重，每个输出 token 用 {tpot_8b}，下限 {floor_8b}，占每步时间的 {floor_share_8b}{floor_share_8b_vs_06b}：大模型才是被显存带宽拖住的。",
                 "en": "The rest of a step goes to kernel launches, attention, sampling, the scheduler and the API server between steps (not measured apart here). Qwen3-8B reads {weight_gb_8b} a step; it took {tpot_8b} per output token against a floor of {floor_8b}, {floor_share_8b} of a step{floor_share_8b_vs_06b}: the large model is the one memory bandwidth holds back."},
        figure="decode-floor",
        unsettled={"zh": "H200 上还没有把 Qwen3-8B 的单请求解码和带宽下限放在一起测（其他页面在别的负载下测过它的单请求速度）："
                         "再跑一次 `capacity` 实验即可。",
                   "en": "Qwen3-8B's single-request decode has not been set against the bandwidth floor on the H200 yet "
                         "(other pages measured its single-request speed under other workloads): one more run of the "
                         "`capacity` experiment settles it."},
        elsewhere="other-gpus-decode-floor"),
    Question(
        ask={"zh": "为什么 vLLM 给一个小模型占掉约 90% 的显存？这些显存能同时装下多少请求？",
             "en": "Why does vLLM take about 90 % of the GPU for a small model, and how many requests does that hold?"},
        answer={"zh": "vLLM 0.26 的源码把 --gpu-memory-utilization 的默认值定为 0.92（这里的服务器显式写了 0.9）：vLLM 在权重和激活之外，"
                      "把这份额度剩下的部分全留给 KV 缓存。"
                      "在 H200 上，0.9 时 Qwen3-0.6B 的 KV 缓存有 {kv_gib_09}，{kv_tokens_09}，够 {fit_09}"
                      "（每个 {request_tokens}，1k 输入、256 输出）同时在途。vLLM 日志里的“最大并发” {vllm_concurrency_09} 是按每个请求占满"
                      " {context_tokens} 的上下文算的。",
                "en": "vLLM 0.26's source (vllm/config/cache.py) sets --gpu-memory-utilization's default to 0.92 (the servers "
                      "here pass 0.9): "
                      "beyond the weights and activations, vLLM gives the rest of that share to the KV cache. On the H200, "
                      "at 0.9 Qwen3-0.6B had {kv_gib_09} of KV cache, {kv_tokens_09}: room "
                      "for {fit_09} of {request_tokens} each (1k in, 256 out) at once. The \"maximum concurrency\" "
                      "vLLM logs, {vllm_concurrency_09}, assumes every request fills the model's {context_tokens} "
                      "context."},
        figure="memory-setting",
        unsettled={"zh": "需要在 H200 上以 0.9 启动一次，读出 vLLM 记录的 KV 缓存大小。",
                   "en": "Settling it takes one start at 0.9 on the H200 and the KV-cache size vLLM logs."}),
    Question(
        ask={"zh": "KV 缓存装满之后会怎样？", "en": "What happens when the KV cache is full?"},
        answer={"zh": "放不下的请求要排队，等的是队尾：--gpu-memory-utilization 0.06（装得下 {fit_006}）时，64 个在途的首 token p99 是 32 个在途时的 {ttft99_006_growth}（{ttft99_006_64} 对 {ttft99_006_32}），vLLM 抢占了 {preempt_006_64} 次。给 KV 缓存留够空间，让预期的在途请求都装得下。",
                "en": "Requests that do not fit queue, and the tail waits: at --gpu-memory-utilization 0.06 (room for {fit_006}), the p99 first token with 64 in flight took {ttft99_006_growth} as long as with 32 ({ttft99_006_64} against {ttft99_006_32}), and vLLM preempted {preempt_006_64} times. Give the KV cache room for the requests you expect in flight."},
        conditions={"zh": "H200 上的 Qwen3-0.6B；0.06 时 KV 缓存只有 {kv_gib_006}。",
                    "en": "Qwen3-0.6B on one H200; at 0.06 the KV cache had {kv_gib_006}."},
        caveats={"zh": "放不下的请求先排队，或被挤出去以后重算。刚超出容量时中位数几乎看不出来（64 个在途时 0.06 是 {ttft_006_64}，0.2 是 {ttft_02_64}{median_hides_wait}，装满的反而更低，原因这里没有测）：大多数请求仍然马上开始，等的是队尾。远超容量时中位数也要等：128 个在途时 0.06 是 {ttft_006_128}，0.2 是 {ttft_02_128}（{median_waits_far_past}）。0.2 时（装得下 {fit_02}）128 个在途的 p99 首 token 是 {ttft99_02_128}，抢占 {preempt_02_128} 次，输出吞吐 {tok_s_02_128}，是 0.06 时 {tok_s_006_128} 的 {tok_s_02_vs_006}。",
                 "en": "Requests that do not fit wait, or are pushed out and computed again. Just past the room the median hardly shows it (at 64 in flight {ttft_006_64} at 0.06 against {ttft_02_64} at 0.2{median_hides_wait}; the full cache's was even the lower, for a reason not measured here): most requests still start at once, and the tail waits. Far past the room the median waits too: at 128 in flight, {ttft_006_128} at 0.06 against {ttft_02_128} at 0.2 ({median_waits_far_past}). At 0.2 (room for {fit_02}) 128 in flight got their p99 first token after {ttft99_02_128}, with {preempt_02_128} preemptions and {tok_s_02_128} of output, {tok_s_02_vs_006} the {tok_s_006_128} at 0.06."},
        figure="full-cache",
        unsettled={"zh": "需要在 H200 上以几档显存设置启动，把并发加到 KV 缓存装满。",
                   "en": "Settling it takes starts at several memory settings on the H200 and concurrency raised until "
                         "the KV cache is full."}),
    Question(
        ask={"zh": "fp8 KV 缓存是让推理更快，还是只多出空间？",
             "en": "Does an fp8 KV cache make inference faster, or only add room?"},
        answer={"zh": "主要是多出空间：同样的 KV 字节数，fp8 装下的 token 是 auto（bf16）的 {kv_tokens_fp8_vs_auto}；一次一个请求时两者几乎一样快（每个输出 token {tpot_fp8_16k} 对 {tpot_auto_16k}{tpot_fp8_vs_auto_16k}）。请求因 KV 空间不够而排队时，fp8 才划算。",
                "en": "Mostly room: in the same KV bytes fp8 held {kv_tokens_fp8_vs_auto} the tokens of auto (bf16), and one request at a time the two were about as fast (an output token {tpot_fp8_16k} against {tpot_auto_16k}{tpot_fp8_vs_auto_16k}). fp8 pays where requests queue for KV space."},
        conditions={"zh": "H200 上的 Qwen3-8B，16k token 的提示；虚拟权重，对回答质量的影响这里没有测。",
                    "en": "Qwen3-8B on one H200, 16k-token prompts; dummy weights, so what fp8 does to the answers is not measured here."},
        caveats={"zh": "fp8 装下 {kv_tokens_fp8}，auto 装下 {kv_tokens_auto}；一次一个请求时首 token 是 {ttft_fp8_16k} 对 {ttft_auto_16k}。同样的提示 16 个同时在途时，fp8 的输出吞吐是 {tok_s_fp8_16k}，auto 是 {tok_s_auto_16k}（{tok_s_fp8_vs_auto_16k}）。光是这 16 个提示就要 {kv_need_16k}{kv_need_fills_auto}，已经占满 auto 的整个缓存，再加上输出，总有请求要在 auto 里等待 KV 空间或被抢占，在 fp8 里则不必{kv_fp8_holds_all}；这一差距是否全来自于此，还没有确认 {fp8_gap_cause}。",
                 "en": "fp8 held {kv_tokens_fp8} and auto {kv_tokens_auto}; one at a time the first token came after {ttft_fp8_16k} against {ttft_auto_16k}. With 16 of those prompts in flight, fp8 delivered {tok_s_fp8_16k} of output and auto {tok_s_auto_16k} ({tok_s_fp8_vs_auto_16k}). The 16 prompts alone take {kv_need_16k}{kv_need_fills_auto}, all of auto's cache: with their output, some requests had to wait or be preempted under auto and none had to under fp8{kv_fp8_holds_all}; whether that is the whole gap is not confirmed {fp8_gap_cause}."},
        figure="kv-dtype",
        unsettled={"zh": "需要在 H200 上让两个 Qwen3-8B 服务器（auto 与 fp8）分到同样的 KV 字节数，测同样的请求。",
                   "en": "Settling it takes two Qwen3-8B servers on the H200, auto and fp8, with the same KV bytes, "
                         "sent the same requests."}),
    Question(
        ask={"zh": "--max-num-seqs 和 --max-num-batched-tokens 该怎么设？",
             "en": "How should --max-num-seqs and --max-num-batched-tokens be set?"},
        answer={"zh": "--max-num-seqs 设到不低于预期的在途请求数，--max-num-batched-tokens 在这种负载下不要往小调：128 个请求在途时，--max-num-seqs 128 的输出吞吐是 8 的 {batch_tok_s_128_vs_8}（{batch_tok_s_128} 对 {batch_tok_s_8}）。",
                "en": "Set --max-num-seqs at least as high as the requests you expect in flight, and do not lower --max-num-batched-tokens for a load like this: with 128 requests in flight, --max-num-seqs 128 delivered {batch_tok_s_128_vs_8} the output of 8 ({batch_tok_s_128} against {batch_tok_s_8})."},
        conditions={"zh": "H200 上的 Qwen3-0.6B，同时发出 128 个请求，每个 {batch_prompt} 输入、256 输出；--max-num-batched-tokens 8192。",
                    "en": "Qwen3-0.6B on one H200, 128 requests sent at once, {batch_prompt} in and 256 out each; --max-num-batched-tokens 8192."},
        caveats={"zh": "--max-num-seqs 8 时最后一批请求等首 token 要 {batch_ttft99_8}（p99），128 时是 {batch_ttft99_128}。代价是每步带的请求多了，每个输出 token 从 {batch_tpot50_8} 变成 {batch_tpot50_128}（中位数）。在 128 个序列下把 --max-num-batched-tokens 从 8192 降到 2048，首 token 中位数从 {batch_ttft50_128_8192} 变成 {batch_ttft50_128_2048}，每个输出 token 从 {batch_tpot50_128} 变成 {batch_tpot50_128_2048}，吞吐降到 {batch_tok_s_128_2048}：三者都变差了{batch_2048_ttft_worse}{batch_2048_tpot_worse}{batch_2048_tok_s_worse}。",
                 "en": "At --max-num-seqs 8 the last requests waited {batch_ttft99_8} for their first token (p99) against {batch_ttft99_128} at 128. The price is more requests in each step: an output token took {batch_tpot50_128} instead of {batch_tpot50_8} (median). At 128 sequences, lowering --max-num-batched-tokens from 8192 to 2048 moved the median first token from {batch_ttft50_128_8192} to {batch_ttft50_128_2048} and the time per output token from {batch_tpot50_128} to {batch_tpot50_128_2048}, and output fell to {batch_tok_s_128_2048}: all three worse{batch_2048_ttft_worse}{batch_2048_tpot_worse}{batch_2048_tok_s_worse}."},
        figure="batch-limits",
        unsettled={"zh": "需要在 H200 上按 --max-num-seqs 与 --max-num-batched-tokens 的组合各启动一个服务器，发同样的请求。",
                   "en": "Settling it takes one server per combination of --max-num-seqs and --max-num-batched-tokens on "
                         "the H200, each sent the same requests."}),
    Question(
        ask={"zh": "一张 GPU 上该不该设 --api-server-count？", "en": "Should I set --api-server-count on one GPU?"},
        answer={"zh": "小模型、高负载时该设：H200 上 Qwen3-0.6B、256 个对话请求在途时，4 个 API 服务器进程的输出吞吐是 1 个时的 {api_chat_4_vs_1}（{api_chat_4} 对 {api_chat_1}）；1 个进程时拖住服务器的就是它（用了 {api_chat_cpu_1} 的 CPU）。这个参数只有经 vllm serve 启动才生效：在 CPU 替身上，--api-server-count 2 留下了 {api_processes_cpu} 个 API 服务器进程。",
                "en": "Yes for a small model at high load: on the H200 with Qwen3-0.6B and 256 chat requests in flight, four API-server processes delivered {api_chat_4_vs_1} the output of one ({api_chat_4} against {api_chat_1}); with one, that process ({api_chat_cpu_1} of CPU) limits the server. The flag takes effect only through vllm serve: on the CPU stand-in, --api-server-count 2 left {api_processes_cpu} API-server processes."},
        conditions={"zh": "H200，默认模式，虚拟权重；vLLM 0.26 的源码里只有 vllm serve 照这个参数启动多个进程，这里的服务器都经它启动。",
                    "en": "On one H200, default mode, dummy weights; in vLLM 0.26's source only vllm serve (vllm/entrypoints/cli/serve.py) starts several processes for the flag, and the servers here start through it."},
        caveats={"zh": "1 个进程时引擎核心只用了 {api_engine_cpu_1}；4 个进程时引擎核心忙到 {api_engine_cpu_4}{api_engine_busier_4}，首 token 中位数从 {api_chat_ttft_1} 降到 {api_chat_ttft_4}{api_chat_ttft_4_vs_1}。16 个在途时定节奏的是引擎（它已用到 {api_chat_16_engine_cpu_1}），4 个进程只多出一点：{api_chat_16_1} 对 {api_chat_16_4}（{api_chat_16_4_vs_1}）{api_gain_small_at_16}。每步更慢的 Qwen3-8B 在 256 个在途时 API 服务器只用了 {api_8b_cpu_1}{api_8b_cpu_below_06b}，1 个进程 {api_8b_1}，4 个 {api_8b_4}（{api_8b_4_vs_1}）。嵌入（Qwen3-Embedding-0.6B，256 个在途）的 API 服务器用了 {api_embed_cpu_1}，4 个进程时从 {api_embed_1} 到 {api_embed_4}（{api_embed_4_vs_1}）。",
                 "en": "With one process the engine core used {api_engine_cpu_1}; with four it got busier ({api_engine_cpu_4}{api_engine_busier_4}) and the median first token fell from {api_chat_ttft_1} to {api_chat_ttft_4}{api_chat_ttft_4_vs_1}. At 16 in flight the engine set the pace (already at {api_chat_16_engine_cpu_1}) and four processes added little: {api_chat_16_1} against {api_chat_16_4} ({api_chat_16_4_vs_1}){api_gain_small_at_16}. Qwen3-8B, whose steps take longer, kept its one API server at {api_8b_cpu_1} with 256 in flight{api_8b_cpu_below_06b}; one process delivered {api_8b_1}, four {api_8b_4} ({api_8b_4_vs_1}). For embeddings (Qwen3-Embedding-0.6B, 256 in flight) the one API server used {api_embed_cpu_1}; four took it from {api_embed_1} to {api_embed_4} ({api_embed_4_vs_1})."},
        figure="api-server-count",
        unsettled={"zh": "需要在 H200 上用 vllm serve 以 --api-server-count 1、2、4 分别跑对话和嵌入，记录吞吐、TTFT 和各进程的 CPU 占用。",
                   "en": "Settling it takes chat and embeddings served through `vllm serve` at --api-server-count 1, 2 "
                         "and 4 on the H200, with throughput, TTFT and each process's CPU share."},
        elsewhere="other-gpus-api-server-count"),
), title={"zh": "显存与容量", "en": "Memory and capacity"})
