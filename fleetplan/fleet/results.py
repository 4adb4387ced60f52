"""Results of a fleet simulation: per class, per pool and fleet-wide, with confidence intervals.

Main entries: :class:`SimulationResult` (``to_dict()`` is the JSON contract of
``fleetplan simulate --format json``; ``to_frame()`` one row per class) and :func:`aggregate`
(replications -> result). Percentiles are computed per replication and averaged; the 95%
confidence interval of P99 TTFT is Student's t over replications, or with one replication over
five consecutive batches of the measured window (batch means) when each batch holds at least
200 requests, else absent (``null``); its low end is never below 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import stdtrit

from fleetplan._notebook import NotebookRepr
from fleetplan._notes import note_detail
from fleetplan.errors import InputError
from fleetplan.fleet.accounting import Account
from fleetplan.fleet.pools import PoolModel
from fleetplan.fleet.sim import Replication
from fleetplan.scenario import Scenario

BATCHES = 5
MIN_BATCH = 200


class SimStatus(StrEnum):
    """Outcome of a simulation: every class within its SLO, some class missing, or overload."""

    met = "met"
    missed = "missed"
    overloaded = "overloaded"
    no_slo = "no-slo"


def share_verdict(met: bool | None, within: bool, *, overloaded: bool | None = None,
                  unfinished: bool | None = None) -> str:
    """A class's verdict on one pool's requests (:class:`PoolShare`), in words: "met";
    "missed" (a P99 beyond its target, ``within`` false); or, with every P99 it was judged on
    within, why it failed all the same: the pool "overloaded" (its backlog grew) or "requests
    unfinished" (left when the simulation ended). ``overloaded`` / ``unfinished`` ``None``:
    not known; ``unfinished`` ``False`` with no overload: "missed" (what failed it is not in
    the figures at hand)."""
    if met:
        return "met"
    if not within:
        return "missed"
    if overloaded:
        return "overloaded"
    return "missed" if unfinished is False else "requests unfinished"


@dataclass(frozen=True)
class PoolShare:
    """One class's requests in one pool: their P99s (means over the replications in which the
    pool served the class, as the class's own figures) and whether that share alone meets the
    class's SLO: every request finished, the pool not overloaded, every P99 within its target.
    Under planned routing a pool's share does not depend on the other pools, and a class's
    P99 misses its target only if some pool's share misses it (more than 1 % of the class's
    requests above a target means more than 1 % of some pool's)."""

    ttft_p99_ms: float
    tpot_p99_ms: float
    e2e_p99_ms: float
    requests: int
    unfinished: int
    met: bool | None


@dataclass(frozen=True)
class SimulatedClass:
    """One traffic class in a simulation: its measured latency percentiles (with the P99's
    confidence interval over replications), SLO verdict, goodput and pools. Not a plan's
    per-class verdict (:class:`fleetplan.optimize.plan.SimulatedClass`, public name
    ``fleetplan.PlannedClass``)."""

    name: str
    requests: int
    rate_rps: float
    ttft_p50_ms: float
    ttft_p90_ms: float
    ttft_p99_ms: float
    ttft_p99_ci_ms: tuple[float | None, float | None]
    tpot_p50_ms: float
    e2e_p99_ms: float
    slo_ttft_p99_ms: float | None
    slo_met: bool | None
    goodput_fraction: float | None
    # beside the binding fields
    ttft_p99_ci_method: str
    ttft_p99_reps_ms: tuple[float, ...]
    tpot_p99_ms: float
    e2e_p50_ms: float
    slo_tpot_p99_ms: float | None
    slo_e2e_p99_ms: float | None
    unfinished: int
    dropped: int
    pools: dict[str, float] = field(default_factory=dict)
    # with a reliability block only (absent from the JSON otherwise)
    requests_retried: int | None = None
    requests_lost: int | None = None
    # the class's figures in each pool that served it (pool label -> PoolShare): which pool
    # misses; the closed loop blames only the pools that missed (fleetplan.optimize.evidence)
    by_pool: dict[str, PoolShare] = field(default_factory=dict)


ClassResult = SimulatedClass  # its earlier name, which the plan's record bore too; kept one release


