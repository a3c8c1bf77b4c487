"""Memory bandwidth of this device from a torch copy, the floor a decode step is measured against.

A copy reads each byte once and writes it once; the rate counts both (as STREAM's copy and NVIDIA's bandwidthTest
do). The figure is the best of several short windows: the device's capability, which another process's burst of
memory traffic (a neighbouring server on a shared CPU host) lowers in some windows, not in all. Runs as a script in
vLLM's Python (it needs only torch) and prints one JSON line.
"""

from __future__ import annotations

import json
import sys


def main(mib: int, min_seconds: float = 2.0, windows: int = 8) -> dict:
    import torch
    from device_timing import repeat_for

    cuda = torch.cuda.is_available()
    source = torch.ones(mib << 20, dtype=torch.uint8, device="cuda" if cuda else "cpu")
    target = torch.empty_like(source)
    rates = []
    for _ in range(windows):
        iterations, elapsed = repeat_for(lambda: target.copy_(source), cuda, min_seconds / windows)
        rates.append(2 * (mib << 20) * iterations / elapsed / 1e9)
    name = torch.cuda.get_device_name(0) if cuda else "cpu"
    return {"device": name, "buffer_mib": mib, "windows": windows, "window_gb_s": rates,
            "bandwidth_gb_s": max(rates), "threads": torch.get_num_threads(), "torch": torch.__version__}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1024)))
