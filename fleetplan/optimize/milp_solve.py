"""One solve of a built fleet-mix MILP (PuLP), and reading the plan out of it.

The model (variables, constraint families, objectives) is built by
:mod:`fleetplan.optimize.milp_model`: integer replicas per pool (configuration x region x SLO
tier), continuous traffic shares per class. :func:`solve_model` solves it once and gives a
:class:`MilpSolution` with an enum status; the decompositions of a day
(:mod:`fleetplan.optimize.decompose`) call it per hour or per relaxation, and
:func:`fleetplan.optimize.milp.solve_problem` is the entry that chooses between them.

Ties are broken lexicographically (:data:`TIE_BREAKS`): after the primary objective (cost) is
solved, a second solve keeps cost ``<=`` the first answer's and minimizes carbon plus
``replicas x`` :data:`TIE_G_PER_REPLICAS` ``/ (most replica-hours + 1)`` (fewer replicas, then
less traffic on tiers stricter than its class's): all of that second term is worth under
0.01 g, so it only decides between plans whose carbon differs by less. The second solve starts
from the first's plan (CBC warm start), gets a quarter of the time limit (at least 1 s) and at
most :data:`TIE_MAX_NODES` branch-and-bound nodes (so that it stops at the same point on every
run); on a model with more than :data:`TIE_FULL_MAX_INTEGERS` integer variables it keeps the
first solve's replica counts and chooses the split alone (an LP). Its answer is kept only where
it is no worse than the plan it started from. So the answer is never dearer than the cost
solve's.

Main entries: :func:`solve_model`, :class:`MilpSolution`, :class:`MilpStatus`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum

import pulp

from fleetplan.optimize.milp_model import MilpModel
from fleetplan.optimize.problem import Tier
from fleetplan.optimize.solvers import SolverSettings, achieved_gap, make_solver

__all__ = [
    "TIE_BREAKS", "TIE_FULL_MAX_INTEGERS", "TIE_G_PER_REPLICAS", "MilpSolution", "MilpStatus",
    "candidate_key", "solve_model",
]

# primary objective -> the objective that breaks its ties (with fewer replicas folded in)
TIE_BREAKS: dict[str, str] = {"cost": "carbon", "carbon": "cost"}
# the whole replicas term of the tie stage weighs less than this, in the tie objective's unit
TIE_G_PER_REPLICAS = 0.01       # grams, behind carbon
TIE_USD_PER_REPLICAS = 1e-4     # dollars, behind cost
TIE_MAX_NODES = 200
# above this many integer variables (a 24-hour model with hourly counts) the tie stage keeps the
# cost solve's replica counts and re-splits the traffic (an LP): CBC spends more than 15 s at the
# root of the full tie model of the 100-class x 8 x 24-hour benchmark, and a stage the time
# limit stops is not the same on every run
TIE_FULL_MAX_INTEGERS = 400
# a stage keeps the previous objective within this (relative, absolute) of its value: solver
# round-off, far below a price or a gram
_KEEP_REL, _KEEP_ABS = 1e-9, 1e-7


class MilpStatus(StrEnum):
    optimal = "optimal"
    feasible = "feasible"            # stopped by the time limit with an incumbent
    infeasible = "infeasible"
    no_solution = "no_solution"      # stopped by the time limit without any plan


@dataclass(frozen=True)
class MilpSolution:
    """What one MILP solve found, keyed by pool name (``config@region/200ms``).

    ``counts[(pool, hour)]`` are the pool's replicas, spares included (a candidate's
    ``redundancy`` spares sit in its strictest open tier; ``spares`` says how many);
    ``tiers[(pool, hour)]`` its tier; ``shares[(class, pool, hour)]`` the class's share;
    ``base_counts[pool]`` the fleet held all day (fixed-peak) or the committed base.
    """

    status: MilpStatus
    solver: str
    seconds: float
    time_limit_s: float
    gap: float
    gap_achieved: float | None
    counts: dict[tuple[str, int], int]
    tiers: dict[tuple[str, int], Tier]
    shares: dict[tuple[str, str, int], float]
    base_counts: dict[str, int]
    cost_per_day_usd: float
    g_co2_per_day: float
    hours: int
    pulp_status: str = ""
    slack: dict[str, tuple[float, float]] = field(default_factory=dict)  # label: (limit, slack)
    spares: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def has_plan(self) -> bool:
        return self.status in (MilpStatus.optimal, MilpStatus.feasible)

    def carriers(self, name: str, hour: int) -> list[str]:
        """The pools carrying class ``name`` in ``hour`` (a share above 0), sorted."""
        return sorted({pool for (cls, pool, h), s in self.shares.items()
                       if cls == name and h == hour and s > 0})

    def working(self, pool: str, hour: int) -> int:
        """Replicas of ``pool`` that carry load in ``hour`` (its count less its spares)."""
        return self.counts.get((pool, hour), 0) - self.spares.get((pool, hour), 0)


def candidate_key(pool_name: str) -> str:
    """``config@region`` of a pool name ``config@region/tier`` (``model/config@region`` of
    ``model/config@region/tier`` in a plan of several models)."""
    head, at, tail = pool_name.partition("@")
    return f"{head}{at}{tail.partition('/')[0]}" if at else pool_name.partition("/")[0]


def _status(prob: pulp.LpProblem) -> MilpStatus:
    if prob.sol_status == pulp.LpSolutionOptimal:
        return MilpStatus.optimal
    if prob.sol_status == pulp.LpSolutionIntegerFeasible:
        return MilpStatus.feasible
    if prob.status in (pulp.LpStatusInfeasible,) or prob.sol_status == pulp.LpSolutionInfeasible:
        return MilpStatus.infeasible
    return MilpStatus.no_solution


def _read(model: MilpModel, status: MilpStatus) -> tuple:  # type: ignore[type-arg]
    """The plan in the model's variables: counts, tiers, shares, base, spares, cost, carbon."""
    problem = model.problem
    tiers_all = problem.tiers
    counts: dict[tuple[str, int], int] = {}
    tiers: dict[tuple[str, int], Tier] = {}
    shares: dict[tuple[str, str, int], float] = {}
    base_counts: dict[str, int] = {}
    spares: dict[tuple[str, int], int] = {}
    slack: dict[str, tuple[float, float]] = {}
    cost = carbon = 0.0
    if status not in (MilpStatus.optimal, MilpStatus.feasible):
        return counts, tiers, shares, base_counts, spares, cost, carbon, slack
    held: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (cand, hour) -> [(tier, n)]
    for (k, ti, h), expr in sorted(model.n.items()):
        v = int(round(pulp.value(expr) or 0.0))
        if v > 0:
            held.setdefault((k, h), []).append((ti, v))
    for (k, h), rows in held.items():
        pool = problem.pools[k]
        opened = model.opened.get((k, h))
        spare = model.spares if opened is not None and (opened.value() or 0) > 0.5 else 0
        churn = model.churn_spares.get((k, h))
        if churn is not None:
            spare += int(round(pulp.value(churn) or 0.0))
        for j, (ti, v) in enumerate(rows):  # tiers are strictest first: spares go to rows[0]
            name = pool.name(tiers_all[ti])
            counts[(name, h)] = v + (spare if j == 0 else 0)
            tiers[(name, h)] = tiers_all[ti]
            if j == 0 and spare:
                spares[(name, h)] = spare
    for (k, ti), b in model.base.items():
        v = int(round(b.value() or 0.0))
        name = problem.pools[k].name(tiers_all[ti])
        v += spares.get((name, 0), 0)
        if v:
            base_counts[name] = v
    for (c, k, ti, h), var in model.x.items():
        s = float(var.value() or 0.0)
        if s > 1e-9:
            key = (problem.demands[c].name, problem.pools[k].name(tiers_all[ti]), h)
            shares[key] = shares.get(key, 0.0) + s
    cost = float(sum(pulp.value(e) or 0.0 for e in model.cost_h))
    carbon = float(sum(pulp.value(e) or 0.0 for e in model.carbon_h))
    for sl in model.slacks:
        moved = float(sl.var.value() or 0.0)
        old = slack.get(sl.label, (sl.limit, 0.0))
        slack[sl.label] = (sl.limit, max(old[1], moved))
    return counts, tiers, _normalized(_served(shares, counts)), base_counts, spares, cost, \
        carbon, slack


