"""The load generator against a server whose delays and faults are known."""

from __future__ import annotations

import asyncio
import math
import os
import signal
import threading
import time
from typing import Any

import aiohttp
import numpy as np
import pytest
from bench_fake_server import Plan
from scipy import stats

from fleetplan.bench import BenchConfig, BenchError, run, run_benchmark, synthetic_requests
from fleetplan.bench.result import BenchResult
from fleetplan.bench.runner import send_schedule
from fleetplan.bench.stream import payload_for, stream_request
from fleetplan.replica.protocol import vllm_arrivals
from fleetplan.workload.lengths import FixedLengths, LengthModel

GUARD_S = 20.0  # a run that takes longer than this has hung: the test fails, it does not wait


def requests(n: int, prompt: int = 8, output: int = 16, seed: int = 0) -> list[Any]:
    """``n`` requests; the output budget is above every plan's token count (a server never
    sends more tokens than ``max_tokens``: bench refuses a usage above it)."""
    lm = LengthModel(input=FixedLengths(value=prompt), output=FixedLengths(value=output))
    return synthetic_requests(n, lm, np.random.default_rng(seed))


def bench(url: str, n: int, **kw: Any) -> dict[str, Any]:
    """Run the benchmark under an outer deadline that fails the test if it is exceeded; the
    result as its file's JSON object."""
    cfg = BenchConfig(endpoint=url, model="m", num_prompts=n, power="none", **kw)

    async def go() -> BenchResult:
        return await asyncio.wait_for(run_benchmark(cfg, requests(n)), GUARD_S)

    return asyncio.run(go()).to_dict()


# Timing laws below hold on any machine, however busy: each client timestamp is compared with the
# server's own record on the same clock (``time.perf_counter``; the fake server runs in-process).
# A client time is never before the server event it reports, and is attributed to the right
# event: its error stays a fraction of the gap between events, where a client that coalesced
# or mis-timed events would be a whole gap off. The absolute figures (a few ms of send path and
# read latency on an idle machine) are measured by ``benchmarks/bench_client.py``, not asserted.
EPS = 1e-6


def test_token_times_match_the_servers_clock(fake_server: Any) -> None:
    """Truth is when the server wrote each token event (same clock, same process)."""
    itl = 0.05
    srv = fake_server(lambda i, b: Plan(ttft_s=0.05, itl_s=itl, tokens=6))
    body = payload_for("completions", "m", requests(1)[0], ignore_eos=False)

    async def go() -> list[Any]:
        async with aiohttp.ClientSession() as client:
            return [await stream_request(client, srv.url + "/v1/completions", body, k, 10)
                    for k in range(4)]

    outs = asyncio.run(asyncio.wait_for(go(), GUARD_S))
    late = []
    for out, rec in zip(outs[1:], srv.records[1:], strict=True):  # [0] opened the connection
        assert out.output_tokens == 6 and out.prompt_tokens == 8
        seen = out.start_s + out.ttft_s + np.concatenate([[0.0], np.cumsum(out.itl_s)])
        written = np.array(rec.t_tokens)
        # causality: sent before the server received it; each token seen after it was written
        assert out.start_s <= rec.t_recv + EPS
        assert np.all(seen >= written - EPS)
        late.extend(seen - written)
        # so the client's TTFT covers the server's (plus the client's own send path)
        assert out.ttft_s >= rec.t_tokens[0] - rec.t_recv - EPS
    # each event is timed as itself: a coalescing client would be ~one gap late
    assert np.median(late) < 0.25 * itl


def test_ttft_and_itl_are_measured_against_the_servers_clock(fake_server: Any) -> None:
    itl = 0.03
    srv = fake_server(lambda i, b: Plan(ttft_s=0.08, itl_s=itl, tokens=10))
    res = bench(srv.url, 6, rate=10.0)
    assert res["completed"] == 6 and res["failed"] == 0
    assert res["output_lens"] == [10] * 6 and res["input_lens"] == [8] * 6
    assert res["output_tokens_source"] == "server usage"
    by_prompt = {r.body["prompt"]: r for r in srv.records[1:]}
    sent = requests(6)
    itl_err, tpot_true = [], []
    for i, req in enumerate(sent):
        rec = by_prompt[req.prompt]
        # client TTFT = the server's + the client's send path, which is never negative
        assert res["ttfts"][i] >= rec.t_tokens[0] - rec.t_recv - EPS
        itl_err.extend(np.abs(np.array(res["itls"][i]) - np.diff(rec.t_tokens)))
        tpot_true.append((rec.t_tokens[-1] - rec.t_tokens[0]) / (len(rec.t_tokens) - 1))
    assert np.median(itl_err) < 0.25 * itl
    itls = np.concatenate([np.array(x) for x in res["itls"]])
    assert itls.size == 6 * 9
    assert np.median(itls) >= itl - 0.25 * itl  # the server never writes sooner than asked
    # TPOT is the server's true inter-token time, whatever the machine added to the nominal one
    assert res["mean_tpot_ms"] == pytest.approx(1000 * np.mean(tpot_true), abs=250 * itl)


