"""The baseline a simulator must beat: geometric interpolation between measured rates.

Main entry: :func:`interpolate` (a metric at a rate, from the two neighbouring measured rates of
the same model x configuration, linear in log(metric) against log(rate)). Only interior rates,
those with measured rates on both sides, have a baseline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from fleetplan.replica.runs import MeasuredRun


def rate_table(runs: Sequence[MeasuredRun]) -> dict[tuple[str, str], dict[float, dict[str, float]]]:
    """(model, config) -> rate -> metric -> mean over the runs of that rate (flagged included:
    they are what was measured)."""
    acc: dict[tuple[str, str], dict[float, list[MeasuredRun]]] = {}
    for r in runs:
        acc.setdefault(r.key, {}).setdefault(r.request_rate, []).append(r)
    out: dict[tuple[str, str], dict[float, dict[str, float]]] = {}
    for key, by_rate in acc.items():
        out[key] = {}
        for rate, rs in by_rate.items():
            names = set.intersection(*(set(r.measured) for r in rs))
            out[key][rate] = {m: sum(r.measured[m] for r in rs) / len(rs) for m in sorted(names)}
    return out


def neighbours(rates: Sequence[float], rate: float) -> tuple[float, float] | None:
    """The closest measured rates strictly below and above ``rate`` (None if not interior)."""
    lo = [r for r in rates if r < rate]
    hi = [r for r in rates if r > rate]
    if not lo or not hi:
        return None
    return max(lo), min(hi)


def interpolate(table: Mapping[float, Mapping[str, float]], rate: float,
                metric: str) -> float | None:
    """Geometric interpolation of ``metric`` at ``rate`` from its measured neighbours."""
    nb = neighbours(sorted(table), rate)
    if nb is None:
        return None
    r1, r2 = nb
    m1, m2 = table[r1].get(metric), table[r2].get(metric)
    if m1 is None or m2 is None or not (m1 > 0 and m2 > 0):
        return None
    w = math.log(rate / r1) / math.log(r2 / r1)
    return m1 * (m2 / m1) ** w


def is_interior(table: Mapping[float, object], rate: float) -> bool:
    return neighbours(sorted(table), rate) is not None
