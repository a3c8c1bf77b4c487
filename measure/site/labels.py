"""Reader-facing names of dataset columns, per language: table headers and chart axes use them (the column's
id and its description stay in the header's tooltip). A test requires one for every declared column.

A column name means the same thing in every dataset that uses it; where one dataset's readers need more, its
entry in ``DATASET_LABELS`` says so. Pages pass no ``labels=`` (tests/test_page_lints.py).
"""

from __future__ import annotations

import re

# column id: (zh, en)
COLUMN_LABELS: dict[str, tuple[str, str]] = {
    "vllm_version": ("vLLM 版本", "vLLM release"),
    # capacity, kv_dtype
    "bandwidth_gb_s": ("实测显存带宽", "measured memory bandwidth"),
    "buffer_mib": ("拷贝的缓冲区", "buffer copied"),
    "weight_gb": ("每步读取的权重", "weights read per step"),
    "floor_ms": ("每 token 下限", "floor per token"),
    "floor_share_pct": ("下限占每步时间", "floor ÷ time per token"),
    "beyond_floor_ms": ("下限之外的时间", "time beyond the floor"),
    "gpu_memory_utilization": ("显存份额", "memory share"),
    "request_tokens": ("一个请求的 token", "tokens of one request"),
    "requests_fit": ("装得下的请求数", "requests that fit"),
    "ttft_p50_ms": ("首 token 时间 p50", "TTFT p50"),
    "tpot_p50_ms": ("每输出 token 时间 p50", "TPOT p50"),
    "preemptions": ("抢占次数", "preemptions"),
    "max_num_seqs": ("同时运行的请求上限", "running-request limit"),
    "tpot_p99_ms": ("每输出 token 时间 p99", "TPOT p99"),
    "kv_cache_dtype": ("KV 缓存类型", "KV-cache dtype"),
    # tuning ladder, --max-model-len, n-gram speculation, rerank under load, image limits
    "step": ("阶梯的级", "rung"),
    "rung": ("这一级", "rung's name"),
    "added": ("这一级加上的参数", "flags this rung adds"),
    "flags": ("到这一级为止的参数", "flags by this rung"),
    "shared_tokens": ("共享的系统提示", "shared system prompt"),
    "ttft_p50_ms_min": ("首 token 时间 p50 最低一轮", "TTFT p50, lowest round"),
    "ttft_p50_ms_max": ("首 token 时间 p50 最高一轮", "TTFT p50, highest round"),
    "ttft_p99_ms_min": ("首 token 时间 p99 最低一轮", "TTFT p99, lowest round"),
    "ttft_p99_ms_max": ("首 token 时间 p99 最高一轮", "TTFT p99, highest round"),
    "tpot_p50_ms_min": ("每输出 token 时间 p50 最低一轮", "TPOT p50, lowest round"),
    "tpot_p50_ms_max": ("每输出 token 时间 p50 最高一轮", "TPOT p50, highest round"),
    "tpot_p99_ms_min": ("每输出 token 时间 p99 最低一轮", "TPOT p99, lowest round"),
    "tpot_p99_ms_max": ("每输出 token 时间 p99 最高一轮", "TPOT p99, highest round"),
    "prefix_hit_share": ("前缀缓存命中的提示 token 占比", "prompt tokens served from the prefix cache"),
    "previous": ("上一级", "rung before"),
    "ratio_low": ("比值下限", "ratio, low end"),
    "ratio_high": ("比值上限", "ratio, high end"),
    "verdict": ("结论", "verdict"),
    "best_step": ("收获最大的一级", "rung that bought most"),
    "best_added": ("它加上的参数", "its flags"),
    "best_gain": ("吞吐是上一级的", "throughput over the rung before"),
    "unchanged": ("分不出变化的级", "rungs with no measurable change"),
    "worse": ("变差的级", "rungs that made it worse"),
    "context_tokens": ("最长请求", "longest request accepted"),
    "speculation": ("推测解码", "speculation"),
    "config": ("--speculative-config", "--speculative-config"),
    "draft_tokens_per_output": ("每个输出 token 的草稿 token", "draft tokens per output token"),
    "acceptance": ("草稿被接受的比例", "share of drafts accepted"),
    "pair_tokens": ("每对的 token", "tokens per pair"),
    "latency_p50_ms_min": ("延迟 p50 最低一轮", "latency p50, lowest round"),
    "latency_p50_ms_max": ("延迟 p50 最高一轮", "latency p50, highest round"),
    "latency_p99_ms_min": ("延迟 p99 最低一轮", "latency p99, lowest round"),
    "latency_p99_ms_max": ("延迟 p99 最高一轮", "latency p99, highest round"),
    "set_in": ("限制设在", "limit set in"),
    "max_pixels": ("像素上限", "max_pixels"),
    "kv_mib": ("一张图占的 KV", "KV an image takes"),
    "sampling": ("解码方式", "decoding"),
    "instances": ("实例数", "instances"),
    "memory_share": ("每个实例的显存份额", "memory share of each instance"),
    "engine_cpu_max": ("最忙的引擎核心", "busiest engine core"),
    # prefill
    "caching": ("前缀缓存", "prefix caching"),
    "prefix_tokens": ("共享前缀", "shared prefix"),
    "case": ("情形", "case"),
    "max_num_batched_tokens": ("每步 token 上限", "batched-token budget"),
    "request_per_s_min": ("请求吞吐最低一轮", "requests per second, lowest round"),
    "request_per_s_max": ("请求吞吐最高一轮", "requests per second, highest round"),
    "measured_prompt_tokens": ("vLLM 计的提示 token", "prompt tokens vLLM counted"),
    "long_prompt": ("长提示", "long prompt"),
    "long_prompt_tokens": ("长提示 token", "long prompt tokens"),
    "long_ttft_ms": ("长提示的首 token 时间", "long prompt's TTFT"),
    "itl_p50_ms": ("token 间隔（ITL）中位数", "gap between tokens (ITL), median"),
    "itl_p99_ms": ("token 间隔（ITL）第 99 百分位", "gap between tokens (ITL), 99th percentile"),
    "itl_max_ms": ("最长的 token 间隔", "longest gap between tokens"),
    "ttft_p99_ms": ("首 token 时间第 99 百分位", "TTFT, 99th percentile"),
    "url_libraries": ("URL 库", "URL libraries"),
    "itl_ms_min": ("ITL 最低一轮", "ITL, lowest round"),
    "itl_ms_max": ("ITL 最高一轮", "ITL, highest round"),
    "installed": ("装上了", "installed"),
    "server_started": ("服务器启动了", "server started"),
    "reason": ("原因", "reason"),
    "group": ("类别", "kind"),
    "probe": ("探测", "probe"),
    "outcome": ("结果", "outcome"),
    "fetched": ("探测服务收到的路径", "paths our service was asked for"),
    "base_min": ("基座最差一轮", "base, worst repeat"),
    "base_max": ("基座最好一轮", "base, best repeat"),
    "adapter_min": ("适配器最差一轮", "adapter, worst repeat"),
    "adapter_max": ("适配器最好一轮", "adapter, best repeat"),
    "accepted": ("被接受", "accepted"),
    "accepted_tokens": ("接受的草稿 token", "accepted draft tokens"),
    "achieved_tflops": ("达到的 TFLOPS", "achieved TFLOPS"),
    "adapter_request_ok": ("适配器请求成功", "adapter request ok"),
    "adapter_value": ("用适配器", "with adapter"),
    "adapters": ("适配器数", "adapters"),
    "answer": ("回答", "answer"),
    "api_server_cpu_share": ("API 服务器 CPU", "API server CPU"),
    "ask": ("第几次提问", "question no."),
    "asks": ("每图提问次数", "asks per image"),
    "base_value": ("基座模型", "base model"),
    "batch_size": ("批大小", "batch size"),
    "bench": ("bench", "bench"),
    "bench_command": ("bench 命令", "bench command"),
    "bench_cpu_share": ("bench CPU", "bench CPU"),
    "bench_max": ("bench 最高", "bench max"),
    "bench_min": ("bench 最低", "bench min"),
    "busiest_process_cpu": ("最忙进程 CPU", "busiest process CPU"),
    "caches": ("缓存", "caches"),
    "chunk_gap_ms": ("分块间隔", "chunk gap"),
    "chunks_per_request": ("每个回答的分块", "chunks per answer"),
    "chunks_per_s": ("分块吞吐", "chunks per second"),
    "client_cpu_cores": ("客户端用的核", "client cores"),
    "client_cpu_max": ("客户端最忙进程 CPU", "client busiest process CPU"),
    "client_cpu_share": ("客户端 CPU", "client CPU"),
    "client_ms": ("客户端看到的延迟", "client latency"),
    "command": ("命令", "command"),
    "compile_s": ("torch.compile", "torch.compile"),
    "concurrency": ("在途请求", "in flight"),
    "correct": ("答对", "correct"),
    "cpu_cores": ("用的核", "cores used"),
    "default": ("默认模式", "default mode"),
    "device": ("设备", "device"),
    "documents": ("文档数", "documents"),
    "draft_tokens": ("草稿 token", "draft tokens"),
    "eager": ("eager 模式", "eager mode"),
    "eager_vs_default": ("eager ÷ 默认", "eager ÷ default"),
    "elapsed_ms": ("用时", "elapsed"),
    "encoder_cache_budget_tokens": ("编码器缓存预算", "encoder cache budget"),
    "encoding_format": ("返回格式", "encoding format"),
    "endpoint": ("端点", "endpoint"),
    "enforce_eager": ("eager 模式", "eager mode"),
    "engine_e2e_ms": ("引擎端到端", "engine end-to-end"),
    "engine_init_s": ("引擎初始化", "engine init"),
    "engine_itl_ms": ("引擎 ITL", "engine ITL"),
    "engine_itl_vs_single": ("引擎 ITL ÷ 单卡", "engine ITL ÷ single"),
    "engine_ms": ("引擎内", "in engine"),
    "engine_queue_ms": ("引擎排队", "engine queue"),
    "engine_ttft_ms": ("引擎 TTFT", "engine TTFT"),
    "error": ("错误", "error"),
    "feature": ("功能", "feature"),
    "first_request_ok": ("首个请求成功", "first request ok"),
    "first_ttft_ms": ("首次 TTFT", "first TTFT"),
    "format": ("格式", "format"),
    "gap_pct": ("差距", "gap"),
    "graph_capture_s": ("CUDA graph 录制", "CUDA graph capture"),
    "harness": ("本站", "ours"),
    "harness_max": ("本站最高", "ours max"),
    "harness_min": ("本站最低", "ours min"),
    "harness_worker_cpu_max": ("本站最忙进程 CPU", "our busiest worker CPU"),
    "harness_workers": ("本站工作进程", "our workers"),
    "image": ("图像", "image"),
    "images": ("图像数", "images"),
    "images_per_prompt": ("每个提示的图像", "images per prompt"),
    "interconnect": ("互连", "interconnect"),
    "itl_median_ms": ("ITL 中位数", "ITL median"),
    "itl_ms": ("ITL", "ITL"),
    "itl_vs_single": ("ITL ÷ 单卡", "ITL ÷ single"),
    "kv_cache_gib": ("KV 缓存", "KV cache"),
    "kv_cache_tokens": ("KV 缓存 token", "KV cache tokens"),
    "kv_ratio": ("KV 之比", "KV ratio"),
    "kv_tokens_count_only": ("KV（只限数量）", "KV (count only)"),
    "kv_tokens_size_hints": ("KV（尺寸提示）", "KV (size hints)"),
    "lag_median_ms": ("读取滞后中位数", "read lag median"),
    "lag_p99_ms": ("读取滞后 p99", "read lag p99"),
    "latency_ms": ("延迟", "latency"),
    "latency_ms_max": ("最慢一次", "slowest repeat"),
    "latency_ms_min": ("最快一次", "fastest repeat"),
    "layout": ("并行方式", "layout"),
    "limit_mm": ("多模态限制", "multimodal limit"),
    "limited_by": ("瓶颈", "limited by"),
    "matmul_params": ("矩阵参数量", "matmul parameters"),
    "max_concurrency": ("最大并发", "max concurrency"),
    "max_concurrency_tokens": ("并发按每请求 token", "tokens per request"),
    "max_loras": ("适配器槽位", "adapter slots"),
    "max_model_len": ("上下文长度", "context length"),
    "memory_condition": ("显存条件", "memory condition"),
    "method": ("方法", "method"),
    "metric": ("指标", "metric"),
    "mm_cache_hits": ("处理缓存命中", "processor cache hits"),
    "mm_cache_queries": ("处理缓存查询", "processor cache queries"),
    "mm_processor_cache_gb": ("处理器缓存", "processor cache"),
    "mode": ("模式", "mode"),
    "model": ("模型", "model"),
    "model_load_gib": ("权重占用", "weights"),
    "no_key": ("不带密钥", "no key"),
    "note": ("说明", "note"),
    "output_tok_s": ("输出吞吐", "output throughput"),
    "output_tok_s_max": ("最快一轮", "fastest round"),
    "output_tok_s_min": ("最慢一轮", "slowest round"),
    "output_tokens": ("输出 token", "output tokens"),
    "output_tokens_mean": ("每个回答的 token", "tokens per answer"),
    "outside_engine_ms": ("引擎之外", "outside engine"),
    "path": ("路径", "path"),
    "paths_requested": ("被请求的路径", "paths requested"),
    "peak_share_pct": ("占峰值", "share of peak"),
    "prefill_ms": ("prefill", "prefill"),
    "prefix_cache_hits": ("前缀缓存命中 token", "prefix cache hit tokens"),
    "prefix_cache_queries": ("前缀缓存查询 token", "prefix cache query tokens"),
    "prefix_hit_rate": ("前缀命中率", "prefix hit rate"),
    "prompt_tokens": ("提示 token", "prompt tokens"),
    "prompt_tokens_mean": ("平均提示 token", "mean prompt tokens"),
    "question": ("问题", "question"),
    "queue_ms": ("排队", "queue"),
    "rank": ("秩", "rank"),
    "ranks": ("进程数", "ranks"),
    "ratio": ("比值", "ratio"),
    "repeat_ttft_ms": ("重复时 TTFT", "repeat TTFT"),
    "repeats": ("重复次数", "repeats"),
    "request_per_s": ("请求吞吐", "requests per second"),
    "requests": ("请求数", "requests"),
    "requires_key": ("需要密钥", "needs key"),
    "right_key": ("正确密钥", "right key"),
    "rounds": ("轮数", "rounds"),
    "route": ("路由", "route"),
    "routing": ("路由方式", "routing"),
    "server": ("服务器", "server"),
    "server_cpu_cores": ("服务器用的核", "server cores"),
    "server_processes": ("服务器进程", "server processes"),
    "server_rss_mib": ("服务器内存", "server memory"),
    "service_hit": ("内部服务被访问", "internal service hit"),
    "setting": ("设置", "setting"),
    "side": ("边长", "side"),
    "side_from": ("边长从", "side from"),
    "side_to": ("边长到", "side to"),
    "slowdown_pct": ("变慢", "slowdown"),
    "started": ("启动了", "started"),
    "started_together": ("同时启动", "started together"),
    "startup_s": ("启动用时", "start-up"),
    "status": ("状态码", "status"),
    "target": ("目标", "target"),
    "tflops": ("TFLOPS", "TFLOPS"),
    "dtype": ("数据类型", "dtype"),
    "threads": ("线程", "threads"),
    "token_ratio": ("token 之比", "token ratio"),
    "tokens_per_input": ("每条输入 token", "tokens per input"),
    "input_words": ("每条输入的词数", "words per input"),
    "inputs_per_request": ("每个请求的输入条数", "inputs per request"),
    "document_words": ("每篇文档的词数", "words per document"),
    "document_tokens": ("每对的 token 数", "tokens per pair"),
    "pairs_per_s": ("每秒打分的对数", "pairs per second"),
    "pairs_per_s_min": ("最慢的请求", "slowest request"),
    "pairs_per_s_max": ("最快的请求", "fastest request"),
    "latency_min_ms": ("最快的请求", "fastest request"),
    "latency_p99_ms": ("延迟第 99 百分位", "latency, 99th percentile"),
    "inputs_per_s": ("每秒嵌入的输入", "inputs per second"),
    "inputs_per_s_min": ("最慢一轮", "slowest round"),
    "inputs_per_s_max": ("最快一轮", "fastest round"),
    "latency_p50_ms": ("单个请求延迟中位数", "request latency, median"),
    "tokens_per_s": ("吞吐", "throughput"),
    "tokens_per_s_max": ("最快一次", "fastest repeat"),
    "tokens_per_s_min": ("最慢一次", "slowest repeat"),
    "tool": ("工具", "tool"),
    "top_document_kind": ("排第一的文档", "top document"),
    "top_score": ("最高分", "top score"),
    "torch": ("torch", "torch"),
    "total": ("总数", "total"),
    "tpot_median_ms": ("TPOT 中位数", "TPOT median"),
    "tpot_ms": ("TPOT", "TPOT"),
    "tpot_ms_max": ("TPOT 最高", "TPOT max"),
    "tpot_ms_min": ("TPOT 最低", "TPOT min"),
    "ttft_median_ms": ("TTFT 中位数", "TTFT median"),
    "ttft_ms": ("首 token 时间", "time to first token"),
    "ttft_ms_max": ("TTFT 最高", "TTFT max"),
    "ttft_ms_min": ("TTFT 最低", "TTFT min"),
    "ttft_ratio": ("TTFT 之比", "TTFT ratio"),
    "unit": ("单位", "unit"),
    "url_kind": ("URL 类型", "URL kind"),
    "version": ("版本", "version"),
    "warmup": ("预热次数", "warm-up"),
    "weights": ("权重", "weights"),
    "worker_cpu_max": ("最忙工作进程 CPU", "busiest worker CPU"),
    "workers": ("工作进程", "workers"),
    "workload": ("负载", "workload"),
    "wrong_key": ("错误密钥", "wrong key"),
    # lora_scale
    "max_lora_rank": ("rank 上限", "rank limit"),
    "resident_ttft_ms": ("已在槽位时 TTFT", "TTFT, adapter resident"),
    "resident_ttft_ms_min": ("已在槽位时 TTFT 最低", "TTFT resident, lowest"),
    "resident_ttft_ms_max": ("已在槽位时 TTFT 最高", "TTFT resident, highest"),
    "swap_ttft_ms": ("需换入时 TTFT", "TTFT, adapter swapped in"),
    "swap_ttft_ms_min": ("需换入时 TTFT 最低", "TTFT swapped in, lowest"),
    "swap_ttft_ms_max": ("需换入时 TTFT 最高", "TTFT swapped in, highest"),
    "swap_ms": ("每次换入的代价", "cost of one swap"),
    "loads": ("加载次数", "loads"),
    "load_call_ms": ("加载调用耗时", "load call"),
    "later_ttft_ms": ("之后请求的 TTFT", "TTFT of later requests"),
    "base_ttft_ms": ("基座模型 TTFT", "base model TTFT"),
    # api_servers
    "api_server_count": ("--api-server-count", "--api-server-count"),
    # fidelity_interval
    "point": ("负载点", "load point"),
    "harness_spread_pct": ("本站各轮差距", "spread of our rounds"),
    "bench_spread_pct": ("bench 各轮差距", "spread of the bench's rounds"),
    "ratio_ci_low": ("95% 置信区间下限", "95 % CI, low"),
    "ratio_ci_high": ("95% 置信区间上限", "95 % CI, high"),
    "ci_max_gap_pct": ("95% 置信下最大可能差距", "largest possible gap at 95 %"),
    "api_processes": ("看到的 API 服务器进程", "API-server processes seen"),
    "processes": ("服务器的进程", "server processes"),
    "api_cpu": ("API 服务器 CPU", "API-server CPU"),
    "api_cpu_max": ("最忙 API 服务器 CPU", "busiest API-server CPU"),
    "engine_cpu": ("引擎核心 CPU", "engine-core CPU"),
    "requests_per_s": ("每秒请求数", "requests per second"),
    # video
    "frames": ("帧数", "frames"),
    "video_tokens": ("视频 token", "video tokens"),
    "tokens_per_frame": ("每帧 token", "tokens per frame"),
    "limit_mm_per_prompt": ("--limit-mm-per-prompt 取值", "--limit-mm-per-prompt value"),
}
LANG_INDEX = {"zh": 0, "en": 1}


