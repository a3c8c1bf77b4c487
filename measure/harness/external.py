"""Other load generators, run through their own command lines: AIPerf and GuideLLM.

Each lives in a virtualenv of its own (their dependencies pin other versions of what vLLM needs):
``nox -s load_generators`` makes them, and ``$MEASURE_AIPERF`` / ``$MEASURE_GUIDELLM`` point at their
executables. Every run reports what the tool itself measured, renamed to vLLM's definitions where the tool
gives the same quantity under another name, and the CPU the tool's whole process tree used.
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from measure.harness.server import REPO_ROOT, portable

VENVS = REPO_ROOT / ".nox"
# tool: (its name on the site, the variable that may point at it, where `nox -s load_generators` puts it)
TOOLS = {"aiperf": ("AIPerf", "MEASURE_AIPERF", "load-generators/aiperf/bin/aiperf"),
         "guidellm": ("GuideLLM", "MEASURE_GUIDELLM", "load-generators/guidellm/bin/guidellm")}


class ToolFailed(RuntimeError):
    """A load generator exited with an error; the message carries its command and the tail of its output."""


@dataclass
class ToolRun:
    tool: str
    version: str
    command: str
    request_per_s: float
    output_tok_s: float
    output_tokens_mean: float
    ttft_median_ms: float | None  # the tool's own TTFT (both skip vLLM's role-only first chunk)
    itl_median_ms: float | None  # vLLM's ITL (gap between streamed chunks); GuideLLM keeps no per-chunk times
    tpot_median_ms: float | None  # vLLM's TPOT, (end-to-end − TTFT) / (tokens − 1), per request
    cpu_cores: float | None  # CPU seconds of the tool's process tree over its wall time, start-up included
    wall_s: float
    busiest_process_cpu: float | None = None  # its busiest process's share of a core, where the tool reports it
    prompt_tokens_mean: float | None = None  # as the server counted them, where the tool reports it


def executable(tool: str) -> Path | None:
    """The tool's executable: $MEASURE_<TOOL>, else the virtualenv ``nox -s load_generators`` made."""
    _, variable, default = TOOLS[tool]
    path = Path(os.environ.get(variable) or VENVS / default)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def _timed(argv: list[str], timeout_s: float, cwd: Path) -> tuple[float, float]:
    """Run ``argv`` to its end; (wall seconds, CPU seconds of it and every process it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=cwd,
                          # not HF_HUB_OFFLINE: with it AIPerf 0.13.0 fails to load a tokenizer from a local folder
                          env={k: v for k, v in os.environ.items() if not k.endswith("_OFFLINE")} | {"NO_COLOR": "1"})
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise ToolFailed(f"{Path(argv[0]).name} exited {proc.returncode}:\n{tail}\ncommand: {shlex.join(argv)}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _shown(argv: list[str], workdir: Path) -> str:
    return portable(shlex.join([Path(argv[0]).name, *argv[1:]]).replace(str(workdir) + "/", "").replace(str(workdir), "."))


def aiperf(base_url: str, model: str, tokenizer: str, *, concurrency: int, requests: int, prompt_tokens: int,
           output_tokens: int, workdir: Path, timeout_s: float = 900) -> ToolRun:
    workdir.mkdir(parents=True, exist_ok=True)
    argv = [str(executable("aiperf")), "profile", "--model", model, "--url", base_url, "--endpoint-type", "chat",
            "--streaming", "--concurrency", str(concurrency), "--request-count", str(requests),
            "--isl", str(prompt_tokens), "--isl-stddev", "0", "--osl", str(output_tokens), "--tokenizer", tokenizer,
            "--use-server-token-count", "--extra-inputs", "ignore_eos:true", "--extra-inputs", "temperature:0",
            "--artifact-dir", str(workdir / "aiperf"), "--ui-type", "none"]
    wall, cpu = _timed(argv, timeout_s, workdir)
    return parse_aiperf(json.loads((workdir / "aiperf" / "profile_export_aiperf.json").read_text()),
                        _shown(argv, workdir), cpu / wall, wall)


def parse_aiperf(data: dict, command: str, cpu_cores: float, wall_s: float) -> ToolRun:
    """AIPerf's aggregate export; its "inter chunk latency" is vLLM's ITL, its "inter token latency" vLLM's TPOT."""
    def p50(key):
        return (data.get(key) or {}).get("p50")

    return ToolRun("AIPerf", data.get("aiperf_version") or "?", command,
                   request_per_s=data["request_throughput"]["avg"], output_tok_s=data["output_token_throughput"]["avg"],
                   output_tokens_mean=data["output_sequence_length"]["avg"], ttft_median_ms=p50("time_to_first_token"),
                   itl_median_ms=p50("inter_chunk_latency"), tpot_median_ms=p50("inter_token_latency"),
                   cpu_cores=cpu_cores, wall_s=wall_s)


def guidellm(base_url: str, model: str, tokenizer: str, *, concurrency: int, requests: int, prompt_tokens: int,
             output_tokens: int, workdir: Path, timeout_s: float = 900) -> ToolRun:
    workdir.mkdir(parents=True, exist_ok=True)
    result = workdir / "guidellm.json"
    # greedy and to the full length, as the other tools ask (left out, the server samples with the model's
    # generation_config, which costs time per token)
    backend = {"kind": "openai_http", "target": base_url, "model": model,
               "extras": {"body": {"temperature": 0, "ignore_eos": True}}}
    argv = [str(executable("guidellm")), "run", "--backend", json.dumps(backend),
            "--profile", f"kind=concurrent,streams={concurrency}",
            "--constraint", f"kind=max_requests,count={requests}",
            "--data", f"kind=synthetic_text,prompt_tokens={prompt_tokens},output_tokens={output_tokens}",
            "--tokenizer", f"kind=huggingface_auto,model={tokenizer}",
            "--output", f"kind=json,path={result}", "--disable-progress"]
    wall, cpu = _timed(argv, timeout_s, workdir)
    return parse_guidellm(json.loads(result.read_text()), _shown(argv, workdir), cpu / wall, wall)


def parse_guidellm(data: dict, command: str, cpu_cores: float, wall_s: float) -> ToolRun:
    """GuideLLM's JSON; its "inter token latency" is vLLM's TPOT, and it keeps only the first and last token's
    time of each request, so vLLM's ITL (per-chunk gaps) cannot be had from it."""
    bench = data["benchmarks"][0]
    m = bench["metrics"]

    def ok(key, stat="median"):
        return (m.get(key) or {}).get("successful", {}).get(stat)

    done = (m.get("request_totals") or {}).get("successful") or ok("request_latency", "count")
    tokens = ok("output_token_count", "mean")
    return ToolRun("GuideLLM", (data.get("metadata") or {}).get("guidellm_version") or "?", command,
                   request_per_s=done / bench["duration"], output_tok_s=done * tokens / bench["duration"],
                   output_tokens_mean=tokens, ttft_median_ms=ok("time_to_first_token_ms"), itl_median_ms=None,
                   tpot_median_ms=ok("inter_token_latency_ms"), cpu_cores=cpu_cores, wall_s=wall_s)


RUNNERS = {"aiperf": aiperf, "guidellm": guidellm}
