"""Capacity at SLO: the highest sustained rate one replica serves with a class's P99s in SLO.

The search runs the calibrated replica model in steady state (long runs of gamma arrivals, warm-up
excluded; :func:`fleetplan.replica.protocol.steady_state`), never the benchmark protocol: the
measured "rates" are bursts of 200 requests the server drains afterwards, so sustainable rates
come out far below the nominal ones (one H100 with the 14B model "at 16 req/s" completed 7.2).

Search, for one (replica parameters, length model, burstiness, prefix-cache hit, SLO); the
class's stated ``prefix_cache_hit`` (share of each prompt already in vLLM's prefix cache) is part
of every cache key, since it changes the prefill work per request:

1. A fixed geometric ladder of rates, ``start_rps * step**i``, climbed from ``start_rps`` until a
   rate fails (or walked down until one passes, to ``min_rps``; none passing means capacity 0 and
   the lowest rate's P99s are kept to explain the SLO no candidate meets).
2. ``refine_steps`` bisections (in log rate) between the last passing and first failing rate.

A rate *passes* when every seed's run is stable (no growing queue) and the largest P99 over the
seeds is within ``(1 - slo_margin) x`` each SLO target. Seeds are the same at every rate (common
random numbers), so the P99-vs-rate curve is a fixed function and the search is monotone in the
SLO: a looser SLO never yields a lower capacity. Each simulated point is cached on disk apart
from the SLO, so searches for other SLOs (tiers, the ``slo`` frontier) reuse the ladder.

Settings: the scenario's ``capacity:`` block (:class:`fleetplan.scenario.CapacitySettings`).
Main entries: :class:`CapacityJob`, :func:`find_capacity`,
:func:`run_capacity_job` (picklable, for executors).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fleetplan.optimize.cache import DiskCache, code_key
from fleetplan.scenario import CapacitySettings
from fleetplan.workload.lengths import LengthModel


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

    def point_key(self, rate: float) -> dict[str, Any]:
        s = self.settings
        return {"v": code_key(), "params": self.params, "lengths": self.lengths,
                "burstiness": self.burstiness, "prefix_cache_hit": self.prefix_cache_hit,
                "rate": rate,
                "run": {"duration_s": s.duration_s, "warmup_s": s.warmup_s,
                        "min_requests": s.min_requests, "seeds": s.seeds, "seed": s.seed}}

    def key(self) -> dict[str, Any]:
        return {"v": code_key(), "params": self.params, "lengths": self.lengths,
                "burstiness": self.burstiness, "prefix_cache_hit": self.prefix_cache_hit,
                "slo": [self.ttft_p99_ms, self.tpot_p99_ms, self.e2e_p99_ms],
                "settings": self.settings}


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
        def pt(x: dict[str, Any] | None) -> PointStats | None:
            return PointStats(**x) if x else None

        probe = pt(d["probe"])
        assert probe is not None
        return cls(float(d["capacity_rps"]), pt(d["at_capacity"]), pt(d["below_capacity"]),
                   probe, int(d["evaluations"]))


PointFn = Callable[[CapacityJob, float], PointStats]


def simulate_point(job: CapacityJob, rate: float) -> PointStats:
    """Steady-state runs of the replica model at ``rate`` for every seed of the job."""
    from fleetplan.replica.steady import steady_state

    s = job.settings
    duration = max(s.duration_s, s.warmup_s + s.min_requests / rate)
    ttft = tpot = e2e = 0.0
    util = thr = 0.0
    stable = True
    for i in range(s.seeds):
        r = steady_state(job.params, rate=rate, lengths=job.lengths, burstiness=job.burstiness,
                         duration_s=duration, warmup_s=s.warmup_s, seed=s.seed + i,
                         prefix_cache_hit=job.prefix_cache_hit)
        stable = stable and bool(r.stable)
        ttft = max(ttft, _finite(getattr(r, "ttft_p99_ms", math.inf)))
        tpot = max(tpot, _finite(getattr(r, "tpot_p99_ms", 0.0)))
        e2e = max(e2e, _finite(getattr(r, "e2e_p99_ms", 0.0)))
        util += float(getattr(r, "utilization", 1.0)) / s.seeds
        t = float(getattr(r, "throughput_rps", rate))
        thr += (t if math.isfinite(t) else 0.0) / s.seeds
    return PointStats(rate, ttft, tpot, e2e, stable, min(util, 1.0), thr)


def _finite(v: Any) -> float:
    v = float(v)
    return v if math.isfinite(v) else 1e12


def _passes(job: CapacityJob, p: PointStats) -> bool:
    keep = 1.0 - job.settings.slo_margin
    if not p.stable:
        return False
    for target, seen in ((job.ttft_p99_ms, p.ttft_p99_ms), (job.tpot_p99_ms, p.tpot_p99_ms),
                         (job.e2e_p99_ms, p.e2e_p99_ms)):
        if target is not None and seen > keep * target:
            return False
    return True


def find_capacity(job: CapacityJob, *, cache: DiskCache | None = None,
                  point_fn: PointFn = simulate_point) -> CapacityResult:
    """The capacity at SLO of ``job`` (cached on disk by every input; see module docstring)."""
    cache = cache if cache is not None else DiskCache(job.cache_root)
    hit = cache.get("capacity", job.key())
    if hit is not None:
        return CapacityResult.from_dict(hit)
    s = job.settings
    evaluations = 0

    def point(rate: float) -> PointStats:
        nonlocal evaluations
        rate = float(f"{rate:.6g}")
        got = cache.get("point", job.point_key(rate))
        if got is not None:
            return PointStats(**got)
        evaluations += 1
        p = point_fn(job, rate)
        cache.put("point", job.point_key(rate), p.to_dict())
        return p

    def ladder(i: int) -> float:
        return s.start_rps * s.step ** i

    first = point(ladder(0))
    lo_i = 0
    lowest = first
    if _passes(job, first):
        i = 0
        good, bad = first, None
        while ladder(i + 1) <= s.max_rps:
            i += 1
            p = point(ladder(i))
            if not _passes(job, p):
                bad = p
                break
            good = p
    else:
        i, good, bad = 0, None, first
        while ladder(i - 1) >= s.min_rps * (1 - 1e-9):
            i -= 1
            lo_i = i
            p = point(ladder(i))
            lowest = p
            if _passes(job, p):
                good = p
                break
            bad = p
    below = None
    if good is not None and bad is not None:
        lo, hi = good, bad
        for _ in range(s.refine_steps):
            mid = point(math.sqrt(lo.rate_rps * hi.rate_rps))
            if _passes(job, mid):
                below, lo = lo, mid
            else:
                hi = mid
        good = lo
    if good is not None and below is None and good.rate_rps > ladder(lo_i):
        below = point(good.rate_rps / s.step)
    result = CapacityResult(good.rate_rps if good else 0.0, good, below, lowest, evaluations)
    cache.put("capacity", job.key(), result.to_dict())
    return result


def run_capacity_job(job: CapacityJob) -> dict[str, Any]:
    """Executor entry (top level, picklable): the result as a dict."""
    return find_capacity(job).to_dict()