# A column's reader-facing name in one dataset, where its readers need more than the column's own name (the
# statistic, the condition): declared once here, for both languages; pages pass no labels.
DATASET_LABELS: dict[tuple[str, str], tuple[str, str]] = {
    ('api_servers.load', 'api_cpu_max'): ('最忙的 API 服务器', 'busiest API server'),
    ('api_servers.load', 'api_processes'): ('API 服务器进程数', 'API-server processes'),
    ('api_servers.load', 'concurrency'): ('在途请求数', 'requests in flight'),
    ('api_servers.load', 'engine_cpu'): ('引擎核心', 'engine core'),
    ('api_servers.load', 'ttft_p50_ms'): ('首 token，中位数', 'first token, median'),
    ('batch_limits.grid', 'max_num_batched_tokens'): ('--max-num-batched-tokens', '--max-num-batched-tokens'),
    ('batch_limits.grid', 'max_num_seqs'): ('--max-num-seqs', '--max-num-seqs'),
    ('batch_limits.grid', 'output_tok_s'): ('输出 tok/s（中位数）', 'output tok/s (median)'),
    ('batch_limits.grid', 'tpot_p50_ms'): ('每输出 token，中位数（TPOT）', 'per output token, median (TPOT)'),
    ('batch_limits.grid', 'tpot_p99_ms'): ('每输出 token，p99（TPOT）', 'per output token, p99 (TPOT)'),
    ('batch_limits.grid', 'ttft_p50_ms'): ('首 token，中位数（TTFT）', 'first token, median (TTFT)'),
    ('batch_limits.grid', 'ttft_p99_ms'): ('首 token，p99（TTFT）', 'first token, p99 (TTFT)'),
    ('capacity.decode_floor', 'bandwidth_gb_s'): ('实测带宽', 'measured bandwidth'),
    ('capacity.decode_floor', 'beyond_floor_ms'): ('下限之外', 'beyond the floor'),
    ('capacity.decode_floor', 'floor_share_pct'): ('下限 ÷ 时间', 'floor ÷ time'),
    ('capacity.decode_floor', 'tpot_ms'): ('每输出 token 时间（中位数）', 'time per output token (median)'),
    ('capacity.decode_floor', 'tpot_ms_max'): ('最慢一轮', 'slowest round'),
    ('capacity.decode_floor', 'tpot_ms_min'): ('最快一轮', 'fastest round'),
    ('capacity.knee', 'concurrency'): ('在途请求数', 'requests in flight'),
    ('capacity.knee', 'output_tok_s'): ('输出 tok/s（中位数）', 'output tok/s (median)'),
    ('capacity.knee', 'setting'): ('内存设置', 'memory setting'),
    ('capacity.knee', 'tpot_p50_ms'): ('每输出 token，中位数（TPOT）', 'per output token, median (TPOT)'),
    ('capacity.knee', 'ttft_p50_ms'): ('首 token 时间（中位数）', 'time to first token (median)'),
    ('capacity.knee', 'ttft_p99_ms'): ('首 token 时间（p99）', 'time to first token (p99)'),
    ('capacity.memory', 'kv_cache_tokens'): ('KV token 数', 'KV tokens'),
    ('capacity.memory', 'max_concurrency'): ('vLLM 的最大并发', "vLLM's maximum concurrency"),
    ('capacity.memory', 'max_concurrency_tokens'): ('它假设的每请求 token 数', 'tokens per request it assumes'),
    ('capacity.memory', 'model_load_gib'): ('权重', 'weights'),
    ('capacity.memory', 'started'): ('已启动', 'started'),
    ('eager.decode', 'client_cpu_max'): ('客户端最忙进程', "client's busiest process"),
    ('eager.decode', 'concurrency'): ('在途请求', 'requests in flight'),
    ('eager.decode', 'output_tok_s'): ('输出吞吐（中位数）', 'output throughput (median)'),
    ('eager.decode', 'tpot_ms'): ('每 token 时间', 'time per token'),
    ('eager.decode', 'tpot_ms_max'): ('最大', 'max'),
    ('eager.decode', 'tpot_ms_min'): ('最小', 'min'),
    ('eager.decode', 'ttft_ms'): ('首 token 时间', 'first token (TTFT)'),
    ('eager.image_0_start', 'error'): ('vLLM 的报错', "vLLM's error"),
    ('eager.image_0_start', 'kv_cache_tokens'): ('KV 缓存', 'KV cache'),
    ('eager.image_0_start', 'limit_mm'): ('--limit-mm-per-prompt', '--limit-mm-per-prompt'),
    ('eager.image_0_start', 'started'): ('是否启动', 'started'),
    ('eager.multimodal_ttft', 'client_cpu_max'): ('客户端最忙进程', "client's busiest process"),
    ('eager.multimodal_ttft', 'requests'): ('每轮请求', 'requests per round'),
    ('eager.multimodal_ttft', 'ttft_ms'): ('首 token 时间', 'first token (TTFT)'),
    ('eager.multimodal_ttft', 'ttft_ms_max'): ('最大', 'max'),
    ('eager.multimodal_ttft', 'ttft_ms_min'): ('最小', 'min'),
    ('eager.startup', 'graph_capture_s'): ('CUDA graph 录制', 'CUDA-graph capture'),
    ('eager.startup', 'startup_s'): ('启动时间', 'start-up time'),
    ('embedding_batching.grid', 'concurrency'): ('在途请求数', 'requests in flight'),
    ('fidelity_interval.ratio', 'ratio'): ('本站 ÷ bench', 'ours ÷ bench'),
    ('kv_dtype.compare', 'kv_cache_tokens'): ('KV token 数', 'KV tokens'),
    ('kv_dtype.compare', 'output_tok_s'): ('输出 tok/s（中位数）', 'output tok/s (median)'),
    ('kv_dtype.compare', 'prompt_tokens'): ('提示', 'prompt'),
    ('kv_dtype.compare', 'tpot_ms'): ('每输出 token，中位数（TPOT）', 'per output token, median (TPOT)'),
    ('kv_dtype.compare', 'ttft_ms'): ('首 token，中位数（TTFT）', 'first token, median (TTFT)'),
    ('lora.overhead', 'adapter_value'): ('用适配器（吞吐为 tok/s，首 token 时间为 ms）', 'with adapter (tok/s or ms, by metric)'),
    ('lora.overhead', 'base_value'): ('基座模型（吞吐为 tok/s，首 token 时间为 ms）', 'base model (tok/s or ms, by metric)'),
    ('lora_scale.grid', 'adapters'): ('轮流使用的适配器数', 'adapters taken in turn'),
    ('lora_scale.grid', 'max_loras'): ('--max-loras', '--max-loras'),
    ('multimodal.image_tokens', 'prompt_tokens'): ('提示 token 数', 'prompt tokens'),
    ('multimodal.multi_image', 'images_per_prompt'): ('每个提示的图像数', 'images per prompt'),
    ('multimodal.repeat_requests', 'ask'): ('第几次提问', 'question number'),
    ('parallelism.comm_cost', 'engine_itl_ms'): ('每 token 延迟（引擎）', 'per-token latency (engine)'),
    ('parallelism.comm_cost', 'engine_itl_vs_single'): ('相对单 rank（引擎）', 'vs one rank (engine)'),
    ('parallelism.comm_cost', 'itl_ms'): ('每 token 延迟（客户端）', 'per-token latency (client)'),
    ('parallelism.comm_cost', 'itl_vs_single'): ('相对单 rank', 'vs one rank'),
    ('parallelism.comm_cost', 'layout'): ('布局', 'layout'),
    ('parallelism.scaling', 'concurrency'): ('在途请求数', 'requests in flight'),
    ('parallelism.scaling', 'output_tok_s'): ('生成吞吐', 'generated tok/s'),
    ('pooling_limits.memory', 'kv_cache_tokens'): ('KV token 数', 'KV tokens'),
    ('prefill.long_prompt', 'prompt_tokens'): ('提示长度', 'prompt length'),
    ('prefill.prefix_cache', 'request_per_s'): ('16 个在途时的每秒请求数', 'requests per second at 16 in flight'),
    ('prefill.prefix_cache', 'ttft_ms'): ('首 token 时间（中位数）', 'time to first token (median)'),
    ('prefill.prefix_cache', 'ttft_ms_max'): ('最慢一轮', 'slowest round'),
    ('prefill.prefix_cache', 'ttft_ms_min'): ('最快一轮', 'fastest round'),
    ('rerank_documents.latency', 'pairs_per_s'): ('每秒打分的对数', 'pairs scored per second'),
    ('security_versions.installs', 'server_started'): ('文本服务器启动了', 'text server started'),
    ('security_versions.installs', 'startup_s'): ('它的启动时间', 'its start-up'),
    ('video.frames', 'prompt_tokens'): ('提示 token 数', 'prompt tokens'),
    ('video.frames', 'side'): ('帧边长', 'frame side'),
}


