"""Attach mode trusts nothing by shape: a server must do the work the experiments ask of it, and attached figures
never land in, complete or make skip an environment the harness measures itself. (No vLLM: fake servers.)"""

from __future__ import annotations

import http.server
import json
import multiprocessing
import os
import re
import subprocess
import sys
import threading

import pytest
from conftest import REPO

VLLM_LOOKALIKE = {  # what the discovery routes of a vLLM answer
    "/v1/models": {"data": [{"id": "m"}]},
    "/version": {"version": "9.9.9"},
    "/metrics": "vllm:num_requests_running 0\n",
}
SSE_CHAT = ('data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
            'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
            'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}\n\n'
            "data: [DONE]\n\n")
GOOD_WORK = {
    "/v1/chat/completions": SSE_CHAT,
    "/v1/embeddings": {"data": [{"embedding": [0.1, 0.2]}, {"embedding": [0.3, 0.4]}], "usage": {"prompt_tokens": 4}},
    "/v1/rerank": {"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]},
}


def fake_server(routes: dict):
    """A loopback server answering each route (GET or POST) with its body (a dict as JSON), 404 elsewhere."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            body = routes.get(self.path)
            text = json.dumps(body) if isinstance(body, dict) else body
            self.send_response(404 if body is None else 200)
            self.send_header("Content-Type", "text/event-stream" if isinstance(body, str) and body.startswith("data:")
                             else "application/json")
            data = (text or "not found").encode()
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = answer  # noqa: N815

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def serve():
    started = []

    def start(routes):
        server, url = fake_server(routes)
        started.append(server)
        return url

    yield start
    for server in started:
        server.shutdown()


def test_a_server_doing_each_kind_of_work_passes_every_probe(serve):
    from measure.harness.attach import KINDS, attach, probe

    server = attach(serve(VLLM_LOOKALIKE | GOOD_WORK))
    for kind in KINDS:
        probe(server, kind)  # raises if the shape is wrong


@pytest.mark.parametrize("kind, broken, why", [
    ("chat", {}, "HTTP 404"),
    ("chat", {"/v1/chat/completions": {"choices": [{"message": {"content": "hi"}}]}}, "no message with choices"),
    ("chat", {"/v1/chat/completions": SSE_CHAT.replace('"completion_tokens":2', '"completion_tokens":7')},
     "completion_tokens 1–2"),
    ("chat", {"/v1/chat/completions": SSE_CHAT.replace("data: [DONE]\n\n", "")}, "did not end with data: [DONE]"),
    ("embeddings", {"/v1/embeddings": {"data": [{"embedding": [0.1]}]}}, "2 embeddings for 2 inputs"),
    ("embeddings", {"/v1/embeddings": {"data": [{"embedding": [0.1, 0.2]}, {"embedding": [0.3]}],
                                       "usage": {"prompt_tokens": 4}}}, "finite vectors of one length"),
    ("embeddings", {"/v1/embeddings": GOOD_WORK["/v1/embeddings"] | {"usage": {}}}, "prompt_tokens ≥ 2"),
    ("rerank", {"/v1/rerank": {"results": [{"index": 0, "relevance_score": "high"}, {"index": 1}]}},
     "finite relevance_score"),
])
def test_a_lookalike_that_does_not_do_the_work_is_refused_with_what_failed(serve, kind, broken, why):
    from measure.harness.attach import attach, probe
    from measure.harness.server import ServerFailed

    work = {path: body for path, body in GOOD_WORK.items() if path not in broken} if broken else {}  # {}: no work
    server = attach(serve(VLLM_LOOKALIKE | work | broken))
    with pytest.raises(ServerFailed, match=f"did not answer a {kind} request as vLLM does: .*{re.escape(why)}"):
        probe(server, kind)


def measure_run(tmp_path, *args) -> subprocess.CompletedProcess:
    env = os.environ | {"MEASURE_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "measure", "--data-root", str(tmp_path / "data"), "run", *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_the_fake_vllm_is_refused_before_anything_is_staged(serve, tmp_path):
    """The issue's drill: a server answering /v1/models, /version and /metrics like vLLM, and nothing else."""
    url = serve(VLLM_LOOKALIKE)
    run = measure_run(tmp_path, "pooling", "--profile", "cpu", "--base-url", f"embedding={url}", "--weights", "dummy")
    out = run.stdout + run.stderr
    assert run.returncode != 0
    assert "did not answer a embeddings request as vLLM does: HTTP 404" in out, out[-3000:]
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").rglob("*.csv")), "nothing is recorded"
    assert not (tmp_path / "data" / ".staging").exists() or not any((tmp_path / "data" / ".staging").iterdir())


def test_attach_writes_only_environments_named_attached(serve, tmp_path):
    url = serve(VLLM_LOOKALIKE | GOOD_WORK)
    run = measure_run(tmp_path, "pooling", "--profile", "cpu", "--env", "cpu-2c-x86-64", "--base-url",
                      f"embedding={url}", "--dry-run")
    assert run.returncode != 0 and "attach mode writes only environments named attached-" in run.stdout + run.stderr


@pytest.mark.parametrize("env, profile", [("attached-box-8000-vllm-9-9-9", None), ("my-box", "attach")])
def test_a_local_run_never_completes_or_skips_because_of_attached_figures(tmp_path, env, profile):
    if profile:
        (tmp_path / "data" / env).mkdir(parents=True)
        (tmp_path / "data" / env / "provenance.json").write_text(json.dumps({"profile": profile}))
    run = measure_run(tmp_path, "pooling", "--profile", "cpu", "--env", env, "--dry-run")
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "holds figures of servers attach mode measured" in out, out[-2000:]


def test_a_role_nothing_uses_is_refused_before_anything_runs_and_writes_nothing(serve, tmp_path):
    url = serve(VLLM_LOOKALIKE | GOOD_WORK)
    run = measure_run(tmp_path, "pooling", "--profile", "cpu", "--base-url", f"bogus={url}", "--weights", "dummy")
    out = run.stdout + run.stderr
    assert run.returncode != 0 and 'no experiment of this run sends requests to a role named "bogus"' in out, out[-2000:]
    assert "Traceback" not in out, "a refusal is one clear message"
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir()), "no attached-… folder"


