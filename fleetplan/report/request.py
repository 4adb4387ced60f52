"""What ``fleetplan report`` asks of the library, as a typed record checked where it is built, and
the one function that writes the page: :class:`ReportRequest` -> :func:`write_requested`.

One plan file gives its report (with a frontier beside it, when given); two give the diff of A
and B. The scenario, when given, is the one the plans were solved from: its assumptions and
prices enter the page, and a plan that contradicts it is refused (the rules of
:func:`fleetplan.optimize.plan_rules.check_plan_scenario`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from fleetplan.catalog.catalog import Catalog
from fleetplan.errors import InputError
from fleetplan.optimize.frontier_file import load_frontier
from fleetplan.optimize.plan import load_plan
from fleetplan.report.render import write_diff, write_report
from fleetplan.scenario import Scenario


@dataclass(frozen=True)
class ReportRequest:
    """The plan files (one: a report; two: the diff of A then B), the frontier file to show
    beside a single plan, and the scenario's path as the page names it."""

    plans: tuple[Path, ...]
    frontier: Path | None = None
    scenario_path: str = ""

    def __post_init__(self) -> None:
        if not self.plans or len(self.plans) > 2:
            raise InputError(f"report: {len(self.plans)} plan files given; give one (a report) "
                             "or two (a diff of A and B)")
        if len(self.plans) == 2 and self.frontier is not None:
            raise InputError("--frontier: a diff of two plans shows no frontier; report one "
                             "plan")

    def default_out(self) -> Path:
        """The page's path when none is given: the plan's name with ``.html``; a diff's
        ``A-vs-B.html`` beside B."""
        if len(self.plans) == 1:
            return self.plans[0].with_suffix(".html")
        a, b = self.plans
        return b.with_name(f"{a.stem}-vs-{b.stem}.html")


def write_requested(path: str | os.PathLike[str], request: ReportRequest,
                    scenario: Scenario | None = None, catalog: Catalog | None = None) -> Path:
    """Read the request's files and write its page (a report, or a diff) to ``path``; the
    plans' GPUs are ``catalog``'s (default: the scenario's, else the bundled one)."""
    if catalog is None and scenario is not None:
        catalog = scenario.data_context().catalog
    docs = [load_plan(p, catalog) for p in request.plans]
    if len(docs) == 2 and any(e.model is not None for d in docs for e in d.fleet):
        raise InputError(f"{request.plans[1]}: fleetplan report of two plans (a diff) is not "
                         "supported yet for plans of several models; report each on its own")
    if len(docs) == 1:
        fr = load_frontier(request.frontier) if request.frontier is not None else None
        return write_report(path, docs[0], scenario=scenario,
                            scenario_path=request.scenario_path, frontier=fr)
    return write_diff(path, docs[0], docs[1], scenario=scenario,
                      scenario_path=request.scenario_path)
