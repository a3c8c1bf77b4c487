"""How figures are computed from request timings, and the version of each of those definitions.

An experiment's fingerprint includes the version of every definition its code uses: a change in how TTFT, ITL,
TPOT, a round's throughput, a percentile or a CPU share is computed moves the figures without changing what is
sent, so it makes the data measured under the old definition stale (and only those). Each definition names the
code it is made of; a test pins that code's digest, so changing it without a new version fails.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Definition:
    version: int
    code: tuple[tuple[str, str], ...]  # (module, qualified name) of the code that makes it up
    history: str  # what each version changed, with the commit that changed it
    digest: str  # of that code, docstrings and comments left out: tests/test_fingerprint.py pins it


LOADGEN, PROCSTAT, HERE = "measure.harness.loadgen", "measure.harness.procstat", "measure.harness.definitions"
DEFINITIONS = {
    "request timing": Definition(
        1, ((LOADGEN, "Timing"), (LOADGEN, "_streamed"), (LOADGEN, "_whole"), (LOADGEN, "_sent")),
        "1: TTFT, ITL, TPOT and latency of one request as vllm bench serve defines them (n > 1 per choice since "
        "513b03a, the same figures for one choice)", "dc8ed7a7bd85c2ec"),
    "round": Definition(
        2, ((LOADGEN, "Batch"), (LOADGEN, "WorkerReport"), (LOADGEN, "LoadSummary"), (LOADGEN, "summarise"),
            (LOADGEN, "LoadGenerator.run")),
        "1: a round timed from the moment its workers were told to start; 2 (9e9c18e): from its first request "
        "sent, as vllm bench serve times its run", "3ec01aaf5793972a"),
    "percentile": Definition(
        2, ((HERE, "percentile"),),
        "1: each experiment took the nearest rank above; 2 (e55dddc): linear between ranks, as vllm bench serve "
        "computes them", "07037cc91741f60f"),
    "spread": Definition(1, ((HERE, "spread"),), "1: median, lowest and highest over the timed rounds", "ff4dbe6e226f0c25"),
    "cpu share": Definition(
        1, ((PROCSTAT, "CpuSampler"), (PROCSTAT, "_at")),
        "1: CPU seconds over a round's wall seconds, sampled from /proc and interpolated", "d853f895e85f3deb"),
}
# Run-context calls that hand an experiment a definition's code: ctx.load(...) is the load client.
CONTEXT_USES = {"load": ("request timing", "round")}
# The metric definitions' version as a whole: it rises by one with every definition's new version.
METRICS_VERSION = 1 + sum(d.version - 1 for d in DEFINITIONS.values())


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
