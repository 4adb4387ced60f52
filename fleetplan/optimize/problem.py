"""The optimizer's numerical inputs: classes, candidate pools, SLO tiers and a capacity table.

A :class:`PlanProblem` is everything the MILP needs and nothing else: plain frozen records, no
scenario objects, no simulation. :mod:`fleetplan.optimize.inputs` builds one from a scenario;
tests and benchmarks build them directly with a fixed capacity table.

Pools per SLO tier: a *pool* of a plan is (configuration, region, tier), named
``1xH100-PCIe@EU27/200ms`` (:meth:`Pool.name`). A tier is the (TTFT, TPOT) target of a class;
a class may use a pool only when the pool's tier is at least as strict as its own SLO, and every
class's load on that pool is counted in replicas at the tier's SLO: ``rate / capacity(class
lengths, config, tier SLO)``. One configuration in one region may run several tiers at once (a
:class:`Pool` here is the candidate, configuration x region; its tiers are pools of the plan).
:meth:`PlanProblem.tier_pairs` lists the (candidate, tier) pairs the MILP needs, with dominated
tiers pruned (see ``docs/optimizer.md`` for why pruning never removes the optimum).

The capacity table, ``capacity[(class, config, tier)]``, is keyed by configuration only (the
region does not change a replica's speed).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from fleetplan.errors import InputError
from fleetplan.scenario.fleet import pool_label

HOURS_PER_DAY = 24


@dataclass(frozen=True, order=True)
class Tier:
    """An SLO level a pool is run at: P99 TTFT and (optional) P99 TPOT, in ms."""

    ttft_p99_ms: float
    tpot_p99_ms: float | None = None

    def serves(self, ttft_p99_ms: float, tpot_p99_ms: float | None) -> bool:
        """True when a pool run at this tier meets a class SLO of (ttft, tpot)."""
        if self.ttft_p99_ms > ttft_p99_ms:
            return False
        if tpot_p99_ms is None:
            return True
        return self.tpot_p99_ms is not None and self.tpot_p99_ms <= tpot_p99_ms

    @property
    def label(self) -> str:
        tpot = "" if self.tpot_p99_ms is None else f"/tpot{self.tpot_p99_ms:g}"
        return f"ttft{self.ttft_p99_ms:g}{tpot}"

    @property
    def words(self) -> str:
        """The tier in a planner's words: ``the 2000 ms tier`` (``the 2000 ms / TPOT 50 ms
        tier``; ``no SLO tier`` for a class without a TTFT target)."""
        if math.isinf(self.ttft_p99_ms):
            return "no SLO tier"
        tpot = "" if self.tpot_p99_ms is None else f" / TPOT {self.tpot_p99_ms:g} ms"
        return f"the {self.ttft_p99_ms:g} ms{tpot} tier"

    @property
    def ttft_ms(self) -> float | None:
        """The tier's TTFT target, ``None`` when it has none (infinite)."""
        return None if math.isinf(self.ttft_p99_ms) else self.ttft_p99_ms


@dataclass(frozen=True)
class Demand:
    """One traffic class as the MILP sees it."""

    name: str
    rates_rps: tuple[float, ...]          # one rate, or one per hour of the day
    ttft_p99_ms: float
    tpot_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    tokens_per_request: float = 416.0     # mean input + output tokens (for $/Mtok, g/Mtok)
    prefix_cache_hit: float = 0.0         # stated share of each prompt in the prefix cache

    def __post_init__(self) -> None:
        if not self.rates_rps or any(not (math.isfinite(r) and r >= 0) for r in self.rates_rps):
            raise InputError(f"class {self.name}: rates {self.rates_rps!r} must be finite and >= 0")
        if not self.ttft_p99_ms > 0:
            raise InputError(f"class {self.name}: ttft_p99_ms(={self.ttft_p99_ms}) must be > 0")

    @property
    def tier(self) -> Tier:
        return Tier(self.ttft_p99_ms, self.tpot_p99_ms)


