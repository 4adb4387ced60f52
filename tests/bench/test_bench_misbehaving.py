"""``bench`` against a misbehaving server: every fault fails its request with the reason, bounded.

Hangs, stalls, resets, 429/5xx, a line that never ends, malformed and lying answers (the corpus
in ``tests/data/bad/bench``): the run ends, the result counts the request as failed with the
field and value at fault, and no lie becomes a figure. Ctrl-C and ``--deadline`` end the test
request too. Every run here is bounded by short timeouts and by an outer guard that fails the
test (instead of waiting) if the run hangs: nothing is timed.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bench_fake_server import Plan

from fleetplan.bench import BenchConfig, BenchError, run, run_benchmark, synthetic_requests
from fleetplan.bench.response import MAX_LINE_BYTES
from fleetplan.workload.lengths import FixedLengths, LengthModel

GUARD_S = 20.0  # a run longer than this has hung: the test fails, it does not wait
CORPUS = Path(__file__).resolve().parents[1] / "data" / "bad" / "bench"
EXPECTED: dict[str, str] = json.loads((CORPUS / "expected.json").read_text())


def requests(n: int) -> list[Any]:
    lm = LengthModel(input=FixedLengths(value=8), output=FixedLengths(value=16))
    return synthetic_requests(n, lm, np.random.default_rng(0))


def bench(url: str, n: int, **kw: Any) -> dict[str, Any]:
    cfg = BenchConfig(endpoint=url, model="m", num_prompts=n, power="none", **kw)

    async def go() -> Any:
        return await asyncio.wait_for(run_benchmark(cfg, requests(n)), GUARD_S)

    return asyncio.run(go()).to_dict()


def faulty(mode: dict[str, Any], good: int = 0) -> Any:
    """A plan: the test request (index 0) and the next ``good`` answer well, the rest with
    ``mode``."""
    return lambda i, b: Plan(tokens=3) if i <= good else Plan(tokens=3, **mode)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_corpus_of_bad_answers_fails_each_request_with_its_field(fake_server: Any,
                                                                     name: str) -> None:
    body = (CORPUS / name).read_bytes()
    srv = fake_server(faulty({"raw_body": body}))
    res = bench(srv.url, 2, rate=math.inf, request_timeout_s=5)
    assert res["completed"] == 0 and res["failed"] == 2
    assert all(EXPECTED[name] in e for e in res["errors"]), res["errors"]
    # nothing the server claimed became a figure: no tokens counted, the prompt's own length
    assert res["output_lens"] == [0, 0] and res["input_lens"] == [8, 8]
    assert res["total_output_tokens"] == 0 and res["mean_ttft_ms"] is None


def test_a_lying_test_request_stops_the_run_with_the_field(fake_server: Any) -> None:
    srv = fake_server(lambda i, b: Plan(tokens=3, usage_override={"prompt_tokens": -7}))
    with pytest.raises(BenchError, match=r"test request .* usage\.prompt_tokens=-7"):
        bench(srv.url, 3, rate=math.inf)


def test_good_and_lying_answers_in_one_run_keep_only_the_true_counts(fake_server: Any) -> None:
    lie = {"completion_tokens": 10**12}
    srv = fake_server(lambda i, b: Plan(tokens=3, usage_override=lie if i % 2 == 0 and i > 0
                                        else None))
    res = bench(srv.url, 4, rate=math.inf)
    assert res["completed"] == 2 and res["failed"] == 2
    assert sorted(res["output_lens"]) == [0, 0, 3, 3] and res["total_output_tokens"] == 6


def test_a_line_that_never_ends_is_refused_at_the_bound(fake_server: Any) -> None:
    srv = fake_server(faulty({"endless_line": True}))
    res = bench(srv.url, 1, rate=math.inf, request_timeout_s=30)
    (err,) = res["errors"]
    assert f"SSE line longer than {MAX_LINE_BYTES} bytes" in err
    assert res["failed"] == 1 and res["partial"] is False


@pytest.mark.parametrize("status", [429, 500, 503])
def test_rate_limits_and_server_errors_are_counted(fake_server: Any, status: int) -> None:
    srv = fake_server(faulty({"status": status}, good=1))
    res = bench(srv.url, 3, rate=math.inf)
    assert res["completed"] == 1 and res["failed"] == 2
    assert sum(e.startswith(f"HTTP {status}") for e in res["errors"]) == 2


def test_an_endless_error_body_is_read_no_further_than_its_start(fake_server: Any) -> None:
    srv = fake_server(faulty({"status": 500, "endless_body": True}))
    res = bench(srv.url, 1, rate=math.inf, request_timeout_s=30)
    (err,) = res["errors"]
    assert err.startswith("HTTP 500") and "eeee" in err and len(err) < 400


@pytest.mark.parametrize("mode, fragment", [
    ({"reset_after": 2}, ""),  # a reset mid-stream
    ({"reset_after": -1}, ""),  # a reset before the status line
    ({"hang_headers": True}, "timeout"),  # accepted, never answered
    ({"hang": True}, "timeout"),  # headers, then no token
    ({"stall_after": 2}, "timeout"),  # two tokens, then silence
])
def test_resets_hangs_and_stalls_fail_their_request_only(fake_server: Any,
                                                         mode: dict[str, Any],
                                                         fragment: str) -> None:
    srv = fake_server(faulty(mode, good=1))
    res = bench(srv.url, 3, rate=math.inf, request_timeout_s=0.3)
    assert res["completed"] == 1 and res["failed"] == 2 and res["partial"] is False
    failed = [e for e in res["errors"] if e]
    assert len(failed) == 2 and all(fragment in e for e in failed), failed
    # a stalled request's tokens before the stall are not counted as output
    assert sorted(res["output_lens"]) == [0, 0, 3]


def test_the_deadline_ends_a_hanging_test_request(fake_server: Any) -> None:
    srv = fake_server(lambda i, b: Plan(hang=True))
    # the request timeout (600 s) would wait; the deadline ends the run: a hang fails the test
    # at GUARD_S instead
    res = bench(srv.url, 5, rate=10.0, deadline_s=0.3)
    assert res["partial"] is True
    assert "deadline of 0.3 s reached during the test request" in res["partial_reason"]
    assert res["num_sent"] == 0 and res["completed"] == res["failed"] == 0
    assert res["errors"] == [] and len(srv.records) == 1


def test_ctrl_c_ends_a_hanging_test_request(fake_server: Any) -> None:
    srv = fake_server(lambda i, b: Plan(hang_headers=True))
    cfg = BenchConfig(endpoint=srv.url, model="m", num_prompts=5, rate=10.0, power="none")
    sent = threading.Event()

    def interrupt_once_asked() -> None:  # Ctrl-C once the test request has reached the server
        for _ in range(int(GUARD_S / 0.02)):
            if srv.records or sent.is_set():
                break
            sent.wait(0.02)
        if not sent.is_set():
            os.kill(os.getpid(), signal.SIGINT)

    ctrl_c = threading.Thread(target=interrupt_once_asked)
    ctrl_c.start()
    try:
        res = run(cfg, requests(5)).to_dict()
    finally:
        sent.set()
        ctrl_c.join()
    assert res["partial"] is True and "interrupted (Ctrl-C) during the test request" in \
        res["partial_reason"]
    assert res["num_sent"] == 0 and res["power_status"] == "unknown"


def _gzip_bomb(line: bytes, mib: int) -> bytes:
    """``mib`` MiB of ``line`` repeated, as gzip members of 1 MiB each (a gzip body may be
    several members; each compresses to about a kilobyte)."""
    import gzip

    member = gzip.compress(line * ((1 << 20) // len(line)), compresslevel=9)
    return member * mib


@pytest.mark.parametrize("line,reason", [
    (b"\n", "lines that carry no token"),  # a gigabyte of blank lines
    (b":" + b"x" * ((1 << 20) - 2) + b"\n", "larger than 256 MiB"),  # of 1 MiB comments
])
def test_a_compressed_body_that_inflates_to_a_gigabyte_fails_its_request_bounded(
        fake_server: Any, line: bytes, reason: str) -> None:
    srv = fake_server(faulty({"gzip_body": _gzip_bomb(line, 1024)}))
    res = bench(srv.url, 2, rate=math.inf, request_timeout_s=20)
    assert res["completed"] == 0 and res["failed"] == 2
    assert res["errors"] and all(reason in e for e in res["errors"]), res["errors"]


def _events(end: bytes) -> bytes:
    """Three completion token events without usage, then [DONE], each line ending in ``end``."""
    lines = [b"data: " + json.dumps({"choices": [{"index": 0, "text": f" t{k}"}]}).encode()
             for k in range(3)] + [b"data: [DONE]"]
    return b"".join(line + end + end for line in lines)


@pytest.mark.parametrize("body", [
    b"\xef\xbb\xbf" + _events(b"\n"),  # a byte order mark opens the stream
    _events(b"\r"),  # lines ended by a lone CR
    _events(b"\r\n"),  # and by CRLF
], ids=["bom", "cr", "crlf"])
def test_every_sse_line_end_and_a_leading_bom_keep_every_token(fake_server: Any,
                                                              body: bytes) -> None:
    # the SSE specification allows CR, LF and CRLF and an opening BOM: no token event is lost,
    # so the count (from text events: no usage here) is the three the server sent
    srv = fake_server(lambda i, b: Plan(raw_body=body))
    res = bench(srv.url, 2, rate=math.inf, request_timeout_s=5)
    assert res["completed"] == 2 and res["failed"] == 0, res["errors"]
    assert res["output_lens"] == [3, 3]


def test_a_json_answer_with_status_200_fails_with_what_it_said(fake_server: Any) -> None:
    answer = json.dumps({"error": {"message": "stream is not supported here"}}).encode()
    srv = fake_server(faulty({"raw_body": answer, "content_type": "application/json"}))
    res = bench(srv.url, 2, rate=math.inf, request_timeout_s=5)
    assert res["completed"] == 0 and res["failed"] == 2
    said = "HTTP 200 with a body of type application/json instead of an event stream"
    assert all(e.startswith(said)
               and "stream is not supported here" in e for e in res["errors"]), res["errors"]
