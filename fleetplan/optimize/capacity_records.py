"""The records of a capacity search: what a search is asked, what one rate's runs found,
what a run stopped early proved, and what the search answers.

:class:`CapacityJob` (every input that decides a capacity, and its cache keys),
:class:`PointStats` (the P99s at one rate, worst over the seeds run; :func:`combine`),
:class:`RunBound` (the P99s a run stopped early proved above a limit) and
:class:`CapacityResult` (the capacity, the points at and below it, the best probe). Each record
read back from the cache is validated (``checked`` / ``from_dict``: a ``ValueError`` makes the
entry a miss). The search itself is :mod:`fleetplan.optimize.capacity`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fleetplan.optimize.cache import code_key
from fleetplan.scenario import CapacitySettings
from fleetplan.workload.lengths import LengthModel

__all__ = ["CapacityJob", "CapacityResult", "PointStats", "RunBound", "combine"]


@dataclass(frozen=True)
class PointStats:
    """Steady-state P99s at one rate: worst over seeds; ``utilization`` averaged (busy share)."""

    rate_rps: float
    ttft_p99_ms: float
    tpot_p99_ms: float
    e2e_p99_ms: float
    stable: bool
    utilization: float
    throughput_rps: float

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def checked(cls, d: Any) -> PointStats:
        """The point of a cache entry's ``d``, refused (``ValueError``) unless it has exactly
        the fields, a positive rate, finite non-negative P99s and throughput, a busy share in
        [0, 1] and a boolean ``stable``."""
        if not isinstance(d, dict) or set(d) != set(cls.__dataclass_fields__):
            raise ValueError("a point needs exactly the fields "
                             + ", ".join(cls.__dataclass_fields__))
        if not isinstance(d["stable"], bool):
            raise ValueError(f"stable(={d['stable']!r}) must be true or false")
        nums = {k: _number(d, k) for k in d if k != "stable"}
        if nums["rate_rps"] <= 0:
            raise ValueError(f"rate_rps(={nums['rate_rps']!r}) must be > 0")
        if nums["utilization"] > 1:
            raise ValueError(f"utilization(={nums['utilization']!r}) must be <= 1")
        return cls(stable=d["stable"], **nums)


def _number(d: dict[str, Any], name: str) -> float:
    v = d[name]
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"{name}(={v!r}) is not a number")
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name}(={v!r}) must be finite and >= 0")
    return float(v)


@dataclass(frozen=True)
class CapacityJob:
    """One capacity search: everything that decides its result (and the cache to use)."""

    model: str
    config: str
    params: Any                 # ReplicaParams (pydantic), kept opaque here
    lengths: LengthModel
    burstiness: float
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    e2e_p99_ms: float | None
    settings: CapacitySettings
    cache_root: str | None = None
    prefix_cache_hit: float = 0.0  # stated share of each prompt already in the prefix cache
    # the result needs the point one ladder step below capacity (``below_capacity``: the busy
    # share's chord of the ``tdp`` power model); without it a search that saw no passing rate
    # below its capacity reports none instead of running two more whole runs
    chord: bool = True

    def point_key(self, rate: float) -> dict[str, Any]:
        s = self.settings
        return {"v": code_key(), "params": self.params, "lengths": _lengths_key(self.lengths),
                "burstiness": self.burstiness, "prefix_cache_hit": self.prefix_cache_hit,
                "rate": rate,
                "run": {"duration_s": s.duration_s, "warmup_s": s.warmup_s,
                        "min_requests": s.min_requests, "seeds": s.seeds, "seed": s.seed}}

    def run_key(self, rate: float, index: int) -> dict[str, Any]:
        """The key of seed ``index``'s run alone: a one-seed point (any seed count reuses it)."""
        key = self.point_key(rate)
        key["run"] = {**key["run"], "seeds": 1, "seed": self.settings.seed + index}
        return key

    def key(self) -> dict[str, Any]:
        return {"v": code_key(), "params": self.params, "lengths": _lengths_key(self.lengths),
                "burstiness": self.burstiness, "prefix_cache_hit": self.prefix_cache_hit,
                "slo": [self.ttft_p99_ms, self.tpot_p99_ms, self.e2e_p99_ms],
                "settings": self.settings, "chord": self.chord}


