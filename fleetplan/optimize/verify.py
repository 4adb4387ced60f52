"""Checking a MILP answer by simulation: the planned fleet, planned routing, several seeds.

A plan is turned back into scenarios, one per distinct hour of the plan (one for a steady plan,
up to 24 for a diurnal one, each simulated at that hour's rates as steady traffic): the fleet the
MILP chose, ``routing: planned`` with each class's split. Every class must meet its SLO in the
fleet simulator (:func:`fleetplan.fleet.simulate`, ``sim.replications`` seeds, at least
:data:`MIN_REPLICATIONS`), and the fleet must not be overloaded.

Main entries: :func:`verify_plan` (every hour of a plan on an executor: the hours in parallel,
or a one-hour plan's replications in parallel, a replication left over in parts of pools,
:mod:`fleetplan.fleet.parts`; the same checks as one after another),
:func:`hour_scenarios` and :func:`run_verification` (picklable, for executors; it reads the
typed :class:`fleetplan.fleet.results.SimulationResult`, not its JSON dict), returning
:class:`HourCheck` records.

Checks are cached on disk (namespace ``verification`` of :class:`fleetplan.optimize.cache.
DiskCache`) when the caller gives a cache: a simulation is a function of its inputs, so a
solve run again on the same scenario (a notebook re-executed, a CI job) replays its rounds from
the cache instead of simulating each plan again. The key (:func:`check_key`) holds every input
the fleet simulator reads: the hour's scenario (fleet, split, rates, seeds, settings), each
pool as :func:`fleetplan.fleet.pools.build_pools` resolves it from the scenario's catalog,
calibration and profile store (replica parameters, price, power model, grid intensity), the
SHA-256 of each trace file a class reads, and :func:`fleetplan.optimize.cache.package_key`
(the package's whole source). A cached check is validated when read (:meth:`HourCheck.checked`)
and, when it fails, simulated again and rewritten; the cache lists it in ``rejected``, which
:func:`fleetplan.optimize.solve.solve` reports in one warning line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from fleetplan.optimize.cache import DiskCache
from fleetplan.optimize.milp import MilpSolution
from fleetplan.optimize.plan import FleetEntry
from fleetplan.optimize.problem import PlanProblem
from fleetplan.scenario import Scenario

MIN_REPLICATIONS = 3


@dataclass(frozen=True)
class ClassCheck:
    name: str
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    e2e_p99_ms: float | None
    met: bool
    ttft_p99_ci_ms: tuple[float, float] | None = None


@dataclass(frozen=True)
class PoolCheck:
    """One pool of a simulated hour: the pool's name as the plan's split names it
    (``config@region/tier``), whether it was overloaded, and each class it served judged on
    that pool's requests alone (:class:`fleetplan.fleet.results.PoolShare`; ``ttft_p99_ci_ms``
    is not computed per pool)."""

    pool: str
    overloaded: bool
    classes: tuple[ClassCheck, ...]


@dataclass(frozen=True)
class HourCheck:
    """What the simulation of one hour of a plan found; ``pools``: per pool, the classes it
    served judged on its own requests (empty where not known: the closed loop then reads the
    classes only)."""

    hour: int
    classes: tuple[ClassCheck, ...]
    overloaded: bool
    g_co2_per_hour: float
    tokens_per_hour: float
    utilization: dict[str, float] = field(default_factory=dict)
    pools: tuple[PoolCheck, ...] = ()

    def pool_class(self, pool: str, name: str) -> ClassCheck | None:
        """Class ``name`` judged on pool ``pool``'s requests alone, or ``None`` if not known."""
        for pc in self.pools:
            if pc.pool == pool:
                return next((c for c in pc.classes if c.name == name), None)
        return None

    def pool_overloaded(self, pool: str) -> bool | None:
        """Whether pool ``pool`` was overloaded, or ``None`` if not known."""
        return next((pc.overloaded for pc in self.pools if pc.pool == pool), None)

    @property
    def met(self) -> bool:
        return not self.overloaded and all(c.met for c in self.classes)

    def to_dict(self) -> dict[str, Any]:
        return {"hour": self.hour, "overloaded": self.overloaded,
                "g_co2_per_hour": self.g_co2_per_hour, "tokens_per_hour": self.tokens_per_hour,
                "utilization": dict(self.utilization),
                "classes": [_class_dict(c) for c in self.classes],
                "pools": [{"pool": pc.pool, "overloaded": pc.overloaded,
                           "classes": [_class_dict(c) for c in pc.classes]}
                          for pc in self.pools]}

    @classmethod
    def checked(cls, d: Any) -> HourCheck:
        """The check of a cache entry's ``d`` (:meth:`to_dict`), refused (``ValueError``) unless
        every field is there with its type: whole hour >= 0, booleans, finite non-negative
        figures (a latency may be ``None``: no request finished), a busy share in [0, 1], a
        confidence interval of two finite numbers (an entry written before its low end was
        cut at 0 may hold a negative one)."""
        fields = {"hour", "overloaded", "g_co2_per_hour", "tokens_per_hour", "utilization",
                  "classes", "pools"}
        if not isinstance(d, dict) or set(d) != fields:
            raise ValueError("a check needs exactly the fields " + ", ".join(sorted(fields)))
        hour = d["hour"]
        if isinstance(hour, bool) or not isinstance(hour, int) or hour < 0:
            raise ValueError(f"hour(={hour!r}) must be a whole number >= 0")
        util = d["utilization"]
        if not isinstance(util, dict) or not all(isinstance(k, str) for k in util):
            raise ValueError("utilization must map pool names to busy shares")
        if not isinstance(d["classes"], list):
            raise ValueError("classes must be a list")
        classes = tuple(_class_check(c) for c in d["classes"])
        if not isinstance(d["pools"], list):
            raise ValueError("pools must be a list")
        pools = tuple(_pool_check(pc) for pc in d["pools"])
        return cls(hour, classes, _flag(d, "overloaded"), _figure(d, "g_co2_per_hour"),
                   _figure(d, "tokens_per_hour"),
                   {k: _figure({f"utilization[{k}]": util[k]}, f"utilization[{k}]", 1.0)
                    for k in sorted(util)}, pools)