def _served(shares: dict[tuple[str, str, int], float],
            counts: dict[tuple[str, int], int]) -> dict[tuple[str, str, int], float]:
    """The shares that go to a pool with replicas in that hour. A share on a pool the solution
    leaves empty is the solver's feasibility tolerance (share x rate <= capacity x 0 + tol):
    routed traffic needs a replica, so it is dropped (the rest is renormalized); a class whose
    every share is such keeps them all (nothing to renormalize onto)."""
    kept = {key: s for key, s in shares.items() if counts.get((key[1], key[2]), 0) > 0}
    classes = {(c, h) for c, _k, h in kept}
    kept.update({key: s for key, s in shares.items() if (key[0], key[2]) not in classes})
    return kept


def _solve_once(model: MilpModel, settings: SolverSettings, warm: bool = False,
                max_nodes: int | None = None) -> MilpStatus:
    solver = make_solver(settings)
    cbc = isinstance(solver, pulp.COIN_CMD)
    if warm and cbc:
        solver.optionsDict["warmStart"] = True
    if max_nodes is not None:
        solver.optionsDict["maxNodes" if cbc else "mip_max_nodes"] = max_nodes
    try:
        model.prob.solve(solver)
    except KeyError as exc:
        # PuLP's HiGHS API has no status for HiGHS's node limit (kSolutionLimit) and raises
        # after writing HiGHS's last point into the variables, which may not be a plan: count
        # it as no plan (the tie stage then keeps the cost solve's answer, read before it)
        if "SolutionLimit" not in repr(exc):
            raise
        return MilpStatus.no_solution
    return _status(model.prob)


