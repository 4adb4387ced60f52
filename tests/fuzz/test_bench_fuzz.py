"""Fuzz ``fleetplan bench`` against a server whose every answer hypothesis draws.

Two laws. Per stream (:func:`~fleetplan.bench.stream.stream_request` over drawn bytes in drawn
chunks, hundreds of cases a second): a request either fails with the reason or measures token
counts the request could have had. Per command (the CLI against the fixture server):

for any answers (token events, lying usage of any type and size, garbage and non-UTF-8
lines, error events, deep nesting, 429/5xx, resets, hangs; the test request included) and any
of the result options: the command exits 0, 1 or 2 as documented (0: every rate measured, 1: a
rate without a successful request, 2: refused, e.g. the test request failed), says why in one
``fleetplan: error:`` line, never shows a traceback, and the result file is either absent or
complete and valid: every line a result whose counts add up and whose token counts are ones the
requests could have had (no lie of the server becomes a figure).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from script_modules import load_file

from fleetplan.bench.requests import BenchRequest
from fleetplan.bench.response import TEMPLATE_TOKENS
from fleetplan.bench.stream import payload_for, stream_request
from fleetplan.cli.app import main

# the misbehaving-server fixture of tests/bench, loaded by path (tests/ is not a package)
fake = load_file("fuzz_bench_fake_server",
                 Path(__file__).resolve().parents[1] / "bench" / "bench_fake_server.py")

PROMPT_WORDS, MAX_TOKENS = 8, 4


def _line(event: Any) -> bytes:
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def _token(k: int) -> bytes:
    return _line({"choices": [{"index": 0, "text": f" t{k}", "finish_reason": None}]})


_wild = st.one_of(st.integers(-(10**13), 10**13), st.floats(allow_nan=True,
                                                           allow_infinity=True),
                  st.text(max_size=4), st.booleans(), st.none(), st.lists(st.integers(),
                                                                          max_size=2))
# mostly plausible counts (a lie within the schema's bounds: above max_tokens, zero, too long a
# prompt), sometimes anything at all
_completion = st.one_of(*[st.integers(0, 2 * MAX_TOKENS)] * 3, _wild)
_prompt = st.one_of(*[st.just(PROMPT_WORDS)] * 3, st.integers(0, 2 * TEMPLATE_TOKENS), _wild)
_usage = st.builds(
    lambda p, c: b"data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": p,
                                                                  "completion_tokens": c}},
                                        allow_nan=True).encode() + b"\n\n", _prompt, _completion)
_junk = st.one_of(
    st.text(max_size=40).map(lambda t: ("data: " + t + "\n\n").encode()),
    st.binary(max_size=40).map(lambda b: b"data: " + b + b"\n\n"),
    st.integers(1, 5000).map(lambda k: b"data: " + b"[" * k + b"\n\n"),
    st.just(b": ping\n\n"),
    st.just(b'data: {"choices": "abc"}\n\n'),
    st.just(b'data: {"error": {"message": "overloaded"}}\n\n'),
    st.just(b"data: [DONE]\n\n"),
)


@st.composite
def _body(draw: Any) -> bytes:
    """A stream: token events, maybe junk among them, maybe a usage event, maybe [DONE]."""
    n = draw(st.one_of(st.integers(1, MAX_TOKENS), st.integers(0, 2 * MAX_TOKENS)))
    parts = [_token(k) for k in range(n)]
    if draw(st.integers(0, 2)) == 0:
        for junk in draw(st.lists(_junk, min_size=1, max_size=2)):
            parts.insert(draw(st.integers(0, len(parts))), junk)
    if draw(st.integers(0, 3)) > 0 or not parts:
        parts.append(draw(_usage))
    if draw(st.booleans()):
        parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


@st.composite
def _plan(draw: Any) -> Any:
    """One answer: a drawn stream body, or a fault of the fixture."""
    kind = draw(st.sampled_from(["body"] * 8 + ["good", "status", "reset", "hang"]))
    if kind == "body":
        return fake.Plan(raw_body=draw(_body()))
    if kind == "status":
        return fake.Plan(status=draw(st.sampled_from([429, 500, 503])))
    if kind == "reset":
        return fake.Plan(tokens=3, reset_after=draw(st.integers(-1, 2)))
    if kind == "hang":
        return fake.Plan(stall_after=draw(st.integers(0, 2)))
    return fake.Plan(tokens=draw(st.integers(1, MAX_TOKENS)))


class _Content:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def iter_any(self) -> Any:
        for c in self.chunks:
            yield c


class _Response:
    status, reason, content_type = 200, "OK", "text/event-stream"

    def __init__(self, chunks: list[bytes]) -> None:
        self.content = _Content(chunks)

    async def __aenter__(self) -> _Response:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        return None


class _Client:
    """Answers every request with the given chunks (the client side of the stream only)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def post(self, url: str, json: Any, headers: Any) -> _Response:
        return _Response(self.chunks)


