"""What the planning commands ask of the library, as typed records checked where they are built,
and the one function each command calls.

- :class:`SolveRequest` -> :func:`run_solve` (``fleetplan solve``: a :class:`Plan`);
- :class:`SimulateRequest` -> :func:`run_simulate` (``fleetplan simulate``, a scenario's fleet or
  a replayed plan: a :class:`~fleetplan.fleet.SimulationResult`);
- :class:`FrontierRequest` -> :func:`run_frontier` (``fleetplan frontier``: a :class:`Frontier`).

A notebook gets the same checks as the command line: a bad value is refused when the record is
built, with one line naming the option (the command's flag, which is also how the docs name it)
and the value. Writing files and printing stay with the caller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetplan._progress import Progress
from fleetplan.errors import InputError
from fleetplan.fleet import SimulationResult, simulate
from fleetplan.optimize.confidence import check_confidence
from fleetplan.optimize.frontier import Frontier, Sweep, frontier
from fleetplan.optimize.loop import DEFAULT_MAX_ROUNDS
from fleetplan.optimize.plan import PLOT_KINDS, Plan
from fleetplan.optimize.solve import solve
from fleetplan.scenario import Scenario, parse_fleet

SIMULATE_PLOT_KINDS = ("latency", "fleet")  # a simulation has no hours to draw


@dataclass(frozen=True)
class SolveRequest:
    """``fleetplan solve``'s options (see :func:`fleetplan.optimize.solve.solve`); ``plot_kind``:
    the plot asked for with the plan (None: no plot, or its default kind)."""

    solver: str | None = None
    executor: str | None = None
    max_rounds: int = DEFAULT_MAX_ROUNDS
    confidence: float | None = None
    plot_kind: str | None = None

    def __post_init__(self) -> None:
        check_confidence(self.confidence)
        if not 1 <= self.max_rounds <= 50:
            raise InputError(f"--max-rounds {self.max_rounds}: expected 1..50")
        if self.plot_kind is not None and self.plot_kind not in PLOT_KINDS:
            raise InputError(f"--plot-kind: plot kind {self.plot_kind!r}: expected latency, "
                             "fleet or hours (diurnal plans)")

    def check_plan(self, plan: Plan) -> None:
        """Refuse a plot the plan cannot draw (an hourly plot of a one-hour plan), before any
        of the plan's files is written."""
        if self.plot_kind == "hours" and not plan.hours:
            raise InputError("--plot-kind: plot kind 'hours' needs a diurnal plan (a scenario "
                             "with hours); this plan has one hour: use latency or fleet")


def run_solve(scenario: Scenario, request: SolveRequest, progress: Progress | None = None
              ) -> Plan:
    """The cheapest verified plan of ``scenario`` as ``request`` asks for it (an infeasible
    plan is returned, never raised; a plot it cannot draw is refused)."""
    plan = solve(scenario, solver=request.solver, executor=request.executor,
                 max_rounds=request.max_rounds, progress=progress,
                 confidence=request.confidence)
    request.check_plan(plan)
    return plan


@dataclass(frozen=True)
class SimulateRequest:
    """``fleetplan simulate``'s options: a fleet spec or a plan file (not both), a routing
    policy, overrides of the scenario's ``sim`` block, and where the replications run
    (``executor``: ``local[:N]``, ``serial`` or a Dask address; None: one after another)."""

    fleet: str | None = None
    plan: Path | Plan | None = None
    routing: str | None = None
    seed: int | None = None
    replications: int | None = None
    duration_s: float | None = None
    executor: str | None = None
    plot_kind: str | None = None  # the plot asked for with the result (None: no plot)

    def __post_init__(self) -> None:
        if self.plot_kind is not None and self.plot_kind not in SIMULATE_PLOT_KINDS:
            raise InputError(f"--plot-kind: plot kind {self.plot_kind!r}: expected latency or "
                             "fleet")
        if self.plan is not None and self.fleet is not None:
            raise InputError("--plan and --fleet: give one (the plan carries its fleet)")

    def scenario(self, scenario: Scenario) -> Scenario:
        """``scenario`` with this request's ``sim`` overrides."""
        overrides = {k: v for k, v in (("seed", self.seed), ("replications", self.replications),
                                       ("duration_s", self.duration_s)) if v is not None}
        if not overrides:
            return scenario
        return scenario.with_updates(sim={**scenario.sim.model_dump(), **overrides})


def run_simulate(scenario: Scenario, request: SimulateRequest,
                 progress: Any = None) -> SimulationResult:
    """Simulate ``scenario``'s fleet (or the request's fleet, or replay its plan).
    ``progress``: called with the fraction done (one replication after another only)."""
    from fleetplan.optimize.executors import get_executor

    pools = (parse_fleet(request.fleet, scenario.data_context().catalog)
             if request.fleet is not None else None)
    ex = None
    if request.executor is not None:
        try:
            ex = get_executor(request.executor)
        except InputError as exc:
            raise InputError(f"--executor: {exc}") from None
    return simulate(request.scenario(scenario), pools, plan=request.plan,
                    routing=request.routing, progress=progress if ex is None else None,
                    executor=ex)


@dataclass(frozen=True)
class FrontierRequest:
    """``fleetplan frontier``'s options (see :func:`fleetplan.optimize.frontier.frontier`)."""

    sweep: Sweep
    points: int = 8
    scheduler: str | None = None
    solver: str | None = None
    lo: float | None = None
    hi: float | None = None

    def __post_init__(self) -> None:
        for option, value in (("--lo", self.lo), ("--hi", self.hi)):
            if value is not None and not math.isfinite(value):
                raise InputError(f"{option} {value:g}: a sweep end is a finite number")
        if not 1 <= self.points <= 10000:
            raise InputError(f"--points {self.points}: expected 1..10000")


def run_frontier(scenario: Scenario, request: FrontierRequest,
                 progress: Progress | None = None) -> Frontier:
    """The frontier of ``scenario`` as ``request`` asks for it."""
    return frontier(scenario, request.sweep, request.points, request.scheduler,
                    solver=request.solver, lo=request.lo, hi=request.hi, progress=progress)
