"""The fleet-mix MILP (PuLP): solving it and reading the plan out of it.

The model itself (variables, constraint families, objective) is built by
:mod:`fleetplan.optimize.milp_model`; its names are re-exported here. Integer replicas per pool,
continuous traffic shares per class; a solve gives a :class:`MilpSolution` with an enum status.

Main entries: :func:`build_model` and :func:`solve_problem` (returns a :class:`MilpSolution`).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import StrEnum

import pulp

from fleetplan.optimize.milp_model import (
    CONSTRAINT_FAMILIES,
    TIE_G_PER_USD,
    TIE_USD_PER_G,
    TIE_USD_PER_MIXED_SHARE,
    MilpModel,
    Slack,
    build_model,
)
from fleetplan.optimize.problem import PlanProblem, Pool, Tier
from fleetplan.optimize.solvers import SolverSettings, achieved_gap, make_solver

__all__ = [
    "CONSTRAINT_FAMILIES", "TIE_G_PER_USD", "TIE_USD_PER_G", "TIE_USD_PER_MIXED_SHARE",
    "MilpModel", "MilpSolution", "MilpStatus", "Slack", "build_model", "pool_by_key",
    "solve_model", "solve_problem",
]


class MilpStatus(StrEnum):
    optimal = "optimal"
    feasible = "feasible"            # stopped by the time limit with an incumbent
    infeasible = "infeasible"
    no_solution = "no_solution"      # stopped by the time limit without any plan


@dataclass(frozen=True)
class MilpSolution:
    """What one MILP solve found. ``counts[(pool_key, hour)]`` are replicas (all tiers)."""

    status: MilpStatus
    solver: str
    seconds: float
    time_limit_s: float
    gap: float
    gap_achieved: float | None
    counts: dict[tuple[str, int], int]
    tiers: dict[tuple[str, int], Tier]     # (pool key, hour) -> the tier the pool runs at
    shares: dict[tuple[str, str, int], float]
    base_counts: dict[str, int]
    cost_per_day_usd: float
    g_co2_per_day: float
    hours: int
    pulp_status: str = ""
    slack: dict[str, tuple[float, float]] = field(default_factory=dict)  # label: (limit, slack)

    @property
    def has_plan(self) -> bool:
        return self.status in (MilpStatus.optimal, MilpStatus.feasible)


def _status(prob: pulp.LpProblem) -> MilpStatus:
    if prob.sol_status == pulp.LpSolutionOptimal:
        return MilpStatus.optimal
    if prob.sol_status == pulp.LpSolutionIntegerFeasible:
        return MilpStatus.feasible
    if prob.status in (pulp.LpStatusInfeasible,) or prob.sol_status == pulp.LpSolutionInfeasible:
        return MilpStatus.infeasible
    return MilpStatus.no_solution


def solve_model(model: MilpModel, settings: SolverSettings) -> MilpSolution:
    """Solve a built model and read the plan out of it."""
    problem = model.problem
    solver = make_solver(settings)
    t0 = time.perf_counter()
    if model.unservable:  # a class no pool can serve at its SLO: infeasible without a solve
        status = MilpStatus.infeasible
    else:
        model.prob.solve(solver)
        status = _status(model.prob)
    seconds = time.perf_counter() - t0
    H = problem.hours
    counts: dict[tuple[str, int], int] = {}
    tiers: dict[tuple[str, int], Tier] = {}
    shares: dict[tuple[str, str, int], float] = {}
    base_counts: dict[str, int] = {}
    slack: dict[str, tuple[float, float]] = {}
    cost = carbon = 0.0
    if status in (MilpStatus.optimal, MilpStatus.feasible):
        for (k, h), expr in model.fleet.items():
            counts[(problem.pools[k].key, h)] = int(round(pulp.value(expr) or 0.0))
        for (k, ti, h), expr in model.n.items():
            if (pulp.value(expr) or 0.0) > 0.5:
                tiers[(problem.pools[k].key, h)] = problem.tiers[ti]
        for (k, _zero), b in model.base.items():
            v = int(round(b.value() or 0.0))
            if v:
                base_counts[problem.pools[k].key] = v
        for (c, k, _ti, h), var in model.x.items():
            s = float(var.value() or 0.0)
            if s > 1e-9:
                key = (problem.demands[c].name, problem.pools[k].key, h)
                shares[key] = shares.get(key, 0.0) + s
        cost = float(sum(pulp.value(e) or 0.0 for e in model.cost_h))
        carbon = float(sum(pulp.value(e) or 0.0 for e in model.carbon_h))
        for sl in model.slacks:
            moved = float(sl.var.value() or 0.0)
            old = slack.get(sl.label, (sl.limit, 0.0))
            slack[sl.label] = (sl.limit, max(old[1], moved))
    scale = 24.0 / H
    return MilpSolution(
        status=status, solver=settings.name, seconds=seconds, time_limit_s=settings.time_limit_s,
        gap=settings.gap, gap_achieved=achieved_gap(model.prob) if status.value in
        ("optimal", "feasible") else None, counts=counts, tiers=tiers,
        shares=_normalized(shares), base_counts=base_counts, cost_per_day_usd=cost * scale,
        g_co2_per_day=carbon * scale, hours=H, pulp_status=pulp.LpStatus[model.prob.status],
        slack=slack,
    )


def _normalized(shares: dict[tuple[str, str, int], float]) -> dict[tuple[str, str, int], float]:
    """Shares rounded to 1e-9 and re-summed to exactly 1 per (class, hour) (solver round-off)."""
    totals: dict[tuple[str, int], float] = {}
    for (c, _k, h), s in shares.items():
        totals[(c, h)] = totals.get((c, h), 0.0) + s
    return {key: round(s / totals[(key[0], key[2])], 9) for key, s in sorted(shares.items())}


def solve_problem(problem: PlanProblem, settings: SolverSettings | None = None, *,
                  objective: str = "cost", drop: Collection[str] = ()) -> MilpSolution:
    """Solve the MILP for ``problem``: one model, or by hours where that is exact
    (:mod:`fleetplan.optimize.decompose`)."""
    from fleetplan.optimize.decompose import solve_plan

    return solve_plan(problem, settings or SolverSettings(), objective=objective, drop=drop)


def pool_by_key(problem: PlanProblem) -> dict[str, Pool]:
    return {p.key: p for p in problem.pools}
