"""The fleet-mix MILP (PuLP): integer replicas per pool, continuous traffic shares per class.

Variables, for pools ``k`` (configuration x region), SLO tiers ``t`` and hours ``h``:
``n[k,t,h]`` integer replicas (one value for every hour in ``fixed-peak``; a committed base
``b[k,t]`` plus hourly on-demand ``o[k,t,h]`` in ``base-plus-on-demand``), ``z[k,t]`` binary "pool
``k`` runs at tier ``t``" (created only where a pool could run at several tiers or redundancy is
asked), and ``x[c,k,t,h]`` in [0, 1], the share of class ``c``'s traffic sent to the pool.

Constraints: every class's traffic is fully assigned; capacity at SLO (``sum_c rate*x/cap <= n -
redundancy*z``); one tier per pool; per-candidate replica caps; GPU availability per type (and
region); budget per hour; carbon (g/Mtok or kg/day). Carbon is linear: idle power and embodied
carbon per replica plus dynamic power per req/s of assigned load. Objective: minimum cost, ties
broken by carbon at $1 per tonne CO2 (or the reverse for ``objective="carbon"``).

Main entries: :func:`build_model` and :func:`solve_problem` (returns a :class:`MilpSolution`).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import StrEnum

import pulp

from fleetplan.optimize.problem import CommitmentMode, PlanProblem, Pool, Tier
from fleetplan.optimize.solvers import SolverSettings, achieved_gap, make_solver

# Tie-break weight: one gram of CO2 is worth a millionth of a dollar ($1 per tonne), far below
# any carbon price, so it only decides between plans of (near-)equal cost.
TIE_USD_PER_G = 1e-6
TIE_G_PER_USD = 1e-3

CONSTRAINT_FAMILIES = ("carbon", "budget", "availability", "max_replicas", "redundancy")


class MilpStatus(StrEnum):
    optimal = "optimal"
    feasible = "feasible"            # stopped by the time limit with an incumbent
    infeasible = "infeasible"
    no_solution = "no_solution"      # stopped by the time limit without any plan


def _name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


@dataclass
class MilpModel:
    """A built PuLP problem with handles on its variables."""

    problem: PlanProblem
    prob: pulp.LpProblem
    n: dict[tuple[int, int, int], pulp.LpAffineExpression]   # (pool, tier, hour) -> replicas
    x: dict[tuple[int, int, int, int], pulp.LpVariable]      # (class, pool, tier, hour)
    z: dict[tuple[int, int], pulp.LpVariable]
    base: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)
    cost_h: list[pulp.LpAffineExpression] = field(default_factory=list)
    carbon_h: list[pulp.LpAffineExpression] = field(default_factory=list)
    unservable: list[tuple[str, int]] = field(default_factory=list)  # (class, hour) no capacity
    slacks: list[Slack] = field(default_factory=list)


@dataclass(frozen=True)
class Slack:
    """An elastic constraint: ``expr <= limit + var`` (for infeasibility diagnosis)."""

    family: str
    label: str
    var: pulp.LpVariable
    limit: float


@dataclass(frozen=True)
class MilpSolution:
    """What one MILP solve found. ``counts[(pool_key, hour)]`` are replicas (all tiers)."""

    status: MilpStatus
    solver: str
    seconds: float
    time_limit_s: float
    gap: float
    gap_achieved: float | None
    counts: dict[tuple[str, int], int]
    tiers: dict[str, Tier]
    shares: dict[tuple[str, str, int], float]
    base_counts: dict[str, int]
    cost_per_day_usd: float
    g_co2_per_day: float
    hours: int
    pulp_status: str = ""
    slack: dict[str, tuple[float, float]] = field(default_factory=dict)  # label: (limit, slack)

    @property
    def has_plan(self) -> bool:
        return self.status in (MilpStatus.optimal, MilpStatus.feasible)


def _upper_bound(problem: PlanProblem, k: int, t: Tier) -> int:
    pool = problem.pools[k]
    worst = 0.0
    for h in range(problem.hours):
        load = sum(d.rates_rps[h] / c for d in problem.demands
                   if (c := problem.cap(d, pool, t)) > 0)
        worst = max(worst, load)
    ub = math.ceil(worst * (1 + 1e-9)) + problem.limits.redundancy + 1
    if pool.max_replicas is not None:
        ub = min(ub, pool.max_replicas)
    return ub


def build_model(problem: PlanProblem, *, objective: str = "cost",
                drop: Collection[str] = (), elastic: Collection[str] = ()) -> MilpModel:
    """Build the MILP.

    ``drop`` removes constraint families (see :data:`CONSTRAINT_FAMILIES`); ``elastic`` makes
    their limits elastic (``expr <= limit + slack``). ``objective`` is ``cost`` (carbon breaks
    ties), ``carbon`` (cost breaks ties) or ``slack`` (the smallest relative relaxation).
    """
    slacks: list[Slack] = []

    def limit(family: str, label: str, expr: pulp.LpAffineExpression, bound: float,
              name: str) -> None:
        if family in elastic:
            s = pulp.LpVariable(f"slack_{name}", 0)
            slacks.append(Slack(family, label, s, bound))
            prob.__iadd__((expr - s <= bound, name))
        else:
            prob.__iadd__((expr <= bound, name))

    lim = problem.limits
    H = problem.hours
    tiers = problem.tiers
    red = 0 if "redundancy" in drop else lim.redundancy
    mode = lim.commitment if H > 1 else CommitmentMode.per_hour
    prob = pulp.LpProblem("fleetplan", pulp.LpMinimize)

    # admissible (pool, tier) pairs: some class has capacity there
    pt: dict[tuple[int, int], int] = {}
    for k, pool in enumerate(problem.pools):
        for ti, t in enumerate(tiers):
            if any(problem.cap(d, pool, t) > 0 for d in problem.demands):
                pt[(k, ti)] = _upper_bound(problem, k, t)
    tiers_of: dict[int, list[int]] = {}
    for k, ti in pt:
        tiers_of.setdefault(k, []).append(ti)

    n: dict[tuple[int, int, int], pulp.LpAffineExpression] = {}
    base: dict[tuple[int, int], pulp.LpVariable] = {}
    z: dict[tuple[int, int], pulp.LpVariable] = {}
    on_demand: dict[tuple[int, int, int], pulp.LpVariable] = {}
    for (k, ti), ub in pt.items():
        tag = f"{k}_{ti}_{_name(problem.pools[k].config)}"
        if len(tiers_of[k]) > 1 or red > 0:
            z[(k, ti)] = pulp.LpVariable(f"z_{tag}", cat=pulp.LpBinary)
        if mode is CommitmentMode.per_hour:
            for h in range(H):
                v = pulp.LpVariable(f"n_{tag}_h{h}", 0, ub, cat=pulp.LpInteger)
                n[(k, ti, h)] = pulp.LpAffineExpression([(v, 1.0)])
        elif mode is CommitmentMode.fixed_peak:
            v = pulp.LpVariable(f"n_{tag}", 0, ub, cat=pulp.LpInteger)
            base[(k, ti)] = v
            for h in range(H):
                n[(k, ti, h)] = pulp.LpAffineExpression([(v, 1.0)])
        else:
            b = pulp.LpVariable(f"b_{tag}", 0, ub, cat=pulp.LpInteger)
            base[(k, ti)] = b
            for h in range(H):
                o = pulp.LpVariable(f"o_{tag}_h{h}", 0, ub, cat=pulp.LpInteger)
                on_demand[(k, ti, h)] = o
                n[(k, ti, h)] = pulp.LpAffineExpression([(b, 1.0), (o, 1.0)])
        if (k, ti) in z:
            for h in range(H):
                prob += n[(k, ti, h)] - ub * z[(k, ti)] <= 0, f"link_{tag}_h{h}"
    for k, tis in tiers_of.items():
        zs = [z[(k, ti)] for ti in tis if (k, ti) in z]
        if len(zs) > 1:
            prob += pulp.lpSum(zs) <= 1, f"one_tier_{k}"

    x: dict[tuple[int, int, int, int], pulp.LpVariable] = {}
    load: dict[tuple[int, int, int], list[tuple[pulp.LpVariable, float]]] = {}
    dyn_g: list[list[tuple[pulp.LpVariable, float]]] = [[] for _ in range(H)]
    unservable: list[tuple[str, int]] = []
    for c, d in enumerate(problem.demands):
        for h in range(H):
            rate = d.rates_rps[h]
            if rate <= 0:
                continue
            shares = []
            for (k, ti) in pt:
                pool = problem.pools[k]
                cap = problem.cap(d, pool, tiers[ti])
                if cap <= 0:
                    continue
                v = pulp.LpVariable(f"x_{c}_{k}_{ti}_h{h}", 0, 1)
                x[(c, k, ti, h)] = v
                shares.append(v)
                load.setdefault((k, ti, h), []).append((v, rate / cap))
                w = problem.dyn_w_per_rps.get((d.name, pool.config), 0.0)
                if w:
                    dyn_g[h].append((v, rate * w / 1000.0 * pool.grid_g_per_kwh))
            if not shares:
                unservable.append((d.name, h))
                continue
            prob += pulp.lpSum(shares) == 1, f"serve_{c}_h{h}"
    for (k, ti, h), terms in load.items():
        rhs = n[(k, ti, h)] - (red * z[(k, ti)] if red and (k, ti) in z else 0)
        prob += pulp.LpAffineExpression(terms) - rhs <= 0, f"cap_{k}_{ti}_h{h}"

    # per-hour totals: replicas per pool, cost, carbon
    per_pool: dict[tuple[int, int], list[pulp.LpAffineExpression]] = {}
    for (k, _ti, h), expr in n.items():
        per_pool.setdefault((k, h), []).append(expr)
    cost_h: list[pulp.LpAffineExpression] = []
    carbon_h: list[pulp.LpAffineExpression] = []
    factor = lim.on_demand_price_factor
    for h in range(H):
        cost_terms: list[tuple[pulp.LpVariable, float]] = []
        carbon = pulp.LpAffineExpression(dyn_g[h])
        for (k, ti), _ub in pt.items():
            pool = problem.pools[k]
            if mode is CommitmentMode.base_plus_on_demand:
                cost_terms.append((base[(k, ti)], pool.price_usd_per_hour))
                cost_terms.append((on_demand[(k, ti, h)], pool.price_usd_per_hour * factor))
            carbon += pool.idle_g_per_hour * n[(k, ti, h)]
        cost = pulp.LpAffineExpression(cost_terms)
        if mode is not CommitmentMode.base_plus_on_demand:
            cost = pulp.lpSum(problem.pools[k].price_usd_per_hour * n[(k, ti, h)]
                              for (k, ti) in pt)
        cost_h.append(cost)
        carbon_h.append(carbon)
        if "max_replicas" not in drop:
            for k, pool in enumerate(problem.pools):
                if pool.max_replicas is not None and (k, h) in per_pool:
                    limit("max_replicas", f"candidates {pool.key} max_replicas",
                          pulp.lpSum(per_pool[(k, h)]), pool.max_replicas, f"maxrep_{k}_h{h}")
        if "availability" not in drop:
            for key, gpus in sorted(lim.availability.items()):
                gpu, _, region = key.partition("@")
                terms = [pool.gpu_count * e for (k, hh), es in per_pool.items() if hh == h
                         for e in es
                         if (pool := problem.pools[k]).gpu == gpu
                         and (not region or pool.region == region)]
                if terms:
                    limit("availability", f"availability {key}", pulp.lpSum(terms), gpus,
                          f"avail_{_name(key)}_h{h}")
        if "budget" not in drop and lim.budget_usd_per_hour is not None:
            limit("budget", "budget_usd_per_hour", cost, lim.budget_usd_per_hour, f"budget_h{h}")
    if "carbon" not in drop:
        total_g = pulp.lpSum(carbon_h)
        if lim.max_g_per_mtok is not None:
            mtok = sum(problem.mtok_per_hour(h) for h in range(H))
            limit("carbon", "carbon.max_g_per_mtok", total_g * (1.0 / mtok),
                  lim.max_g_per_mtok, "carbon_g_per_mtok")
        if lim.max_kg_per_day is not None:
            limit("carbon", "carbon.max_kg_per_day", total_g * (24.0 / H) / 1000.0,
                  lim.max_kg_per_day, "carbon_kg_per_day")
    if objective == "slack":
        prob += pulp.lpSum(s.var * (1.0 / max(s.limit, 1.0)) for s in slacks)
    elif objective == "cost":
        prob += pulp.lpSum(cost_h) + TIE_USD_PER_G * pulp.lpSum(carbon_h)
    elif objective == "carbon":
        prob += pulp.lpSum(carbon_h) + TIE_G_PER_USD * pulp.lpSum(cost_h)
    else:
        raise ValueError(f"objective {objective!r} must be 'cost', 'carbon' or 'slack'")
    return MilpModel(problem, prob, n, x, z, base, cost_h, carbon_h, unservable, slacks)


def _status(prob: pulp.LpProblem) -> MilpStatus:
    if prob.sol_status == pulp.LpSolutionOptimal:
        return MilpStatus.optimal
    if prob.sol_status == pulp.LpSolutionIntegerFeasible:
        return MilpStatus.feasible
    if prob.status in (pulp.LpStatusInfeasible,) or prob.sol_status == pulp.LpSolutionInfeasible:
        return MilpStatus.infeasible
    return MilpStatus.no_solution


def solve_model(model: MilpModel, settings: SolverSettings) -> MilpSolution:
    """Solve a built model and read the plan out of it."""
    problem = model.problem
    solver = make_solver(settings)
    t0 = time.perf_counter()
    if model.unservable:  # a class no pool can serve at its SLO: infeasible without a solve
        status = MilpStatus.infeasible
    else:
        model.prob.solve(solver)
        status = _status(model.prob)
    seconds = time.perf_counter() - t0
    H = problem.hours
    counts: dict[tuple[str, int], int] = {}
    tiers: dict[str, Tier] = {}
    shares: dict[tuple[str, str, int], float] = {}
    base_counts: dict[str, int] = {}
    slack: dict[str, tuple[float, float]] = {}
    cost = carbon = 0.0
    if status in (MilpStatus.optimal, MilpStatus.feasible):
        for (k, ti, h), expr in model.n.items():
            v = int(round(pulp.value(expr) or 0.0))
            pool = problem.pools[k]
            counts[(pool.key, h)] = counts.get((pool.key, h), 0) + v
            if v > 0:
                tiers[pool.key] = problem.tiers[ti]
        for (k, _ti), b in model.base.items():
            v = int(round(b.value() or 0.0))
            if v:
                key = problem.pools[k].key
                base_counts[key] = base_counts.get(key, 0) + v
        for (c, k, _ti, h), var in model.x.items():
            s = float(var.value() or 0.0)
            if s > 1e-9:
                key = (problem.demands[c].name, problem.pools[k].key, h)
                shares[key] = shares.get(key, 0.0) + s
        cost = float(sum(pulp.value(e) or 0.0 for e in model.cost_h))
        carbon = float(sum(pulp.value(e) or 0.0 for e in model.carbon_h))
        for sl in model.slacks:
            v = float(sl.var.value() or 0.0)
            old = slack.get(sl.label, (sl.limit, 0.0))
            slack[sl.label] = (sl.limit, max(old[1], v))
    scale = 24.0 / H
    return MilpSolution(
        status=status, solver=settings.name, seconds=seconds, time_limit_s=settings.time_limit_s,
        gap=settings.gap, gap_achieved=achieved_gap(model.prob) if status.value in
        ("optimal", "feasible") else None, counts=counts, tiers=tiers,
        shares=_normalized(shares), base_counts=base_counts, cost_per_day_usd=cost * scale,
        g_co2_per_day=carbon * scale, hours=H, pulp_status=pulp.LpStatus[model.prob.status],
        slack=slack,
    )


def _normalized(shares: dict[tuple[str, str, int], float]) -> dict[tuple[str, str, int], float]:
    """Shares rounded to 1e-9 and re-summed to exactly 1 per (class, hour) (solver round-off)."""
    totals: dict[tuple[str, int], float] = {}
    for (c, _k, h), s in shares.items():
        totals[(c, h)] = totals.get((c, h), 0.0) + s
    return {key: round(s / totals[(key[0], key[2])], 9) for key, s in sorted(shares.items())}


def solve_problem(problem: PlanProblem, settings: SolverSettings | None = None, *,
                  objective: str = "cost", drop: Collection[str] = ()) -> MilpSolution:
    """Build and solve the MILP for ``problem``."""
    return solve_model(build_model(problem, objective=objective, drop=drop),
                       settings or SolverSettings())


def pool_by_key(problem: PlanProblem) -> dict[str, Pool]:
    return {p.key: p for p in problem.pools}
