"""The report's names for the one plan record and its readers (:mod:`fleetplan.optimize.plan`,
:mod:`fleetplan.optimize.frontier_file`): ``fleetplan report``, ``fleetplan simulate --plan``
and the library read a plan through the same validator into the same :class:`Plan`.

``PlanDoc``, ``PoolRow``, ``ClassRow``, ``HourRow``, ``CapacityRow`` and ``SolverRow`` are the
names this module gave the records before they became one family; they stay as aliases.
"""

from fleetplan.optimize.frontier_file import (
    FrontierDoc,
    FrontierPointRow,
    frontier_from_dict,
    load_frontier,
)
from fleetplan.optimize.plan import Plan, fleet_label, load_plan, plan_from_dict
from fleetplan.optimize.plan_fields import STATUSES
from fleetplan.optimize.plan_parts import (
    CapacityNote,
    ClassResult,
    FleetEntry,
    HourPlan,
    SolverReport,
)
from fleetplan.optimize.plan_rules import check_plan_scenario

PlanDoc = Plan
PoolRow = FleetEntry
ClassRow = ClassResult
HourRow = HourPlan
CapacityRow = CapacityNote
SolverRow = SolverReport

__all__ = [
    "STATUSES",
    "CapacityRow",
    "ClassRow",
    "FrontierDoc",
    "FrontierPointRow",
    "HourRow",
    "Plan",
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
