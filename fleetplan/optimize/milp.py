"""The fleet-mix MILP (PuLP): the entry that solves a :class:`PlanProblem` for a plan.

:func:`solve_problem` solves one model, or the day by hours where that is exact
(:mod:`fleetplan.optimize.decompose`); each solve is :func:`solve_model`'s
(:mod:`fleetplan.optimize.milp_solve`: status, gap, ties broken lexicographically) on a model
that :func:`build_model` built (:mod:`fleetplan.optimize.milp_model`). Their names are
re-exported here, the one place callers import the MILP from.

Main entries: :func:`build_model` and :func:`solve_problem` (returns a :class:`MilpSolution`).
"""

from __future__ import annotations

from collections.abc import Collection

from fleetplan.optimize.decompose import solve_plan
from fleetplan.optimize.milp_model import (
    CONSTRAINT_FAMILIES,
    OBJECTIVES,
    MilpModel,
    Slack,
    build_model,
)
from fleetplan.optimize.milp_solve import (
    TIE_BREAKS,
    TIE_G_PER_REPLICAS,
    MilpSolution,
    MilpStatus,
    candidate_key,
    solve_model,
)
from fleetplan.optimize.problem import PlanProblem, Pool
from fleetplan.optimize.solvers import SolverSettings

__all__ = [
    "CONSTRAINT_FAMILIES", "OBJECTIVES", "TIE_BREAKS", "TIE_G_PER_REPLICAS", "MilpModel",
    "MilpSolution", "MilpStatus", "Slack", "build_model", "candidate_key", "pool_by_key",
    "solve_model", "solve_problem",
]


def solve_problem(problem: PlanProblem, settings: SolverSettings | None = None, *,
                  objective: str = "cost", drop: Collection[str] = (),
                  ties: bool = True) -> MilpSolution:
    """Solve the MILP for ``problem``: one model, or by hours where that is exact
    (:mod:`fleetplan.optimize.decompose`); ties broken lexicographically unless ``ties`` is
    false."""
    return solve_plan(problem, settings or SolverSettings(), objective=objective, drop=drop,
                      ties=ties)


def pool_by_key(problem: PlanProblem) -> dict[str, Pool]:
    return {p.key: p for p in problem.pools}

