"""YAML parsing with limits: PyYAML's safe loader with depth, value-count and alias budgets
checked on the event stream and node graph before anything is built (a "billion laughs" is
refused from its expanded size, never expanded), duplicate keys refused naming key and line, and
the YAML 1.2 reading of exponent floats (:func:`load_yaml`; import it through
:mod:`fleetplan._load`). PyYAML is imported when a document is read."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

from fleetplan._input import (
    MAX_ALIASES,
    MAX_BYTES,
    MAX_DEPTH,
    MAX_NODES,
    source_text,
    value_error_text,
)
from fleetplan._show import show_value
from fleetplan.errors import InputError, InputLimitError

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
    text, src = source_text(path_or_text, what, source, max_bytes)
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
        raise InputError(f"{src}: not readable YAML ({value_error_text(exc)})") from None
