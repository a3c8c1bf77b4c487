"""Dense matrix-multiply rate of this device, the ceiling a roofline ratio is measured against.

Runs as a script in vLLM's Python (it needs only torch) and prints one JSON line. The dtype is bf16 where torch
multiplies it at full speed (a GPU, a CPU with AVX-512), else fp32: on a 2-core AVX2 EPYC torch's own bf16 matmul took
a fallback ~500 times slower than fp32, which vLLM's CPU layers (oneDNN) never take.
"""

from __future__ import annotations

import json
import sys


def full_speed_dtype(cuda: bool) -> str:
    """bfloat16 where this device multiplies it at full speed, else float32."""
    import torch

    if cuda:
        return "bfloat16"
    bf16_check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return "bfloat16" if bf16_check is not None and bf16_check() else "float32"


def main(side: int, min_seconds: float = 2.0, dtype: str | None = None) -> dict:
    import torch
    from device_timing import repeat_for

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    dtype = dtype or full_speed_dtype(cuda)
    a = torch.randn(side, side, dtype=getattr(torch, dtype), device=device)
    b = torch.randn(side, side, dtype=getattr(torch, dtype), device=device)
    iterations, elapsed = repeat_for(lambda: a @ b, cuda, min_seconds)
    name = torch.cuda.get_device_name(0) if cuda else "cpu"
    return {"device": name, "side": side, "dtype": dtype, "iterations": iterations, "seconds": elapsed,
            "tflops": 2 * side**3 * iterations / elapsed / 1e12, "threads": torch.get_num_threads(),
            "torch": torch.__version__}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 4096, dtype=sys.argv[2] if len(sys.argv) > 2 else None)))