def _flag(d: dict[str, Any], name: str) -> bool:
    if not isinstance(d[name], bool):
        raise ValueError(f"{name}(={d[name]!r}) must be true or false")
    return bool(d[name])


def _figure(d: dict[str, Any], name: str, top: float = math.inf,
            optional: bool = False) -> Any:
    v = d[name]
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) \
            or not 0 <= v <= top:
        raise ValueError(f"{name}(={v!r}) must be a finite number within [0, {top:g}]")
    return float(v)


def _class_dict(c: ClassCheck) -> dict[str, Any]:
    return {"name": c.name, "ttft_p99_ms": c.ttft_p99_ms, "tpot_p99_ms": c.tpot_p99_ms,
            "e2e_p99_ms": c.e2e_p99_ms, "met": c.met,
            "ttft_p99_ci_ms": list(c.ttft_p99_ci_ms) if c.ttft_p99_ci_ms else None}


def _pool_check(d: Any) -> PoolCheck:
    if not isinstance(d, dict) or set(d) != {"pool", "overloaded", "classes"} \
            or not isinstance(d["pool"], str) or not isinstance(d["classes"], list):
        raise ValueError("a pool check needs exactly a pool name, overloaded and a list of "
                         "classes")
    return PoolCheck(d["pool"], _flag(d, "overloaded"),
                     tuple(_class_check(c) for c in d["classes"]))


def _class_check(c: Any) -> ClassCheck:
    fields = {"name", "ttft_p99_ms", "tpot_p99_ms", "e2e_p99_ms", "met", "ttft_p99_ci_ms"}
    if not isinstance(c, dict) or set(c) != fields or not isinstance(c["name"], str):
        raise ValueError("a class check needs a name and exactly the fields "
                         + ", ".join(sorted(fields)))
    ci = c["ttft_p99_ci_ms"]
    if ci is not None:
        if not isinstance(ci, list) or len(ci) != 2:
            raise ValueError(f"ttft_p99_ci_ms(={ci!r}) must be a pair")
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                   for v in ci) or ci[0] > ci[1]:
            raise ValueError(f"ttft_p99_ci_ms(={ci!r}) must be two finite numbers, low first")
        ci = (float(ci[0]), float(ci[1]))
    return ClassCheck(c["name"], _figure(c, "ttft_p99_ms", optional=True),
                      _figure(c, "tpot_p99_ms", optional=True),
                      _figure(c, "e2e_p99_ms", optional=True), _flag(c, "met"), ci)


def plan_fleet(sol: MilpSolution, hour: int) -> list[dict[str, Any]]:
    """The fleet of ``hour`` as scenario pools: one per (configuration, region, tier)."""
    return [FleetEntry.of_pool(name, n, sol.tiers[(name, hh)]).scenario_pool()
            for (name, hh), n in sorted(sol.counts.items()) if hh == hour and n > 0]


def hour_scenarios(scenario: Scenario, problem: PlanProblem,
                   sol: MilpSolution) -> list[tuple[int, Scenario]]:
    """One scenario per hour of the plan to simulate (the fleet and splits of that hour)."""
    from fleetplan.fleet.simulate import planned_scenario

    out = []
    for h in range(sol.hours):
        splits: dict[str, dict[str, float]] = {}
        rates: dict[str, float] = {}
        for i, c in enumerate(scenario.classes):
            rate = problem.demands[i].rates_rps[h]
            if rate <= 0:
                continue
            rates[c.name] = float(rate)
            splits[c.name] = {k: sh for (name, k, hh), sh in sol.shares.items()
                              if name == c.name and hh == h and sh > 0}
        variant = planned_scenario(scenario, plan_fleet(sol, h), splits, rates=rates,
                                   min_replications=MIN_REPLICATIONS, limits=False)
        out.append((h, variant))
    return out


