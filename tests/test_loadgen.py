"""The load generator measured like an instrument: against the synthetic endpoint (it stands in for no vLLM
behaviour), its timings must follow vllm bench serve's definitions, and its saturation must reach the page."""

from __future__ import annotations

import asyncio
import csv
import statistics

import pytest

from measure.harness import synthetic
from measure.harness.bench import CPU_MARK, cpu_mark
from measure.harness.loadgen import HttpRequest, LoadGenerator, shares
from measure.schema import SATURATED
from measure.site.claims import ClaimRenderer

# The tests marked timing assert gaps and CPU shares that hold only on an idle machine: `nox -s tests` runs them
# alone, after the rest, and `nox -s quick` leaves them out; the others hold under any load.
GAP_MS = 20.0
CHUNKS = 6


def chat(n: int, chunks: int = CHUNKS) -> list[HttpRequest]:
    return [HttpRequest.chat([{"role": "user", "content": "hello"}], "synthetic", chunks)] * n


def test_in_flight_shares():
    assert shares(concurrency=5, workers=3, requests=10) == [2, 2, 1]
    assert shares(concurrency=2, workers=8, requests=10) == [1, 1]  # never more workers than slots
    assert shares(concurrency=8, workers=4, requests=2) == [4, 4]  # nor than requests


@pytest.mark.timing
def test_workers_with_unequal_shares_keep_every_slot_busy():
    """3 slots over 2 workers (2 + 1), 9 equal requests: three waves, as with one semaphore. Dealing the
    requests out beforehand (5 + 4) left the one-slot worker running four in a row."""
    wave = CHUNKS * GAP_MS / 1000
    with synthetic.running(chunk_gap_ms=GAP_MS) as (base, _), LoadGenerator(base, workers=2) as generator:
        batch = generator.run(chat(9), concurrency=3)
    assert not batch.errors and sorted(len(w.timings) for w in batch.workers) == [3, 6]
    assert batch.wall_s < 3.6 * wave


@pytest.mark.timing
def test_timings_follow_the_bench_definitions():
    """Paced chunks: TTFT is the role-only chunk (sent at once), one ITL per later chunk ≈ the gap, the
    request ends at the last token chunk, tokens come from usage, and TPOT = (e2e − TTFT) / (tokens − 1)."""
    with synthetic.running(chunk_gap_ms=GAP_MS) as (base, _), LoadGenerator(base, workers=2) as generator:
        batch = generator.run(chat(8), concurrency=4)
    assert not batch.errors and len(batch.workers) == 2
    assert sum(len(w.timings) for w in batch.workers) == 8
    for timing in batch.timings:
        assert timing.output_tokens == CHUNKS
        assert len(timing.itl_s) == CHUNKS  # role chunk first, then one gap per token chunk
        assert all(gap > GAP_MS / 1000 * 0.8 for gap in timing.itl_s)
        assert timing.e2e_s == pytest.approx(timing.ttft_s + sum(timing.itl_s), abs=1e-6)
        assert timing.tpot_s == pytest.approx((timing.e2e_s - timing.ttft_s) / (CHUNKS - 1))
        assert timing.lag_s and max(timing.lag_s) < GAP_MS / 1000  # read soon after it was sent
    # TTFT is the role-only chunk, sent at once: had it waited for the first paced token, every TTFT would exceed the
    # gap. (The median: a worker's first request also opens its connection, which took 17 ms on a busy 2-core host.)
    assert statistics.median(t.ttft_s for t in batch.timings) < GAP_MS / 1000 / 2
    summary = batch.summary()
    assert summary.output_tokens == 8 * CHUNKS and summary.workers == 2
    # 8 requests, 4 in flight: two waves of ~CHUNKS gaps each
    assert summary.wall_s > 2 * CHUNKS * GAP_MS / 1000 * 0.8
    assert 0 < summary.worker_cpu_max < 1


def test_embeddings_end_when_the_body_is_read():
    with synthetic.running() as (base, _), LoadGenerator(base, workers=1) as generator:
        batch = generator.run([HttpRequest.embedding("x", "synthetic")] * 16, concurrency=4)
    assert not batch.errors
    for timing in batch.timings:
        assert timing.prompt_tokens == 16 and 0 < timing.ttft_s <= timing.e2e_s


