"""How often a step runs on this device in a while, synchronised: the loop the peak scripts share.

Imported by the scripts beside it, which run in vLLM's Python as plain files (their folder is on sys.path)."""

from __future__ import annotations

import time


def repeat_for(step, cuda: bool, min_seconds: float) -> tuple[int, float]:
    """Run ``step`` three times to warm up, then for at least ``min_seconds``; (iterations, seconds)."""
    import torch

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(3):
        step()
    sync()
    iterations, elapsed = 0, 0.0
    start = time.perf_counter()
    while elapsed < min_seconds:
        step()
        iterations += 1
        if iterations % 10 == 0 or not cuda:  # a GPU queues work: synchronise now and then, not every step
            sync()
            elapsed = time.perf_counter() - start
    sync()
    return iterations, time.perf_counter() - start
