"""Attach mode: measure a vLLM someone else started; provenance comes from the server and the user."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, VLLM_HOW, python_imports, require

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def running_server(tmp_path_factory):
    require(python_imports("import vllm"), "vLLM", VLLM_HOW)
    from measure.harness import server as srv
    from measure.harness.profiles import CPU, server_env
    from measure.models import resolve

    tmp = tmp_path_factory.mktemp("attach")
    model = resolve(CPU.models["embedding"], REPO / ".cache" / "models")
    started = srv.launch(model.server_args, model.name, (*CPU.server_args, "--runner", "pooling"), server_env(CPU),
                         tmp / "server.log", timeout_s=CPU.startup_timeout_s)
    yield tmp, started
    started.stop()


def test_attach_measures_only_the_given_role(running_server):
    tmp, started = running_server
    env = os.environ | {"MEASURE_STATE_DIR": str(tmp / "state"), "COLUMNS": "200"}
    run = subprocess.run(
        [sys.executable, "-m", "measure", "--data-root", str(tmp / "data"), "run", "pooling", "--profile", "cpu",
         "--env", "attached-someone-elses", "--base-url", f"embedding={started.base_url}", "--weights", "dummy"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "starting vLLM" not in run.stdout + run.stderr  # nothing of ours was started
    published = Path(tmp / "data" / "attached-someone-elses")
    rows = pd.read_csv(published / "pooling.embedding_throughput.csv")
    assert set(rows["model"]) == {started.model} and set(rows["weights"]) == {"dummy"}
    assert not (published / "pooling.rerank_latency.csv").exists()  # no reranker was given
    prov = json.loads((published / "provenance.json").read_text())
    server = prov["servers"]["attached-embedding"]
    assert server["attached"] and server["base_url"] == started.base_url and server["weights"] == "dummy"
    assert prov["software"]["vllm"] == "0.32.0" and prov["hardware"]["attached"]
