"""Dense matrix-multiply rate of this device, the ceiling a roofline ratio is measured against.

Runs as a script in vLLM's Python (it needs only torch) and prints one JSON line. A GPU is timed in bf16. A CPU is
timed in whichever of bf16 and fp32 it multiplies faster, found by timing both briefly: torch's flag for a full-speed
bf16 matmul is no guide (a 2-core AVX2 EPYC took a fallback ~500x slower than fp32; an AVX-512 Xeon without
avx512_bf16 reports support and ran bf16 5 to 13 times slower), and vLLM's CPU layers (oneDNN) take neither fallback.
"""

from __future__ import annotations

import json
import sys


def fastest_dtype(cuda: bool, side: int) -> str:
    """bfloat16 on a GPU; on a CPU the faster of bfloat16 and float32 at this size, timed briefly."""
    if cuda:
        return "bfloat16"
    return max(("bfloat16", "float32"), key=lambda dtype: rate(dtype, side, False, 0.3)[0])


def rate(dtype: str, side: int, cuda: bool, min_seconds: float) -> tuple[float, int, float]:
    """(TFLOP/s, iterations, seconds) of ``side``-square matmuls in ``dtype``."""
    import torch
    from device_timing import repeat_for

    device = "cuda" if cuda else "cpu"
    a = torch.randn(side, side, dtype=getattr(torch, dtype), device=device)
    b = torch.randn(side, side, dtype=getattr(torch, dtype), device=device)
    iterations, elapsed = repeat_for(lambda: a @ b, cuda, min_seconds)
    return 2 * side**3 * iterations / elapsed / 1e12, iterations, elapsed


def main(side: int, min_seconds: float = 2.0, dtype: str | None = None) -> dict:
    import torch

    cuda = torch.cuda.is_available()
    dtype = dtype or fastest_dtype(cuda, side)
    tflops, iterations, elapsed = rate(dtype, side, cuda, min_seconds)
    name = torch.cuda.get_device_name(0) if cuda else "cpu"
    return {"device": name, "side": side, "dtype": dtype, "iterations": iterations, "seconds": elapsed,
            "tflops": tflops, "threads": torch.get_num_threads(), "torch": torch.__version__}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 4096, dtype=sys.argv[2] if len(sys.argv) > 2 else None)))