def test_arrival_rate_is_within_sampling_error(fake_server: Any) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=1))
    n, rate = 160, 40.0
    res = bench(srv.url, n, rate=rate, burstiness=1.0, seed=7)
    sched = send_schedule(BenchConfig(endpoint=srv.url, model="m", num_prompts=n, rate=rate,
                                      seed=7))
    lag = np.array(res["start_times"]) - sched
    # never early; and the result reports the lag it had (however busy the machine was)
    assert np.all(lag > -0.001)
    assert res["send_lag_max_ms"] == pytest.approx(1000 * max(lag.max(), 0.0), abs=0.01)
    assert res["send_lag_p50_ms"] == pytest.approx(1000 * max(np.median(lag), 0.0), abs=0.01)
    # the schedule is kept: typical lag a small part of the mean gap ...
    assert np.median(lag) < 0.25 / rate
    # ... so the rate the server sees is the asked one within sampling error (n-1 exponential
    # gaps: standard error 1/(rate*sqrt(n-1))), and the client's gaps are exponential
    arrivals = np.sort([r.t_recv for r in srv.records[1:]])
    se = 1.0 / (rate * math.sqrt(n - 1))
    assert abs(np.diff(arrivals).mean() - 1.0 / rate) < 4 * se
    gaps = np.diff(res["start_times"])
    assert stats.kstest(gaps, "expon", args=(0, 1.0 / rate)).pvalue > 1e-3


def test_normalized_schedule_sends_the_last_request_at_n_over_rate() -> None:
    cfg = BenchConfig(endpoint="http://127.0.0.1:1", model="m", num_prompts=50, rate=10.0,
                      arrival_schedule="normalized", burstiness=0.5)
    t = send_schedule(cfg)
    assert t[0] > 0 and math.isclose(t[-1], 5.0) and np.all(np.diff(t) >= 0)
    first = send_schedule(cfg.model_copy(update={"arrival_schedule": "first-at-zero"}))
    assert first[0] == 0.0


def test_schedule_is_vllms_for_the_same_seed() -> None:
    """vLLM 0.8's client (which the replica model replays) and 0.32's, same seed, same times."""
    cfg = BenchConfig(endpoint="http://127.0.0.1:1", model="m", num_prompts=200, rate=4.0,
                      seed=42, burstiness=1.0)
    times, _ = vllm_arrivals(200, 4.0, 1.0, 42)
    assert np.array_equal(send_schedule(cfg), times)
    legacy = np.random.RandomState(42)  # vLLM 0.32: np.random.seed(42); n sequential draws
    delays = np.cumsum([legacy.gamma(1.0, 1 / 4.0) for _ in range(200)])
    norm = send_schedule(cfg.model_copy(update={"arrival_schedule": "normalized"}))
    assert np.allclose(norm, delays * (200 / 4.0) / delays[-1])


def test_same_seed_same_requests_and_schedule() -> None:
    cfg = BenchConfig(endpoint="http://127.0.0.1:1", model="m", num_prompts=20, rate=3.0)
    assert np.array_equal(send_schedule(cfg), send_schedule(cfg))
    assert requests(5, 30, 7, seed=3) == requests(5, 30, 7, seed=3)


def test_server_errors_are_counted_with_their_message(fake_server: Any) -> None:
    srv = fake_server(lambda i, b: Plan(status=500 if i % 3 == 1 else 200))
    res = bench(srv.url, 9, rate=math.inf)
    assert res["failed"] == 3 and res["completed"] == 6
    errs = [e for e in res["errors"] if e]
    assert len(errs) == 3 and all("HTTP 500" in e for e in errs)
    assert res["output_lens"].count(0) == 3


def test_timeouts_are_counted_and_do_not_hang(fake_server: Any) -> None:
    srv = fake_server(lambda i, b: Plan(hang=i % 2 == 0 and i > 0))
    # (a hang fails the test at GUARD_S instead of waiting: see bench())
    res = bench(srv.url, 6, rate=math.inf, request_timeout_s=0.5)
    assert res["failed"] == 3
    assert res["duration"] >= 0.5  # the hanging requests were waited for their timeout
    assert all("timeout" in e for e in res["errors"] if e)
    assert res["partial"] is False


