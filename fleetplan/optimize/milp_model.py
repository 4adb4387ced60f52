"""Building the fleet-mix MILP (PuLP), one constraint family at a time.

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

Each family is one method of :class:`_Builder`, named as :data:`CONSTRAINT_FAMILIES` and
:mod:`fleetplan.optimize.explain` name them; the order in which they run fixes the order of rows
in the LP file, which is part of a plan's reproducibility.

Main entry: :func:`build_model` (returns a :class:`MilpModel`; solved by
:func:`fleetplan.optimize.milp.solve_model`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import dataclass, field

import pulp

from fleetplan.optimize.problem import CommitmentMode, PlanProblem, Tier

# Tie-break weight: one gram of CO2 is worth a millionth of a dollar ($1 per tonne), far below
# any carbon price, so it only decides between plans of (near-)equal cost.
TIE_USD_PER_G = 1e-6
TIE_G_PER_USD = 1e-3
# Second tie-break: a class's traffic on a pool run at a stricter tier than its own SLO costs
# $0.0001 per unit share, so loose traffic mixes into a strict pool only when that saves money
# (mixing is where the linear capacity model is least exact).
TIE_USD_PER_MIXED_SHARE = 1e-4

CONSTRAINT_FAMILIES = ("carbon", "budget", "availability", "max_replicas", "redundancy")


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
    b = _Builder(problem, drop, elastic)
    b.admissible_pairs()
    for k in b.tiers_of:
        b.pool_fleet(k)
        for h in range(b.H):
            b.pool_tiers(k, h)
    b.coverage()
    b.capacity()
    for h in range(b.H):
        b.hour_totals(h)
        b.max_replicas(h)
        b.availability(h)
        b.budget(h)
    b.carbon()
    b.objective(objective)
    return MilpModel(problem, b.prob, b.n, b.x, b.z, b.base, b.cost_h, b.carbon_h,
                     b.unservable, b.slacks, b.fleet)


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
        self.mode = mode = lim.commitment if H > 1 else CommitmentMode.per_hour
        self.fixed = problem.fixed_counts
        self.hourly_tiers = mode is CommitmentMode.per_hour
        # one fleet for all hours
        self.shared = self.fixed is not None or mode is not CommitmentMode.per_hour
        self.prob = pulp.LpProblem("fleetplan", pulp.LpMinimize)
        self.slacks: list[Slack] = []
        # (pool, tier) -> per-hour upper bound of its replicas, where some class has capacity
        self.pt: dict[tuple[int, int], list[int]] = {}
        self.tiers_of: dict[int, list[int]] = {}
        self.n: dict[tuple[int, int, int], pulp.LpAffineExpression] = {}
        self.base: dict[tuple[int, int], pulp.LpVariable] = {}
        self.z: dict[tuple[int, int, int], pulp.LpVariable] = {}
        self.on_demand: dict[tuple[int, int, int], pulp.LpVariable] = {}
        self.fleet: dict[tuple[int, int], pulp.LpAffineExpression] = {}  # pool k in hour h
        self.x: dict[tuple[int, int, int, int], pulp.LpVariable] = {}
        self.load: dict[tuple[int, int, int], list[tuple[pulp.LpVariable, float]]] = {}
        self.dyn_g: list[list[tuple[pulp.LpVariable, float]]] = [[] for _ in range(H)]
        self.unservable: list[tuple[str, int]] = []
        self.mixed: list[pulp.LpVariable] = []
        self.cost_h: list[pulp.LpAffineExpression] = []
        self.carbon_h: list[pulp.LpAffineExpression] = []

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
        """The (pool, tier) pairs where some class has capacity, with their upper bounds."""
        problem, fixed, H = self.problem, self.fixed, self.H
        for k, pool in enumerate(problem.pools):
            if fixed is not None and fixed.get(pool.key, 0) <= 0:
                continue
            for ti, t in enumerate(self.tiers):
                if any(problem.cap(d, pool, t) > 0 for d in problem.demands):
                    ubs = _upper_bounds(problem, k, t, self.red)
                    # a fleet shared by the hours may hold its peak in any hour
                    if fixed is not None:
                        ubs = [fixed[pool.key]] * H
                    self.pt[(k, ti)] = (ubs if self.mode is CommitmentMode.per_hour
                                        else [max(ubs)] * H)
        for k, ti in self.pt:
            self.tiers_of.setdefault(k, []).append(ti)

    def _tag(self, k: int) -> str:
        return f"{k}_{_name(self.problem.pools[k].config)}"

    def pool_fleet(self, k: int) -> None:
        """Pool ``k``'s fleet shared by the hours: fixed, one peak count, or base + on-demand
        (per-hour plans get their fleet from the tiers, in :meth:`pool_tiers`)."""
        prob, fixed, H = self.prob, self.fixed, self.H
        pool = self.problem.pools[k]
        tag = self._tag(k)
        ub = max(max(self.pt[(k, ti)]) for ti in self.tiers_of[k])
        if fixed is not None:
            ub = fixed[pool.key]
            v = prob.add_variable(f"n_{tag}", ub, ub, cat=pulp.LpInteger)
            self.base[(k, 0)] = v
            for h in range(H):
                self.fleet[(k, h)] = pulp.LpAffineExpression([(v, 1.0)])
        elif self.mode is CommitmentMode.fixed_peak:
            v = prob.add_variable(f"n_{tag}", 0, ub, cat=pulp.LpInteger)
            self.base[(k, 0)] = v
            for h in range(H):
                self.fleet[(k, h)] = pulp.LpAffineExpression([(v, 1.0)])
        elif self.mode is CommitmentMode.base_plus_on_demand:
            b = prob.add_variable(f"b_{tag}", 0, ub, cat=pulp.LpInteger)
            self.base[(k, 0)] = b
            for h in range(H):
                o = prob.add_variable(f"o_{tag}_h{h}", 0, ub, cat=pulp.LpInteger)
                self.on_demand[(k, 0, h)] = o
                self.fleet[(k, h)] = pulp.LpAffineExpression([(b, 1.0), (o, 1.0)])

    def pool_tiers(self, k: int, h: int) -> None:
        """Pool ``k``'s replicas per tier in hour ``h``, the tier binaries and one tier per
        pool; ties the tiers' replicas to the pool's fleet."""
        prob, n, z, shared = self.prob, self.n, self.z, self.shared
        tag = self._tag(k)
        tis = self.tiers_of[k]
        single = len(tis) == 1 and self.red == 0
        for ti in tis:
            ttag = f"{tag}_{ti}_h{h}"
            if not shared or not single:
                v = prob.add_variable(f"n_{ttag}", 0, self.pt[(k, ti)][h],
                                      cat=pulp.LpContinuous if shared else pulp.LpInteger)
                n[(k, ti, h)] = pulp.LpAffineExpression([(v, 1.0)])
            else:
                n[(k, ti, h)] = self.fleet[(k, h)]
            if not single:
                # per-hour plans may change a pool's tier hour to hour; a fleet shared by
                # the hours keeps one tier (one role) for the day
                zv = (z[(k, ti, 0)] if h and not self.hourly_tiers else
                      prob.add_variable(f"z_{ttag}", cat=pulp.LpBinary))
                z[(k, ti, h)] = zv
                prob += n[(k, ti, h)] - self.pt[(k, ti)][h] * zv <= 0, f"link_{ttag}"
        if len(tis) > 1 and (self.hourly_tiers or h == 0):
            prob += pulp.lpSum(z[(k, ti, h)] for ti in tis) <= 1, f"one_tier_{tag}_h{h}"
        if not shared:
            self.fleet[(k, h)] = pulp.lpSum(n[(k, ti, h)] for ti in tis)
        elif not single:
            # the pool's replicas all serve the hour's one tier
            prob += (pulp.lpSum(n[(k, ti, h)] for ti in tis) - self.fleet[(k, h)] == 0,
                     f"fleet_{tag}_h{h}")

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
        """Capacity at SLO: each (pool, tier, hour)'s load fits its replicas less the spares."""
        red, z = self.red, self.z
        for (k, ti, h), terms in self.load.items():
            rhs = self.n[(k, ti, h)] - (red * z[(k, ti, h)] if red and (k, ti, h) in z else 0)
            self.prob += pulp.LpAffineExpression(terms) - rhs <= 0, f"cap_{k}_{ti}_h{h}"

    # ---------------------------------------------------------------- hourly limits
    def hour_totals(self, h: int) -> None:
        """Hour ``h``'s cost and carbon expressions."""
        factor = self.lim.on_demand_price_factor
        committed = self.mode is CommitmentMode.base_plus_on_demand and self.fixed is None
        cost = pulp.LpAffineExpression()
        carbon = pulp.LpAffineExpression(self.dyn_g[h])
        for k in self.tiers_of:
            pool = self.problem.pools[k]
            if committed:
                cost += pool.price_usd_per_hour * self.base[(k, 0)]
                cost += pool.price_usd_per_hour * factor * self.on_demand[(k, 0, h)]
            else:
                cost += pool.price_usd_per_hour * self.fleet[(k, h)]
            carbon += pool.idle_g_per_hour * self.fleet[(k, h)]
        self.cost_h.append(cost)
        self.carbon_h.append(carbon)

    def max_replicas(self, h: int) -> None:
        """Per-candidate replica caps in hour ``h``."""
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
        """Cost with carbon and mixing as tie-breaks, the reverse, or the relative slack."""
        prob, cost_h, carbon_h, mixed = self.prob, self.cost_h, self.carbon_h, self.mixed
        if objective == "slack":
            prob += pulp.lpSum(s.var * (1.0 / max(s.limit, 1.0)) for s in self.slacks)
        elif objective == "cost":
            prob += (pulp.lpSum(cost_h) + TIE_USD_PER_G * pulp.lpSum(carbon_h)
                     + TIE_USD_PER_MIXED_SHARE * pulp.lpSum(mixed))
        elif objective == "carbon":
            prob += (pulp.lpSum(carbon_h) + TIE_G_PER_USD * pulp.lpSum(cost_h)
                     + TIE_USD_PER_MIXED_SHARE * TIE_G_PER_USD * pulp.lpSum(mixed))
        else:
            raise ValueError(f"objective {objective!r} must be 'cost', 'carbon' or 'slack'")
