"""End to end on a real vLLM (CPU backend): a run killed with SIGKILL takes its server with it, the finished rows
are kept, the rest measured, and the site built from the result."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, VLLM_HOW, WORKER_IN_ENGINE, build_site, python_imports, require, smaller

from measure.harness.server import group_members

pytestmark = pytest.mark.vllm

ENV = "e2e-cpu"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    require(python_imports("import vllm.entrypoints.openai.api_server"), "vLLM", VLLM_HOW)
    tmp = tmp_path_factory.mktemp("e2e")
    data = tmp / "data"
    data.mkdir()
    shutil.copytree(REPO / "data" / "article-2026-10-27", data / "article-2026-10-27")
    return tmp


def measure(workdir: Path, *args: str, **popen) -> subprocess.Popen:
    env = os.environ | {"MEASURE_STATE_DIR": str(workdir / "state"), "PYTHONUNBUFFERED": "1", "COLUMNS": "200"} \
        | smaller({"repeats": 2}) | WORKER_IN_ENGINE
    return subprocess.Popen(
        [sys.executable, "-m", "measure", "--data-root", str(workdir / "data"), "run", "pooling", "--profile", "cpu",
         "--env", ENV, *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen,
    )


def test_kill_resume_and_publish(workdir):
    staged = workdir / "data" / ".staging" / ENV / "pooling.embedding_throughput.csv"
    published = workdir / "data" / ENV
    # 1. A run that is killed with SIGKILL once it has finished a few rows.
    first = measure(workdir)
    deadline = time.monotonic() + 420
    while not (staged.exists() and len(staged.read_text().splitlines()) >= 3):
        assert first.poll() is None, first.stdout.read()
        assert time.monotonic() < deadline, "no rows staged in time"
        time.sleep(0.5)
    pid_files = list((workdir / "state" / "pids").glob("*.json"))
    assert len(pid_files) == 1
    server_pid = json.loads(pid_files[0].read_text())["pid"]
    first.send_signal(signal.SIGKILL)
    first.wait()
    rows_before = pd.read_csv(staged)
    # the kernel tells the server its client died (PR_SET_PDEATHSIG): vLLM shuts down, engine core and all
    deadline = time.monotonic() + 60
    while group_members(server_pid):
        assert time.monotonic() < deadline, f"the server's processes outlived their client: {group_members(server_pid)}"
        time.sleep(0.5)
    assert not published.exists(), "a killed run must not publish anything"

    # 2. The next run has no orphan to end (test_process_hygiene shows it would); without --resume it refuses to
    # touch the staged rows.
    refused = measure(workdir)
    out, _ = refused.communicate(timeout=300)
    assert "orphaned" not in out
    assert refused.returncode != 0 and "--resume" in out

    # 2b. The staged rows carry what they were measured on (run.json, as a device lease ending leaves them):
    # resuming them under another vLLM is refused; on another host of the same kind, it is allowed.
    run_json = staged.parent / "run.json"
    record = json.loads(run_json.read_text())
    assert record["software"]["vllm"] == "0.32.0" and record["profile"] == "cpu"
    assert [s for s in record["servers"] if record["servers"][s]["weights"] == "dummy"], "the server that was running"
    assert record["dataset_servers"]["pooling.embedding_throughput"]
    run_json.write_text(json.dumps(record | {"software": record["software"] | {"vllm": "0.0.0-other"}}))
    mixed = measure(workdir, "--resume")
    out, _ = mixed.communicate(timeout=300)
    assert mixed.returncode != 0 and "other conditions" in out and "vLLM: 0.0.0-other then, 0.32.0 now" in out, out
    assert pd.read_csv(staged).equals(rows_before) and "starting vLLM" not in out
    run_json.write_text(json.dumps(record | {"hardware": record["hardware"] | {"host": "earlier-host"}}))

    # 3. The resumed run keeps the finished rows and measures the rest.
    second = measure(workdir, "--resume")
    out, _ = second.communicate(timeout=1500)
    assert second.returncode == 0, out
    final = pd.read_csv(published / "pooling.embedding_throughput.csv")
    merged = rows_before.merge(final, on=list(rows_before.columns), how="left", indicator=True)
    assert (merged["_merge"] == "both").all(), "rows finished before the kill must be published unchanged"
    assert not (workdir / "data" / ".staging" / ENV).exists()
    assert not list((workdir / "state" / "pids").glob("*.json")), "no server left behind"

    # 4. Provenance names the software and the exact server commands behind each dataset.
    prov = json.loads((published / "provenance.json").read_text())
    assert prov["source"] == "measured" and prov["software"]["vllm"] == "0.32.0"
    servers = prov["datasets"]["pooling.embedding_throughput"]["servers"]
    assert servers and all("vllm.entrypoints.openai.api_server" in prov["servers"][s]["command"] for s in servers)
    assert {prov["servers"][s]["weights"] for s in servers} == {"dummy", "real"}  # tiny Qwen3 + real MiniLM
    assert prov["experiments"]["pooling"]["resumed_from"] == {"started": record["started"], "host": "earlier-host",
                                                              "code_revision": record["code_revision"]}
    startup = pd.read_csv(published / "servers.startup.csv")
    assert startup["server"].is_unique and (startup["startup_s"] > 0).all()
    # every start is kept with the experiment it was made for (servers.startup holds each server's latest only)
    starts = prov["experiments"]["pooling"]["server_starts"]
    assert {s["server"] for s in starts} == set(startup["server"]) and {s["experiment"] for s in starts} == {"pooling"}
    assert all(s["startup_s"] > 0 and s["started_together"] >= 1 for s in starts)
    assert set(startup["server"]) == set(prov["servers"]) == set(prov["datasets"]["servers.startup"]["servers"])

    # 5. A second run on unchanged code re-measures nothing (and says why); --dry-run says the same.
    again = measure(workdir)
    out, _ = again.communicate(timeout=300)
    assert again.returncode == 0, out
    assert "pooling: skip: unchanged since" in out and "starting vLLM" not in out
    assert pd.read_csv(published / "pooling.embedding_throughput.csv").equals(final)

    # 6. The site built from this data root shows our numbers where it said 未实测 before.
    from measure.site.scan import make_store, scan_pages

    def status(root):
        claims = {(c.page, c.key): c.status for c in scan_pages(store=make_store(root, partial=True))}
        return claims[("pooling.en.md", "pooling.prefill_comparison:table")]

    assert status(REPO / "tests" / "fixtures" / "data") == "not_measured"
    assert status(workdir / "data") == "measured"
    site = workdir / "site"
    build_site(workdir / "data", site)
    html = (site / "en" / "pooling" / "index.html").read_text()
    assert f'href="../../data/{ENV}/pooling.prefill_comparison.csv"' in html
    assert "vLLM 0.32.0" in html