def column_label(column: str, lang: str, dataset: str | None = None) -> str:
    """The reader's name of ``column`` (in ``dataset``, where that dataset declares its own); its id where none is
    declared (a test forbids that)."""
    pair = DATASET_LABELS.get((dataset, column)) or COLUMN_LABELS.get(column)
    return pair[LANG_INDEX[lang]] if pair else column


def dataset_labels(dataset: str, lang: str) -> dict[str, str]:
    """Every column name ``dataset`` declares for its own readers, in ``lang``."""
    return {column: pair[LANG_INDEX[lang]] for (name, column), pair in DATASET_LABELS.items() if name == dataset}


def model_label(name: str, lang: str) -> str:
    """A served model's name for a reader: the CPU's scaled-down stand-ins say what they are (their figures show the
    pipeline working, not the full model's speed)."""
    from measure.models import TINY_TEXT

    if not isinstance(name, str) or not name.startswith("tiny-"):
        return value_label(name, lang)  # a description in place of a name (the article's models) reads as text
    base, layers, hidden = name[len("tiny-"):], TINY_TEXT["num_hidden_layers"], TINY_TEXT["hidden_size"]
    return (f"{base} 缩小版（{layers} 层，隐藏维度 {hidden}）" if lang == "zh"
            else f"tiny {base} ({layers} layers, hidden {hidden})")


