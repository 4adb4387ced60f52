"""Capacities simulated on demand: only those a plan could use, with the same optimum.

A cold solve of many classes on many candidates spends nearly all its time on capacity searches
(one per class workload x configuration, each a dozen or more simulated runs), while the plan
uses a few configurations per class. :class:`LazyCapacities` starts the MILP with an analytic
**upper bound** in place of every capacity (:attr:`fleetplan.optimize.bracket.Bracket.bound_rps`,
work conservation: no replica completes requests faster than its engine can do their least
work) and simulates a capacity only when a solution puts traffic on it:

1. solve the MILP with simulated capacities where known and bounds elsewhere;
2. if the solution uses a bound, simulate the searches it used (each search covers every tier
   of one workload on one configuration, and every class with that workload) and go to 1;
3. otherwise the solution is the answer.

Why it is the same optimum (within the solver's gap): a bound is never below the capacity it
stands for, and an unsimulated capacity adds no power term, so each MILP is a relaxation of the
one with every capacity simulated: it admits every plan that one admits, at no higher cost or
carbon. A solution of the relaxation that uses only simulated capacities is a plan of the full
problem with the same cost and carbon, so no plan of the full problem is cheaper, nor (tie
stage) cleaner at that cost. The derating and trims of the closed loop scale bounds and
capacities alike, so this holds in every round. Two things differ from simulating everything:
a configuration's per-replica power intercept under ``power: activity`` is the largest over the
classes simulated on it (the classes a plan could use), and a simulated capacity above its bound
(which the bound's slack makes implausible) is reported in :attr:`LazyCapacities.exceeded`, and
then every remaining search runs, so the answer is the full problem's in any case.

Main entry: :class:`LazyCapacities` (``solve`` for the closed loop, ``complete`` before an
infeasibility is explained, ``inputs`` for the report).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fleetplan._progress import Progress
from fleetplan.optimize.bracket import bracket
from fleetplan.optimize.cache import input_hash
from fleetplan.optimize.capacity import CapacityJob, CapacityResult
from fleetplan.optimize.executors import Executor
from fleetplan.optimize.inputs import Inputs, Setup, assemble, run_searches
from fleetplan.optimize.milp import MilpSolution, solve_problem
from fleetplan.optimize.problem import PlanProblem, Tier
from fleetplan.optimize.solvers import SolverSettings

Key = tuple[str, str, Tier]
# a simulated capacity may exceed its bound by this much before the bound counts as broken
# (grid rates are rounded to 6 digits)
_BOUND_TOL = 1e-6


def capacity_bound(job: CapacityJob) -> float:
    """An upper bound on ``job``'s capacity without simulating: the work-conservation bound of
    its replica for its lengths (:func:`fleetplan.optimize.bracket.bracket`), at most the search
    grid's top rate; the grid's top when the parameters are not a replica's."""
    br = bracket(job.params, job.lengths, job.prefix_cache_hit)
    top = job.settings.max_rps
    return top if br is None else min(br.bound_rps, top)


def _group(job: CapacityJob) -> str:
    """The search a job belongs to: its workload on its configuration (every tier)."""
    return input_hash({"point": job.point_key(1.0), "settings": job.settings})


@dataclass
class LazyCapacities:
    """The capacity table of one scenario, simulated as plans come to use it (module docs).

    ``finish`` turns assembled inputs into the problem the loop solves (the reliability and
    spot pricing of :func:`fleetplan.optimize.solve.with_reliability`)."""

    setup: Setup
    executor: Executor
    progress: Progress | None = None
    finish: Callable[[PlanProblem], PlanProblem] = lambda p: p
    results: dict[Key, CapacityResult] = field(default_factory=dict)
    exceeded: list[tuple[Key, float, float]] = field(default_factory=list)
    batches: int = 0  # rounds of searches run

    def __post_init__(self) -> None:
        self._groups = {k: _group(j) for k, j in self.setup.jobs.items()}
        self._bound_of: dict[str, float] = {}
        self.bounds: dict[Key, float] = {}
        for k, j in self.setup.jobs.items():
            g = self._groups[k]
            if g not in self._bound_of:
                self._bound_of[g] = capacity_bound(j)
            self.bounds[k] = self._bound_of[g]
        self._inputs: Inputs | None = None

    # ------------------------------------------------------------------ state
    @property
    def searched(self) -> int:
        """Searches (workload x configuration) simulated so far."""
        return len({self._groups[k] for k in self.results})

    @property
    def total(self) -> int:
        """Searches the full table needs."""
        return len(set(self._groups.values()))

    def inputs(self) -> Inputs:
        """The MILP inputs as they stand: simulated capacities, bounds for the rest."""
        if self._inputs is None:
            raw = assemble(self.setup, self.results, self.bounds)
            self._inputs = Inputs(self.finish(raw.problem), raw.results, raw.power_sources,
                                  raw.notes)
        return self._inputs

    def problem(self) -> PlanProblem:
        return self.inputs().problem

    # ------------------------------------------------------------------ searching
    def evaluate(self, keys: set[Key] | None = None) -> None:
        """Simulate the searches of ``keys`` (every tier and class of each; ``None``: every
        search not run yet)."""
        groups = ({self._groups[k] for k in keys} if keys is not None
                  else set(self._groups.values()))
        todo = {k: j for k, j in self.setup.jobs.items()
                if self._groups[k] in groups and k not in self.results}
        if not todo:
            return
        self.batches += 1
        n = len({self._groups[k] for k in todo})
        name = (f"capacity searches, batch {self.batches}: {n} "
                f"({self.searched} of {self.total} done before)")
        done = run_searches(todo, self.executor, self.progress, name=name)
        for k, res in done.items():
            self.results[k] = res
            if res.capacity_rps > self.bounds[k] * (1 + _BOUND_TOL):
                self.exceeded.append((k, res.capacity_rps, self.bounds[k]))
        self._inputs = None
        if self.exceeded and keys is not None:  # a broken bound: trust none of them
            self.evaluate(None)

    def complete(self) -> Inputs:
        """Every search run (what explaining an infeasible problem needs)."""
        self.evaluate(None)
        return self.inputs()

    def open_keys(self, sol: MilpSolution) -> set[Key]:
        """The capacities ``sol`` puts traffic on that are bounds, not simulated."""
        out: set[Key] = set()
        for (name, pool, h), share in sol.shares.items():
            if share <= 0:
                continue
            tier = sol.tiers[(pool, h)]
            key = (name, pool.partition("@")[0], tier)
            if key not in self.results and key in self.setup.jobs:
                out.add(key)
        return out

    def solve(self, make: Callable[[PlanProblem], PlanProblem],
              settings: SolverSettings) -> tuple[MilpSolution, PlanProblem]:
        """Solve ``make(problem())`` until its solution uses simulated capacities only (module
        docs); returns the solution and the problem it solved. A relaxation without a plan
        means the full problem has none either."""
        while True:
            current = make(self.problem())
            sol = solve_problem(current, settings)
            todo = self.open_keys(sol) if sol.has_plan else set()
            if not todo:
                return sol, current
            self.evaluate(todo)

    def note(self) -> str:
        """What the plan's notes say about the table."""
        done = (f"capacities: {self.searched} of {self.total} capacity searches (workload x "
                f"configuration) simulated, in {self.batches} "
                f"batch{'es' if self.batches != 1 else ''}")
        if self.searched == self.total:
            return done
        return (done + "; the others were bounded above analytically (work conservation, "
                "fleetplan.optimize.bracket) and no plan using them could be cheaper, or "
                "cleaner at the same cost, than this one")
