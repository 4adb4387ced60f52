"""Decompositions of the diurnal MILP, so 24-hour plans solve in seconds.

The monolithic 24-hour model (every hour's shares, tiers and counts in one MILP) is correct but
slow: its LP relaxation is weak in the rounding of replica counts, and the solver has to close
that gap for 24 hours at once. Two of the three commitment modes decompose exactly; the third
is solved whole, with a fallback whose gap is reported as proven:

- ``per-hour``: hours share nothing (each hour has its own fleet and tiers), so the day is 24
  independent one-hour MILPs, solved in parallel threads; the day is within the gap when every
  hour is. A daily carbon cap couples the hours: then the monolithic model is solved.
- ``fixed-peak``: one fleet (each pool, configuration x region x tier, one count) for every
  hour. Hour generation: solve the
  model on a few hours (a relaxation: its optimum bounds the day's from below), check every
  other hour with the fleet fixed (an LP), add the busiest violated hour, repeat. The final fleet
  serves every hour at the relaxation's cost, so it is optimal for the day within the gap.
- ``base-plus-on-demand``: a committed base all day plus hourly on-demand replicas. With pools
  per tier (no tier binaries) the monolithic model is solved first: on the 100-class x
  8-configuration benchmark it proves its plan within the gap in about 10-25 s (HiGHS, CBC).
  Where it does not (status ``feasible`` or no plan at the time limit), two more plans compete:
  the fixed-peak plan's pools (hour generation, exact) with the base-plus-on-demand model
  solved on those pools only (the fixed-peak fleet is one of its solutions, so it never costs
  more than that fleet); and the cheaper plan is kept. The day is bounded from below by the
  monolithic model's bound where the solver reports one (HiGHS) and by the per-hour plan at
  committed prices (every replica-hour costs at least the committed price). The reported gap is
  (plan - best bound) / plan, and the status is ``optimal`` only when it is within the solver's
  gap. (Before pools per tier, the tier binaries tied to 24 hours of counts left the
  monolithic model at $570.68/h after 30 s, 53% above the fixed-peak plan: the fallback.)
- Anything with a daily carbon cap: the monolithic model.

Main entry: :func:`solve_plan` (what :func:`fleetplan.optimize.milp.solve_problem` calls).
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from fleetplan.optimize.milp_model import build_model
from fleetplan.optimize.milp_solve import MilpSolution, MilpStatus, candidate_key, solve_model
from fleetplan.optimize.problem import CommitmentMode, PlanProblem
from fleetplan.optimize.solvers import SolverSettings

_RANK = {MilpStatus.optimal: 0, MilpStatus.feasible: 1, MilpStatus.no_solution: 2,
         MilpStatus.infeasible: 3}


def _monolithic(problem: PlanProblem, settings: SolverSettings, objective: str,
                drop: Collection[str], ties: bool = True) -> MilpSolution:
    model = build_model(problem, objective=objective, drop=drop)
    return solve_model(model, settings, objective=objective, ties=ties and objective != "slack")


def _coupled(problem: PlanProblem, drop: Collection[str]) -> bool:
    lim = problem.limits
    return "carbon" not in drop and lim.carbon_capped


def solve_plan(problem: PlanProblem, settings: SolverSettings, *, objective: str = "cost",
               drop: Collection[str] = (), ties: bool = True) -> MilpSolution:
    """Solve ``problem``, by hours where that is exact (see the module docstring); ``ties``:
    break ties lexicographically (:mod:`fleetplan.optimize.milp_solve`) in every sub-solve."""
    if (problem.hours == 1 or objective == "slack" or problem.fixed_counts is not None
            or _coupled(problem, drop)):
        return _monolithic(problem, settings, objective, drop, ties)
    mode = problem.limits.commitment
    if mode is CommitmentMode.per_hour:
        return _by_hour(problem, settings, objective, drop, ties)
    if mode is CommitmentMode.fixed_peak:
        return _hour_generation(problem, settings, objective, drop, ties)
    if mode is CommitmentMode.base_plus_on_demand and objective == "cost":
        return _pinned_tiers(problem, settings, drop, ties)
    return _monolithic(problem, settings, objective, drop, ties)


def _merge(problem: PlanProblem, parts: list[tuple[int, MilpSolution]], seconds: float,
           settings: SolverSettings, base: dict[str, int] | None = None) -> MilpSolution:
    """One day's solution from one-hour solutions (``parts``: (hour, solution))."""
    status = max((s.status for _h, s in parts), key=_RANK.__getitem__)
    ok = status in (MilpStatus.optimal, MilpStatus.feasible)
    counts: dict[tuple[str, int], int] = {}
    tiers = {}
    shares: dict[tuple[str, str, int], float] = {}
    spares: dict[tuple[str, int], int] = {}
    slack: dict[str, tuple[float, float]] = {}
    cost = carbon = 0.0
    gaps = []
    if ok:
        for h, s in parts:
            counts.update({(k, h): n for (k, _0), n in s.counts.items()})
            spares.update({(k, h): n for (k, _0), n in s.spares.items()})
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
        pulp_status="+".join(sorted({s.pulp_status for _h, s in parts})), slack=slack,
        spares=spares)