# Chinese for the count units the schemas write in English: (after a number in prose, in a column heading).
# Units of physics and symbols (ms, tok/s, GiB, %, ×, px) read the same in both languages.
UNIT_ZH = {
    "cores": ("个核", "核"), "requests": ("个请求", "请求"), "processes": ("个进程", "进程"),
    "inputs": ("条输入", "输入"), "inputs/s": ("条输入/s", "输入/s"), "words": ("个词", "词"),
    "servers": ("台", "台"), "docs": ("篇文档", "文档"), "docs/s": ("篇文档/s", "文档/s"),
    "chunks": ("个块", "块"), "chunks/s": ("块/s", "块/s"), "params": ("个参数", "参数"),
    "HTTP status": ("HTTP 状态码", "HTTP"),
    "tokens": ("个 token", "token"), "adapters": ("个适配器", "适配器"), "frames": ("帧", "帧"),
    "slots": ("个槽位", "槽位"),
}


def with_unit(number: str, unit: str, lang: str) -> str:
    """A number and its unit (already in the reader's language) as prose shows them: a no-break space between them
    ("16 ⏎ %" at a line's end reads as two things), and a factor as a factor: 1.15× in English, 1.15 倍 in Chinese
    (a compare() and a ratio column read alike)."""
    if not unit:
        return number
    if unit == "×":
        return number + ("\u00a0倍" if lang == "zh" else "×")
    return number + "\u00a0" + unit


