"""Values rendered for error messages, cut where they are rendered (:func:`show_value`: a
shared structure of 10^18 leaves prints at once; import it through :mod:`fleetplan._load`)."""

from __future__ import annotations

import json
from typing import Any


def show_value(v: Any, limit: int = 80) -> str:
    """``v`` as an error message shows it (JSON-like for lists and dicts, ``repr`` otherwise),
    cut to ``limit`` characters with ``...``. Only the part shown is rendered: the walk stops
    once ``limit`` is passed, whatever the size (or sharing) of ``v``."""
    if not isinstance(v, dict | list | tuple):
        text = _top(v, limit)
        return text if len(text) <= limit else text[: limit - 3] + "..."
    out: list[str] = []
    n = 0
    stack: list[Any] = [v]
    while stack and n <= limit:
        x = stack.pop()
        if isinstance(x, _Lit):
            piece = x.text
        elif isinstance(x, dict):
            piece = "{"
            items = list(x.items())[: limit]  # more could never be shown
            stack.append(_Lit("}" if len(items) == len(x) else ", ...}"))
            for j in range(len(items) - 1, -1, -1):
                k, val = items[j]
                stack.append(val)
                stack.append(_Lit(_scalar(k if isinstance(k, str) else str(k)) + ": "))
                if j:
                    stack.append(_Lit(", "))
        elif isinstance(x, list | tuple):
            piece = "["
            items = list(x[: limit])
            stack.append(_Lit("]" if len(items) == len(x) else ", ...]"))
            for j in range(len(items) - 1, -1, -1):
                stack.append(items[j])
                if j:
                    stack.append(_Lit(", "))
        else:
            piece = _scalar(x)
        out.append(piece)
        n += len(piece)
    text = "".join(out)
    return text if len(text) <= limit and not stack else text[: limit - 3] + "..."


class _Lit:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _top(x: Any, limit: int) -> str:
    """A scalar shown alone: its ``repr`` (of a prefix, for a long text; no huge-int digits)."""
    if isinstance(x, str):
        return repr(x[: limit + 3])
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) >= 10**200:
        return f"<an integer of {x.bit_length()} bits>"
    return repr(x)[: limit + 3]


def _scalar(x: Any) -> str:
    """A scalar inside a shown list/dict, as JSON writes it (``str`` for what JSON cannot)."""
    if isinstance(x, str):
        return json.dumps(x[:200])
    if x is None or isinstance(x, bool | int | float):
        try:
            if isinstance(x, int) and abs(x) >= 10**200:
                return f"<an integer of {x.bit_length()} bits>"
            return json.dumps(x)
        except ValueError:
            return str(x)
    return str(x)[:200]