@st.composite
def _chunked(draw: Any) -> list[bytes]:
    body = draw(_body())
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=6)))
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(chunks=_chunked(), api=st.sampled_from(["completions", "chat"]))
def test_a_stream_fails_with_its_reason_or_counts_what_it_could_have_had(
        chunks: list[bytes], api: str) -> None:
    prompt = " ".join(["the"] * PROMPT_WORDS)
    body = payload_for(api, "m", BenchRequest(prompt, PROMPT_WORDS, MAX_TOKENS), False)  # type: ignore[arg-type]
    out = asyncio.run(stream_request(_Client(chunks), "http://x/v1/completions", body, 0,  # type: ignore[arg-type]
                                     5.0))
    if not out.success:
        assert out.error and "\n" not in out.error and len(out.error) < 400
        assert out.output_tokens == 0 and out.itl_s == []
        return
    assert 1 <= out.output_tokens <= MAX_TOKENS
    assert out.prompt_tokens is None or 1 <= out.prompt_tokens <= len(prompt) + TEMPLATE_TOKENS
    assert out.ttft_s >= 0 and out.latency_s >= out.ttft_s and all(x >= 0 for x in out.itl_s)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(n=st.integers(1, MAX_TOKENS), usage=st.booleans(), done=st.booleans(), crlf=st.booleans(),
       cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_an_honest_stream_cut_anywhere_is_measured_exactly(n: int, usage: bool, done: bool,
                                                          crlf: bool, cuts: list[int]) -> None:
    events = [_token(k) for k in range(n)]
    if usage:
        events.append(_line({"choices": [], "usage": {"prompt_tokens": PROMPT_WORDS,
                                                      "completion_tokens": n}}))
    if done:
        events.append(b"data: [DONE]\n\n")
    body = b"".join(events)
    if crlf:
        body = body.replace(b"\n", b"\r\n")
    at = sorted({c % (len(body) + 1) for c in cuts})
    chunks = [body[a:b] for a, b in zip([0, *at], [*at, len(body)], strict=True)]
    req = payload_for("completions", "m", BenchRequest("the " * 8, PROMPT_WORDS, MAX_TOKENS),
                      False)
    out = asyncio.run(stream_request(_Client(chunks), "http://x/v1/completions", req, 0,  # type: ignore[arg-type]
                                     5.0))
    assert out.success, out.error
    assert out.output_tokens == n and len(out.itl_s) == n - 1
    assert out.prompt_tokens == (PROMPT_WORDS if usage else None)


class _Answers:
    """The fixture server's answers, one per request in arrival order, set per example."""

    def __init__(self) -> None:
        self.plans: list[Any] = []
        self.start = 0

    def __call__(self, i: int, body: dict[str, Any]) -> Any:
        k = i - self.start
        return self.plans[k] if k < len(self.plans) else fake.Plan(tokens=2)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Any, _Answers]]:
    answers = _Answers()
    srv = fake.FakeServer(answers).start()
    yield srv, answers
    srv.stop()


def _check_result(res: dict[str, Any], api: str) -> None:
    """A complete, valid result whose figures the requests could have had."""
    n = res["num_sent"]
    assert res["completed"] + res["failed"] == n == len(res["errors"])
    for key in ("input_lens", "output_lens", "ttfts", "latencies", "itls", "start_times"):
        assert len(res[key]) == n, key
    assert sum(1 for e in res["errors"] if e == "") == res["completed"]
    assert all(0 <= x <= MAX_TOKENS for x in res["output_lens"]), res["output_lens"]
    assert res["total_output_tokens"] == sum(res["output_lens"])
    assert all(0 <= x <= 64 + TEMPLATE_TOKENS for x in res["input_lens"]), res["input_lens"]
    assert res["partial"] is False
    assert res["backend"] == ("openai-chat" if api == "chat" else "openai")


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(test_answer=st.integers(0, 4).flatmap(lambda k: _plan() if k == 0
                                              else st.just(fake.Plan(tokens=2))),
       answers=st.lists(_plan(), min_size=1, max_size=5),
       api=st.sampled_from(["completions", "chat"]),
       rates=st.sampled_from([["inf"], ["50"], ["inf", "50"]]),
       out_kind=st.sampled_from(["file", "file", "none", "dir"]))