def test_failed_requests_are_reported_not_timed():
    with synthetic.running() as (base, _), LoadGenerator(base, workers=1) as generator:
        batch = generator.run([HttpRequest("/v1/nowhere", b"{}", stream=True)] * 3, concurrency=3)
    assert len(batch.errors) == 3 and all(e.startswith("HTTP 404") for e in batch.errors)
    with pytest.raises(RuntimeError, match="3 of 3 requests failed"):
        batch.summary()


def test_bench_cpu_mark_is_read_from_its_output():
    assert cpu_mark(f"noise\n{CPU_MARK} [3.0, 4.0, 12.5]\nmore") == (3.0, 4.0, 12.5)
    assert cpu_mark("no mark") is None


@pytest.mark.timing
def test_cpu_sampler_reads_a_share_over_any_window():
    import os
    import time

    from measure.harness.procstat import CpuSampler

    with CpuSampler({"me": os.getpid()}, interval_s=0.02) as sampler:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.4:  # busy
            pass
        t1 = time.monotonic()
        time.sleep(0.4)  # idle
        t2 = time.monotonic()
    assert sampler.share("me", t0, t1) > 0.6
    assert sampler.share("me", t1 + 0.05, t2) < 0.3
    assert sampler.share("nobody", t0, t1) is None


def comparison_rows(tmp_root, rows):
    from measure.experiments.fidelity import COMPARISON

    path = tmp_root / "fixture-cpu" / COMPARISON.file_name
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(COMPARISON.header)
        for row in rows:
            writer.writerow(COMPARISON.row_to_cells(row))


def row(concurrency, harness_cpu):
    return {"workload": "chat", "concurrency": concurrency, "metric": "output throughput", "unit": "tok/s",
            "harness": 100.0, "harness_min": 99.0, "harness_max": 101.0, "bench": 100.0, "bench_min": 99.0,
            "bench_max": 101.0, "ratio": 1.0, "gap_pct": 0.0, "rounds": 3, "harness_workers": 1,
            "harness_worker_cpu_max": harness_cpu, "bench_cpu_share": 0.3, "api_server_cpu_share": 0.5,
            "limited_by": "none"}


@pytest.mark.parametrize("lang, word", [("en", "Unconfirmed"), ("zh", "未确认")])
def test_a_saturated_client_turns_its_figures_unconfirmed(fixture_root, lang, word):
    from measure.site.scan import make_store

    comparison_rows(fixture_root, [row(4, 0.40), row(16, SATURATED + 0.05)])
    renderer = ClaimRenderer(make_store(fixture_root), lang, f"page.{lang}.md", data_url="../data/")
    kept_up = renderer.value("fidelity.comparison", "ratio", workload="chat", concurrency=4, metric="output throughput")
    assert word not in kept_up and renderer.claims[-1].status == "measured"
    saturated = renderer.value("fidelity.comparison", "ratio", workload="chat", concurrency=16, metric="output throughput")
    assert word in saturated and "0.90" in saturated and "harness_worker_cpu_max" in saturated
    assert renderer.claims[-1].status == "unconfirmed"
    # what the client cannot have set stays as measured: the row's key, the client's own CPU share, words
    for column in ("concurrency", "harness_worker_cpu_max", "limited_by"):
        shown = renderer.value("fidelity.comparison", column, workload="chat", concurrency=16, metric="output throughput")
        assert word not in shown and renderer.claims[-1].status == "measured", column
    table = renderer.table("fidelity.comparison")
    assert table.count("claim-unconfirmed") == 2  # the saturated row's badge and the note under the table
    assert any(c.status == "unconfirmed" and c.key.endswith(":saturated") for c in renderer.claims)


def test_rows_outside_a_pages_tolerance_are_unconfirmed(fixture_root):
    from measure.schema import UnknownName
    from measure.site.scan import make_store

    far = row(4, 0.40) | {"ratio": 1.2}
    comparison_rows(fixture_root, [far, row(16, 0.40)])
    renderer = ClaimRenderer(make_store(fixture_root), "en", "page.en.md", data_url="../data/")
    table = renderer.table("fidelity.comparison", tolerance={"ratio": [0.95, 1.05]})
    assert "outside this page" in table and "tolerance of 0.95–1.05" in table and "1 row(s) marked unconfirmed" in table
    assert "Unconfirmed" not in renderer.table("fidelity.comparison")  # no tolerance asked, none applied
    html = renderer.value("fidelity.comparison", "ratio", workload="chat", concurrency=4, metric="output throughput",
                          tolerance={"ratio": [0.95, 1.05]})
    assert "Unconfirmed" in html and renderer.claims[-1].status == "unconfirmed"
    with pytest.raises(UnknownName):
        renderer.table("fidelity.comparison", tolerance={"ratioo": [0.95, 1.05]})
    with pytest.raises(UnknownName):
        renderer.table("fidelity.comparison", tolerance={"ratio": [1.05, 0.95]})


