"""Parsing of repeated ``NAME=VALUE`` options (``--price H100-PCIe=2.0``)."""

from __future__ import annotations

import math

from fleetplan.errors import InputError


def parse_pairs(values: list[str] | None, option: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in values or []:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise InputError(f"{option} {item!r}: expected NAME=NUMBER, e.g. H100-PCIe=2.0")
        try:
            value = float(raw)
        except ValueError:
            raise InputError(f"{option} {item!r}: {raw!r} is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise InputError(f"{option} {item!r}: {raw!r} must be a positive number")
        out[name.strip()] = value
    return out
