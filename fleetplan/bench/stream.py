"""One streamed request to an OpenAI-compatible server, timed as vLLM's benchmark client times it.

Main entry: :func:`stream_request` (an ``aiohttp.ClientSession``, the URL, the request) -> a
:class:`RequestOutcome` with TTFT, the inter-token gaps, end-to-end latency, token counts and an
error string ("" on success). It never raises for a server's or the network's fault: timeouts,
HTTP errors, malformed SSE lines and dropped connections become a failed outcome with the reason.

Timing follows ``vllm bench serve`` (``async_request_openai_completions``): the clock starts
before the request is sent; every SSE event with a non-empty ``choices`` list is one token event
(TTFT at the first, one inter-token gap per later one, even when its text is empty); the
latency ends at the last token event (the trailing usage event carries no token). Token counts
come from the server's ``usage`` (requested with ``stream_options.include_usage``); a server that
sends none gets its output counted as token events, and the outcome says so.

The client is aiohttp, as in vLLM's and SGLang's benchmark clients: its C HTTP parser keeps the
client's own CPU cost per token event small. That matters where client and server share a few
cores: with httpx, on a 2-core machine beside a CPU vLLM server, the client fell up to 2.5 s
behind its send schedule at 12 req/s and its TTFTs and ITLs were 40-1500% above those of
``vllm bench serve`` measuring the same server alternately.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp

from fleetplan.bench.requests import BenchRequest

Api = Literal["completions", "chat"]
_MAX_ERROR_BODY = 300


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


class StreamError(Exception):
    """The stream broke the protocol (malformed event, error event)."""


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
    """The token events of one SSE stream, timed as they are parsed."""

    def __init__(self, out: RequestOutcome, t0: float) -> None:
        self.out, self.last, self.got_token = out, t0, False
        self.usage: dict[str, Any] | None = None
        self.t0 = t0

    def line(self, raw: str) -> bool:
        """Take one line; True once ``[DONE]`` is seen."""
        data = _event_data(raw.rstrip("\r"))
        if data is None:
            return False
        data = data.strip()
        if data == "[DONE]":
            return True
        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            raise StreamError(f"malformed SSE data line: {data[:80]!r}") from None
        if not isinstance(event, dict):
            raise StreamError(f"malformed SSE event (not an object): {data[:80]!r}")
        if event.get("error"):
            raise StreamError(f"error event from server: {str(event['error'])[:200]}")
        if event.get("choices"):
            now = time.perf_counter()
            if not self.got_token:
                self.got_token = True
                self.out.ttft_s = now - self.t0
            else:
                self.out.itl_s.append(now - self.last)
            self.last = now
        elif isinstance(event.get("usage"), dict):
            self.usage = event["usage"]
        return False


async def _consume(resp: aiohttp.ClientResponse, out: RequestOutcome, t0: float) -> None:
    ev = _Events(out, t0)
    buf = b""
    done = False
    async for chunk in resp.content.iter_any():
        buf += chunk
        *lines, buf = buf.split(b"\n")  # a line is complete at its LF (CRLF included)
        for raw in lines:
            if ev.line(raw.decode("utf-8")):
                done = True
                break
        if done:
            break
    if not done and buf:
        ev.line(buf.decode("utf-8"))  # a last line without its newline
    if not ev.got_token:
        raise StreamError("no token received (stream ended before the first token)")
    out.latency_s = ev.last - t0
    usage = ev.usage
    if usage is not None and isinstance(usage.get("completion_tokens"), int):
        out.output_tokens = int(usage["completion_tokens"])
        out.tokens_from_usage = True
        if isinstance(usage.get("prompt_tokens"), int):
            out.prompt_tokens = int(usage["prompt_tokens"])
    else:
        out.output_tokens = 1 + len(out.itl_s)


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
                    text = (await resp.read()).decode("utf-8", "replace")
                    raise StreamError(f"HTTP {resp.status} {resp.reason}: "
                                      f"{' '.join(text.split())[:_MAX_ERROR_BODY]}")
                await _consume(resp, out, t0)
        out.success = True
    except TimeoutError:
        out.error = f"timeout: no complete response within {timeout_s:g} s"
    except StreamError as exc:
        out.error = str(exc)
    except aiohttp.ClientError as exc:
        out.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    except (OSError, UnicodeDecodeError) as exc:
        out.error = f"{type(exc).__name__}: {exc}"
    if not out.success:
        out.itl_s = []
        out.output_tokens = 0
    return out