def test_a_refusal_prints_one_message_and_its_traceback_only_with_verbose(serve, tmp_path):
    url = serve({})  # nothing answers
    quiet = measure_run(tmp_path, "pooling", "--profile", "cpu", "--base-url", f"embedding={url}", "--dry-run")
    assert quiet.returncode == 2 and "Traceback" not in quiet.stderr
    assert quiet.stderr.strip().splitlines()[-1].startswith("error: ") and "/v1/models answered HTTP 404" in quiet.stderr
    env = os.environ | {"MEASURE_STATE_DIR": str(tmp_path / "state")}
    loud = subprocess.run([sys.executable, "-m", "measure", "-v", "--data-root", str(tmp_path / "data"), "run",
                           "pooling", "--profile", "cpu", "--base-url", f"embedding={url}", "--dry-run"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert "Traceback" in loud.stderr


def test_an_oversized_or_hidden_model_id_is_refused_and_shown_briefly(serve):
    from measure.harness.attach import attach
    from measure.harness.server import ServerFailed

    for bad in ("m" * 5_000_000, "m\u202eodel"):
        with pytest.raises(ServerFailed) as failure:
            attach(serve(VLLM_LOOKALIKE | {"/v1/models": {"data": [{"id": bad}]}}))
        assert "an id is at most 256 characters" in str(failure.value) and len(str(failure.value)) < 500


def test_a_token_count_that_is_no_count_fails_naming_the_route(serve):
    import asyncio

    from measure.harness.client import Client, ServerAnswerInvalid

    url = serve(VLLM_LOOKALIKE | {"/v1/embeddings": '{"object": "list", "model": "m", "data": [{"object": "embedding", '
                                                     '"index": 0, "embedding": [0.1]}], "usage": {"prompt_tokens": NaN, '
                                                     '"total_tokens": 1}}',
                                  "/rerank": '{"results": [{"index": 0, "relevance_score": NaN}]}'})

    async def both():
        client = Client(url + "/v1", "m")
        try:
            with pytest.raises(ServerAnswerInvalid, match="/v1/embeddings: the server reported prompt_tokens=nan"):
                await client.embed(["a"])
            with pytest.raises(ServerAnswerInvalid, match="/rerank: the server's answer holds NaN"):
                await client.post("/rerank", {"query": "q", "documents": ["d"]})
        finally:
            await client.close()

    asyncio.run(both())


def test_a_stalled_answer_fails_with_that_said_instead_of_holding_the_run(monkeypatch):
    """A server that stops sending mid-answer: the request fails after the stall limit, saying so."""
    import socket
    import time

    from measure.harness import loadgen

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    held = []

    def accept():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            held.append(conn)  # and then nothing more

    threading.Thread(target=accept, daemon=True).start()
    monkeypatch.setattr(loadgen, "STALL_S", 1.0)
    shard = loadgen.Shard(f"http://127.0.0.1:{listener.getsockname()[1]}", {},
                          [loadgen.HttpRequest.chat([{"role": "user", "content": "hi"}], "m", 4)], 1, time.monotonic(),
                          60.0)
    start = time.monotonic()
    monkeypatch.setattr(loadgen, "_NEXT", multiprocessing.Value("q", 0))  # what a worker's start sets
    report = loadgen.run_shard(shard)
    assert time.monotonic() - start < 20
    assert not report.timings[0].ok and "the server sent nothing for 1 s" in report.timings[0].error
    listener.close()