def test_malformed_sse_line_fails_the_request(fake_server: Any) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=4, malformed_after=2 if i == 2 else None))
    res = bench(srv.url, 4, rate=math.inf)
    assert res["failed"] == 1
    assert "malformed SSE data line" in next(e for e in res["errors"] if e)


def test_dropped_connection_is_counted(fake_server: Any) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=6, itl_s=0.005,
                                        drop_after=3 if i in (1, 4) else None))
    res = bench(srv.url, 5, rate=math.inf)
    assert res["failed"] == 2 and res["completed"] == 3
    assert all(e for e, n in zip(res["errors"], res["output_lens"], strict=True) if n == 0)


def test_stream_without_done_and_with_comments_succeeds(fake_server: Any) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=5, done=False, comments=True))
    res = bench(srv.url, 3, rate=math.inf)
    assert res["completed"] == 3 and res["output_lens"] == [5, 5, 5]


def test_without_usage_tokens_are_counted_as_events_and_said_so(fake_server: Any) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=7, usage=False))
    res = bench(srv.url, 2, rate=math.inf)
    assert res["output_lens"] == [7, 7]
    assert res["output_tokens_source"].startswith("token events")
    assert "word count" in res["input_tokens_source"]
    assert res["input_lens"] == [8, 8]


def test_chat_api_is_streamed(fake_server: Any) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=3))
    res = bench(srv.url, 2, rate=math.inf, api="chat")
    assert res["completed"] == 2 and res["backend"] == "openai-chat"
    assert srv.records[-1].body["max_completion_tokens"] == 16
    assert srv.records[-1].body["stream_options"] == {"include_usage": True}


def test_max_concurrency_caps_requests_in_flight(fake_server: Any) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=3, ttft_s=0.05, itl_s=0.01))
    res = bench(srv.url, 8, rate=math.inf, max_concurrency=2)
    assert res["completed"] == 8 and srv.max_in_flight == 2
    assert max(res["queue_times"]) > 0.05


def test_failed_test_request_stops_before_the_run(fake_server: Any) -> None:
    srv = fake_server(lambda i, b: Plan(status=503))
    with pytest.raises(BenchError, match="test request"):
        bench(srv.url, 3, rate=math.inf)
    assert len(srv.records) == 1


def test_unreachable_server_fails_fast() -> None:
    with pytest.raises(BenchError, match="test request"):
        bench("http://127.0.0.1:9", 2, request_timeout_s=2)


def test_deadline_ends_the_run_with_a_partial_result(fake_server: Any) -> None:
    srv = fake_server(lambda i, b: Plan(hang=i > 0))
    # every request after the test request hangs: only the deadline can end the run (a hang
    # fails the test at GUARD_S instead of waiting: see bench())
    res = bench(srv.url, 10, rate=5.0, deadline_s=1.0)
    assert res["partial"] is True and "deadline" in res["partial_reason"]
    assert 0 < res["num_sent"] < 10 and res["failed"] == res["num_sent"]
    assert all(e.startswith("cancelled") for e in res["errors"])


def test_ctrl_c_returns_the_partial_result(fake_server: Any) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=2, ttft_s=0.01))
    cfg = BenchConfig(endpoint=srv.url, model="m", num_prompts=40, rate=10.0, power="none")
    timer = threading.Timer(1.0, os.kill, args=(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        res = run(cfg, requests(40)).to_dict()
    finally:
        timer.cancel()
    assert res["partial"] is True and "interrupted" in res["partial_reason"]
    assert 3 <= res["num_sent"] < 40 and res["completed"] >= 3


def test_a_starved_client_reports_its_send_lag(fake_server: Any) -> None:
    """A client whose event loop is blocked sends late; the result says how late."""
    srv = fake_server(lambda i, b: Plan(tokens=2))
    n, rate = 40, 40.0
    cfg = BenchConfig(endpoint=srv.url, model="m", num_prompts=n, rate=rate, seed=3,
                      power="none", arrival_schedule="normalized")
    blocked: list[int] = []

    def hog(done: int, failed: int, total: int) -> None:
        if done == 5 and not blocked:  # early in a 1-s schedule: the next sends wait
            blocked.append(done)
            time.sleep(0.3)

    async def go() -> BenchResult:
        return await asyncio.wait_for(run_benchmark(cfg, requests(n), on_progress=hog), GUARD_S)

    res = asyncio.run(go()).to_dict()
    assert blocked
    assert res["send_lag_max_ms"] >= 200.0
    assert res["send_lag_p99_ms"] >= 150.0
    assert res["send_lag_p50_ms"] <= res["send_lag_p99_ms"] <= res["send_lag_max_ms"]
