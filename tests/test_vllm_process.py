"""On a real vLLM (CPU backend): a server killed mid-run takes its engine with it and the run says how it died;
several choices per request (n = 2) are timed per choice."""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import REPO, VLLM_HOW, python_imports, require, smaller

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def vllm_installed():
    require(python_imports("import vllm.entrypoints.openai.api_server"), "vLLM", VLLM_HOW)


def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}"
        time.sleep(0.2)


def test_an_api_server_killed_mid_run_leaves_nothing_and_the_run_says_it_died(vllm_installed, tmp_path):
    from measure.harness.server import _inductor_cache_default, group_members

    # A TMPDIR of its own: what the run leaves there is its own, whatever other tests do in /tmp meanwhile
    # (short: vLLM's socket paths under it must fit 107 bytes; tmp_path is too long).
    tmp = Path(tempfile.mkdtemp(prefix="killed-", dir="/tmp"))
    state = tmp_path / "state"
    env = os.environ | {"MEASURE_STATE_DIR": str(state), "PYTHONUNBUFFERED": "1", "COLUMNS": "200", "TMPDIR": str(tmp)} \
        | smaller({"repeats": 2})
    run = subprocess.Popen(
        [sys.executable, "-m", "measure", "--data-root", str(tmp_path / "data"), "run", "pooling", "--profile", "cpu",
         "--env", "killed"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        staged = tmp_path / "data" / ".staging" / "killed" / "pooling.embedding_throughput.csv"
        wait_for(lambda: (staged.exists() and len(staged.read_text().splitlines()) >= 2) or run.poll() is not None,
                 420, "the first row measured")
        assert run.poll() is None, run.stdout.read()
        info = json.loads(next((state / "pids").glob("*.json")).read_text())
        group = info["pid"]
        members = group_members(group)
        assert len(members) >= 2, f"an API server and its engine core, found {members}"
        os.kill(group, signal.SIGKILL)
        try:
            wait_for(lambda: not group_members(group), 30, f"every process of the server's group {members} ended")
        except AssertionError:
            states = {m: Path(f"/proc/{m}/stat").read_text().rsplit(")", 1)[1].split()[:2] for m in group_members(group)}
            raise AssertionError(f"left: {states}; run alive: {run.poll() is None}") from None
        out, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
        # torch's compile cache stays where torch keeps it (TMPDIR/torchinductor_USER), as in any vLLM start
        left = sorted(set(os.listdir(tmp)) - {Path(_inductor_cache_default()).name})
        shutil.rmtree(tmp)
    assert run.returncode != 0
    assert "died (killed by signal SIGKILL) during the experiment" in out, out[-4000:]
    assert not Path(info["tmpdir"]).exists(), "the server's TMPDIR (vLLM's sockets) removed"
    assert Path(info["tmpdir"]).parent == tmp, "the server's TMPDIR made under the run's"
    assert not left, f"files the run left in its TMPDIR: {left}"


@pytest.fixture(scope="module")
def chat_server(vllm_installed, tmp_path_factory):
    from measure.harness import server as srv
    from measure.harness.profiles import CPU, server_env
    from measure.models import resolve

    model = resolve(CPU.models["chat"], REPO / ".cache" / "models")
    started = srv.launch(model.server_args, model.name, CPU.server_args, server_env(CPU),
                         tmp_path_factory.mktemp("choices") / "server.log", timeout_s=CPU.startup_timeout_s)
    yield started
    started.stop()


def test_two_choices_per_request_are_timed_per_choice(chat_server):
    """usage.completion_tokens counts both choices: divided into one stream's time it halved TPOT."""
    from measure.harness.loadgen import HttpRequest, LoadGenerator

    output_tokens, prompt = 24, [{"role": "user", "content": "Count slowly."}]

    def requests(n: int) -> list:
        return [HttpRequest.chat(prompt, chat_server.model, output_tokens, ignore_eos=True, n=n, temperature=1.0)] * 4

    with LoadGenerator(chat_server.base_url, workers=1) as generator:
        generator.run(requests(1)[:1] + requests(2)[:1], concurrency=1)  # warm-up
        # one- and two-choice rounds in turn, so that a load beside this server (another test's vLLM in CI)
        # falls on both alike; each pair is compared within itself
        pairs = [(generator.run(requests(1), concurrency=1), generator.run(requests(2), concurrency=1))
                 for _ in range(3)]
    rounds = [batch for pair in pairs for batch in pair]
    assert not any(batch.errors for batch in rounds), [batch.errors for batch in rounds]
    twos = [t for _, two in pairs for t in two.timings]
    assert all(t.output_tokens == 2 * output_tokens and len(t.choice_spans) == 2 for t in twos)

    def ratio(pick) -> float:  # the median over the pairs of (two-choice / one-choice)
        return statistics.median(pick(two) / pick(one) for one, two in pairs)

    # Two sequences decode in one batch, a step costing about what one does (more on a loaded CPU); dividing one
    # stream's time by both choices' tokens, as before, gives about half of each choice's own time per token
    tpot_ratio = ratio(lambda batch: statistics.median(t.tpot_s for t in batch.timings))
    assert 0.8 < tpot_ratio < 2.5, [(one.summary().tpot_median_ms, two.summary().tpot_median_ms) for one, two in pairs]
    tpot_two = statistics.median(t.tpot_s for t in twos)
    old_two = statistics.median((t.e2e_s - t.ttft_s) / (t.output_tokens - 1) for t in twos)
    assert old_two / tpot_two < 0.7, (tpot_two, old_two)
    # throughput counts both choices' tokens over the round's wall time (a ratio of two rounds' throughputs, asked
    # > 1.3 here before, came out 1.24 on a slower 2-core CPU with another vLLM beside it: it timed the CPU too)
    for one, two in pairs:
        for choices, summary in ((1, one.summary()), (2, two.summary())):
            assert summary.output_tok_s * summary.wall_s == pytest.approx(4 * choices * output_tokens)
    # ITL is taken within a choice: a choice's gaps add up to its own span, so a request's gaps add up to both spans
    # (gaps between any two messages, as before, added up to one span: half). A median of the gaps is no test of
    # this: an API server starved of CPU sends a step's messages in bursts, and CI saw the median at 0.46 of TPOT
    for t in twos:
        assert sum(t.itl_s) == pytest.approx(sum(last - first for first, last in t.choice_spans)), t.choice_spans