@dataclass(frozen=True)
class Pool:
    """A candidate pool: one configuration in one region, with its per-replica economics."""

    config: str
    region: str
    gpu: str
    gpu_count: int
    price_usd_per_hour: float        # per replica (price per GPU-hour x GPUs)
    idle_w: float                    # per replica
    grid_g_per_kwh: float
    embodied_g_per_hour: float = 0.0  # per replica, amortized
    max_replicas: int | None = None
    # churn (scenario reliability block): steady-state share of time a replica is down, and the
    # quantile the pool's spares are sized at (k: P(more than k of N + k down) <= quantile)
    unavailability: float = 0.0
    spare_quantile: float = 0.01
    # the candidate's market when it names one (``spot``: named ``config@region~spot``)
    market: str | None = None

    @property
    def key(self) -> str:
        """``config@region`` (``config@region~spot`` for a spot candidate)."""
        return pool_label(self.config, self.region, market=self.market)

    def name(self, tier: Tier) -> str:
        """The name of this candidate's pool at ``tier``: ``config@region/200ms``
        (``config@region~spot/200ms`` for spot)."""
        return pool_label(self.config, self.region, tier.ttft_ms, tier.tpot_p99_ms, self.market)

    @property
    def idle_g_per_hour(self) -> float:
        """Carbon of one replica-hour that does not depend on load (idle power + embodied)."""
        return self.idle_w / 1000.0 * self.grid_g_per_kwh + self.embodied_g_per_hour


@dataclass(frozen=True)
class Probe:
    """The best one replica of a configuration does for a class: its P99s at the lowest rate
    the capacity search tried (used to explain an SLO no candidate can meet)."""

    rate_rps: float
    ttft_p99_ms: float
    tpot_p99_ms: float | None = None
    e2e_p99_ms: float | None = None


class CommitmentMode(StrEnum):
    per_hour = "per-hour"
    fixed_peak = "fixed-peak"
    base_plus_on_demand = "base-plus-on-demand"


def every_hour(demands: Iterable[Demand]) -> tuple[Demand, ...]:
    """``demands``, those of one rate beside others of 24 hourly rates run at it every hour
    (a constant batch class beside a diurnal chat; within one model or over several)."""
    out = tuple(demands)
    hours = max((len(d.rates_rps) for d in out), default=1)
    return tuple(replace(d, rates_rps=d.rates_rps * hours) if len(d.rates_rps) == 1 else d
                 for d in out)


@dataclass(frozen=True)
class Limits:
    """Optional constraints. ``availability`` maps a GPU (or ``GPU@region``) to a GPU count."""

    availability: Mapping[str, int] = field(default_factory=dict)
    budget_usd_per_hour: float | None = None
    redundancy: int = 0
    max_g_per_mtok: float | None = None
    max_kg_per_day: float | None = None
    commitment: CommitmentMode = CommitmentMode.per_hour
    on_demand_price_factor: float = 1.0

    @property
    def carbon_capped(self) -> bool:
        """Whether a carbon cap binds (per Mtok or per day)."""
        return self.max_g_per_mtok is not None or self.max_kg_per_day is not None


