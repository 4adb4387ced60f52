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
# Second tie-break: a class's traffic on a pool run at a stricter tier than its own SLO costs
# $0.0001 per unit share, so loose traffic mixes into a strict pool only when that saves money
# (mixing is where the linear capacity model is least exact).
TIE_USD_PER_MIXED_SHARE = 1e-4

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
    z: dict[tuple[int, int, int], pulp.LpVariable]                 # (pool, tier, hour)
    base: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)
    cost_h: list[pulp.LpAffineExpression] = field(default_factory=list)
    carbon_h: list[pulp.LpAffineExpression] = field(default_factory=list)
    unservable: list[tuple[str, int]] = field(default_factory=list)  # (class, hour) no capacity
    slacks: list[Slack] = field(default_factory=list)
    fleet: dict[tuple[int, int], pulp.LpAffineExpression] = field(default_factory=dict)


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
    tiers: dict[tuple[str, int], Tier]     # (pool key, hour) -> the tier the pool runs at
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


def _upper_bounds(problem: PlanProblem, k: int, t: Tier, red: int) -> list[int]:
    """Per hour, the most replicas pool ``k`` at tier ``t`` could need (all traffic on it)."""
    pool = problem.pools[k]
    out = []
    for h in range(problem.hours):
        load = sum(d.rates_rps[h] / c for d in problem.demands
                   if (c := problem.cap(d, pool, t)) > 0)
        ub = math.ceil(load * (1 + 1e-9)) + red + 1
        out.append(ub if pool.max_replicas is None else min(ub, pool.max_replicas))
    return out


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
            s = prob.add_variable(f"slack_{name}", 0)
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
    pt: dict[tuple[int, int], list[int]] = {}
    fixed = problem.fixed_counts
    for k, pool in enumerate(problem.pools):
        if fixed is not None and fixed.get(pool.key, 0) <= 0:
            continue
        for ti, t in enumerate(tiers):
            if any(problem.cap(d, pool, t) > 0 for d in problem.demands):
                ubs = _upper_bounds(problem, k, t, red)
                # a fleet shared by the hours may hold its peak in any hour
                if fixed is not None:
                    ubs = [fixed[pool.key]] * H
                pt[(k, ti)] = ubs if mode is CommitmentMode.per_hour else [max(ubs)] * H
    tiers_of: dict[int, list[int]] = {}
    for k, ti in pt:
        tiers_of.setdefault(k, []).append(ti)

    n: dict[tuple[int, int, int], pulp.LpAffineExpression] = {}
    base: dict[tuple[int, int], pulp.LpVariable] = {}
    z: dict[tuple[int, int, int], pulp.LpVariable] = {}
    on_demand: dict[tuple[int, int, int], pulp.LpVariable] = {}
    fleet: dict[tuple[int, int], pulp.LpAffineExpression] = {}  # replicas of pool k in hour h
    hourly_tiers = mode is CommitmentMode.per_hour
    shared = fixed is not None or mode is not CommitmentMode.per_hour  # one fleet for all hours
    for k in tiers_of:
        pool = problem.pools[k]
        tag = f"{k}_{_name(pool.config)}"
        ub = max(max(pt[(k, ti)]) for ti in tiers_of[k])
        if fixed is not None:
            ub = fixed[pool.key]
            v = prob.add_variable(f"n_{tag}", ub, ub, cat=pulp.LpInteger)
            base[(k, 0)] = v
            for h in range(H):
                fleet[(k, h)] = pulp.LpAffineExpression([(v, 1.0)])
        elif mode is CommitmentMode.fixed_peak:
            v = prob.add_variable(f"n_{tag}", 0, ub, cat=pulp.LpInteger)
            base[(k, 0)] = v
            for h in range(H):
                fleet[(k, h)] = pulp.LpAffineExpression([(v, 1.0)])
        elif mode is CommitmentMode.base_plus_on_demand:
            b = prob.add_variable(f"b_{tag}", 0, ub, cat=pulp.LpInteger)
            base[(k, 0)] = b
            for h in range(H):
                o = prob.add_variable(f"o_{tag}_h{h}", 0, ub, cat=pulp.LpInteger)
                on_demand[(k, 0, h)] = o
                fleet[(k, h)] = pulp.LpAffineExpression([(b, 1.0), (o, 1.0)])
        for h in range(H):
            tis = tiers_of[k]
            single = len(tis) == 1 and red == 0
            for ti in tis:
                ttag = f"{tag}_{ti}_h{h}"
                if not shared or not single:
                    v = prob.add_variable(f"n_{ttag}", 0, pt[(k, ti)][h],
                                          cat=pulp.LpContinuous if shared else pulp.LpInteger)
                    n[(k, ti, h)] = pulp.LpAffineExpression([(v, 1.0)])
                else:
                    n[(k, ti, h)] = fleet[(k, h)]
                if not single:
                    # per-hour plans may change a pool's tier hour to hour; a fleet shared by
                    # the hours keeps one tier (one role) for the day
                    zv = (z[(k, ti, 0)] if h and not hourly_tiers else
                          prob.add_variable(f"z_{ttag}", cat=pulp.LpBinary))
                    z[(k, ti, h)] = zv
                    prob += n[(k, ti, h)] - pt[(k, ti)][h] * zv <= 0, f"link_{ttag}"
            if len(tis) > 1 and (hourly_tiers or h == 0):
                prob += pulp.lpSum(z[(k, ti, h)] for ti in tis) <= 1, f"one_tier_{tag}_h{h}"
            if not shared:
                fleet[(k, h)] = pulp.lpSum(n[(k, ti, h)] for ti in tis)
            elif not single:
                # the pool's replicas all serve the hour's one tier
                prob += (pulp.lpSum(n[(k, ti, h)] for ti in tis) - fleet[(k, h)] == 0,
                         f"fleet_{tag}_h{h}")

    x: dict[tuple[int, int, int, int], pulp.LpVariable] = {}
    load: dict[tuple[int, int, int], list[tuple[pulp.LpVariable, float]]] = {}
    dyn_g: list[list[tuple[pulp.LpVariable, float]]] = [[] for _ in range(H)]
    unservable: list[tuple[str, int]] = []
    mixed: list[pulp.LpVariable] = []
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
                v = prob.add_variable(f"x_{c}_{k}_{ti}_h{h}", 0, 1)
                x[(c, k, ti, h)] = v
                if tiers[ti] != d.tier:
                    mixed.append(v)
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
        rhs = n[(k, ti, h)] - (red * z[(k, ti, h)] if red and (k, ti, h) in z else 0)
        prob += pulp.LpAffineExpression(terms) - rhs <= 0, f"cap_{k}_{ti}_h{h}"

    # per-hour totals: replicas per pool, cost, carbon
    per_pool = {key: [expr] for key, expr in fleet.items()}
    cost_h: list[pulp.LpAffineExpression] = []
    carbon_h: list[pulp.LpAffineExpression] = []
    factor = lim.on_demand_price_factor
    for h in range(H):
        cost = pulp.LpAffineExpression()
        carbon = pulp.LpAffineExpression(dyn_g[h])
        for k in tiers_of:
            pool = problem.pools[k]
            if mode is CommitmentMode.base_plus_on_demand and fixed is None:
                cost += pool.price_usd_per_hour * base[(k, 0)]
                cost += pool.price_usd_per_hour * factor * on_demand[(k, 0, h)]
            else:
                cost += pool.price_usd_per_hour * fleet[(k, h)]
            carbon += pool.idle_g_per_hour * fleet[(k, h)]
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
        prob += (pulp.lpSum(cost_h) + TIE_USD_PER_G * pulp.lpSum(carbon_h)
                 + TIE_USD_PER_MIXED_SHARE * pulp.lpSum(mixed))
    elif objective == "carbon":
        prob += (pulp.lpSum(carbon_h) + TIE_G_PER_USD * pulp.lpSum(cost_h)
                 + TIE_USD_PER_MIXED_SHARE * TIE_G_PER_USD * pulp.lpSum(mixed))
    else:
        raise ValueError(f"objective {objective!r} must be 'cost', 'carbon' or 'slack'")
    return MilpModel(problem, prob, n, x, z, base, cost_h, carbon_h, unservable, slacks, fleet)


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
    tiers: dict[tuple[str, int], Tier] = {}
    shares: dict[tuple[str, str, int], float] = {}
    base_counts: dict[str, int] = {}
    slack: dict[str, tuple[float, float]] = {}
    cost = carbon = 0.0
    if status in (MilpStatus.optimal, MilpStatus.feasible):
        for (k, h), expr in model.fleet.items():
            counts[(problem.pools[k].key, h)] = int(round(pulp.value(expr) or 0.0))
        for (k, ti, h), expr in model.n.items():
            if (pulp.value(expr) or 0.0) > 0.5:
                tiers[(problem.pools[k].key, h)] = problem.tiers[ti]
        for (k, _zero), b in model.base.items():
            v = int(round(b.value() or 0.0))
            if v:
                base_counts[problem.pools[k].key] = v
        for (c, k, _ti, h), var in model.x.items():
            s = float(var.value() or 0.0)
            if s > 1e-9:
                key = (problem.demands[c].name, problem.pools[k].key, h)
                shares[key] = shares.get(key, 0.0) + s
        cost = float(sum(pulp.value(e) or 0.0 for e in model.cost_h))
        carbon = float(sum(pulp.value(e) or 0.0 for e in model.carbon_h))
        for sl in model.slacks:
            moved = float(sl.var.value() or 0.0)
            old = slack.get(sl.label, (sl.limit, 0.0))
            slack[sl.label] = (sl.limit, max(old[1], moved))
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
    """Solve the MILP for ``problem``: one model, or by hours where that is exact
    (:mod:`fleetplan.optimize.decompose`)."""
    from fleetplan.optimize.decompose import solve_plan

    return solve_plan(problem, settings or SolverSettings(), objective=objective, drop=drop)


def pool_by_key(problem: PlanProblem) -> dict[str, Pool]:
    return {p.key: p for p in problem.pools}
