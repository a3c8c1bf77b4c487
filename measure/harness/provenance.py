"""Provenance is data: what machine, which software, which code produced a dataset."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from measure.harness.profiles import cpu_cores

REPO_ROOT = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], timeout: float = 30, cwd: Path = REPO_ROOT) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


# What a measurement runs: the measure package, its dependencies and sessions, and the scripts of an offline GPU host;
# not the site's macros (measure/site), which only render what was measured.
MEASURED_CODE = ("measure", ":(exclude)measure/site", "pyproject.toml", "noxfile.py", "scripts")


def code_revision(repo: Path = REPO_ROOT) -> str:
    """The last commit that changed what a measurement runs (MEASURED_CODE), with +dirty for uncommitted changes
    to it, new files not yet added included (a new experiment module is measured code; ignored files are not): a commit that only edits pages or data leaves the revision as it was, so datasets measured on either
    side of it (a GPU chapter spread over two leases) name one revision. $MEASURE_CODE_REVISION where set: a
    host that got a copy of the tree without .git (``python -m measure revision`` prints the value to pass)."""
    if os.environ.get("MEASURE_CODE_REVISION"):
        return os.environ["MEASURE_CODE_REVISION"]
    if not (repo / ".git").exists():
        return "unknown"
    rev = _run(["git", "log", "-1", "--format=%H", "--", *MEASURED_CODE], cwd=repo) or "unknown"
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=all", "--", *MEASURED_CODE], cwd=repo)
    return rev + ("+dirty" if dirty else "")


def _cpuinfo(field: str) -> str | None:
    """The first CPU's ``field`` in /proc/cpuinfo (None off Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    return _cpuinfo("model name") or platform.processor() or platform.machine()


# x86 extensions that pick vLLM's CPU kernels: without AVX-512 or AMX, vLLM 0.32 refuses an fp8 KV cache, and two
# "AMD EPYC" hosts can differ here (CI has had both), so the same CPU name does not mean the same speed
VLLM_CPU_EXTENSIONS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile")


def cpu_extensions() -> list[str]:
    flags = set((_cpuinfo("flags") or "").split())
    return [ext for ext in VLLM_CPU_EXTENSIONS if ext in flags]


def memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None


def gpus() -> list[dict]:
    if not shutil.which("nvidia-smi"):
        return []
    out = _run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"])
    found = []
    for line in out.splitlines():
        name, mem, driver = (x.strip() for x in line.split(","))
        found.append({"name": name, "memory_mib": int(float(mem)), "driver": driver})
    return found


def gpu_topology() -> str:
    text = _run(["nvidia-smi", "topo", "-m"]) if shutil.which("nvidia-smi") else ""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)  # nvidia-smi underlines the header with ANSI codes


def software(python: str = sys.executable) -> dict:
    """Versions as the Python that runs vLLM sees them (it may differ from ours)."""
    probe = (
        "import json, platform\n"
        "out = {'python': platform.python_version()}\n"
        "for mod in ('vllm', 'torch', 'transformers'):\n"
        "    try:\n"
        "        m = __import__(mod); out[mod] = m.__version__\n"
        "    except Exception as exc:\n"
        "        out[mod] = None\n"
        "try:\n"
        "    import torch; out['cuda'] = torch.version.cuda\n"
        "except Exception:\n"
        "    out['cuda'] = None\n"
        "print(json.dumps(out))\n"
    )
    text = _run([python, "-c", probe], timeout=120)
    try:
        return json.loads(text.splitlines()[-1])
    except (ValueError, IndexError):
        return {"python": platform.python_version(), "vllm": None, "torch": None}


def hardware() -> dict:
    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cpu_extensions": cpu_extensions(),
        "cpu_count": len(cpu_cores()),
        "memory_gib": memory_gib(),
        "gpus": gpus(),
        "gpu_topology": gpu_topology(),
    }


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def default_env_name(profile: str, hw: dict) -> str:
    """``gpu-1x-nvidia-h200`` or ``cpu-2c-x86-64``: one folder per kind of machine."""
    if hw.get("gpus"):
        names = {g["name"] for g in hw["gpus"]}
        return f"{profile}-{len(hw['gpus'])}x-{slug(' '.join(sorted(names)))}"
    return f"{profile}-{hw.get('cpu_count')}c-{slug(hw.get('machine', ''))}"


def environment_label(hw: dict, sw: dict) -> dict[str, str]:
    vllm = sw.get("vllm") or "?"
    if hw.get("gpus"):
        g = hw["gpus"][0]
        what = {"zh": f"{len(hw['gpus'])}× {g['name']}", "en": f"{len(hw['gpus'])}× {g['name']}"}
    else:
        what = {"zh": f"CPU {hw.get('cpu_count')} 核", "en": f"CPU {hw.get('cpu_count')} cores"}
    return {"zh": f"本站实测：{what['zh']}，vLLM {vllm}", "en": f"Ours: {what['en']}, vLLM {vllm}"}


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