@dataclass(frozen=True)
class PlanProblem:
    """Inputs of one MILP.

    ``capacity[(class_name, config, tier)]`` is the sustainable rate (req/s) of one replica of
    ``config`` serving only that class's requests with the tier's SLO met; a missing key or 0 means
    the class cannot be served there at that tier. ``dyn_w_per_rps[(class_name, config)]`` is the
    dynamic power one req/s of the class adds on that configuration.
    """

    demands: tuple[Demand, ...]
    pools: tuple[Pool, ...]
    capacity: Mapping[tuple[str, str, Tier], float]
    dyn_w_per_rps: Mapping[tuple[str, str], float] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    probes: Mapping[tuple[str, str], Probe] = field(default_factory=dict)
    slo_margin: float = 0.0
    # set by the decomposition (fleetplan.optimize.decompose), not by users: a fleet to check
    # (pool name ``config@region/tier`` -> working replicas, every hour, spares not included)
    # and the pools of the plan allowed at all (pool names)
    fixed_counts: Mapping[str, int] | None = None
    open_pools: frozenset[str] | None = None
    # (class, configuration) pairs whose requests the configuration cannot hold (capacity 0),
    # and why (fleetplan.optimize.inputs.unfit_pairs): what explains a class no pool serves
    unfit: Mapping[tuple[str, str], str] = field(default_factory=dict)
    # set by the closed loop (fleetplan.optimize.loop.derated): spot pools' own capacity
    # multiplier over the table's, by (configuration, tier); 1 where absent
    spot_factor: Mapping[tuple[str, Tier], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.demands:
            raise InputError("the scenario has no traffic classes")
        if not self.pools:
            raise InputError("the scenario has no candidate configurations")
        names = [d.name for d in self.demands]
        if len(set(names)) != len(names):
            raise InputError(f"class names must be unique, got {names}")
        keys = [p.key for p in self.pools]
        if len(set(keys)) != len(keys):
            raise InputError(f"candidate (config, region, market) triples must be unique, got "
                             f"{keys}")
        hours = {len(d.rates_rps) for d in self.demands}
        if len(hours) != 1:
            raise InputError(
                "every class needs as many rates as the others (one, or 24 hourly rates: "
                "rate_profile_rps); "
                f"got {[len(d.rates_rps) for d in self.demands]}"
            )

    @property
    def hours(self) -> int:
        return len(self.demands[0].rates_rps)

    @property
    def tiers(self) -> tuple[Tier, ...]:
        """Distinct class SLO tiers, strictest first."""
        return tuple(sorted({d.tier for d in self.demands},
                            key=lambda t: (t.ttft_p99_ms, math.inf if t.tpot_p99_ms is None
                                           else t.tpot_p99_ms)))

    def cap(self, demand: Demand, pool: Pool, tier: Tier) -> float:
        """Capacity of one replica for ``demand`` at ``tier`` (0 when not admissible)."""
        if not tier.serves(demand.ttft_p99_ms, demand.tpot_p99_ms):
            return 0.0
        if self.open_pools is not None or self.fixed_counts is not None:
            name = pool.name(tier)
            if self.open_pools is not None and name not in self.open_pools:
                return 0.0
            if self.fixed_counts is not None and self.fixed_counts.get(name, 0) <= 0:
                return 0.0
        base = float(self.capacity.get((demand.name, pool.config, tier), 0.0))
        if pool.market == "spot" and self.spot_factor:
            base *= self.spot_factor.get((pool.config, tier), 1.0)
        return base

    def tier_pairs(self) -> dict[int, list[int]]:
        """Candidate index -> the indices (into :attr:`tiers`) of the tiers it may run, with
        dominated tiers pruned.

        A tier is left out when no class has capacity there, or when a strictly stricter tier
        of the same candidate serves every class the tier serves with at least the same
        capacity (its load fits there in no more replicas, at the same price and carbon: see
        ``docs/optimizer.md``). A fixed fleet (``fixed_counts``) is never pruned.
        """
        tiers = self.tiers
        out: dict[int, list[int]] = {}
        for k, pool in enumerate(self.pools):
            caps = {ti: {d.name: c for d in self.demands if (c := self.cap(d, pool, t)) > 0}
                    for ti, t in enumerate(tiers)}
            live = [ti for ti, c in caps.items() if c]
            if self.fixed_counts is None:
                live = [ti for ti in live if not any(
                    other != ti and tiers[other].serves(tiers[ti].ttft_p99_ms,
                                                         tiers[ti].tpot_p99_ms)
                    and all(caps[other].get(n, 0.0) >= c for n, c in caps[ti].items())
                    for other in live)]
            if live:
                out[k] = live
        return out

    def hour(self, h: int) -> PlanProblem:
        """The one-hour problem of hour ``h`` (rates of that hour only)."""
        from dataclasses import replace

        demands = tuple(replace(d, rates_rps=(d.rates_rps[h],)) for d in self.demands)
        return replace(self, demands=demands)

    def hours_subset(self, hours: tuple[int, ...]) -> PlanProblem:
        """The problem restricted to some hours (a relaxation of the whole day)."""
        from dataclasses import replace

        demands = tuple(replace(d, rates_rps=tuple(d.rates_rps[h] for h in hours))
                        for d in self.demands)
        return replace(self, demands=demands)

    def mtok_per_hour(self, hour: int) -> float:
        """Millions of tokens served in ``hour`` (all traffic is served in a feasible plan)."""
        return sum(d.rates_rps[hour] * d.tokens_per_request for d in self.demands) * 3600 / 1e6

    def replace(self, **changes: object) -> PlanProblem:
        """A copy with some fields changed (the original is never mutated)."""
        from dataclasses import replace

        return replace(self, **changes)  # type: ignore[arg-type]