def test_bench_obeys_the_law_whatever_the_server_answers(
        server: tuple[Any, _Answers], tmp_path: Path, test_answer: Any, answers: list[Any],
        api: str, rates: list[str], out_kind: str) -> None:
    srv, plan = server
    plan.start = len(srv.records)
    # the test request, then the rate's requests; a second rate repeats the same answers
    plan.plans = [test_answer, *answers, test_answer, *answers]
    out = {"file": tmp_path / f"r{plan.start}.jsonl", "none": None, "dir": tmp_path}[out_kind]
    args = ["bench", "--endpoint", srv.url, "--model", "m", "--api", api,
            "--input-len", str(PROMPT_WORDS), "--output-len", str(MAX_TOKENS),
            "--num-prompts", str(len(answers)), "--power", "none", "--no-progress",
            "--format", "json", "--request-timeout", "0.2"]
    args += ["--rate", rates[0]] if len(rates) == 1 else ["--sweep", ",".join(rates)]
    if out is not None:
        args += ["--out", str(out)]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(args)
    err = stderr.getvalue()
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in err
    errors = [ln for ln in err.splitlines() if ln.startswith("fleetplan: error:")]
    assert len(errors) == (0 if code == 0 else 1), err
    if out_kind == "dir":
        assert code == 2 and "--out" in errors[0]
        return
    results = [json.loads(x) for x in out.read_text().splitlines()] \
        if out is not None and out.exists() else None
    if code == 0:
        assert out is None or (results is not None and len(results) == len(rates))
    if results is not None:
        assert len(results) <= len(rates)
        for res, rate in zip(results, rates, strict=False):
            assert res["request_rate"] in (float(rate), rate)  # inf is written "inf"
            _check_result(res, api)
            assert res["completed"] >= 1 or code == 1 or (code == 2 and len(results) > 0)
    if code == 1:
        assert results is None or any(r["completed"] == 0 for r in results)
    if code == 0 and results is not None:
        assert all(r["completed"] >= 1 for r in results)
        assert not math.isnan(results[0]["duration"])


_number = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr),
                    st.integers(-(10**20), 10**20).map(str), st.text(max_size=6))
_length = st.one_of(st.integers(-3, 10**5).map(str), st.integers(10**8, 10**10).map(str),
                    st.sampled_from(["fixed:", "uniform:", "lognormal:"]).flatmap(
                        lambda k: st.text(max_size=12).map(lambda t: k + t)),
                    st.integers(1, 4000).map(lambda k: "{" * k))
_endpoint = st.one_of(
    st.builds(lambda port, path: f"http://127.0.0.1:{port}{path}", st.integers(-5, 70000),
              st.text(max_size=8)),
    st.text(max_size=30), st.just("http://127.0.0.1:9"))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(endpoint=_endpoint, opts=st.lists(st.tuples(
    st.sampled_from(["--rate", "--sweep", "--burstiness", "--input-len",
                     "--output-len", "--max-concurrency", "--request-timeout", "--deadline",
                     "--seed", "--api", "--arrival-schedule", "--power", "--format"]),
    st.one_of(_number, _length)), max_size=3))
def test_any_options_against_no_server_are_refused_in_one_line(
        endpoint: str, opts: list[tuple[str, str]]) -> None:
    """Whatever the options (and no server listening): exit 2 and one line, never a
    traceback, a hang or a run. Click's own usage errors (a value outside an option's
    declared range) keep click's short usage block."""
    args = ["bench", "--endpoint", endpoint, "--model", "m", "--no-progress",
            "--request-timeout", "2", "--num-prompts", "2"]  # (a few prompts: fast to build)
    for flag, value in opts:
        args += [flag, value]
    if not any(f in ("--input-len", "--output-len") for f, _ in opts):
        args += ["--input-len", "4", "--output-len", "2"]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(args)
    err = stderr.getvalue()
    assert "Traceback" not in err
    assert code == 2, (code, args, err)
    ours = [ln for ln in err.splitlines() if ln.startswith("fleetplan: error:")]
    assert len(ours) == 1 and len(ours[0]) < 600 or "Error: " in err, err
