"""Typed field access for reading a plan or frontier file: every refusal is one line naming the
file, the field's path and its value (``plan.json: classes[0].rate_rps = -1: expected a finite
number >= 0``).

Main entry: :class:`FieldReader`, used by the records' ``from_dict``
(:mod:`fleetplan.optimize.plan_parts`, :mod:`fleetplan.optimize.plan`) and the rules across
fields (:mod:`fleetplan.optimize.plan_rules`). It knows no plan record, so every record module
may import it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from fleetplan.catalog.catalog import Catalog
from fleetplan.errors import InputError

TOP = "(top level)"
STATUSES = ("optimal", "feasible", "infeasible")


def at(where: str, key: str) -> str:
    """The path of ``key`` inside ``where`` (a top-level key is named alone)."""
    return key if where == TOP else f"{where}.{key}"


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return False
    return True


class FieldReader:
    """Typed field access that names the file, the field path and the value on failure."""

    def __init__(self, source: str, catalog: Catalog | None = None) -> None:
        self.source = source
        self.catalog = catalog  # whose GPUs a configuration may name (None: the bundled)

    def fail(self, where: str, value: Any, expected: str) -> InputError:
        shown = json.dumps(value)[:80] if _jsonable(value) else repr(value)[:80]
        if isinstance(value, float) and math.isinf(value):
            shown = "Infinity" if value > 0 else "-Infinity"
        return InputError(f"{self.source}: {where} = {shown}: expected {expected}")

    def obj(self, d: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(d, Mapping):
            raise self.fail(where, d, "an object")
        return d

    def field(self, d: Mapping[str, Any], key: str, where: str) -> Any:
        if key not in d:
            raise InputError(f"{self.source}: {at(where, key)}: missing")
        return d[key]

    def opt_num(self, d: Mapping[str, Any], key: str, where: str,
                lo: float | None = 0.0, finite: bool = False) -> float | None:
        """A number or null (absent reads as null); ``finite``: infinity refused (money,
        carbon, rates: a latency may be infinite, an overloaded class's)."""
        v = d.get(key)
        return None if v is None else self._num(v, at(where, key), lo, " or null", finite)

    def num(self, d: Mapping[str, Any], key: str, where: str, lo: float | None = 0.0,
            finite: bool = False) -> float:
        return self._num(self.field(d, key, where), at(where, key), lo, "", finite)

    def _num(self, v: Any, where: str, lo: float | None, tail: str, finite: bool) -> float:
        if v == "inf" and not finite:  # how JSON writers spell infinity (fleetplan._io.json_safe)
            v = math.inf
        if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v) \
                or (lo is not None and v < lo) or (finite and math.isinf(v)):
            raise self.fail(where, v, ("a finite number" if finite else "a number")
                            + (f" >= {lo:g}" if lo is not None else "") + tail)
        return float(v)

    def int_(self, d: Mapping[str, Any], key: str, where: str, lo: int = 0) -> int:
        v = self.field(d, key, where)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise self.fail(at(where, key), v, f"a whole number >= {lo}")
        return v

    def str_(self, d: Mapping[str, Any], key: str, where: str) -> str:
        v = self.field(d, key, where)
        if not isinstance(v, str) or not v:
            raise self.fail(at(where, key), v, "a non-empty string")
        return v

    def opt_str(self, d: Mapping[str, Any], key: str, where: str) -> str | None:
        return None if d.get(key) is None else self.str_(d, key, where)

    def bool_(self, d: Mapping[str, Any], key: str, where: str) -> bool:
        v = self.field(d, key, where)
        if not isinstance(v, bool):
            raise self.fail(at(where, key), v, "true or false")
        return v

    def opt_bool(self, d: Mapping[str, Any], key: str, where: str) -> bool | None:
        """true, false or absent (None: a plan file written before the field was recorded)."""
        return None if d.get(key) is None else self.bool_(d, key, where)

    def list_(self, d: Mapping[str, Any], key: str, where: str) -> list[Any]:
        v = self.field(d, key, where)
        if not isinstance(v, list):
            raise self.fail(at(where, key), v, "a list")
        return v

    def opt_list(self, d: Mapping[str, Any], key: str, where: str) -> list[Any] | None:
        return None if d.get(key) is None else self.list_(d, key, where)

    def status(self, d: Mapping[str, Any], where: str) -> str:
        """A plan's (or a frontier point's) ``status``: optimal, feasible or infeasible."""
        status = self.field(d, "status", where)
        if status not in STATUSES:
            raise self.fail(at(where, "status"), status, " | ".join(STATUSES))
        return str(status)

    def interval(self, d: Mapping[str, Any], key: str, where: str, *, lo: float | None
                 ) -> tuple[float, float] | None:
        """``[lo, hi]`` (ms) or absent; ``lo`` given: both ends at least ``lo``."""
        raw = d.get(key)
        if raw is None:
            return None
        if (not isinstance(raw, list) or len(raw) != 2
                or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in raw)
                or raw[0] > raw[1] or (lo is not None and raw[0] < lo)):
            expected = ("[lo, hi] in ms with lo <= hi" if lo is None
                        else f"[lo, hi] in ms with {lo:g} <= lo <= hi")
            raise self.fail(at(where, key), raw, expected)
        return float(raw[0]), float(raw[1])
