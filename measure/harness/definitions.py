"""How figures are computed from request timings, and the version of those definitions.

Every experiment's fingerprint includes ``METRICS_VERSION``: a change in how TTFT, ITL, TPOT, throughput, a
percentile or a CPU share is computed moves the figures without changing what is sent, so it must make the data
measured under the old definitions stale. ``DEFINITIONS`` names the code that makes up the definitions; a test pins
its digest, so a change there without a new version fails.
"""

from __future__ import annotations

import statistics

import numpy as np

# 1: until 9e9c18e (2026-12-06) a batch was timed from the moment its workers were told to start.
# 2: a batch is timed from its first request sent, as `vllm bench serve` times its run.
# 3: percentiles interpolate linearly between ranks, as `vllm bench serve` computes them (numpy's default);
#    before, four experiments each took the nearest rank above.
METRICS_VERSION = 3

# The functions whose code is the metric definitions (module, qualified name). What a test pins is the digest of
# their code, docstrings and comments left out.
DEFINITIONS = (
    ("measure.harness.definitions", "percentile"),
    ("measure.harness.definitions", "spread"),
    ("measure.harness.loadgen", "Timing"),
    ("measure.harness.loadgen", "WorkerReport"),
    ("measure.harness.loadgen", "Batch"),
    ("measure.harness.loadgen", "summarise"),
    ("measure.harness.loadgen", "LoadGenerator.run"),
    ("measure.harness.loadgen", "_streamed"),
    ("measure.harness.loadgen", "_whole"),
    ("measure.harness.procstat", "CpuSampler"),
    ("measure.harness.procstat", "_at"),
)
DEFINITIONS_DIGEST = ""  # pinned below by tests/test_fingerprint.py's message when the code changes


def percentile(values, p: float) -> float:
    """The ``p``-th percentile (0–100) of ``values``, linear between ranks: what `vllm bench serve` reports as
    p99 (``np.percentile(values, 99)``). Raises on an empty list: a percentile of nothing is no figure."""
    values = list(values)
    if not values:
        raise ValueError("a percentile of no values")
    return float(np.percentile(values, p))


def spread(values) -> tuple[float | None, float | None, float | None]:
    """(median, lowest, highest) of a figure over its rounds, leaving out rounds without it; all None if none has it."""
    present = [v for v in values if v is not None]
    return (statistics.median(present), min(present), max(present)) if present else (None, None, None)
