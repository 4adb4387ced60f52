"""The report's name for the one plan reader, :mod:`fleetplan.optimize.plan_file` (it moved
there so that ``simulate --plan`` and the report read a plan through the same validator without
the optimizer importing the report)."""

from fleetplan.optimize.plan_file import (
    STATUSES,
    CapacityRow,
    ClassRow,
    FrontierDoc,
    FrontierPointRow,
    HourRow,
    PlanDoc,
    PoolRow,
    SolverRow,
    check_plan_scenario,
    fleet_label,
    frontier_from_dict,
    load_frontier,
    load_plan,
    plan_from_dict,
)

__all__ = [
    "STATUSES",
    "CapacityRow",
    "ClassRow",
    "FrontierDoc",
    "FrontierPointRow",
    "HourRow",
    "PlanDoc",
    "PoolRow",
    "SolverRow",
    "check_plan_scenario",
    "fleet_label",
    "frontier_from_dict",
    "load_frontier",
    "load_plan",
    "plan_from_dict",
]