STARTUP_DATASET = "servers.startup"  # measure.experiment.STARTUP's name (importing it here would be circular)


def servers_in_use(provenance: dict) -> dict:
    """The provenance's server records that some dataset other than the start-up facts refers to. The rest
    belong to runs whose datasets were re-measured with other servers since; they go, and their start-up rows
    with them (``Staging.keep_only``), so the start-up table lists the servers behind the published data."""
    in_use = {s for name, d in (provenance.get("datasets") or {}).items() if name != STARTUP_DATASET
              for s in d.get("servers", [])}
    return {k: v for k, v in (provenance.get("servers") or {}).items() if k in in_use}


@dataclass
class RunFacts:
    """What a run knows of where and with what it measures: the provenance of everything it promotes."""

    env_name: str
    hardware: dict
    software: dict
    profile: str
    fingerprints: dict[str, str]
    plans: dict[str, dict] = field(default_factory=dict)  # experiment -> a digest of each part of its measured plan
    attached: dict[str, str] | None = None  # attach mode: role -> the server's base URL
    resumed_from: dict | None = None  # the interrupted run's record, when this run resumed it
    sizes_override: dict | None = None  # workload sizes MEASURE_SIZES replaced (a smoke run, not the profile's own)

    def environment(self) -> tuple[dict, dict]:
        """(hardware, label) of the environment. Attached, the server runs elsewhere: we know only what it
        reports and what the user declared."""
        if self.attached is None:
            return self.hardware, environment_label(self.hardware, self.software)
        hardware = {"attached": True, "gpus": [], "servers": dict(self.attached),
                    "client": {k: self.hardware.get(k) for k in ("host", "cpu", "cpu_count")}}
        version = self.software.get("vllm")
        return hardware, {"zh": f"附着测量：{self.env_name}，vLLM {version}", "en": f"Attached: {self.env_name}, vLLM {version}"}

    def record_experiment(self, current: dict, *, experiment: str, datasets: list[str], promoted_now: list[str],
                          dataset_servers: dict[str, set[str]], planned: set[str], server_records: dict,
                          kept_older: bool, revision: str, date: str, wall_s: float | None = None,
                          server_starts: list[dict] | None = None) -> dict:
        """``current`` (the environment's provenance.json) after promoting ``promoted_now`` of ``experiment``:
        its datasets name the servers behind them, and every server keeps its full command. ``kept_older``: the
        run measured only missing datasets, so the others keep their own provenance. ``server_starts``: every
        server start made for this experiment, in order (servers it shared with an earlier one started there)."""
        hardware, label = self.environment()
        recorded = current.setdefault("datasets", {})
        if current.get("hardware") is not None:  # datasets written before they kept their own: the record then
            for entry in recorded.values():
                entry.setdefault("hardware", current["hardware"])
        current.update({
            "source": "measured", "date": date, "code_revision": revision, "hardware": hardware, "software": self.software,
            "profile": self.profile if self.attached is None else "attach", "label": label,
        })
        servers = current.setdefault("servers", {})
        servers.update(server_records)
        # Each dataset keeps the hardware it was measured on: runs on different machines (a CPU with AVX-512 and one
        # without) may publish into one environment, whose own "hardware" is the latest run's.
        for name in datasets:
            if name in promoted_now:
                recorded[name] = {"experiment": experiment, "date": date, "code_revision": revision,
                                  "servers": sorted(dataset_servers.get(name, planned)), "software": self.software,
                                  "hardware": hardware}
        servers = current["servers"] = servers_in_use(current)
        recorded[STARTUP_DATASET] = {"experiment": "harness", "date": date, "code_revision": revision,
                                     "servers": sorted(servers), "hardware": hardware}
        before = current.setdefault("experiments", {}).get(experiment, {})
        measured = set(promoted_now) - {STARTUP_DATASET}
        current["experiments"][experiment] = {
            "fingerprint": self.fingerprints[experiment], "date": date, "code_revision": revision,
            "software": self.software,
            **({"plan": self.plans[experiment]} if experiment in self.plans else {}),
            "datasets": sorted(measured | (set(before.get("datasets", [])) if kept_older else set())),
            # how long this run of it took, server starts included: what `--dry-run` plans the next one with
            **({"wall_s": round(wall_s, 1)} if wall_s is not None and not kept_older and not self.resumed_from else {}),
            **({"server_starts": server_starts} if server_starts else {}),
            **({"partial": "only missing datasets were measured; a plain run re-measures all"} if kept_older else {}),
            **({"sizes_override": self.sizes_override} if self.sizes_override else {}),
            **({"resumed_from": {k: self.resumed_from.get(k) for k in ("started", "code_revision")}
                | {"host": (self.resumed_from.get("hardware") or {}).get("host")}} if self.resumed_from else {}),
        }
        return current
