"""A synthetic OpenAI-style endpoint on 127.0.0.1 that answers as fast as it can: it measures the load client.

It stands in for no vLLM behaviour. Chat requests stream ``max_completion_tokens`` one-token chunks (after
a role-only chunk, as vLLM sends) and a usage chunk; each chunk carries the server's send time
(``x_sent_ns``, the host's monotonic clock), so the client can tell how late it read it. Embedding
requests get vectors of a fixed size. With ``--chunk-gap-ms`` the chunks are paced like a decoding GPU;
without it they are written back to back, which finds the client's ceiling.

Several processes share the port (SO_REUSEPORT) so the server is not the limit on a host with cores to spare.
Run: ``python -m measure.harness.synthetic --port 8123 --processes 4``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import socket
import subprocess
import sys
import time

import orjson

ROLE = b'data: {"id":"s","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
TOKEN = (b'data: {"id":"s","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok"}}],'
         b'"x_sent_ns":%d}\n\n')
USAGE = (b'data: {"id":"s","object":"chat.completion.chunk","choices":[],'
         b'"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}\n\n')
DONE = b"data: [DONE]\n\n"
EMBED_DIM = 1024


def _app(chunk_gap_s: float):
    from aiohttp import web

    vector = orjson.dumps([0.0123456789] * EMBED_DIM)
    bodies: dict[int, bytes] = {}

    async def chat(request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        prompt = sum(len(str(m.get("content", ""))) // 4 for m in body.get("messages", []))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(ROLE)
        for _ in range(tokens):
            if chunk_gap_s:
                await asyncio.sleep(chunk_gap_s)
            await response.write(TOKEN % time.monotonic_ns())
        await response.write(USAGE % (prompt, tokens, prompt + tokens) + DONE)
        return response

    async def embeddings(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        inputs = body.get("input")
        count = len(inputs) if isinstance(inputs, list) else 1
        if count not in bodies:
            data = b",".join(b'{"object":"embedding","index":%d,"embedding":%s}' % (i, vector) for i in range(count))
            bodies[count] = (b'{"object":"list","model":"synthetic","data":[' + data +
                             b'],"usage":{"prompt_tokens":%d,"total_tokens":%d}}' % (count * 16, count * 16))
        return web.Response(body=bodies[count], content_type="application/json")

    async def health(_request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.add_routes([web.post("/v1/chat/completions", chat), web.post("/v1/embeddings", embeddings),
                    web.get("/health", health)])
    return app


def _serve(port: int, chunk_gap_s: float) -> None:
    from aiohttp import web

    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    web.run_app(_app(chunk_gap_s), sock=sock, print=None, access_log=None, handle_signals=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--chunk-gap-ms", type=float, default=0.0)
    a = ap.parse_args(argv)
    gap = a.chunk_gap_ms / 1000
    children = [multiprocessing.Process(target=_serve, args=(a.port, gap), daemon=True) for _ in range(a.processes - 1)]
    for child in children:
        child.start()
    _serve(a.port, gap)


@contextlib.contextmanager
def running(processes: int = 1, chunk_gap_ms: float = 0.0, python: str = sys.executable, timeout_s: float = 30.0):
    """Start the synthetic server in its own process group; yields (base_url, process group id)."""
    import httpx

    from measure.harness.server import _kill_group, free_port

    port = free_port()
    proc = subprocess.Popen([python, "-m", "measure.harness.synthetic", "--port", str(port), "--processes",
                             str(processes), "--chunk-gap-ms", str(chunk_gap_ms)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the synthetic server exited with code {proc.returncode}: "
                                   f"{proc.stderr.read().decode(errors='replace')[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(base + "/health", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the synthetic server was not up after {timeout_s:.0f} s")
            time.sleep(0.1)
        time.sleep(0.2 * processes)  # the other processes bind the same port a moment later
        yield base, os.getpgid(proc.pid)
    finally:
        _kill_group(proc.pid, grace_s=5.0)  # SIGTERM to the whole group, SIGKILL after the grace
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
