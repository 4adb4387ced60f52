"""The plan report: one self-contained static HTML page a planner can hand over.

Main entries: :func:`load_plan` (a ``fleetplan solve --format json`` file as the optimizer's own
:class:`~fleetplan.optimize.plan.Plan`; ``PlanDoc`` is its older name), :func:`build_context`
(the scenario's assumptions, carbon split and the model's accuracy), :func:`render_report` and
:func:`write_html` (the page), :func:`diff_plans` and :func:`render_diff` (what changed between
two plans and what it costs), :class:`ReportRequest` and :func:`write_requested` (what
``fleetplan report``, the command line of this package, calls).
"""

from fleetplan.report.context import ReportContext, build_context
from fleetplan.report.diff import PlanDiff, diff_plans
from fleetplan.report.plan_file import (
    FrontierDoc,
    PlanDoc,
    frontier_from_dict,
    load_frontier,
    load_plan,
    plan_from_dict,
)
from fleetplan.report.render import render_diff, render_report, write_html
from fleetplan.report.request import ReportRequest, write_requested

__all__ = [
    "FrontierDoc",
    "PlanDiff",
    "PlanDoc",
    "ReportContext",
    "ReportRequest",
    "build_context",
    "diff_plans",
    "frontier_from_dict",
    "load_frontier",
    "load_plan",
    "plan_from_dict",
    "render_diff",
    "render_report",
    "write_html",
    "write_requested",
]
