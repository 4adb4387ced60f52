"""Building the fleet-mix MILP (PuLP), one constraint family at a time.

A pool of the plan is (candidate ``k`` = configuration x region, SLO tier ``t``); the admissible
pairs, dominated tiers pruned, come from :meth:`PlanProblem.tier_pairs`. Variables, for hours
``h``: ``n[k,t,h]`` integer replicas of the pool (one value for every hour in ``fixed-peak``; a
committed base ``b[k,t]`` plus hourly on-demand ``o[k,t,h]`` in ``base-plus-on-demand``);
``x[c,k,t,h]`` in [0, 1], the share of class ``c``'s traffic sent to the pool; with redundancy,
``u[k,h]`` binary "candidate ``k`` is open" (one for the day in the modes whose fleet is shared
by the hours), which brings ``redundancy`` spare replicas for all its tiers together.

Churn spares (a candidate whose replicas are down a share ``u`` of the time, from the scenario's
``reliability:`` block): ``N`` working replicas (all its tiers) need ``K(N)`` spares, the fewest
``k`` with ``P(Binomial(N + k, u) > k) <= quantile`` (:func:`fleetplan.scenario.reliability.
spares_table`, a non-decreasing step function). It is linearised exactly with one binary per
step: ``z[k,h,j] = 1`` when ``N >= N_j`` (the smallest ``N`` with ``K(N) >= j``), forced by
``N - (N_j - 1) <= (ub - N_j + 1) z[k,h,j]``; the spares are ``sum_j z[k,h,j]`` (cost pushes each
``z`` to 0 where it may be) and count in the candidate's fleet like any replica.

Constraints: every class's traffic is fully assigned; capacity at SLO per pool (``sum_c
rate*x/cap <= n``); spares (``n <= ub*u``); per-candidate replica caps, GPU availability per type
(and region), the budget per hour and carbon (g/Mtok or kg/day) all count every tier of a
candidate together, spares included. Carbon is linear: idle power and embodied carbon per replica
plus dynamic power per req/s of assigned load.

Objectives (:data:`OBJECTIVES`): ``cost`` ($), ``carbon`` (g), ``replicas`` (replica-hours, with
traffic on a stricter tier than its class's as a tie-break worth less than one replica in all),
``slack`` (the smallest relative relaxation of the elastic families). Tie-breaks are not weights
here: :func:`fleetplan.optimize.milp_solve.solve_model` solves them lexicographically.

Each family is one method of :class:`_Builder`, named as :data:`CONSTRAINT_FAMILIES` and
:mod:`fleetplan.optimize.explain` name them; the order in which they run fixes the order of rows
in the LP file, which is part of a plan's reproducibility.

Main entry: :func:`build_model` (returns a :class:`MilpModel`; solved by
:func:`fleetplan.optimize.milp_solve.solve_model`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import dataclass, field

import pulp

from fleetplan.optimize.problem import CommitmentMode, PlanProblem

CONSTRAINT_FAMILIES = ("carbon", "budget", "availability", "max_replicas", "redundancy")
OBJECTIVES = ("cost", "carbon", "replicas", "slack")


def _name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


@dataclass
class MilpModel:
    """A built PuLP problem with handles on its variables and objective expressions."""

    problem: PlanProblem
    prob: pulp.LpProblem
    n: dict[tuple[int, int, int], pulp.LpAffineExpression]   # (cand, tier, hour) -> replicas
    x: dict[tuple[int, int, int, int], pulp.LpVariable]      # (class, cand, tier, hour)
    opened: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)  # (cand, hour)
    base: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)    # (cand, tier)
    cost_h: list[pulp.LpAffineExpression] = field(default_factory=list)
    carbon_h: list[pulp.LpAffineExpression] = field(default_factory=list)
    unservable: list[tuple[str, int]] = field(default_factory=list)  # (class, hour) no capacity
    slacks: list[Slack] = field(default_factory=list)
    fleet: dict[tuple[int, int], pulp.LpAffineExpression] = field(default_factory=dict)
    spares: int = 0
    objectives: dict[str, pulp.LpAffineExpression] = field(default_factory=dict)
    churn_spares: dict[tuple[int, int], pulp.LpAffineExpression] = field(default_factory=dict)


@dataclass(frozen=True)
class Slack:
    """An elastic constraint: ``expr <= limit + var`` (for infeasibility diagnosis)."""

    family: str
    label: str
    var: pulp.LpVariable
    limit: float


def _upper_bounds(problem: PlanProblem, k: int, t_index: int) -> list[int]:
    """Per hour, the most replicas pool (``k``, tier) could need (all traffic on it)."""
    pool = problem.pools[k]
    t = problem.tiers[t_index]
    out = []
    for h in range(problem.hours):
        load = sum(d.rates_rps[h] / c for d in problem.demands
                   if (c := problem.cap(d, pool, t)) > 0)
        ub = math.ceil(load * (1 + 1e-9)) + 1
        out.append(ub if pool.max_replicas is None else min(ub, pool.max_replicas))
    return out


def build_model(problem: PlanProblem, *, objective: str = "cost",
                drop: Collection[str] = (), elastic: Collection[str] = ()) -> MilpModel:
    """Build the MILP.

    ``drop`` removes constraint families (see :data:`CONSTRAINT_FAMILIES`); ``elastic`` makes
    their limits elastic (``expr <= limit + slack``). ``objective`` is one of
    :data:`OBJECTIVES`; the others stay available in ``MilpModel.objectives`` for the
    lexicographic tie-breaks.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r} must be one of {', '.join(OBJECTIVES)}")
    b = _Builder(problem, drop, elastic)
    b.admissible_pairs()
    for k in b.tiers_of:
        b.pool_replicas(k)
    b.coverage()
    b.capacity()
    for h in range(b.H):
        b.hour_totals(h)
        b.max_replicas(h)
        b.availability(h)
        b.budget(h)
    b.carbon()
    b.objective(objective)
    return MilpModel(problem, b.prob, b.n, b.x, b.opened, b.base, b.cost_h, b.carbon_h,
                     b.unservable, b.slacks, b.fleet, b.red, b.objectives, b.churn_spares)


