"""Capacities at stricter tiers, searched only where the MILP could use them.

A class may ride in a pool held to a stricter SLO than its own (a batch class filling a chat
pool's spare replicas), so the MILP's table has the class's capacity at every stricter tier too.
Those searches are about half of a cold solve's simulation, and most of them are never used.
:func:`fleetplan.optimize.inputs.build_problem` with ``defer_stricter=True`` searches each class
at its own SLO only and bounds its stricter-tier capacities by that figure (never lower: the
search is monotone in the SLO, :mod:`fleetplan.optimize.capacity`); :func:`price_tiers` then
decides which of them to search, by column-generation-style rounds that keep the answer exact:

1. Solve the cost MILP with the bounds (a *relaxation*: every capacity at least the true one,
   so its proven lower bound ``LB`` is a lower bound of the full table's optimum too).
2. Solve it with the unsearched entries at 0 (a *restriction*: a feasible answer of the full
   table). When its cost ``C`` satisfies ``C x (1 - gap) <= LB``, it is within the solver's
   gap of the full table's optimum, the guarantee a solve of the full table gives: stop.
3. Else search the unsearched entries the relaxation's answer uses (one batch on the executor)
   and go to 1. Each round searches at least one entry; round :data:`MAX_ROUNDS` searches all
   that are left (the full table), so there are at most that many rounds (a relaxation the
   solver stops at its time limit proves no bound, and only the full table then settles it).

If the relaxation has no plan, neither has the full table; the rest of it is then searched, so
that the explanation of the infeasibility (its cheapest relaxation) is the full table's. The
entries still unsearched at the end stay at 0 for the rest of the solve (the closed loop's
derate and trim rounds then choose among the searched ones) and the plan says how many were
searched. Main entry: :func:`price_tiers`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from fleetplan._progress import Progress
from fleetplan.optimize.decompose import proven_bound
from fleetplan.optimize.executors import Executor
from fleetplan.optimize.inputs import Inputs, run_searches
from fleetplan.optimize.milp import MilpSolution, solve_problem
from fleetplan.optimize.problem import Tier
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.scenario.fleet import split_pool_name

Key = tuple[str, str, Tier]
SHARE_TOL = 1e-9  # a share below this carries nothing (solver tolerance)
MAX_ROUNDS = 6  # the last round searches every entry still pending (the full table)


def used_entries(sol: MilpSolution, keys: set[Key]) -> set[Key]:
    """The (class, configuration, tier) entries of ``keys`` that ``sol`` routes traffic over."""
    out: set[Key] = set()
    for (name, pool, h), share in sol.shares.items():
        if share <= SHARE_TOL:
            continue
        key = (name, split_pool_name(pool)[0], sol.tiers[(pool, h)])
        if key in keys:
            out.add(key)
    return out


def price_tiers(inputs: Inputs, settings: SolverSettings, executor: Executor,
                progress: Progress | None = None) -> Inputs:
    """``inputs`` with its pending stricter-tier capacities searched where the MILP could use
    them and the rest at 0 (module docstring); unchanged when nothing is pending."""
    pending = dict(inputs.pending)
    if not pending:
        return inputs
    problem = inputs.problem
    capacity = dict(problem.capacity)
    results = dict(inputs.results)
    total, rounds = len(pending), 0
    while pending:
        relaxed = solve_problem(problem.replace(capacity=capacity), settings, ties=False)
        if relaxed.has_plan:
            used = used_entries(relaxed, set(pending))
            if not used:
                break  # the relaxation's answer is one of the restriction's: exact
            restricted = solve_problem(problem.replace(capacity=_zeroed(capacity, pending)),
                                       settings, ties=False)
            bound = proven_bound(relaxed, settings)
            if (restricted.has_plan and bound is not None
                    and restricted.cost_per_day_usd * (1.0 - settings.gap) <= bound):
                break
        rounds += 1
        if rounds == MAX_ROUNDS or not relaxed.has_plan:
            # the full table: no rounds left, or no plan even at the bounds (then none at all,
            # and what the infeasibility explanation relaxes must be the full table's)
            used = set(pending)
        found = run_searches({k: pending[k] for k in sorted(used, key=_order)}, executor,
                             progress)
        for key, res in found.items():
            capacity[key] = res.capacity_rps
            results[key] = res
            del pending[key]
    note = (f"capacities at stricter tiers than a class's own SLO: {total - len(pending)} of "
            f"{total} searched, where the MILP could use them ({rounds} pricing round"
            f"{'' if rounds == 1 else 's'}); the first answer is within the solver's gap of the "
            "full table's optimum (docs/optimizer.md, Pricing)")
    return replace(inputs, problem=problem.replace(capacity=_zeroed(capacity, pending)),
                   results=results, pending={}, notes=(*inputs.notes, note))


def _zeroed(capacity: dict[Key, float], pending: Collection[Key]) -> dict[Key, float]:
    return {k: (0.0 if k in pending else v) for k, v in capacity.items()}


def _order(key: Key) -> tuple[str, str, float, float]:
    name, config, tier = key
    return (name, config, tier.ttft_p99_ms,
            -1.0 if tier.tpot_p99_ms is None else tier.tpot_p99_ms)