@dataclass(frozen=True)
class PoolResult:
    config: str
    count: int
    region: str
    utilization: float
    requests: int
    # beside the binding fields
    label: str
    gpus: int
    overloaded: bool
    completed_rps: float
    calibrated: bool
    params_source: str
    context_window: int
    price_usd_per_gpu_hour: float
    price_source: str
    power_w: float
    power_source: str
    # the scenario's power model (activity | tdp), the share it scaled with (power activity
    # or busy share) and the mean watts per GPU that gave power_w
    power_model: str
    power_activity: float
    power_share: float
    power_w_per_gpu: float
    grid_g_per_kwh: float
    grid_source: str
    embodied_source: str
    cost_per_hour_usd: float
    energy_kwh_per_hour: float
    g_co2_operational_per_hour: float
    g_co2_embodied_per_hour: float
    availability: float | None = None  # share of replica-time up (reliability block only)


@dataclass(frozen=True)
class SimulationResult(NotebookRepr):
    """A simulated scenario; :meth:`to_dict` gives the binding JSON shape."""

    status: SimStatus
    model: str
    routing: str
    classes: tuple[SimulatedClass, ...]
    pools: tuple[PoolResult, ...]
    account: Account
    overloaded: bool
    offered_rps: float
    sustainable_rps: float | None
    seed: int
    replications: int
    duration_s: float
    warmup_s: float
    notes: tuple[str, ...]
    # a scenario with several models: each model's totals (fleetplan.fleet.by_model), which add
    # up to the fleet's; empty for one model (its JSON then has no ``models``)
    models: tuple[Any, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract (binding names first, extra fields beside them)."""
        out = self._fields()
        if self.models:
            out["models"] = [m.to_dict() for m in self.models]
        return out

    def _fields(self) -> dict[str, Any]:
        a = self.account
        return {
            "classes": [_class_dict(c) for c in self.classes],
            "pools": [_pool_dict(p) for p in self.pools],
            "cost_per_hour_usd": a.cost_per_hour_usd,
            "cost_per_mtok_usd": _num(a.cost_per_mtok_usd),
            "energy_kwh_per_hour": a.energy_kwh_per_hour,
            "g_co2_per_hour": a.g_co2_per_hour,
            "g_co2_per_mtok": _num(a.g_co2_per_mtok),
            "overloaded": self.overloaded,
            "seed": self.seed,
            "status": self.status.value,
            "model": self.model,
            "routing": self.routing,
            "replications": self.replications,
            "duration_s": self.duration_s,
            "warmup_s": self.warmup_s,
            "tokens_per_s": a.tokens_per_hour / 3600.0,
            "g_co2_operational_per_hour": a.g_co2_operational_per_hour,
            "g_co2_embodied_per_hour": a.g_co2_embodied_per_hour,
            "g_co2_operational_per_mtok": _num(a.per_mtok(a.g_co2_operational_per_hour)),
            "g_co2_embodied_per_mtok": _num(a.per_mtok(a.g_co2_embodied_per_hour)),
            "offered_rps": self.offered_rps,
            "sustainable_rps": self.sustainable_rps,
            "calibrated": all(p.calibrated for p in self.pools),
            "notes": list(self.notes),
            # the same notes with their topic, pools, level and priority (fleetplan._notes)
            "notes_detail": [note_detail(n) for n in self.notes],
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per class (the CI split into ``ttft_p99_ci_lo_ms`` / ``_hi_ms``)."""
        rows = []
        for c in self.classes:
            d = _class_dict(c)
            lo, hi = d.pop("ttft_p99_ci_ms")
            d.pop("ttft_p99_reps_ms")
            d.pop("pools")
            d.pop("by_pool")
            d["ttft_p99_ci_lo_ms"], d["ttft_p99_ci_hi_ms"] = lo, hi
            rows.append(d)
        return pd.DataFrame(rows)

    def pools_frame(self) -> pd.DataFrame:
        """One row per pool."""
        return pd.DataFrame([_pool_dict(p) for p in self.pools])

    def plot(self, ax: Any = None, *, kind: str = "latency") -> Any:
        """``latency``: each class's simulated P99 TTFT (95% interval) against its SLO;
        ``fleet``: the fleet's composition. Returns the matplotlib Axes."""
        from fleetplan.viz import plot_class_latency, plot_fleet_composition

        if kind == "latency":
            return plot_class_latency(self.to_frame(), ax=ax)
        if kind == "fleet":
            return plot_fleet_composition(self.pools_frame(), ax=ax)
        raise InputError(f"plot kind {kind!r}: expected latency or fleet")

    def _summary(self) -> str:
        a = self.account
        met = all(c.slo_met is not False for c in self.classes)
        return (f"{self.model}: {self.status.value}, "
                f"{'every SLO met' if met else 'SLO missed'}; ${a.cost_per_hour_usd:.2f}/h, "
                f"{_num(a.g_co2_per_mtok) or float('nan'):.1f} g CO2e/1M tokens "
                f"(seed {self.seed}, {self.replications} replication(s))")


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


_CHURN_FIELDS = ("requests_retried", "requests_lost", "availability")


def _pool_dict(p: PoolResult) -> dict[str, Any]:
    d = asdict(p)
    if d["availability"] is None:
        del d["availability"]
    return d


def _class_dict(c: SimulatedClass) -> dict[str, Any]:
    d = asdict(c)
    d["by_pool"] = {label: {k: _num(v) if isinstance(v, float) else v for k, v in share.items()}
                    for label, share in d["by_pool"].items()}
    for k in _CHURN_FIELDS:
        if d.get(k, 0) is None:
            del d[k]
    d["ttft_p99_ci_ms"] = list(c.ttft_p99_ci_ms)
    d["ttft_p99_reps_ms"] = [_num(x) for x in c.ttft_p99_reps_ms]
    for k, v in d.items():
        if isinstance(v, float):
            d[k] = _num(v)
    return d


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if x.size else math.nan


def p99_ci(reps: Sequence[float], batches: Sequence[float]) -> tuple[tuple[float | None,
                                                                         float | None], str]:
    """95% CI of the mean of ``reps`` (t over replications), else of ``batches``. Its low end
    is at least 0: a P99 is not negative, so the part of a wide t interval below 0 (a few
    replications far apart) holds no possible value and is cut off."""
    for values, how in ((reps, "t over replications"), (batches, "t over 5 batch means")):
        v = np.asarray([x for x in values if math.isfinite(x)], dtype=float)
        if v.size >= 2:
            half = float(stdtrit(v.size - 1, 0.975) * v.std(ddof=1) / math.sqrt(v.size))
            m = float(v.mean())
            return (max(m - half, 0.0), m + half), how
    return (None, None), ("none: one replication too short for batch means" if not reps
                          else "none: fewer than 2 replications with requests")


def _batch_p99(rep: Replication, mask: np.ndarray) -> list[float]:
    idx = np.flatnonzero(mask)
    if idx.size < BATCHES * MIN_BATCH:
        return []
    return [_pct(rep.ttft_s[part], 99) * 1e3 for part in np.array_split(idx, BATCHES)]


def class_result(scenario: Scenario, c: int, reps: Sequence[Replication],
                 pools: Sequence[PoolModel], dropped: int,
                 pools_overloaded: Sequence[bool], *, churn: bool = False) -> SimulatedClass:
    """Statistics of class ``c`` over the replications (``churn``: count retried and lost
    requests; a lost request is censored in the latencies, not counted as unfinished)."""
    spec = scenario.classes[c]
    slo = spec.slo
    per: dict[str, list[float]] = {k: [] for k in
                                   ("t50", "t90", "t99", "p50", "p99", "e50", "e99", "rate")}
    good = total = unfinished = retried = lost = 0
    routed = np.zeros(len(pools))
    batches: list[float] = []
    # per pool: its share's P99s in each replication (ttft, tpot, e2e) and unfinished requests
    shares: dict[int, list[tuple[float, float, float]]] = {}
    share_unfinished: dict[int, int] = {}
    for rep in reps:
        m = rep.cls == c
        _pool_p99s(rep, m, shares, share_unfinished)
        ttft, tpot, e2e = rep.ttft_s[m] * 1e3, rep.tpot_s[m] * 1e3, rep.e2e_s[m] * 1e3
        fin = rep.finished[m]
        tp = tpot[~np.isnan(tpot)]
        for k, arr, q in (("t50", ttft, 50), ("t90", ttft, 90), ("t99", ttft, 99),
                          ("p50", tp, 50), ("p99", tp, 99), ("e50", e2e, 50), ("e99", e2e, 99)):
            per[k].append(_pct(arr, q))
        per["rate"].append(int(m.sum()) / rep.window_s)
        total += int(m.sum())
        gone = rep.lost[m] if rep.lost is not None else np.zeros(fin.size, dtype=bool)
        unfinished += int((~fin & ~gone).sum())
        lost += int(gone.sum())
        if rep.retried is not None:
            retried += int(rep.retried[m].sum())
        routed += np.bincount(rep.pool[m], minlength=len(pools))
        if slo is not None:
            ok = fin.copy()
            if slo.ttft_p99_ms is not None:
                ok &= ttft <= slo.ttft_p99_ms
            if slo.tpot_p99_ms is not None:
                ok &= np.nan_to_num(tpot, nan=0.0) <= slo.tpot_p99_ms
            if slo.e2e_p99_ms is not None:
                ok &= e2e <= slo.e2e_p99_ms
            good += int(ok.sum())
        if len(reps) == 1:
            batches = _batch_p99(rep, m)
    mean = {k: float(np.mean(v)) if v else math.nan for k, v in per.items()}
    ci, how = p99_ci(per["t99"] if len(reps) > 1 else [], batches)
    met: bool | None = None
    if slo is not None and total > 0:
        used = [p for p in range(len(pools)) if routed[p] > 0]
        met = total > 0 and unfinished == 0 and not any(pools_overloaded[p] for p in used)
        for target, value in ((slo.ttft_p99_ms, mean["t99"]), (slo.tpot_p99_ms, mean["p99"]),
                              (slo.e2e_p99_ms, mean["e99"])):
            if target is not None and not (value <= target):
                met = False
    share = {pools[p].label: float(routed[p] / total) for p in range(len(pools))
             if total and routed[p] > 0}
    by_pool = {pools[p].label: _pool_share(slo, rows, int(routed[p]), share_unfinished[p],
                                           pools_overloaded[p])
               for p, rows in sorted(shares.items())}
    return SimulatedClass(
        name=spec.name, requests=total, rate_rps=mean["rate"],
        ttft_p50_ms=mean["t50"], ttft_p90_ms=mean["t90"], ttft_p99_ms=mean["t99"],
        ttft_p99_ci_ms=ci, tpot_p50_ms=mean["p50"], e2e_p99_ms=mean["e99"],
        slo_ttft_p99_ms=slo.ttft_p99_ms if slo else None, slo_met=met,
        goodput_fraction=(good / total if total else None) if slo is not None else None,
        ttft_p99_ci_method=how, ttft_p99_reps_ms=tuple(per["t99"]),
        tpot_p99_ms=mean["p99"], e2e_p50_ms=mean["e50"],
        slo_tpot_p99_ms=slo.tpot_p99_ms if slo else None,
        slo_e2e_p99_ms=slo.e2e_p99_ms if slo else None,
        unfinished=unfinished, dropped=dropped, pools=share,
        requests_retried=retried if churn else None, requests_lost=lost if churn else None,
        by_pool=by_pool,
    )


def _pool_p99s(rep: Replication, m: np.ndarray, shares: dict[int, list[tuple[float, float,
                                                                                  float]]],
               unfinished: dict[int, int]) -> None:
    """Add one replication's P99s (ms) of class mask ``m`` in each pool that served it."""
    gone = rep.lost if rep.lost is not None else np.zeros(m.size, dtype=bool)
    for p in np.unique(rep.pool[m]):
        mp = m & (rep.pool == p)
        tpot = rep.tpot_s[mp]
        shares.setdefault(int(p), []).append(
            (_pct(rep.ttft_s[mp] * 1e3, 99), _pct(tpot[~np.isnan(tpot)] * 1e3, 99),
             _pct(rep.e2e_s[mp] * 1e3, 99)))
        unfinished[int(p)] = unfinished.get(int(p), 0) + int((~rep.finished[mp] & ~gone[mp]).sum())


def _pool_share(slo: Any, rows: list[tuple[float, float, float]], requests: int,
                unfinished: int, overloaded: bool) -> PoolShare:
    """A pool's share of a class (:class:`PoolShare`) from its per-replication P99s."""
    ttft, tpot, e2e = (float(np.nanmean(v)) if not all(math.isnan(x) for x in v) else math.nan
                       for v in zip(*rows, strict=True))
    met: bool | None = None
    if slo is not None:
        met = unfinished == 0 and not overloaded and all(
            target is None or value <= target
            for target, value in ((slo.ttft_p99_ms, ttft), (slo.tpot_p99_ms, tpot),
                                  (slo.e2e_p99_ms, e2e)))
    return PoolShare(ttft, tpot, e2e, requests, unfinished, met)