def _finite(v: float | None) -> float | None:
    return float(v) if v is not None and math.isfinite(v) else None


def check_key(scenario: Scenario) -> dict[str, Any]:
    """Every input that decides the simulation of ``scenario`` (an hour of a plan, with its
    fleet): the cache key of its check (module docstring)."""
    import hashlib
    from pathlib import Path

    from fleetplan.fleet.pools import build_pools
    from fleetplan.optimize.cache import package_key

    assert scenario.fleet is not None
    traces = {}
    for c in scenario.classes:
        if c.trace is not None and c.trace.file not in traces:
            traces[c.trace.file] = hashlib.sha256(Path(c.trace.file).read_bytes()).hexdigest()
    return {"v": package_key(), "scenario": scenario,
            "pools": build_pools(scenario, scenario.fleet), "traces": traces}


def verify_plan(scenario: Scenario, problem: PlanProblem, sol: MilpSolution, executor: Any,
                memo: dict[str, HourCheck] | None = None,
                cache: DiskCache | None = None) -> list[HourCheck]:
    """One :class:`HourCheck` per hour of ``sol``, simulated on ``executor``: several hours go
    out as one item each; a single hour sends its replications out instead (each replication
    is independent; :func:`fleetplan.fleet.simulate` with ``executor``). Results do not depend
    on the executor or its worker count.

    ``memo`` (hour scenario's input hash -> its check), kept by the caller across rounds: an
    hour whose scenario (fleet, split, rates, seeds) was simulated before is not simulated
    again (a simulation is a function of its scenario), nor are two equal hours of one plan.
    ``cache``: a disk cache whose checks (module docstring) stand in for simulations and which
    receives the new ones; ``None``: none."""
    from fleetplan.optimize.cache import input_hash

    memo = {} if memo is None else memo
    items = hour_scenarios(scenario, problem, sol)
    keys = [input_hash(sc) for _h, sc in items]
    todo: dict[str, tuple[int, Scenario]] = {}
    stored: dict[str, dict[str, Any]] = {}
    for key, item in zip(keys, items, strict=True):
        if key in memo or key in todo:
            continue
        if cache is not None:
            try:
                stored[key] = check_key(item[1])
            except OSError:  # a trace that cannot be read: the simulation names it
                pass
            else:
                hit = cache.get("verification", stored[key], HourCheck.checked)
                if hit is not None:
                    memo[key] = HourCheck.checked(hit)
                    continue
        todo[key] = item
    runs = list(todo.items())
    if len(runs) == 1:
        done = [run_verification(runs[0][1], executor)]
    else:
        done = list(executor.map(run_verification, [item for _k, item in runs])) if runs else []
    for (key, _item), check in zip(runs, done, strict=True):
        memo[key] = check
        if cache is not None and key in stored:
            cache.put("verification", stored[key], check.to_dict())
    return [replace(memo[key], hour=h) for (h, _sc), key in zip(items, keys, strict=True)]


def run_verification(item: tuple[int, Scenario], executor: Any = None) -> HourCheck:
    """Simulate one hour's scenario (executor entry: top level, picklable); ``executor``: where
    its replications run (default: one after another, here)."""
    from fleetplan.fleet import simulate

    hour, scenario = item
    res = simulate(scenario, executor=executor)
    classes = []
    for c in res.classes:
        lo, hi = c.ttft_p99_ci_ms
        ci = (float(lo), float(hi)) if lo is not None and hi is not None else None
        classes.append(ClassCheck(
            name=c.name, ttft_p99_ms=_finite(c.ttft_p99_ms), tpot_p99_ms=_finite(c.tpot_p99_ms),
            e2e_p99_ms=_finite(c.e2e_p99_ms), met=bool(c.slo_met), ttft_p99_ci_ms=ci))
    g_h = _finite(res.account.g_co2_per_hour) or 0.0
    g_mtok = _finite(res.account.g_co2_per_mtok)
    tokens = g_h / g_mtok * 1e6 if g_mtok else 0.0
    util = {f"{p.config}@{p.region}": float(p.utilization or 0.0) for p in res.pools}
    served: dict[str, list[ClassCheck]] = {}
    for c in res.classes:
        for label, sh in c.by_pool.items():
            served.setdefault(label, []).append(ClassCheck(
                name=c.name, ttft_p99_ms=_finite(sh.ttft_p99_ms),
                tpot_p99_ms=_finite(sh.tpot_p99_ms), e2e_p99_ms=_finite(sh.e2e_p99_ms),
                met=bool(sh.met)))
    pools = tuple(PoolCheck(p.label, bool(p.overloaded), tuple(served.get(p.label, ())))
                  for p in res.pools)
    return HourCheck(hour, tuple(classes), res.overloaded, g_h, tokens, util, pools)