def unit_label(unit: str | None, lang: str, heading: bool = False) -> str:
    """``unit`` as a reader of ``lang`` reads it: after a number in prose, or (``heading``) in a column heading."""
    if not unit or lang != "zh" or unit not in UNIT_ZH:
        return unit or ""
    return UNIT_ZH[unit][1 if heading else 0]


# Chinese for the categorical values the datasets write in English (they stay the selector values pages use).
VALUE_ZH = {
    # prefill
    "hit": "命中", "miss": "未命中", "on": "开", "off": "关", "beside": "旁边有一个",
    # eager
    "default": "默认", "eager": "eager", "cold": "冷", "warm": "热",
    "multimodal time to first token": "多模态首 token 时间",
    "output throughput at 32 in flight": "32 个请求在途时的输出吞吐",
    "start-up, warm caches": "启动（缓存已热）",
    "time per output token at 1 in flight": "1 个请求在途时每个输出 token 的时间",
    # fidelity and load generators
    "engine-bound": "引擎为瓶颈", "high load": "高负载",
    "client": "客户端", "neither": "都没有", "none": "无", "vLLM API server": "vLLM API 服务器",
    "vllm bench serve": "vllm bench serve",  # a command: kept, and known as a part of limited_by's lists
    "flat out": "全速", "paced": "定速",
    "ITL median": "ITL 中位数", "TPOT median": "TPOT 中位数", "TTFT mean": "TTFT 均值", "TTFT median": "TTFT 中位数",
    "end-to-end median": "端到端中位数", "latency median (to headers)": "延迟中位数（到响应头）",
    "output throughput": "输出吞吐", "request throughput": "请求吞吐", "chat": "对话", "chat (streamed)": "对话（流式）", "completions": "补全", "embeddings": "嵌入",
    "this site": "本站", "vLLM's own": "vLLM 自带",
    # LoRA
    "speculative decoding (ngram)": "投机解码（ngram）", "largest slowdown reported": "报告的最大变慢",
    "smallest slowdown reported": "报告的最小变慢",
    "1.7B model of the series' LoRA article": "本系列 LoRA 一文的 1.7B 模型", "throughput": "吞吐", "ttft": "首 token 时间",
    # multimodal
    "8 GB card emulated": "模拟 8GB 显卡", "8 GB laptop card": "8GB 笔记本显卡", "whole device": "整张卡",
    "count only": "只限数量", "model's own": "模型自带", "image 0": "图像数为 0", "size hints": "尺寸提示", "PNG (control)": "PNG（对照）",
    # parallelism, pooling
    "shared memory (CPU backend, one host)": "共享内存（CPU 后端，单机）", "not stated": "未说明", "prefill": "prefill",
    "dummy": "虚拟", "real": "真实", "not called: changes server state": "未调用：会改变服务器状态",
    "colour": "颜色", "digits": "数字", "single": "不并行", "ours": "本站", "harness": "本站的客户端", "pinned": "固定到一个引擎", "round-robin": "轮询", "generative model of the series' part 2": "本系列第 2 篇的生成模型",
    # security
    "a path that does not exist": "不存在的路径", "a system file": "系统文件", "a system folder": "系统目录",
    "the server's working folder": "服务器的工作目录", "--allowed-local-media-path set": "设置了 --allowed-local-media-path",
    "allowed name redirecting to loopback": "允许的名字重定向到回环地址", "file:// URL": "file:// URL",
    "loopback, closed port": "回环地址，关闭的端口", "loopback, open port": "回环地址，开放的端口",
    "non-image content type": "非图像的内容类型",
    # security per release
    "auth": "认证", "runtime LoRA": "运行时 LoRA", "media fetch": "媒体下载", "server did not start": "服务器没有启动",
    "image URL on 127.0.0.1": "指向 127.0.0.1 的图像 URL", "allowed name redirecting to 127.0.0.1": "允许的名字重定向到 127.0.0.1",
    "backslash (CVE-2026-24779's shape): 127.0.0.1 before, localhost after":
        "反斜杠（CVE-2026-24779 的写法）：前面是 127.0.0.1，后面是 localhost",
    "backslash (CVE-2026-25960's shape): localhost before, 127.0.0.1 after":
        "反斜杠（CVE-2026-25960 的写法）：前面是 localhost，后面是 127.0.0.1",
    "URL parsers": "URL 解析器", "urllib.parse (standard library)": "urllib.parse（标准库）",
    "yarl (aiohttp's URL parser)": "yarl（aiohttp 的 URL 解析器）", "refused": "拒绝",
    "load an adapter from /etc/hostname (with the key)": "从 /etc/hostname 加载适配器（带密钥）",
    # video
    "video 0": "不允许视频", "video 1": "允许一段视频",
    # tuning
    "better": "变好", "worse": "变差", "no measurable change": "分不出变化", "server": "服务器", "request": "请求",
    "TTFT p50": "首 token 时间 p50", "TTFT p99": "首 token 时间 p99", "TPOT p50": "每输出 token 时间 p50",
    "TPOT p99": "每输出 token 时间 p99", "ngram": "ngram", "request, trusted server": "请求（服务器信任请求里的参数）",
    "greedy": "贪心", "sampled": "采样", "1 instance": "1 个实例", "2 instances": "2 个实例", "4 instances": "4 个实例",
    "1 server, 4 API servers": "1 个服务器、4 个 API 进程",
}
# Values built from parts (security_versions' probes and outcomes): translated part by part.
_PATTERNS = ((re.compile(r"^(.+) without a key$"), "不带密钥：{}"), (re.compile(r"^fetched (.+)$"), "取了 {}"),
             (re.compile(r"^not fetched \((\d+)\)$"), "没有取（{}）"), (re.compile(r"^host (\S+)$"), "主机 {}"))


# values the data spell in the code's words where the pages use plainer ones
VALUE_EN = {"harness": "ours"}


def value_label(value, lang: str):
    """A categorical value as a reader of ``lang`` reads it (values are English in the data)."""
    if not isinstance(value, str):
        return value
    if lang != "zh":
        return VALUE_EN.get(value, value)
    if value in VALUE_ZH:
        return VALUE_ZH[value]
    if " · " in value:
        return " · ".join(str(value_label(part, lang)) for part in value.split(" · "))
    if ", " in value and all(part in VALUE_ZH for part in value.split(", ")):
        # a list of names (fidelity's limited_by): each part translated, joined the Chinese way
        return "、".join(str(value_label(part, lang)) for part in value.split(", "))
    for pattern, template in _PATTERNS:
        m = pattern.match(value)
        if m:
            return template.format(m.group(1))
    return value
