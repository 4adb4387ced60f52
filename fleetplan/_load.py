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

The API is split by concept (this module re-exports it, so ``fleetplan._load``'s names stay
importable): :mod:`fleetplan._input` (limits, reading files), :mod:`fleetplan._json_load`,
:mod:`fleetplan._yaml_load`, :mod:`fleetplan._show` (values in messages); :func:`load_data`
lives here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fleetplan._input import (
    MAX_ALIASES,
    MAX_BYTES,
    MAX_DEPTH,
    MAX_NODES,
    check_regular_file,
    read_bytes_bounded,
    read_text_bounded,
)
from fleetplan._json_load import load_json
from fleetplan._show import show_value
from fleetplan._yaml_load import load_yaml

__all__ = ["MAX_ALIASES", "MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "check_regular_file",
           "load_data", "load_json", "load_yaml", "read_bytes_bounded", "read_text_bounded",
           "show_value"]


def load_data(path: str | os.PathLike[str], *, what: str, yaml_ok: bool = True,
              hint: str = "", max_bytes: int = MAX_BYTES) -> Any:
    """A user's file as data: JSON when named ``*.json`` (or ``yaml_ok`` is false), else YAML
    (JSON is YAML too), through :func:`load_json` / :func:`load_yaml` and their limits, at most
    :data:`MAX_NODES` values either way (a scenario, plan or frontier file)."""
    p = Path(path)
    if yaml_ok and p.suffix.lower() != ".json":
        return load_yaml(p, what=what, hint=hint, max_bytes=max_bytes)
    return load_json(p, what=what, hint=hint, max_bytes=max_bytes, max_nodes=MAX_NODES)
