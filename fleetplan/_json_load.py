"""JSON parsing with limits: nesting depth and value count pre-scanned without recursion,
duplicate keys refused naming key and line, size bounded (:func:`load_json`; import it through
:mod:`fleetplan._load`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
from typing import Any

from fleetplan._input import MAX_BYTES, MAX_DEPTH, line_of, source_text, value_error_text
from fleetplan._show import show_value
from fleetplan.errors import InputError, InputLimitError

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)|[\[\]{}:]')


# an unterminated string runs to the end (possessive, no retry from each later quote: a text of
# 10^6 escaped quotes would otherwise be rescanned from every one of them)
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)')
_BRACKET = re.compile(r"[\[\]{}]")


def _json_depth(text: str, src: str, max_depth: int, max_nodes: int | None) -> None:
    """Refuse nesting deeper than ``max_depth``, without recursion: strings are blanked (a bracket
    inside one is text), then brackets counted. JSON strings hold no raw newline, so line
    numbers survive the blanking. More than ``max_nodes`` values (counted by their commas) are
    refused too: what validates them next holds each in memory, an error for each bad one."""
    bare = _JSON_STRING.sub('""', text) if '"' in text else text
    values = bare.count(",") if max_nodes is not None else 0
    if max_nodes is not None and values > max_nodes:
        raise InputLimitError(f"{src}: more than {max_nodes} values ({values + 1}); a JSON "
                              "input here is not that large")
    depth = 0
    for m in _BRACKET.finditer(bare):
        if m.group() in "[{":
            depth += 1
            if depth > max_depth:
                raise InputLimitError(f"{src}: nested too deeply (more than {max_depth} levels, "
                                      f"at line {line_of(bare, m.start())})")
        else:
            depth -= 1


def _duplicate_line(text: str, dup: str) -> int | None:
    """The line of the second ``dup`` key of one object (the slow path, on error only)."""
    stack: list[set[str] | None] = []  # a set of keys per open object, None per open list
    pending: str | None = None  # the last string token, a key if ':' follows
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group()
        if tok[0] == '"':
            pending = tok
            continue
        if tok == ":":
            keys = stack[-1] if stack else None
            if pending is not None and keys is not None:
                key = pending[1:-1]
                if "\\" in key:
                    with contextlib.suppress(ValueError):
                        key = json.loads(pending)
                if key in keys and key == dup:
                    return line_of(text, m.start())
                keys.add(key)
        elif tok in "[{":
            stack.append(set() if tok == "{" else None)
        elif stack:
            stack.pop()
        pending = None
    return None


class _DuplicateJSONKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateJSONKey(k)
            seen.add(k)
    return out


def load_json(path_or_text: str | os.PathLike[str], *, what: str = "JSON file",
              source: str | None = None, max_bytes: int = MAX_BYTES,
              max_depth: int = MAX_DEPTH, max_nodes: int | None = None,
              hint: str = "") -> Any:
    """Parsed JSON from a file (a path) or a text (a ``str``), checked before it is built:
    nesting at most ``max_depth``, no duplicate key in an object (the key and its line are
    named), at most ``max_bytes``, and with ``max_nodes`` at most that many values (default: no
    count; a detailed vLLM result holds millions of per-token figures). ``hint`` is added to a
    syntax error."""
    text, src = source_text(path_or_text, what, source, max_bytes)
    _json_depth(text, src, max_depth, max_nodes)
    tail = f"; {hint}" if hint else ""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateJSONKey as exc:
        line = _duplicate_line(text, exc.key)
        where = f"line {line}: " if line is not None else ""
        raise InputError(f"{src}: {where}duplicate key {show_value(exc.key)} in one object "
                         "(each key may appear once)") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{src}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
                         f"{tail}") from None
    except RecursionError:  # the pre-scan bounds depth; kept should a limit be set very high
        raise InputLimitError(f"{src}: nested too deeply to read as a {what}") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise InputError(f"{src}: not readable JSON ({value_error_text(exc)})") from None
