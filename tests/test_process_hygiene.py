"""Process hygiene without vLLM: a stand-in process tree (an "API server" and its "engine" child, see
fixtures/process/) shows that a server killed with SIGKILL takes its whole group with it, that a killed client
leaves no server running, and that the next run ends a group whose API server is gone. The same drill against a
real vLLM is in test_vllm_process.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timing  # waits of seconds for processes to end

FAKE_PYTHON = Path(__file__).parent / "fixtures" / "process" / "python"


def wait_for(condition, timeout_s: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}"
        time.sleep(0.1)


def engine_pid(log: Path) -> int:
    wait_for(lambda: log.exists() and "engine" in log.read_text(), what="the stand-in's engine started")
    return int(log.read_text().split()[1])


@pytest.fixture
def state(tmp_path, monkeypatch):
    from measure.harness import server as srv

    monkeypatch.setattr(srv, "STATE_DIR", tmp_path / "state")
    return tmp_path / "state"


def test_an_api_server_killed_with_sigkill_takes_its_engine_and_tmpdir_with_it(state, tmp_path):
    from measure.harness import server as srv

    server = srv.spawn(("--model", "m"), "m", (), {}, tmp_path / "server.log", python=str(FAKE_PYTHON))
    engine, group, tmpdir = engine_pid(tmp_path / "server.log"), server.process.pid, server.tmpdir
    assert tmpdir.is_dir() and str(tmpdir).startswith("/tmp/") and engine in srv.group_members(group)
    os.kill(group, signal.SIGKILL)
    wait_for(lambda: not srv.group_members(group), 10, "every process of the server's group ended")
    assert server.died == "killed by signal SIGKILL"
    wait_for(lambda: not tmpdir.exists(), 5, "the server's TMPDIR removed")
    # the watcher removes the pid record last (a crash in between leaves it for the next run to clear)
    wait_for(lambda: not list((state / "pids").glob("*.json")), 5, "the server's pid record removed")


def test_a_stopped_server_leaves_no_process_and_no_tmpdir(state, tmp_path):
    from measure.harness import server as srv

    server = srv.spawn(("--model", "m"), "m", (), {}, tmp_path / "server.log", python=str(FAKE_PYTHON))
    engine_pid(tmp_path / "server.log")
    group, tmpdir = server.process.pid, server.tmpdir
    server.stop(grace_s=5)
    assert not srv.group_members(group) and not tmpdir.exists() and server.died is None


def test_a_client_killed_with_sigkill_leaves_no_server_and_the_next_run_clears_its_files(state, tmp_path):
    from measure.harness import server as srv

    client = subprocess.Popen([sys.executable, "-c", f"""
from pathlib import Path
import time
from measure.harness import server as srv
srv.STATE_DIR = Path({str(state)!r})
server = srv.spawn(("--model", "m"), "m", (), {{}}, Path({str(tmp_path / "server.log")!r}), python={str(FAKE_PYTHON)!r})
print(server.process.pid, server.tmpdir, flush=True)
time.sleep(300)
"""], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent)
    pid, tmpdir = client.stdout.readline().split()
    engine_pid(tmp_path / "server.log")
    client.send_signal(signal.SIGKILL)
    client.wait()
    # the kernel sends the API server SIGTERM (PR_SET_PDEATHSIG), on which vLLM shuts its engine down
    log = tmp_path / "server.log"
    wait_for(lambda: "got SIGTERM" in log.read_text(), 10, "the API server told that its client died")
    # whatever is still shutting down (under load the stand-in once lingered), and the TMPDIR nobody was left to
    # remove, the next run clears
    srv.reap_orphans(state / "pids", log=lambda m: None)
    assert not srv.group_members(int(pid))
    assert not Path(tmpdir).exists() and not list((state / "pids").glob("*.json"))


def test_the_next_run_ends_a_group_whose_api_server_is_gone(state, tmp_path):
    """Should an engine outlive both its API server and its client, the pid file leads the next run to it."""
    from measure.harness import server as srv

    log = tmp_path / "server.log"
    tmpdir = tmp_path / "server-tmp"
    tmpdir.mkdir()
    with open(log, "w") as out:  # started without a watcher: nobody ends the group when its leader dies
        leader = subprocess.Popen([str(FAKE_PYTHON), "-m", srv.VLLM_MODULE], stdout=out, start_new_session=True,
                                  env=os.environ | {"TMPDIR": str(tmpdir)})
    engine = engine_pid(log)
    leader.send_signal(signal.SIGKILL)
    leader.wait()
    assert srv.group_members(leader.pid) == [engine]
    pids = state / "pids"
    pids.mkdir(parents=True)
    (pids / f"{leader.pid}.json").write_text(json.dumps({"pid": leader.pid, "tmpdir": str(tmpdir),
                                                         "owner": {"pid": 1, "start_ticks": -1}}))
    messages = []
    assert srv.reap_orphans(pids, log=messages.append) == [leader.pid]
    assert "its API server is gone" in messages[0]
    wait_for(lambda: not srv.group_members(leader.pid), 10, "the engine ended")
    assert not tmpdir.exists() and not list(pids.glob("*.json"))


def test_a_dead_server_reads_as_dead_at_once_while_its_watcher_holds_the_wait(state, tmp_path):
    """Popen.poll() answers None while another thread waits on the process: the run once reported a killed
    server's requests as timeouts, not as its death (seen in CI under load)."""
    from measure.harness import server as srv

    server = srv.spawn(("--model", "m"), "m", (), {}, tmp_path / "server.log", python=str(FAKE_PYTHON))
    engine_pid(tmp_path / "server.log")
    assert server.exited() is None
    os.kill(server.process.pid, signal.SIGKILL)
    wait_for(lambda: not srv.process_running(server.process.pid), 10, "the API server dead")
    assert server.exited() == "killed by signal SIGKILL"
    wait_for(lambda: not srv.group_members(server.process.pid), 10, "its group ended")


def test_a_server_that_stopped_answering_gets_a_moment_to_be_seen_dead():
    """A client sees its connection break before the kernel lists a killed server as dead (its sockets close early in
    its exit): CI under load once read the server as alive and reported its requests as timeouts."""
    import threading

    from measure.harness.server import Server

    dying = Server("http://127.0.0.1:9/", "m", process=subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(1.5)"], start_new_session=True))
    threading.Thread(target=dying.watch, daemon=True).start()  # as spawn() does
    try:
        assert dying.exited() is None  # at once: still running
        started = time.monotonic()
        assert dying.exited(settle_s=20) == "exit code 0"
        assert time.monotonic() - started < 10
    finally:
        dying.process.kill()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_run_killed_with_sigkill_leaves_no_load_generator_worker_or_resource_tracker(tmp_path):
    """The load generator's worker processes and multiprocessing's resource tracker end with the run that started
    them: before, a SIGKILL of the run left them under init for minutes."""
    client = subprocess.Popen([sys.executable, "-c", """
import time
from multiprocessing import resource_tracker
from measure.harness.loadgen import LoadGenerator
generator = LoadGenerator("http://127.0.0.1:9")
pool = generator._executor(3)
workers = sorted(set(pool._processes))
tracker = resource_tracker._resource_tracker._pid
print(" ".join(map(str, workers + [tracker])), flush=True)
time.sleep(300)
"""], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent)
    pids = [int(p) for p in client.stdout.readline().split()]
    assert len(pids) == 4 and all(_alive(p) for p in pids), pids
    client.send_signal(signal.SIGKILL)
    client.wait()
    wait_for(lambda: not any(_alive(p) for p in pids), 10, f"processes {pids} of the killed run ended")