def _map_hours(fn, hours: list[int]) -> list[MilpSolution]:  # type: ignore[no-untyped-def]
    workers = min(len(hours), os.cpu_count() or 1)
    if workers <= 1:
        return [fn(h) for h in hours]
    with ThreadPoolExecutor(max_workers=workers) as pool:  # solvers run outside the GIL
        return list(pool.map(fn, hours))


def _by_hour(problem: PlanProblem, settings: SolverSettings, objective: str,
             drop: Collection[str], ties: bool = True) -> MilpSolution:
    t0 = time.perf_counter()
    hours = list(range(problem.hours))
    sols = _map_hours(lambda h: _monolithic(problem.hour(h), settings, objective, drop, ties),
                      hours)
    return _merge(problem, list(zip(hours, sols, strict=True)), time.perf_counter() - t0,
                  settings)


def _hour_generation(problem: PlanProblem, settings: SolverSettings, objective: str,
                     drop: Collection[str], ties: bool = True) -> MilpSolution:
    t0 = time.perf_counter()
    H = problem.hours
    load = [sum(d.rates_rps[h] for d in problem.demands) for h in range(H)]
    chosen = [max(range(H), key=lambda h: (load[h], -h))]
    while True:
        master = _monolithic(problem.hours_subset(tuple(chosen)), settings, objective, drop,
                             ties)
        if not master.has_plan:
            return replace(master, hours=H, seconds=time.perf_counter() - t0)
        fleet = dict(master.base_counts)
        working = {k: n - master.spares.get((k, 0), 0) for k, n in fleet.items()}
        fixed = replace(problem, fixed_counts={k: n for k, n in working.items() if n > 0})

        def check(h: int, fixed: PlanProblem = fixed) -> MilpSolution:
            return _monolithic(fixed.hour(h), settings, objective, drop, ties)

        sols = _map_hours(check, list(range(H)))
        bad = [h for h, s in enumerate(sols) if not s.has_plan]
        if not bad:
            merged = _merge(problem, list(enumerate(sols)), time.perf_counter() - t0, settings,
                            base=fleet)
            return replace(merged, status=master.status, gap_achieved=master.gap_achieved)
        chosen.append(max(bad, key=lambda h: (load[h], -h)))


def _as_mode(problem: PlanProblem, mode: CommitmentMode) -> PlanProblem:
    return problem.replace(limits=replace(problem.limits, commitment=mode))


def proven_bound(sol: MilpSolution, settings: SolverSettings) -> float | None:
    """A proven lower bound on the cost of ``sol``'s model (None when the solver gave none)."""
    if not sol.has_plan:
        return None
    if sol.gap_achieved is not None:
        return sol.cost_per_day_usd * (1.0 - sol.gap_achieved)
    return sol.cost_per_day_usd * (1.0 - settings.gap) if sol.status is MilpStatus.optimal \
        else None


def _pinned_tiers(problem: PlanProblem, settings: SolverSettings,
                  drop: Collection[str], ties: bool = True) -> MilpSolution:
    """base-plus-on-demand: the monolithic model first; where it does not prove its plan, the
    fixed-peak plan's pools and the per-hour bound (see the module docstring)."""
    t0 = time.perf_counter()
    H = problem.hours
    mono = _monolithic(problem, settings, "cost", drop, ties)
    if mono.status is MilpStatus.optimal:  # proven within the gap (CBC reports no finer one)
        proven = mono.gap_achieved if mono.gap_achieved is not None else settings.gap
        return replace(mono, hours=H, gap_achieved=proven, seconds=time.perf_counter() - t0)
    peak = _hour_generation(_as_mode(problem, CommitmentMode.fixed_peak), settings, "cost", drop,
                            ties)
    plan = mono
    if peak.has_plan:
        names = frozenset(name for (name, _h) in peak.tiers)
        keys = {candidate_key(name) for name in names}
        pools = tuple(p for p in problem.pools if p.key in keys)
        pinned = _monolithic(problem.replace(pools=pools, open_pools=names), settings, "cost",
                             drop, ties)
        if pinned.has_plan and (not plan.has_plan
                                or pinned.cost_per_day_usd < plan.cost_per_day_usd):
            plan = pinned
    if not plan.has_plan:
        return replace(mono, hours=H, seconds=time.perf_counter() - t0)
    bounds: list[float] = []
    if (b := proven_bound(mono, settings)) is not None:
        bounds.append(b)
    if problem.limits.on_demand_price_factor >= 1.0:
        # every replica-hour costs at least the committed price
        lower = _by_hour(_as_mode(problem, CommitmentMode.per_hour), settings, "cost", drop,
                         ties=False)
        if (b := proven_bound(lower, settings)) is not None:
            bounds.append(b)
    gap = (max(0.0, (plan.cost_per_day_usd - max(bounds)) / plan.cost_per_day_usd)
           if bounds and plan.cost_per_day_usd > 0 else None)
    ok = gap is not None and gap <= settings.gap
    return replace(plan, status=MilpStatus.optimal if ok else MilpStatus.feasible,
                   gap_achieved=gap, hours=H, seconds=time.perf_counter() - t0)
