"""The plan report: one self-contained static HTML page a planner can hand over.

Main entries: :func:`load_plan` (a ``fleetplan solve --format json`` file as a typed
:class:`PlanDoc`), :func:`build_context` (the scenario's assumptions, carbon split and the model's
accuracy), :func:`render_report` and :func:`write_html` (the page), :func:`diff_plans` and
:func:`render_diff` (what changed between two plans and what it costs). ``fleetplan report``
is the command line of this package.
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

__all__ = [
    "FrontierDoc",
    "PlanDiff",
    "PlanDoc",
    "ReportContext",
    "build_context",
    "diff_plans",
    "frontier_from_dict",
    "load_frontier",
    "load_plan",
    "plan_from_dict",
    "render_diff",
    "render_report",
    "write_html",
]
