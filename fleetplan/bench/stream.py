"""One streamed request to an OpenAI-compatible server, timed as vLLM's benchmark client times it.

Main entry: :func:`stream_request` (an ``aiohttp.ClientSession``, the URL, the request) -> a
:class:`RequestOutcome` with TTFT, the inter-token gaps, end-to-end latency, token counts and an
error string ("" on success). It never raises for a server's or the network's fault: timeouts,
HTTP errors, malformed SSE lines and dropped connections become a failed outcome with the reason.
Lines end at CRLF, LF or a lone CR, and a byte order mark opening the stream is dropped, as the
SSE specification says; a 200 answer whose body is JSON, text or HTML (an error page, a server
that ignored ``stream``) fails its request with the start of that body.

Timing follows ``vllm bench serve`` (``async_request_openai_completions``): the clock starts
before the request is sent; every SSE event with a non-empty ``choices`` list is one token event
(TTFT at the first, one inter-token gap per later one, even when its text is empty); the
latency ends at the last token event (the trailing usage event carries no token). Token counts
come from the server's ``usage`` (requested with ``stream_options.include_usage``); a server that
sends none gets its output counted as the token events that carry text (at least one; more than
``max_tokens`` fails the request), and the outcome says so.

Every event passes :mod:`fleetplan.bench.response`'s schema first: a line longer than 1 MiB, a
malformed or mis-typed event, more token events than the request's budget allows, or token
counts the request cannot have had (negative, above ``max_tokens``) fail the request with the
field and value; an error response's body is read no further than 4 KiB.

The client is aiohttp, as in vLLM's and SGLang's benchmark clients: its C HTTP parser keeps the
client's own CPU cost per token event small. That matters where client and server share a few
cores: with httpx, on a 2-core machine beside a CPU vLLM server, the client fell up to 2.5 s
behind its send schedule at 12 req/s and its TTFTs and ITLs were 40-1500% above those of
``vllm bench serve`` measuring the same server alternately.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp

from fleetplan.bench.requests import BenchRequest
from fleetplan.bench.response import (
    MAX_LINE_BYTES,
    Expected,
    ResponseError,
    ServerUsage,
    error_text,
    parse_event,
)

Api = Literal["completions", "chat"]
_MAX_ERROR_BODY = 300
_MAX_ERROR_READ = 4096
#: The most bytes of one response body, after decompression: a compressed body that inflates to
#: a gigabyte fails its request at this size instead of keeping the client busy.
MAX_BODY_BYTES = 256 << 20
#: Lines that carry no token or usage (blank lines, comments, other SSE fields, empty events)
#: one response may send: a few per event, and keep-alive comments for a long prefill.
MAX_IDLE_LINES = 1024
IDLE_LINES_PER_EVENT = 4


@dataclass
class RequestOutcome:
    """What one request measured. Times in seconds; ``error`` is "" when it succeeded."""

    index: int
    success: bool = False
    start_s: float = 0.0
    ttft_s: float = 0.0
    itl_s: list[float] = field(default_factory=list)
    latency_s: float = 0.0
    prompt_tokens: int | None = None
    output_tokens: int = 0
    tokens_from_usage: bool = False
    error: str = ""

    @property
    def tpot_s(self) -> float | None:
        """Mean time per output token after the first (vLLM's definition), if defined."""
        if not self.success or self.output_tokens < 2:
            return None
        return (self.latency_s - self.ttft_s) / (self.output_tokens - 1)


StreamError = ResponseError  # the stream broke the protocol (malformed event, error event)


def payload_for(api: Api, model: str, req: BenchRequest, ignore_eos: bool,
                extra_body: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body vLLM's benchmark client sends for this API."""
    body: dict[str, Any]
    if api == "completions":
        body = {"model": model, "prompt": req.prompt, "repetition_penalty": 1.0,
                "max_tokens": req.max_tokens, "logprobs": None, "stream": True,
                "stream_options": {"include_usage": True}}
    else:
        body = {"model": model,
                "messages": [{"role": "user", "content": [{"type": "text", "text": req.prompt}]}],
                "max_completion_tokens": req.max_tokens, "stream": True,
                "stream_options": {"include_usage": True}}
    if ignore_eos:
        body["ignore_eos"] = True
    if extra_body:
        body.update(extra_body)
    return body


def _event_data(line: str) -> str | None:
    """The payload of an SSE ``data:`` line; None for blank lines, comments and other fields."""
    if not line or line.startswith(":"):
        return None
    name, sep, value = line.partition(":")
    if not sep or name != "data":
        return None
    return value[1:] if value.startswith(" ") else value


class _Events:
    """The token events of one SSE stream, timed as they are parsed and checked against what
    the request asked for (:class:`~fleetplan.bench.response.Expected`)."""

    def __init__(self, out: RequestOutcome, t0: float, expected: Expected) -> None:
        self.out, self.last, self.got_token = out, t0, False
        self.usage: ServerUsage | None = None
        self.t0 = t0
        self.expected = expected
        self.max_events = expected.max_token_events
        self.events = 0
        self.text_events = 0  # token events whose text is not empty (the count without usage)
        self.idle = 0  # lines that carried no token and no usage

    def _idle(self) -> bool:
        self.idle += 1
        if self.idle > MAX_IDLE_LINES + IDLE_LINES_PER_EVENT * self.events:
            raise StreamError(f"server sent {self.idle} lines that carry no token after "
                              f"{self.events} token events: refused")
        return False

    def line(self, raw: bytes) -> bool:
        """Take one line; True once ``[DONE]`` is seen."""
        data = _event_data(raw.decode("utf-8"))
        if data is None:
            return self._idle()
        data = data.strip()
        if data == "[DONE]":
            return True
        event = parse_event(data)
        if event.error:
            raise StreamError(f"error event from server: {error_text(event.error)}")
        if event.choices:
            now = time.perf_counter()
            if not self.got_token:
                self.got_token = True
                self.out.ttft_s = now - self.t0
            else:
                self.out.itl_s.append(now - self.last)
            self.last = now
            self.events += 1
            self.text_events += _has_text(event.choices[0])
            if self.max_events is not None and self.events > self.max_events:
                raise StreamError(f"server sent more than {self.max_events} token events for "
                                  f"max_tokens={self.expected.max_tokens}")
        elif event.usage is not None:
            self.usage = event.usage
        else:
            return self._idle()
        return False


def _has_text(choice: Any) -> bool:
    """Whether a choice carries generated text (``text``, or a chat ``delta.content``)."""
    if not isinstance(choice, dict):
        return False
    delta = choice.get("delta")
    text = choice.get("text", delta.get("content") if isinstance(delta, dict) else None)
    return isinstance(text, str) and text != ""


def _lf_lines(chunk: bytes, after_cr: bool) -> tuple[bytes, bool]:
    """``chunk`` with every SSE line end (CRLF, LF or a lone CR) as one LF, and whether it
    ended in CR (then an LF opening the next chunk is the same line end)."""
    if after_cr and chunk.startswith(b"\n"):
        chunk = chunk[1:]
    if b"\r" not in chunk:
        return chunk, False
    return chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n"), chunk.endswith(b"\r")


def _too_long(n: int) -> StreamError:
    return StreamError(f"SSE line longer than {MAX_LINE_BYTES} bytes ({n} bytes without a "
                       "newline): refused")


async def _consume(resp: aiohttp.ClientResponse, out: RequestOutcome, t0: float,
                   expected: Expected) -> None:
    ev = _Events(out, t0, expected)
    pending = bytearray()  # the line being received; bounded by MAX_LINE_BYTES
    done = False
    size = 0
    after_cr = False  # the last chunk ended in CR: an LF that opens this one ends no line
    first = True
    async for raw in resp.content.iter_any():
        # a read that finds data waiting does not give the event loop a turn: give it one, so
        # the request's timeout and the run's deadline fire however fast the body comes
        await asyncio.sleep(0)
        size += len(raw)
        if size > MAX_BODY_BYTES:
            raise StreamError(f"response body larger than {MAX_BODY_BYTES >> 20} MiB "
                              "(after decompression): refused")
        chunk, after_cr = _lf_lines(raw, after_cr)
        if first and chunk:
            # SSE: a byte order mark opening the stream is not part of its first line
            chunk, first = chunk.removeprefix(b"\xef\xbb\xbf"), False
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0:  # a line is complete at its end
            if len(pending) + nl - start > MAX_LINE_BYTES:
                raise _too_long(len(pending) + nl - start)
            if pending:
                pending += chunk[start:nl]
                line, pending = bytes(pending), bytearray()
            else:
                line = chunk[start:nl]
            start = nl + 1
            if ev.line(line):
                done = True
                break
        if done:
            break
        if len(pending) + len(chunk) - start > MAX_LINE_BYTES:
            raise _too_long(len(pending) + len(chunk) - start)
        pending += chunk[start:]
    if not done and pending:
        ev.line(bytes(pending))  # a last line without its newline
    if not ev.got_token:
        raise StreamError("no token received (stream ended before the first token)")
    out.latency_s = ev.last - t0
    usage = ev.usage
    if usage is not None and usage.completion_tokens is not None:
        expected.check_usage(usage)
        out.output_tokens = usage.completion_tokens
        out.tokens_from_usage = True
        out.prompt_tokens = usage.prompt_tokens
    else:
        if usage is not None:
            expected.check_usage(usage)
        # without usage: the events that carry text, one token each (at least the one token a
        # stream with a token event generated); more than the budget cannot be tokens
        budget = expected.max_tokens
        if budget is not None and ev.text_events > budget:
            raise StreamError(f"server sent {ev.text_events} text events for max_tokens="
                              f"{budget} and no usage: its output length is unknown")
        out.output_tokens = max(1, ev.text_events)


async def _error_text(resp: aiohttp.ClientResponse) -> str:
    """The start of an error response's body (never more than a few KiB of it is read)."""
    data = b""
    while len(data) < _MAX_ERROR_READ and (chunk := await resp.content.read(_MAX_ERROR_READ)):
        data += chunk
    text = data[:_MAX_ERROR_READ].decode("utf-8", "replace")
    return " ".join(text.split())[:_MAX_ERROR_BODY]


async def stream_request(client: aiohttp.ClientSession, url: str, body: dict[str, Any], index: int,
                         timeout_s: float, headers: dict[str, str] | None = None,
                         ) -> RequestOutcome:
    """Send one streaming request and time it; failures become ``success=False`` + ``error``.

    ``timeout_s`` bounds the whole request (connect, prefill, every token). Cancellation
    (``asyncio.CancelledError``) propagates to the caller, which records the request.
    """
    out = RequestOutcome(index=index)
    t0 = time.perf_counter()
    out.start_s = t0
    try:
        async with asyncio.timeout(timeout_s):
            async with client.post(url, json=body, headers=headers) as resp:
                if resp.status != 200:
                    text = await _error_text(resp)
                    raise StreamError(f"HTTP {resp.status} {str(resp.reason)[:80]}: {text}")
                if resp.content_type in ("application/json", "text/plain", "text/html"):
                    # a body, not an event stream: a proxy's or server's error page sent with
                    # 200, or a server that ignored "stream": say what it said
                    text = await _error_text(resp)
                    raise StreamError(f"HTTP 200 with a body of type {resp.content_type} "
                                      f"instead of an event stream: {text}")
                await _consume(resp, out, t0, Expected.from_body(body))
        out.success = True
    except TimeoutError:
        out.error = f"timeout: no complete response within {timeout_s:g} s"
    except StreamError as exc:
        out.error = str(exc)
    except aiohttp.ClientError as exc:
        out.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    except (OSError, ValueError) as exc:  # not UTF-8; a host name or redirect URL unusable
        out.error = f"{type(exc).__name__}: {exc}"
    if not out.success:
        out.itl_s = []
        out.output_tokens = 0
    return out
