"""CPU seconds of processes, read from ``/proc`` (Linux): who was busy while a batch ran."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int | str) -> list[str] | None:
    try:
        # the command name (field 2) may hold spaces and parentheses: split after its closing one
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of one process (its threads included, its children not)."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS if fields else None


def process_start_ticks(pid: int) -> int | None:
    """When a process started (clock ticks after boot): with the pid, it names one process even after pid reuse."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def process_running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, dead but not yet reaped, is not)."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """The live processes of a process group (its leader may be gone while its engine and workers run on)."""
    members = []
    for entry in Path("/proc").glob("[0-9]*"):
        fields = _stat_fields(entry.name)
        if fields and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):  # field 5: the process group
            members.append(int(entry.name))
    return members


LOG_PREFIX = re.compile(r"^\(([A-Za-z]+)[-_A-Za-z0-9]* pid=(\d+)\)", re.M)  # "(ApiServer_1 pid=32256) INFO …"
KINDS = {"apiserver": "api", "enginecore": "engine", "worker": "worker", "vllmworker": "worker",
         "mainprocess": "other"}


def process_names(log: str, pgid: int) -> dict[str, int]:
    """A name per live process of a server (api0…, engine0…, worker0…, other0…), by the name vLLM's log lines give
    each process ("(ApiServer_1 pid=…)", "(EngineCore pid=…)"; vLLM's process titles did not show in /proc on the
    CPU backend); a process of the group the log never names (multiprocessing's resource tracker) is "other"."""
    kind_of: dict[int, str] = {}
    for name, pid in LOG_PREFIX.findall(log):
        kind_of.setdefault(int(pid), KINDS.get(name.lower(), "other"))
    found: dict[str, list[int]] = {"api": [], "engine": [], "worker": [], "other": []}
    for pid in sorted(set(group_members(pgid)) | {p for p in kind_of if p == pgid}):
        found[kind_of.get(pid, "other")].append(pid)
    return {f"{kind}{i}": pid for kind, pids in found.items() for i, pid in enumerate(pids)}


def group_cpu_s(pgid: int) -> float:
    """CPU seconds of every live process in a process group (a server and the workers it started)."""
    total = 0.0
    for entry in Path("/proc").glob("[0-9]*"):
        fields = _stat_fields(entry.name)
        if fields and int(fields[2]) == pgid:  # field 5 of /proc/PID/stat: the process group
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


class CpuSampler:
    """Samples the CPU seconds of named processes every ``interval_s`` in a thread, so the share of a core
    each used can be read afterwards over any window (a batch, or the timed part of another program's run)."""

    def __init__(self, pids: dict[str, int | None], interval_s: float = 0.05):
        import threading

        self.pids = {name: pid for name, pid in pids.items() if pid}
        self.interval_s = interval_s
        self.samples: list[tuple[float, dict[str, float | None]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)

    def _sample(self) -> None:
        self.samples.append((time.monotonic(), {name: process_cpu_s(pid) for name, pid in self.pids.items()}))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval_s)

    def add(self, name: str, pid: int) -> None:
        self.pids = self.pids | {name: pid}  # a new dict: the sampling thread reads the old one safely

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def share(self, name: str, t0: float, t1: float) -> float | None:
        """CPU seconds of ``name`` over [t0, t1] divided by the window's length (samples interpolated)."""
        points = [(t, c[name]) for t, c in list(self.samples) if c.get(name) is not None]
        if t1 <= t0 or len(points) < 2 or points[0][0] > t0 + self.interval_s * 2 or points[-1][0] < t1 - self.interval_s * 2:
            return None
        return (_at(points, t1) - _at(points, t0)) / (t1 - t0)


def _at(points: list[tuple[float, float]], t: float) -> float:
    """The CPU seconds at time ``t``, linear between the samples around it."""
    before = max((p for p in points if p[0] <= t), default=points[0], key=lambda p: p[0])
    after = min((p for p in points if p[0] >= t), default=points[-1], key=lambda p: p[0])
    if after[0] == before[0]:
        return before[1]
    return before[1] + (after[1] - before[1]) * (t - before[0]) / (after[0] - before[0])