class _Builder:
    """The model under construction: the PuLP problem and the variables made so far."""

    def __init__(self, problem: PlanProblem, drop: Collection[str],
                 elastic: Collection[str]) -> None:
        self.problem = problem
        self.drop = drop
        self.elastic = elastic
        self.lim = lim = problem.limits
        self.H = H = problem.hours
        self.tiers = problem.tiers
        self.red = 0 if "redundancy" in drop else lim.redundancy
        self.mode = lim.commitment if H > 1 else CommitmentMode.per_hour
        self.fixed = problem.fixed_counts
        # one fleet for all hours (fixed, fixed-peak, base-plus-on-demand)
        self.shared = self.fixed is not None or self.mode is not CommitmentMode.per_hour
        self.prob = pulp.LpProblem("fleetplan", pulp.LpMinimize)
        self.slacks: list[Slack] = []
        # (cand, tier) -> per-hour upper bound of its replicas
        self.pt: dict[tuple[int, int], list[int]] = {}
        self.tiers_of: dict[int, list[int]] = {}
        self.n: dict[tuple[int, int, int], pulp.LpAffineExpression] = {}
        self.base: dict[tuple[int, int], pulp.LpVariable] = {}
        self.on_demand: dict[tuple[int, int, int], pulp.LpVariable] = {}
        self.opened: dict[tuple[int, int], pulp.LpVariable] = {}
        self.fleet: dict[tuple[int, int], pulp.LpAffineExpression] = {}  # cand k in hour h
        self.x: dict[tuple[int, int, int, int], pulp.LpVariable] = {}
        self.load: dict[tuple[int, int, int], list[tuple[pulp.LpVariable, float]]] = {}
        self.dyn_g: list[list[tuple[pulp.LpVariable, float]]] = [[] for _ in range(H)]
        self.unservable: list[tuple[str, int]] = []
        self.mixed: list[pulp.LpVariable] = []
        self.cost_h: list[pulp.LpAffineExpression] = []
        self.carbon_h: list[pulp.LpAffineExpression] = []
        self.objectives: dict[str, pulp.LpAffineExpression] = {}
        self.churn_spares: dict[tuple[int, int], pulp.LpAffineExpression] = {}

    def limit(self, family: str, label: str, expr: pulp.LpAffineExpression, bound: float,
              name: str) -> None:
        """``expr <= bound``, elastic (with a slack variable) when ``family`` is."""
        if family in self.elastic:
            s = self.prob.add_variable(f"slack_{name}", 0)
            self.slacks.append(Slack(family, label, s, bound))
            self.prob += expr - s <= bound, name
        else:
            self.prob += expr <= bound, name

    # ---------------------------------------------------------------- variables
    def admissible_pairs(self) -> None:
        """The (candidate, tier) pairs of the plan's possible pools, with upper bounds."""
        problem, fixed, H = self.problem, self.fixed, self.H
        for k, tis in problem.tier_pairs().items():
            for ti in tis:
                if fixed is not None:
                    ubs = [fixed[problem.pools[k].name(self.tiers[ti])]] * H
                else:
                    ubs = _upper_bounds(problem, k, ti)
                    if self.mode is not CommitmentMode.per_hour:
                        ubs = [max(ubs)] * H  # a shared fleet may hold its peak in any hour
                self.pt[(k, ti)] = ubs
            self.tiers_of[k] = list(tis)

    def _tag(self, k: int, ti: int) -> str:
        return f"{k}_{_name(self.problem.pools[k].config)}_{ti}"

    def pool_replicas(self, k: int) -> None:
        """Replicas of candidate ``k``'s pools (one per tier), its spares and its fleet."""
        prob, H, fixed = self.prob, self.H, self.fixed
        committed = self.mode is CommitmentMode.base_plus_on_demand and fixed is None
        for ti in self.tiers_of[k]:
            tag = self._tag(k, ti)
            ub = self.pt[(k, ti)]
            if fixed is not None or self.mode is CommitmentMode.fixed_peak:
                lo = ub[0] if fixed is not None else 0
                v = prob.add_variable(f"n_{tag}", lo, ub[0], cat=pulp.LpInteger)
                self.base[(k, ti)] = v
                for h in range(H):
                    self.n[(k, ti, h)] = pulp.LpAffineExpression([(v, 1.0)])
            elif committed:
                bv = prob.add_variable(f"b_{tag}", 0, ub[0], cat=pulp.LpInteger)
                self.base[(k, ti)] = bv
                for h in range(H):
                    o = prob.add_variable(f"o_{tag}_h{h}", 0, ub[h], cat=pulp.LpInteger)
                    self.on_demand[(k, ti, h)] = o
                    self.n[(k, ti, h)] = pulp.LpAffineExpression([(bv, 1.0), (o, 1.0)])
            else:
                for h in range(H):
                    v = prob.add_variable(f"n_{tag}_h{h}", 0, ub[h], cat=pulp.LpInteger)
                    self.n[(k, ti, h)] = pulp.LpAffineExpression([(v, 1.0)])
        for h in range(H):
            terms = pulp.lpSum(self.n[(k, ti, h)] for ti in self.tiers_of[k])
            if self.red:
                # the candidate's spares, shared by its tiers: one open flag for the day when
                # the fleet is shared by the hours
                if self.shared and h:
                    u = self.opened[(k, 0)]
                else:
                    u = prob.add_variable(f"u_{k}_{_name(self.problem.pools[k].config)}_h{h}",
                                          cat=pulp.LpBinary)
                self.opened[(k, h)] = u
                for ti in self.tiers_of[k]:
                    prob += (self.n[(k, ti, h)] - self.pt[(k, ti)][h] * u <= 0,
                             f"open_{self._tag(k, ti)}_h{h}")
                terms = terms + self.red * u
            spares = self._churn_spares(k, h)
            if spares is not None:
                terms = terms + spares
            self.fleet[(k, h)] = pulp.LpAffineExpression(terms)

    def _churn_spares(self, k: int, h: int) -> pulp.LpAffineExpression | None:
        """Candidate ``k``'s churn spares in hour ``h`` (module docstring); ``None`` when its
        replicas never fail."""
        from fleetplan.scenario.reliability import spares_table

        pool = self.problem.pools[k]
        if pool.unavailability <= 0:
            return None
        working = pulp.lpSum(self.n[(k, ti, h)] for ti in self.tiers_of[k])
        ub = sum(self.pt[(k, ti)][h] for ti in self.tiers_of[k])
        table = spares_table(ub, pool.unavailability, pool.spare_quantile)
        steps = []
        for j in range(1, table[-1] + 1):
            nj = next(n for n, need in enumerate(table) if need >= j)
            z = self.prob.add_variable(f"z_{self._tag(k, 0)}_h{h}_s{j}", cat=pulp.LpBinary)
            self.prob += (working - (ub - nj + 1) * z <= nj - 1,
                          f"spare_{self._tag(k, 0)}_h{h}_s{j}")
            steps.append(z)
        expr = pulp.LpAffineExpression(pulp.lpSum(steps)) if steps else \
            pulp.LpAffineExpression()
        self.churn_spares[(k, h)] = expr
        return expr

    # ---------------------------------------------------------------- per-class coverage
    def coverage(self) -> None:
        """Share variables: every class's traffic of every hour is fully assigned; collects
        each pool's load and the dynamic carbon of the shares."""
        problem, prob, tiers = self.problem, self.prob, self.tiers
        for c, d in enumerate(problem.demands):
            for h in range(self.H):
                rate = d.rates_rps[h]
                if rate <= 0:
                    continue
                shares = []
                for (k, ti) in self.pt:
                    pool = problem.pools[k]
                    cap = problem.cap(d, pool, tiers[ti])
                    if cap <= 0:
                        continue
                    v = prob.add_variable(f"x_{c}_{k}_{ti}_h{h}", 0, 1)
                    self.x[(c, k, ti, h)] = v
                    if tiers[ti] != d.tier:
                        self.mixed.append(v)
                    shares.append(v)
                    self.load.setdefault((k, ti, h), []).append((v, rate / cap))
                    w = problem.dyn_w_per_rps.get((d.name, pool.config), 0.0)
                    if w:
                        self.dyn_g[h].append((v, rate * w / 1000.0 * pool.grid_g_per_kwh))
                if not shares:
                    self.unservable.append((d.name, h))
                    continue
                prob += pulp.lpSum(shares) == 1, f"serve_{c}_h{h}"

    # ---------------------------------------------------------------- per-pool capacity
    def capacity(self) -> None:
        """Capacity at SLO: each pool's load of the hour fits its (working) replicas."""
        for (k, ti, h), terms in self.load.items():
            self.prob += (pulp.LpAffineExpression(terms) - self.n[(k, ti, h)] <= 0,
                          f"cap_{k}_{ti}_h{h}")

    # ---------------------------------------------------------------- hourly limits
    def hour_totals(self, h: int) -> None:
        """Hour ``h``'s cost and carbon expressions (every tier and the spares of each
        candidate together)."""
        factor = self.lim.on_demand_price_factor
        cost = pulp.LpAffineExpression()
        carbon = pulp.LpAffineExpression(self.dyn_g[h])
        for k in self.tiers_of:
            pool = self.problem.pools[k]
            cost += pool.price_usd_per_hour * self.fleet[(k, h)]
            if self.on_demand:
                extra = pulp.lpSum(self.on_demand[(k, ti, h)] for ti in self.tiers_of[k])
                cost += pool.price_usd_per_hour * (factor - 1.0) * extra
            carbon += pool.idle_g_per_hour * self.fleet[(k, h)]
        self.cost_h.append(cost)
        self.carbon_h.append(carbon)

    def max_replicas(self, h: int) -> None:
        """Per-candidate replica caps in hour ``h`` (all its tiers and spares)."""
        if "max_replicas" in self.drop:
            return
        for k, pool in enumerate(self.problem.pools):
            if pool.max_replicas is not None and (k, h) in self.fleet:
                self.limit("max_replicas", f"candidates {pool.key} max_replicas",
                           pulp.lpSum([self.fleet[(k, h)]]), pool.max_replicas,
                           f"maxrep_{k}_h{h}")

    def availability(self, h: int) -> None:
        """GPUs available per type (and region) in hour ``h``."""
        if "availability" in self.drop:
            return
        pools = self.problem.pools
        for key, gpus in sorted(self.lim.availability.items()):
            gpu, _, region = key.partition("@")
            terms = [pool.gpu_count * e for (k, hh), e in self.fleet.items() if hh == h
                     if (pool := pools[k]).gpu == gpu
                     and (not region or pool.region == region)]
            if terms:
                self.limit("availability", f"availability {key}", pulp.lpSum(terms), gpus,
                           f"avail_{_name(key)}_h{h}")

    def budget(self, h: int) -> None:
        """The hourly budget in hour ``h``."""
        if "budget" not in self.drop and self.lim.budget_usd_per_hour is not None:
            self.limit("budget", "budget_usd_per_hour", self.cost_h[h],
                       self.lim.budget_usd_per_hour, f"budget_h{h}")

    # ---------------------------------------------------------------- carbon, objective
    def carbon(self) -> None:
        """Carbon caps of the day: grams per million tokens and kilograms per day."""
        if "carbon" in self.drop:
            return
        lim, H = self.lim, self.H
        total_g = pulp.lpSum(self.carbon_h)
        if lim.max_g_per_mtok is not None:
            mtok = sum(self.problem.mtok_per_hour(h) for h in range(H))
            self.limit("carbon", "carbon.max_g_per_mtok", total_g * (1.0 / mtok),
                       lim.max_g_per_mtok, "carbon_g_per_mtok")
        if lim.max_kg_per_day is not None:
            self.limit("carbon", "carbon.max_kg_per_day", total_g * (24.0 / H) / 1000.0,
                       lim.max_kg_per_day, "carbon_kg_per_day")

    def objective(self, objective: str) -> None:
        """The objective asked for; every objective's expression kept for the tie-breaks."""
        replicas = pulp.lpSum(self.fleet.values())
        # traffic on a stricter tier than its class's (where the linear capacity model is least
        # exact) breaks ties between fleets of equal replicas; all of it weighs less than one
        # replica, since each class-hour's shares sum to 1
        w = 0.5 / max(1, len(self.problem.demands) * self.H)
        self.objectives = {
            "cost": pulp.lpSum(self.cost_h),
            "carbon": pulp.lpSum(self.carbon_h),
            "replicas": replicas + w * pulp.lpSum(self.mixed),
            "slack": pulp.lpSum(s.var * (1.0 / max(s.limit, 1.0)) for s in self.slacks),
        }
        self.prob += self.objectives[objective]
