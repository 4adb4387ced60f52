"""The one bounded reader of a user's YAML and JSON: size, type, depth, value count, aliases and
duplicate keys are checked *before* anything large is built, and every failure is one
:class:`~fleetplan.errors.InputError` line naming the file (and line); limits that are passed
raise its subclass :class:`~fleetplan.errors.InputLimitError`, with the figure.

Main entries:

- :func:`read_text_bounded` ``(path, *, what, max_bytes)``: the UTF-8 text of a *regular* file
  (a directory, FIFO, device or socket is refused by its type before it is opened, so a FIFO
  cannot hang a read and ``/dev/zero`` cannot fill memory), at most ``max_bytes`` long.
  :func:`read_bytes_bounded` gives the bytes; :func:`check_regular_file` only the type check
  (for readers that open the file themselves, e.g. ``pandas.read_csv``).
- :func:`load_json` ``(path_or_text, *, what, source, max_bytes, max_depth, max_nodes, hint)``:
  JSON with a linear pre-scan that refuses nesting deeper than ``max_depth`` (no
  RecursionError) and, when asked, more than ``max_nodes`` values; duplicate keys are refused
  naming key and line.
- :func:`load_yaml` ``(path_or_text, *, what, source, max_bytes, max_depth, max_aliases,
  max_nodes, hint)``: YAML (safe loader) with the same checks on the parser's events, an alias
  budget (a "billion laughs" document is refused from its size and depth once expanded,
  computed on the node graph: the expansion is never built) and the YAML 1.2 reading of exponent
  floats (``1e5`` is the number 100000.0, not the text ``"1e5"``).
- :func:`load_data` ``(path, *, what, yaml_ok, hint)``: YAML or JSON by the file's suffix
  (``*.json`` is JSON), at most :data:`MAX_NODES` values: scenario, plan and frontier files.
- :func:`show_value` ``(value, limit=80)``: a value rendered for an error message, cut at
  ``limit`` characters *without* rendering the rest (a shared structure of 10^18 leaves prints
  at once).

A ``path_or_text`` that is a :class:`~pathlib.Path` (or ``os.PathLike``) is read with
:func:`read_text_bounded`; a ``str`` is the document itself (``source`` names it in errors).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fleetplan.errors import InputError, InputLimitError

MAX_BYTES = 16 * 1024 * 1024
"""Largest file read by default (16 MiB: a scenario of 10^5 classes is ~5 MiB)."""
MAX_DEPTH = 64
"""Deepest nesting of lists/mappings accepted by default (a scenario nests 5 levels)."""
MAX_ALIASES = 1000
"""Most YAML alias uses (``*name``) accepted by default."""
MAX_NODES = 1_000_000
"""Most YAML values (scalars, lists, mappings), as written and once every alias is expanded:
what a consumer of the value will walk (a 10^5-class scenario has ~5 x 10^5; PyYAML holds
~370 bytes per node while it builds, so this bounds a YAML load to ~400 MB)."""


# --- files -------------------------------------------------------------------------------------

def _kind(mode: int) -> str | None:
    """What a non-regular file is, by its ``st_mode`` (``None``: a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_regular_file(path: str | os.PathLike[str], *, what: str) -> os.stat_result:
    """``os.stat`` of ``path`` (following symlinks) when it is an existing regular file; else one
    :class:`InputError` line (missing, a directory, a FIFO, a device ...). Opens nothing."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(f"{p}: no such {what}") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read the {what} ({exc.strerror or exc})") from None
    kind = _kind(st.st_mode)
    if kind is not None:
        raise InputError(f"{p}: {kind}, not a {what} (a regular file)")
    return st


def read_bytes_bounded(path: str | os.PathLike[str], *, what: str,
                       max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (see :func:`read_text_bounded`)."""
    p = Path(path)
    st = check_regular_file(p, what=what)
    if st.st_size > max_bytes:
        raise InputLimitError(f"{p}: {st.st_size} bytes, more than the {max_bytes} a {what} may "
                              "have")
    try:
        # O_NONBLOCK: should the path have become a FIFO since the stat, opening cannot hang
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise InputError(f"{p}: cannot read the {what} ({exc.strerror or exc})") from None
    try:
        kind = _kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise InputError(f"{p}: {kind}, not a {what} (a regular file)")
        chunks, got = [], 0
        while got <= max_bytes:  # the file may grow after the stat: never read past the limit
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise InputError(f"{p}: cannot read the {what} ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if got > max_bytes:
        raise InputLimitError(f"{p}: more than the {max_bytes} bytes a {what} may have")
    return b"".join(chunks)


def read_text_bounded(path: str | os.PathLike[str], *, what: str,
                      max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``max_bytes`` bytes.

    Refused, each as one :class:`InputError` line naming the file: missing, not a regular file
    (directory, FIFO, device, socket: by ``os.stat`` type, before opening), larger than
    ``max_bytes`` (:class:`~fleetplan.errors.InputLimitError`), unreadable, not UTF-8.
    ``what`` names the file in the messages (``scenario file``).
    """
    data = read_bytes_bounded(path, what=what, max_bytes=max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{Path(path)}: not UTF-8 text (byte {exc.start}), not a {what}") \
            from None


def _text(path_or_text: str | os.PathLike[str], what: str, source: str | None,
          max_bytes: int) -> tuple[str, str]:
    if isinstance(path_or_text, str):
        if len(path_or_text) > max_bytes:
            raise InputLimitError(f"{source or what}: {len(path_or_text)} characters, more than "
                                  f"the {max_bytes} a {what} may have")
        return path_or_text, source or what
    return read_text_bounded(path_or_text, what=what, max_bytes=max_bytes), \
        source or str(path_or_text)


# --- JSON --------------------------------------------------------------------------------------

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)|[\[\]{}:]')


def _value_error(exc: ValueError) -> str:
    text = str(exc)
    if "integer string conversion" in text:
        return "an integer of more than 4300 digits"
    return text[:120]


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


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
                                      f"at line {_line(bare, m.start())})")
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
                    return _line(text, m.start())
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
    text, src = _text(path_or_text, what, source, max_bytes)
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
        raise InputError(f"{src}: not readable JSON ({_value_error(exc)})") from None


# --- YAML --------------------------------------------------------------------------------------

# YAML 1.1 (PyYAML) reads `1e5` as a string: its floats need a dot. YAML 1.2 and JSON read a
# number; so does fleetplan (scalars that match JSON's number grammar with an exponent).
_EXP_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


def _loader_class() -> type:
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _BoundedLoader(base):  # type: ignore[misc, valid-type]
        """PyYAML's safe loader refusing duplicate keys (line named) and reading `1e5` as a
        number; depth and aliases are checked on the events and nodes before construction."""

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    fresh = key not in seen
                except TypeError:
                    continue  # an unhashable key: the base constructor refuses it
                if not fresh:
                    raise _DuplicateKey(key, key_node.start_mark.line + 1)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    _BoundedLoader.yaml_implicit_resolvers = {
        k: list(v) for k, v in base.yaml_implicit_resolvers.items()}
    _BoundedLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXP_FLOAT,
                                         list("-+0123456789"))
    return _BoundedLoader


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int) -> None:
        super().__init__(key, line)
        self.key, self.line = key, line


_LOADER: type | None = None


def _expanded_shape(root: Any, limit: int) -> tuple[int, int]:
    """Nodes and depth of the YAML node graph once every alias is expanded, computed on the
    graph (each node once, no recursion); the count stops above ``limit``. A cycle counts as
    ``limit + 1`` nodes (a recursive document is never a valid input here). The depth matters
    too: aliases nest one deep structure in another (100 aliases of 30 levels: 3000 deep)."""
    from yaml.nodes import MappingNode, SequenceNode

    def children(n: Any) -> Iterator[Any]:
        if isinstance(n, SequenceNode):
            yield from n.value
        elif isinstance(n, MappingNode):
            for k, v in n.value:
                yield k
                yield v

    shape: dict[int, tuple[int, int]] = {}
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        n, done = stack.pop()
        i = id(n)
        if done:
            total, deepest = 1, 0
            for c in children(n):
                size, depth = shape[id(c)]
                total += size
                deepest = max(deepest, depth)
                if total > limit:
                    return limit + 1, deepest + 1
            shape[i] = (total, deepest + 1 if isinstance(n, SequenceNode | MappingNode) else 0)
            open_.discard(i)
            continue
        if i in shape:
            continue
        if i in open_:
            return limit + 1, 0
        open_.add(i)
        stack.append((n, True))
        for c in children(n):
            if id(c) in open_:
                return limit + 1, 0
            if id(c) not in shape:
                stack.append((c, False))
    return shape[id(root)]


def _mark_line(ev: Any) -> int | str:
    mark = getattr(ev, "start_mark", None)
    return "?" if mark is None else mark.line + 1


def load_yaml(path_or_text: str | os.PathLike[str], *, what: str = "YAML file",
              source: str | None = None, max_bytes: int = MAX_BYTES,
              max_depth: int = MAX_DEPTH, max_aliases: int = MAX_ALIASES,
              max_nodes: int = MAX_NODES, hint: str = "") -> Any:
    """Parsed YAML (safe types only) from a file (a path) or a text (a ``str``).

    Checked before the value is built, each failure one :class:`InputError` line naming the
    source and line: at most ``max_bytes``; nesting at most ``max_depth`` (scanned on the event
    stream, no recursion); at most ``max_aliases`` alias uses and ``max_nodes`` nodes once
    aliases are expanded (a billion-laughs document is refused with its size, never built);
    no duplicate key in a mapping; one document. ``1e5`` reads as a number (YAML 1.2).
    """
    import yaml

    global _LOADER
    text, src = _text(path_or_text, what, source, max_bytes)
    tail = f"; {hint}" if hint else ""
    if _LOADER is None:
        _LOADER = _loader_class()

    def syntax(exc: yaml.YAMLError) -> InputError:
        first = " ".join(str(exc).replace(' in "<unicode string>",', ' at').split())
        return InputError(f"{src}: not valid YAML: {first[:200]}{tail}")

    depth = aliases = nodes = 0
    try:
        for ev in yaml.parse(text, Loader=_LOADER):
            if isinstance(ev, yaml.NodeEvent):
                nodes += 1
                if nodes > max_nodes:
                    raise InputLimitError(f"{src}: more than {max_nodes} values (at line "
                                          f"{_mark_line(ev)}); a {what} is not that large")
            if isinstance(ev, yaml.CollectionStartEvent):
                depth += 1
                if depth > max_depth:
                    raise InputLimitError(f"{src}: nested too deeply (more than {max_depth} "
                                          f"levels, at line {_mark_line(ev)})")
            elif isinstance(ev, yaml.CollectionEndEvent):
                depth -= 1
            elif isinstance(ev, yaml.AliasEvent):
                aliases += 1
                if aliases > max_aliases:
                    raise InputLimitError(f"{src}: line {_mark_line(ev)}: more than "
                                          f"{max_aliases} aliases (*name)")
        loader = _LOADER(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            if aliases:
                n, deep = _expanded_shape(node, max_nodes)
                if n > max_nodes:
                    raise InputLimitError(
                        f"{src}: its aliases expand to more than {max_nodes} values (a "
                        "recursive or exponential alias structure); write the values out")
                if deep > max_depth:
                    raise InputLimitError(f"{src}: nested too deeply once its aliases are "
                                          f"expanded (more than {max_depth} levels)")
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except _DuplicateKey as exc:
        raise InputError(f"{src}: line {exc.line}: duplicate key {show_value(exc.key)} in one "
                         "mapping (each key may appear once)") from None
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):  # libyaml's own bound, met while scanning ahead
            raise InputLimitError(f"{src}: nested too deeply (more than {max_depth} levels)") \
                from None
        raise syntax(exc) from None
    except RecursionError:  # bounded by max_depth; kept should a limit be set very high
        raise InputLimitError(f"{src}: nested too deeply to read as a {what}") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise InputError(f"{src}: not readable YAML ({_value_error(exc)})") from None


def load_data(path: str | os.PathLike[str], *, what: str, yaml_ok: bool = True,
              hint: str = "", max_bytes: int = MAX_BYTES) -> Any:
    """A user's file as data: JSON when named ``*.json`` (or ``yaml_ok`` is false), else YAML
    (JSON is YAML too), through :func:`load_json` / :func:`load_yaml` and their limits, at most
    :data:`MAX_NODES` values either way (a scenario, plan or frontier file)."""
    p = Path(path)
    if yaml_ok and p.suffix.lower() != ".json":
        return load_yaml(p, what=what, hint=hint, max_bytes=max_bytes)
    return load_json(p, what=what, hint=hint, max_bytes=max_bytes, max_nodes=MAX_NODES)


# --- values in messages ------------------------------------------------------------------------

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