def _lengths_key(lengths: LengthModel) -> dict[str, Any]:
    """The length model as it decides a run: without its ``source`` note (which names the
    class), so classes with the same lengths share their runs and capacities."""
    d = lengths.model_dump(mode="json", by_alias=True)
    d.pop("source", None)
    return d


@dataclass(frozen=True)
class CapacityResult:
    """``capacity_rps`` (0: the SLO is out of reach), the point at capacity, the best probe."""

    capacity_rps: float
    at_capacity: PointStats | None
    below_capacity: PointStats | None
    probe: PointStats
    evaluations: int

    def to_dict(self) -> dict[str, Any]:
        return {"capacity_rps": self.capacity_rps,
                "at_capacity": self.at_capacity.to_dict() if self.at_capacity else None,
                "below_capacity": (self.below_capacity.to_dict()
                                   if self.below_capacity else None),
                "probe": self.probe.to_dict(), "evaluations": self.evaluations}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CapacityResult:
        """The result of :meth:`to_dict`'s ``d``, validated (``ValueError`` when it is not one:
        see :meth:`PointStats.checked`; a capacity > 0 is the rate of its point at capacity,
        a capacity 0 has none)."""
        fields = ("capacity_rps", "at_capacity", "below_capacity", "probe", "evaluations")
        if not isinstance(d, dict) or set(d) != set(fields):
            raise ValueError("a capacity result needs exactly the fields " + ", ".join(fields))

        def pt(x: Any) -> PointStats | None:
            return None if x is None else PointStats.checked(x)

        cap = _number(d, "capacity_rps")
        ev = d["evaluations"]
        if isinstance(ev, bool) or not isinstance(ev, int) or ev < 0:
            raise ValueError(f"evaluations(={ev!r}) must be a whole number >= 0")
        at, below, probe = pt(d["at_capacity"]), pt(d["below_capacity"]), pt(d["probe"])
        if probe is None:
            raise ValueError("probe is missing")
        if (at is None) != (cap == 0) or (at is not None and at.rate_rps != cap):
            raise ValueError(f"capacity_rps(={cap!r}) is not the rate of at_capacity")
        return cls(cap, at, below, probe, ev)


@dataclass(frozen=True)
class RunBound:
    """What a run stopped early established: each P99 it proved above a limit (ms; ``None``:
    nothing known). A judgement whose limit for one of them is at most the bound is a fail
    without a run; any other needs one."""

    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    e2e_p99_ms: float | None = None

    @classmethod
    def of(cls, name: str, limit: float) -> RunBound:
        return cls(**{name: float(limit)})

    def merged(self, other: RunBound | None) -> RunBound:
        """The stronger of both bounds, figure by figure."""
        if other is None:
            return self
        vals = {}
        for f in self.__dataclass_fields__:
            a, b = getattr(self, f), getattr(other, f)
            vals[f] = b if a is None else a if b is None else max(a, b)
        return RunBound(**vals)

    def fails(self, limits: dict[str, float]) -> bool:
        """Whether the bound alone fails a run judged with these P99 limits."""
        return any(getattr(self, k) is not None and lim <= getattr(self, k)
                   for k, lim in limits.items())

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def checked(cls, d: Any) -> RunBound:
        """The bound of a cache entry's ``d``, refused (``ValueError``) unless it has exactly
        the fields, each ``None`` or a finite number >= 0, at least one a number."""
        if not isinstance(d, dict) or set(d) != set(cls.__dataclass_fields__):
            raise ValueError("a run bound needs exactly the fields "
                             + ", ".join(cls.__dataclass_fields__))
        vals = {k: None if d[k] is None else _number(d, k) for k in d}
        if all(v is None for v in vals.values()):
            raise ValueError("a run bound bounds nothing")
        return cls(**vals)


def combine(rate: float, runs: Sequence[PointStats], seeds: int) -> PointStats:
    """The point of ``seeds`` runs at one rate: worst P99s, stable only if every run is, busy
    share and throughput averaged (over ``seeds``; pass every run for a complete point)."""
    ttft = tpot = e2e = 0.0
    util = thr = 0.0
    stable = True
    for r in runs:
        stable = stable and r.stable
        ttft, tpot, e2e = max(ttft, r.ttft_p99_ms), max(tpot, r.tpot_p99_ms), max(e2e, r.e2e_p99_ms)
        util += r.utilization / seeds
        thr += r.throughput_rps / seeds
    return PointStats(rate, ttft, tpot, e2e, stable, min(util, 1.0), thr)
