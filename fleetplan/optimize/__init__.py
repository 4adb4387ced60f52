"""The optimizer: the cheapest fleet mix meeting every class's SLO and the carbon target.

Main entries: :func:`solve` (scenario -> verified :class:`Plan`), :func:`frontier` (cost vs carbon,
SLO or rate; -> :class:`Frontier`), :func:`save_model` (the plan's MILP as an LP file). Building
blocks: capacities at SLO (:mod:`.capacity`, cached on disk by :mod:`.cache`; stricter tiers
searched on demand by :mod:`.pricing`), the MILP (:mod:`.milp` over a :class:`PlanProblem`),
the closed loop (:mod:`.loop`, :mod:`.verify`, whose checks are cached too),
infeasibility explanations (:mod:`.explain`), executors (:mod:`.executors`: serial, local
processes, Dask). See ``docs/optimizer.md``.
"""

from fleetplan.optimize.capacity import CapacitySettings, find_capacity
from fleetplan.optimize.executors import get_executor
from fleetplan.optimize.frontier import Frontier, FrontierPoint, Sweep, frontier
from fleetplan.optimize.milp import MilpStatus, solve_problem
from fleetplan.optimize.plan import ClassResult, FleetEntry, HourPlan, Plan, PlanStatus
from fleetplan.optimize.problem import CommitmentMode, Demand, Limits, PlanProblem, Pool, Tier
from fleetplan.optimize.solve import save_model, solve
from fleetplan.optimize.solvers import SolverSettings, solver_names

__all__ = [
    "CapacitySettings", "ClassResult", "CommitmentMode", "Demand", "FleetEntry", "Frontier",
    "FrontierPoint", "HourPlan", "Limits", "MilpStatus", "Plan", "PlanProblem", "PlanStatus",
    "Pool", "SolverSettings", "Sweep", "Tier", "find_capacity", "frontier", "get_executor",
    "save_model", "solve", "solve_problem", "solver_names",
]