def _most(expr: pulp.LpAffineExpression) -> float:
    """The largest value ``expr`` (non-negative coefficients) takes within its bounds."""
    return float(sum(abs(c) * (v.upBound if v.upBound is not None else 1.0)
                     for v, c in expr.items()))


def _break_ties(model: MilpModel, settings: SolverSettings, objective: str) -> bool:
    """The tie stage after a solved ``objective`` (see the module docstring); True when its
    plan was kept (the model's variables then hold it)."""
    tie = TIE_BREAKS.get(objective)
    if tie is None:
        return False
    primary = model.objectives[objective]
    value = float(pulp.value(primary) or 0.0)
    model.prob += primary <= value + abs(value) * _KEEP_REL + _KEEP_ABS, f"tie_keep_{objective}"
    replicas = model.objectives["replicas"]
    weight = (TIE_G_PER_REPLICAS if tie == "carbon" else TIE_USD_PER_REPLICAS) / (
        _most(replicas) + 1.0)
    target = model.objectives[tie] + weight * replicas
    before = float(pulp.value(target) or 0.0)
    model.prob.setObjective(target)
    budget = settings.model_copy(update={"time_limit_s": min(
        settings.time_limit_s, max(1.0, settings.time_limit_s / 4))})
    ints = [v for v in model.prob.variables() if v.cat == pulp.LpInteger]
    fixed: list[tuple[pulp.LpVariable, float | None, float | None]] = []
    if len(ints) > TIE_FULL_MAX_INTEGERS:  # keep the fleet, re-split the traffic
        for v in ints:
            fixed.append((v, v.lowBound, v.upBound))
            n = round(float(v.value() or 0.0))
            v.lowBound = v.upBound = n
    try:
        status = _solve_once(model, budget, warm=True, max_nodes=TIE_MAX_NODES)
    finally:
        for v, lo, hi in fixed:
            v.lowBound, v.upBound = lo, hi
    if status not in (MilpStatus.optimal, MilpStatus.feasible):
        return False
    return float(pulp.value(target) or 0.0) <= before + abs(before) * _KEEP_REL + _KEEP_ABS


def solve_model(model: MilpModel, settings: SolverSettings, *, objective: str = "cost",
                ties: bool = True) -> MilpSolution:
    """Solve a built model (whose objective is ``objective``) and read the plan out of it.

    With ``ties``, the tie stage of :data:`TIE_BREAKS` follows (see the module docstring);
    status and gap are the primary solve's.
    """
    problem = model.problem
    t0 = time.perf_counter()
    if model.unservable:  # a class no pool can serve at its SLO: infeasible without a solve
        status = MilpStatus.infeasible
        read = _read(model, status)
        pulp_status = "Infeasible"
        gap = None
    else:
        status = _solve_once(model, settings)
        pulp_status = pulp.LpStatus[model.prob.status]
        gap = achieved_gap(model.prob) if status in (MilpStatus.optimal,
                                                      MilpStatus.feasible) else None
        read = _read(model, status)
        if (ties and status in (MilpStatus.optimal, MilpStatus.feasible)
                and _break_ties(model, settings, objective)):
            read = _read(model, MilpStatus.optimal)
    seconds = time.perf_counter() - t0
    counts, tiers, shares, base_counts, spares, cost, carbon, slack = read
    H = problem.hours
    scale = 24.0 / H
    return MilpSolution(
        status=status, solver=settings.name, seconds=seconds, time_limit_s=settings.time_limit_s,
        gap=settings.gap, gap_achieved=gap, counts=counts, tiers=tiers, shares=shares,
        base_counts=base_counts, cost_per_day_usd=cost * scale, g_co2_per_day=carbon * scale,
        hours=H, pulp_status=pulp_status, slack=slack, spares=spares,
    )


def _normalized(shares: dict[tuple[str, str, int], float]) -> dict[tuple[str, str, int], float]:
    """Shares rounded to 1e-9 and re-summed to exactly 1 per (class, hour) (solver round-off)."""
    totals: dict[tuple[str, int], float] = {}
    for (c, _k, h), s in shares.items():
        totals[(c, h)] = totals.get((c, h), 0.0) + s
    return {key: round(s / totals[(key[0], key[2])], 9) for key, s in sorted(shares.items())}
