"""One-line validation errors: ``SOURCE: PATH = VALUE: MESSAGE``.

:func:`format_validation_error` renders pydantic's first error with the full field path walked
in the input (``classes[1].slo.ttft_p99_ms``), the value found there, and a count of the rest.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from fleetplan._load import show_value

MAX_MESSAGE = 400
"""Longest message text of one error (the value shown beside it is cut at 80 characters)."""


def _path(loc: tuple[Any, ...], data: Any) -> tuple[str, Any, bool]:
    """Render a pydantic ``loc`` as ``classes[1].slo.ttft_p99_ms``; also the value found there.

    Union tags pydantic inserts (``lognormal``, ``function-after[...]``) are not keys of the
    input: walking the input alongside the loc drops them (a missing last key is kept).
    """
    out, cur, found = "", data, True
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(part, int) and isinstance(cur, list | tuple) and 0 <= part < len(cur):
            out += f"[{part}]"
            cur = cur[part]
        elif isinstance(cur, dict) and part in cur:
            out += _key(part, out)
            cur = cur[part]
        elif last and isinstance(cur, dict):
            out += _key(part, out)
            found = False
    return out or "(top level)", cur, found


def _key(part: Any, before: str) -> str:
    """One key of the path: ``.name`` (bare at the start), or ``[...]`` escaped where the key
    holds a character that does not print (a line break would split the one-line message)."""
    text = str(part)
    if not text.isprintable():
        return f"[{ascii(text)}]"
    return f".{text}" if before else text


def _show(v: Any) -> str:
    """The value as the message shows it: at most 80 characters, and only those are rendered
    (an alias-shared structure of any size prints at once)."""
    return show_value(v, 80)


def _record_fields(class_name: str) -> list[str]:
    """The field names (as a file spells them) of the scenario record called ``class_name``;
    empty when there is none."""
    from fleetplan.scenario.base import Strict

    todo: list[type] = [Strict]
    while todo:
        cls = todo.pop()
        if cls.__name__ == class_name and issubclass(cls, Strict):
            return cls.file_fields()
        todo.extend(cls.__subclasses__())
    return []


def format_validation_error(exc: ValidationError, data: Any, source: str) -> str:
    """One line: ``SOURCE: PATH = VALUE: MESSAGE`` for the first error (and a count of the rest)."""
    errs = exc.errors(include_url=False)
    e = errs[0]
    loc = tuple(e["loc"])
    ctx = e.get("ctx") or {}
    if e["type"] == "unknown_field":
        loc = (*loc, ctx["field"])
    path, value, found = _path(loc, data)
    msg = e["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if len(msg) > MAX_MESSAGE:  # a validator may quote a value of any length
        msg = msg[: MAX_MESSAGE - 3] + "..."
    if e["type"] == "extra_forbidden":
        msg = "unknown field"
    elif e["type"] == "model_type":  # a record given as a bare value: name its fields
        fields = _record_fields(str(ctx.get("class_name", "")))
        msg = "expected a mapping of fields" + (f" ({', '.join(fields)})" if fields else "")
    elif e["type"] == "dict_type":
        msg = "expected a mapping (name: value, one per line in YAML)"
    if e["type"] == "missing":
        text = f"{source}: {path}: required field is missing"
    elif path == "(top level)":
        text = f"{source}: {msg}"
    elif found and not isinstance(value, dict):
        text = f"{source}: {path} = {_show(value)}: {msg}"
    else:
        text = f"{source}: {path}: {msg}"
    if len(errs) > 1:
        text += f" (and {len(errs) - 1} more error(s))"
    return text
