"""Checking a MILP answer by simulation: the planned fleet, planned routing, several seeds.

A plan is turned back into scenarios, one per distinct hour of the plan (one for a steady plan,
up to 24 for a diurnal one, each simulated at that hour's rates as steady traffic): the fleet the
MILP chose, ``routing: planned`` with each class's split. Every class must meet its SLO in the
fleet simulator (:func:`fleetplan.fleet.simulate`, ``sim.replications`` seeds, at least
:data:`MIN_REPLICATIONS`), and the fleet must not be overloaded.

Main entries: :func:`verify_plan` (every hour of a plan on an executor: the hours in parallel,
or a one-hour plan's replications in parallel; the same checks as one after another),
:func:`hour_scenarios` and :func:`run_verification` (picklable, for executors; it reads the
typed :class:`fleetplan.fleet.results.SimulationResult`, not its JSON dict), returning
:class:`HourCheck` records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

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
class HourCheck:
    """What the simulation of one hour of a plan found."""

    hour: int
    classes: tuple[ClassCheck, ...]
    overloaded: bool
    g_co2_per_hour: float
    tokens_per_hour: float
    utilization: dict[str, float] = field(default_factory=dict)

    @property
    def met(self) -> bool:
        return not self.overloaded and all(c.met for c in self.classes)


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


def verify_plan(scenario: Scenario, problem: PlanProblem, sol: MilpSolution, executor: Any,
                memo: dict[str, HourCheck] | None = None) -> list[HourCheck]:
    """One :class:`HourCheck` per hour of ``sol``, simulated on ``executor``: several hours go
    out as one item each; a single hour sends its replications out instead (each replication
    is independent; :func:`fleetplan.fleet.simulate` with ``executor``). Results do not depend
    on the executor or its worker count.

    ``memo`` (hour scenario's input hash -> its check), kept by the caller across rounds: an
    hour whose scenario (fleet, split, rates, seeds) was simulated before is not simulated
    again (a simulation is a function of its scenario), nor are two equal hours of one plan."""
    from fleetplan.optimize.cache import input_hash

    memo = {} if memo is None else memo
    items = hour_scenarios(scenario, problem, sol)
    keys = [input_hash(sc) for _h, sc in items]
    todo: dict[str, tuple[int, Scenario]] = {}
    for key, item in zip(keys, items, strict=True):
        if key not in memo:
            todo.setdefault(key, item)
    runs = list(todo.items())
    if len(runs) == 1:
        done = [run_verification(runs[0][1], executor)]
    else:
        done = list(executor.map(run_verification, [item for _k, item in runs])) if runs else []
    for (key, _item), check in zip(runs, done, strict=True):
        memo[key] = check
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
    return HourCheck(hour, tuple(classes), res.overloaded, g_h, tokens, util)
