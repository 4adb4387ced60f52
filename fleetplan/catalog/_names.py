"""The grammar of catalog names that pool names are built from.

A pool is named ``<n>x<GPU>@<region>[~spot][/tier]`` (:mod:`fleetplan.scenario.fleet`), and plan
files, fleet specs (``2x1xH100-PCIe@FRA``) and reports read those names back. A GPU or region
name holding one of the separators would be read back as another pool (a region ``EU27~spot``
as a spot pool in EU27), so catalog rows are refused when their names leave the grammar:

- a GPU: a letter or digit, then letters, digits, ``.``, ``_`` and ``-`` (``A100-80GB``);
- a region code: a letter or digit, then letters, digits, ``_`` and ``-`` (``EU27``, ``US-CA``);

at most 64 characters each. Main entry: :func:`check_name`.
"""

from __future__ import annotations

import re

MAX_NAME_CHARS = 64
_GRAMMAR = {
    "GPU": (re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*"), "letters, digits, '.', '_' and '-'"),
    "region": (re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*"), "letters, digits, '_' and '-'"),
}


def check_name(kind: str, value: str) -> str:
    """``value`` when it is a valid ``kind`` name (``"GPU"`` or ``"region"``); else
    ``ValueError`` saying what such a name may hold."""
    pattern, allowed = _GRAMMAR[kind]
    if len(value) > MAX_NAME_CHARS or not pattern.fullmatch(value):
        raise ValueError(f"a {kind} name starts with a letter or digit and holds only "
                         f"{allowed}, at most {MAX_NAME_CHARS} characters (pool names such as "
                         "2xRTX-4090@EU27~spot/200ms use the others as separators)")
    return value
