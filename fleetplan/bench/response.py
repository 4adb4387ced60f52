"""What a server may answer to ``bench``: the typed, bounded schema of its SSE events and usage.

Main entries: :func:`parse_event` (one SSE ``data:`` payload -> :class:`SseEvent`, or
:class:`ResponseError` naming the field and value), :class:`Expected` (what the request asked
for, read from the body sent) and :meth:`Expected.check_usage` (the server's token counts must be
possible for that request). Everything a server sends passes through here before it becomes a
figure of the result: a server that claims -7 prompt tokens or 10^12 completion tokens for a
4-token budget fails that request with the reason, it is never written as a measurement.

Limits (each is a named bound, not a measured figure):

- :data:`MAX_LINE_BYTES`: one SSE line (an event) of at most 1 MiB; vLLM's events are a few
  hundred bytes (a few KiB with logprobs). A longer line is refused, so a server that never ends
  its line cannot make the client buffer without bound.
- :data:`MAX_TOKENS`: token counts above 10^8 (beyond any model's context) are refused.
- :data:`TOKEN_EVENT_SLACK`: a stream may carry at most ``2 * max_tokens + 16`` token events (vLLM
  sends at most one per token, plus a role event and a final one).
- :data:`TEMPLATE_TOKENS`: ``usage.prompt_tokens`` may exceed the prompt's UTF-8 byte count (a
  byte-level BPE token covers at least one byte) by at most 4096 tokens of chat template and
  special tokens (an assumption, generous for current templates).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

MAX_LINE_BYTES = 1 << 20
MAX_TOKENS = 100_000_000
TOKEN_EVENT_SLACK = 16
TEMPLATE_TOKENS = 4096
MAX_VERSION_CHARS = 64


class ResponseError(Exception):
    """The server's answer broke the protocol or the schema (the request fails with this)."""


class ServerUsage(BaseModel):
    """The ``usage`` object of the final event (OpenAI's shape; other keys are ignored)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    prompt_tokens: StrictInt | None = Field(default=None, ge=0, le=MAX_TOKENS)
    completion_tokens: StrictInt | None = Field(default=None, ge=0, le=MAX_TOKENS)


class SseEvent(BaseModel):
    """One streamed event: a token event has a non-empty ``choices`` list."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    choices: list[Any] | None = None
    usage: ServerUsage | None = None
    error: Any = None


def _show(v: Any) -> str:
    """A value as an error shows it: short, never the whole of a large value."""
    if isinstance(v, str):
        return repr(v[:40] + ("..." if len(v) > 40 else ""))
    if isinstance(v, bool | int | float) or v is None:
        text = repr(v)
        return text if len(text) <= 40 else text[:37] + "..."
    return f"a {type(v).__name__}"


def parse_event(data: str) -> SseEvent:
    """One SSE payload (the text after ``data:``) as a checked event."""
    try:
        return SseEvent.model_validate_json(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        if err["type"].startswith("json_") or not err["loc"]:
            raise ResponseError(f"malformed SSE data line: {_show(data)}") from None
        field = ".".join(str(p) for p in err["loc"])
        raise ResponseError(f"malformed SSE event: {field}={_show(err.get('input'))}: "
                            f"{err['msg']}") from None


def error_text(error: Any) -> str:
    """An error event's message (its ``message`` field, or the value), at most 200 characters."""
    msg = error.get("message", error) if isinstance(error, dict) else error
    return msg[:200] if isinstance(msg, str) else _show(msg)


def version_of(payload: Any) -> str | None:
    """The engine version from a ``/version`` answer, if it is a short printable string."""
    v = payload.get("version") if isinstance(payload, dict) else None
    if isinstance(v, int | float) and not isinstance(v, bool):
        v = str(v)
    if not isinstance(v, str) or not v or len(v) > MAX_VERSION_CHARS or not v.isprintable():
        return None
    return v


def _texts(messages: list[Any]) -> list[str]:
    """The text parts of chat messages (``content`` as a string or a list of parts)."""
    out: list[str] = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        parts: list[Any] = content if isinstance(content, list) else [{"text": content}]
        out.extend(t for c in parts if isinstance(c, dict)
                   and isinstance(t := c.get("text"), str))
    return out


@dataclass(frozen=True)
class Expected:
    """What a request asked for, read from the body sent (the limits its answer must keep)."""

    max_tokens: int | None
    prompt_bytes: int | None

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Expected:
        budget = body.get("max_tokens", body.get("max_completion_tokens"))
        prompt: Any = body.get("prompt")
        if prompt is None and isinstance(body.get("messages"), list):
            prompt = "".join(_texts(body["messages"]))
        return cls(max_tokens=budget if isinstance(budget, int) and budget > 0 else None,
                   prompt_bytes=len(prompt.encode("utf-8")) if isinstance(prompt, str) else None)

    @property
    def max_token_events(self) -> int | None:
        return None if self.max_tokens is None else 2 * self.max_tokens + TOKEN_EVENT_SLACK

    def check_usage(self, usage: ServerUsage) -> None:
        """Refuse token counts this request cannot have had (after the schema's bounds)."""
        out, inp = usage.completion_tokens, usage.prompt_tokens
        if out is not None:
            if out < 1:
                raise ResponseError(f"server usage completion_tokens={out} for a stream that "
                                    "sent tokens (usage refused)")
            if self.max_tokens is not None and out > self.max_tokens:
                raise ResponseError(f"server usage completion_tokens={out} is above the "
                                    f"request's max_tokens={self.max_tokens} (usage refused)")
        if inp is not None and self.prompt_bytes is not None:
            if self.prompt_bytes > 0 and inp < 1:
                raise ResponseError(f"server usage prompt_tokens={inp} for a non-empty prompt "
                                    "(usage refused)")
            if inp > self.prompt_bytes + TEMPLATE_TOKENS:
                raise ResponseError(f"server usage prompt_tokens={inp} is above the prompt's "
                                    f"{self.prompt_bytes} bytes + {TEMPLATE_TOKENS} template "
                                    "tokens (usage refused)")