def test_several_choices_need_ignore_eos_and_are_timed_per_choice():
    """n > 1: usage.completion_tokens counts every choice; each choice's TPOT comes from its own messages."""
    from measure.harness.client import Client
    from measure.harness.loadgen import HttpRequest, Timing

    with pytest.raises(ValueError, match="pass ignore_eos=True"):
        HttpRequest.chat([{"role": "user", "content": "x"}], "m", 8, n=2)
    with pytest.raises(ValueError, match="temperature above 0"):
        HttpRequest.chat([{"role": "user", "content": "x"}], "m", 8, n=2, ignore_eos=True)
    assert HttpRequest.chat([{"role": "user", "content": "x"}], "m", 8, n=2, ignore_eos=True, temperature=1).choices == 2
    # two choices of 11 tokens each: the first spans 1.0 s, the second 2.0 s (10 gaps each)
    timing = Timing(True, start=0.0, end=2.5, ttft_s=0.5, output_tokens=22, choice_spans=[(0.5, 1.5), (0.5, 2.5)])
    assert timing.tpot_s == pytest.approx(0.15)
    assert Timing(True, 0.0, 2.5, ttft_s=0.5, output_tokens=21, choice_spans=[(0.5, 1.5), (0.5, 2.5)]).tpot_s is None
    assert Timing(True, 0.0, 2.5, ttft_s=0.5, output_tokens=21).tpot_s == pytest.approx(0.1)  # one choice, as before
    with pytest.raises(ValueError, match="use the load generator"):
        asyncio.run(Client("http://127.0.0.1:1/v1", "m").chat_stream([], n=2))


def _dropping_server(replies: tuple):
    """A raw HTTP/1.1 server: on each connection, ``replies[i]`` answers its i-th request (None: it closes the
    connection without a byte instead, having read the request)."""
    import socket
    import threading

    def serve(listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                for reply in replies:
                    request = b""
                    while b"\r\n\r\n" not in request or not request.endswith(b"}"):
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        request += chunk
                    if reply is None:
                        break
                    conn.sendall(reply)

    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=serve, args=(listener,), daemon=True).start()
    return listener


EMBEDDING_ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 45\r\n\r\n"
                    b'{"data": [], "usage": {"prompt_tokens": 1}}  ')


def test_a_request_the_server_closed_its_kept_alive_connection_on_is_sent_again():
    """A server that answers a connection's first request and closes it on reading the second (as uvicorn's
    keep-alive timer does when its event loop stalled): the second request goes again on a new connection, its
    latency counting the lost attempt."""
    listener = _dropping_server((EMBEDDING_ANSWER, None))
    try:
        with LoadGenerator(f"http://127.0.0.1:{listener.getsockname()[1]}", workers=1) as generator:
            batch = generator.run([HttpRequest.embedding("x", "synthetic")] * 2, concurrency=1)
    finally:
        listener.close()
    first, second = batch.timings
    assert first.ok and not first.retried and second.ok and second.retried
    assert second.ttft_s <= second.e2e_s and second.start >= first.end


def test_a_dropped_request_says_on_which_connection_and_when():
    """A request the server dropped on a new connection is not sent again (the server read it, and may have acted
    on it): the error names the connection and that no byte came back."""
    listener = _dropping_server((None,))
    try:
        with LoadGenerator(f"http://127.0.0.1:{listener.getsockname()[1]}", workers=1) as generator:
            batch = generator.run([HttpRequest.embedding("x", "synthetic")], concurrency=1)
    finally:
        listener.close()
    (dropped,) = batch.timings
    assert not dropped.ok and not dropped.retried
    assert "ms after the POST, on a new connection, before any byte of the answer" in dropped.error
    assert dropped.error.startswith("ServerDisconnectedError")
