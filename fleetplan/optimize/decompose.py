"""Exact decompositions of the diurnal MILP, so 24-hour plans solve in seconds.

The monolithic 24-hour model (every hour's shares, tiers and counts in one MILP) is correct but
slow: its LP relaxation is weak in the rounding of replica counts, and the solver has to close
that gap for 24 hours at once. Two of the three commitment modes decompose exactly:

- ``per-hour``: hours share nothing (each hour has its own fleet and tiers), so the day is 24
  independent one-hour MILPs, solved in parallel threads; the day is within the gap when every
  hour is. A daily carbon cap couples the hours: then the monolithic model is solved.
- ``fixed-peak``: one fleet (and one tier per pool) for every hour. Hour generation: solve the
  model on a few hours (a relaxation: its optimum bounds the day's from below), check every
  other hour with the fleet fixed (an LP), add the busiest violated hour, repeat. The final fleet
  serves every hour at the relaxation's cost, so it is optimal for the day within the gap.
- ``base-plus-on-demand`` (and anything with a daily carbon cap): the monolithic model.

Main entry: :func:`solve_plan` (what :func:`fleetplan.optimize.milp.solve_problem` calls).
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from fleetplan.optimize.milp import MilpSolution, MilpStatus, build_model, solve_model
from fleetplan.optimize.problem import CommitmentMode, PlanProblem
from fleetplan.optimize.solvers import SolverSettings

_RANK = {MilpStatus.optimal: 0, MilpStatus.feasible: 1, MilpStatus.no_solution: 2,
         MilpStatus.infeasible: 3}


def _monolithic(problem: PlanProblem, settings: SolverSettings, objective: str,
                drop: Collection[str]) -> MilpSolution:
    return solve_model(build_model(problem, objective=objective, drop=drop), settings)


def _coupled(problem: PlanProblem, drop: Collection[str]) -> bool:
    lim = problem.limits
    return "carbon" not in drop and (lim.max_g_per_mtok is not None
                                     or lim.max_kg_per_day is not None)


def solve_plan(problem: PlanProblem, settings: SolverSettings, *, objective: str = "cost",
               drop: Collection[str] = ()) -> MilpSolution:
    """Solve ``problem``, by hours where that is exact (see the module docstring)."""
    if (problem.hours == 1 or objective == "slack" or problem.fixed_counts is not None
            or _coupled(problem, drop)):
        return _monolithic(problem, settings, objective, drop)
    mode = problem.limits.commitment
    if mode is CommitmentMode.per_hour:
        return _by_hour(problem, settings, objective, drop)
    if mode is CommitmentMode.fixed_peak:
        return _hour_generation(problem, settings, objective, drop)
    return _monolithic(problem, settings, objective, drop)


def _merge(problem: PlanProblem, parts: list[tuple[int, MilpSolution]], seconds: float,
           settings: SolverSettings, base: dict[str, int] | None = None) -> MilpSolution:
    """One day's solution from one-hour solutions (``parts``: (hour, solution))."""
    status = max((s.status for _h, s in parts), key=_RANK.__getitem__)
    ok = status in (MilpStatus.optimal, MilpStatus.feasible)
    counts: dict[tuple[str, int], int] = {}
    tiers = {}
    shares: dict[tuple[str, str, int], float] = {}
    slack: dict[str, tuple[float, float]] = {}
    cost = carbon = 0.0
    gaps = []
    if ok:
        for h, s in parts:
            counts.update({(k, h): n for (k, _0), n in s.counts.items()})
            tiers.update({(k, h): t for (k, _0), t in s.tiers.items()})
            shares.update({(c, k, h): v for (c, k, _0), v in s.shares.items()})
            cost += s.cost_per_day_usd / 24.0
            carbon += s.g_co2_per_day / 24.0
            gaps.append(s.gap_achieved)
            for label, (lim, v) in s.slack.items():
                slack[label] = (lim, max(v, slack.get(label, (lim, 0.0))[1]))
    H = problem.hours
    return MilpSolution(
        status=status, solver=settings.name, seconds=seconds, time_limit_s=settings.time_limit_s,
        gap=settings.gap, gap_achieved=None if not gaps or None in gaps
        else max(g for g in gaps if g is not None), counts=counts, tiers=tiers, shares=shares,
        base_counts=dict(base or {}), cost_per_day_usd=cost * 24.0 / H,
        g_co2_per_day=carbon * 24.0 / H, hours=H,
        pulp_status="+".join(sorted({s.pulp_status for _h, s in parts})), slack=slack)


def _map_hours(fn, hours: list[int]) -> list[MilpSolution]:  # type: ignore[no-untyped-def]
    workers = min(len(hours), os.cpu_count() or 1)
    if workers <= 1:
        return [fn(h) for h in hours]
    with ThreadPoolExecutor(max_workers=workers) as pool:  # solvers run outside the GIL
        return list(pool.map(fn, hours))


def _by_hour(problem: PlanProblem, settings: SolverSettings, objective: str,
             drop: Collection[str]) -> MilpSolution:
    t0 = time.perf_counter()
    hours = list(range(problem.hours))
    sols = _map_hours(lambda h: _monolithic(problem.hour(h), settings, objective, drop), hours)
    return _merge(problem, list(zip(hours, sols, strict=True)), time.perf_counter() - t0,
                  settings)


def _hour_generation(problem: PlanProblem, settings: SolverSettings, objective: str,
                     drop: Collection[str]) -> MilpSolution:
    t0 = time.perf_counter()
    H = problem.hours
    load = [sum(d.rates_rps[h] for d in problem.demands) for h in range(H)]
    chosen = [max(range(H), key=lambda h: (load[h], -h))]
    while True:
        master = _monolithic(problem.hours_subset(tuple(chosen)), settings, objective, drop)
        if not master.has_plan:
            return replace(master, hours=H, seconds=time.perf_counter() - t0)
        fleet = dict(master.base_counts)
        tiers = {k: t for (k, _h), t in master.tiers.items()}
        fixed = replace(problem, fixed_counts=fleet, fixed_tiers=tiers)

        def check(h: int, fixed: PlanProblem = fixed) -> MilpSolution:
            return _monolithic(fixed.hour(h), settings, objective, drop)

        sols = _map_hours(check, list(range(H)))
        bad = [h for h, s in enumerate(sols) if not s.has_plan]
        if not bad:
            merged = _merge(problem, list(enumerate(sols)), time.perf_counter() - t0, settings,
                            base=fleet)
            return replace(merged, status=master.status, gap_achieved=master.gap_achieved)
        chosen.append(max(bad, key=lambda h: (load[h], -h)))
