"""Dense bf16 matrix-multiply rate of this device, the ceiling a roofline ratio is measured against.

Runs as a script in vLLM's Python (it needs only torch) and prints one JSON line.
"""

from __future__ import annotations

import json
import sys


def main(side: int, min_seconds: float = 2.0) -> dict:
    import torch
    from device_timing import repeat_for

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    a = torch.randn(side, side, dtype=torch.bfloat16, device=device)
    b = torch.randn(side, side, dtype=torch.bfloat16, device=device)
    iterations, elapsed = repeat_for(lambda: a @ b, cuda, min_seconds)
    name = torch.cuda.get_device_name(0) if cuda else "cpu"
    return {"device": name, "side": side, "iterations": iterations, "seconds": elapsed,
            "tflops": 2 * side**3 * iterations / elapsed / 1e12, "threads": torch.get_num_threads(),
            "torch": torch.__version__}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 4096)))
