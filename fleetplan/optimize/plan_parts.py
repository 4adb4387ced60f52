"""The parts of a plan: a pool (:class:`FleetEntry`), a class's outcome (:class:`ClassResult`),
the solver's report (:class:`SolverReport`), an hour of a diurnal plan (:class:`HourPlan`) and a
per-replica capacity (:class:`CapacityNote`) and the benchmark to run next (:class:`MeasureNext`).

Each record owns its piece of the JSON contract (``fleetplan solve --format json``; field names
binding): ``to_dict`` writes it, ``from_dict`` reads it back and refuses a bad field with one
line naming the file, the field's path and its value (:class:`~fleetplan.optimize.plan_fields.
FieldReader`). Two shapes of a pool are read: pools per SLO tier (``{pool, config, region,
tier_ttft_p99_ms, count}``) and the older one pool per (configuration, region) (``{config,
count, region}``), named ``config@region`` with no tier. Fields a reader does not know are
ignored, so a plan that gains fields still loads. :class:`fleetplan.optimize.plan.Plan` holds
them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import FleetplanError, InputError
from fleetplan.optimize.plan_fields import FieldReader
from fleetplan.scenario.fleet import pool_label, split_model, split_pool_name

if TYPE_CHECKING:
    from fleetplan.optimize.problem import Tier

SPLIT_TOLERANCE = 1e-3

@dataclass(frozen=True)
class FleetEntry:
    """``count`` replicas of one pool: a configuration in a region, run at an SLO tier."""

    config: str
    count: int
    region: str
    tier_ttft_p99_ms: float | None = None
    tier_tpot_p99_ms: float | None = None
    spare: int | None = None  # of ``count``, replicas kept for churn or redundancy (N+k)
    market: str | None = None  # ``spot`` for a spot pool (named ``config@region~spot/...``)
    # whether the replica model of this configuration is calibrated (measured runs) or
    # spec-based; None in plan files written before it was recorded
    calibrated: bool | None = field(default=None, compare=False)
    # the model the replicas serve: set in a plan of several models only (the pool's name then
    # starts with it, ``model/config@region/200ms``)
    model: str | None = None
    # the engine settings of the pool's replicas ((key, value) pairs in ENGINE_ARGS' order):
    # set when its candidate states a ``server:`` record, written only then
    server: tuple[tuple[str, int | float | bool], ...] | None = None

    @classmethod
    def of_pool(cls, name: str, count: int, tier: Tier, spare: int | None = None) -> FleetEntry:
        """``count`` replicas of the pool named ``name`` (``config@region/200ms``, or
        ``config@region~spot/200ms``, or ``model/config@region/200ms``) at ``tier``."""
        model, rest = split_model(name)
        config, region, market = split_pool_name(rest)
        return cls(config, count, region, tier.ttft_ms, tier.tpot_p99_ms, spare, market,
                   model=model)

    @property
    def pool(self) -> str:
        """The pool's unique name, ``config@region/200ms`` (``config@region~spot/200ms``;
        ``model/config@region/200ms`` in a plan of several models)."""
        return pool_label(self.config, self.region, self.tier_ttft_p99_ms, self.tier_tpot_p99_ms,
                          self.market, self.model)

    @property
    def gpus_per_replica(self) -> int:
        return HardwareConfig.split(self.config)[0]  # a plan's names are canonical

    @property
    def gpus(self) -> int:
        return self.count * self.gpus_per_replica

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pool": self.pool}
        if self.model is not None:
            out["model"] = self.model
        out.update({"config": self.config, "region": self.region,
                    "tier_ttft_p99_ms": self.tier_ttft_p99_ms, "count": self.count})
        if self.tier_tpot_p99_ms is not None:
            out["tier_tpot_p99_ms"] = self.tier_tpot_p99_ms
        if self.spare is not None:
            out["spare"] = self.spare
        if self.market is not None and self.market != "on-demand":
            out["market"] = self.market
        if self.calibrated is not None:
            out["calibrated"] = self.calibrated
        if self.server:
            out["server"] = dict(self.server)
        return out

    def scenario_pool(self) -> dict[str, Any]:
        """The entry as a scenario's ``fleet`` item."""
        return {k: v for k, v in self.to_dict().items()
                if k not in ("pool", "spare", "calibrated") and v is not None}

    @classmethod
    def from_dict(cls, r: FieldReader, d: Any, where: str) -> FleetEntry:
        """A ``fleet[]`` item (either shape); its ``pool``, when given, must name it."""
        d = r.obj(d, where)
        config = r.str_(d, "config", where)
        try:
            HardwareConfig.parse(config, r.catalog)
        except (FleetplanError, ValueError):
            raise r.fail(f"{where}.config", config,
                         "a configuration such as 1xH100-PCIe") from None
        row = cls(config=config, count=r.int_(d, "count", where),
                  region=r.opt_str(d, "region", where) or "EU27",
                  tier_ttft_p99_ms=r.opt_num(d, "tier_ttft_p99_ms", where),
                  tier_tpot_p99_ms=r.opt_num(d, "tier_tpot_p99_ms", where),
                  market=_market(r, d, where),
                  spare=None if d.get("spare") is None else r.int_(d, "spare", where),
                  calibrated=r.opt_bool(d, "calibrated", where),
                  model=r.opt_str(d, "model", where), server=_server(r, d, where))
        pool = r.opt_str(d, "pool", where)
        if pool is not None and pool != row.pool:
            raise r.fail(f"{where}.pool", pool,
                         f"the name of its config, region and tier ({row.pool})")
        return row


def _market(r: FieldReader, d: Mapping[str, Any], where: str) -> str | None:
    """``fleet[].market`` (written for a spot pool only; absent: the default market)."""
    market = r.opt_str(d, "market", where)
    if market not in (None, "on-demand", "spot"):
        raise r.fail(f"{where}.market", market, "on-demand or spot")
    return None if market == "on-demand" else market


def _server(r: FieldReader, d: Mapping[str, Any], where: str
            ) -> tuple[tuple[str, int | float | bool], ...] | None:
    """``fleet[].server``: the engine settings of the pool's replicas (absent: none stated),
    each key and value as a scenario candidate's ``server:`` takes them."""
    from fleetplan.profiles.server import ENGINE_ARGS

    raw = d.get("server")
    if raw is None:
        return None
    r.obj(raw, f"{where}.server")
    for key, value in raw.items():
        arg = ENGINE_ARGS.get(key)
        if arg is None:
            raise r.fail(f"{where}.server.{key}", value,
                         f"a key of {', '.join(ENGINE_ARGS)}")
        try:
            arg.check(value)
        except ValueError as exc:
            raise r.fail(f"{where}.server.{key}", value, f"a {key} setting ({exc})") from None
    return tuple((k, raw[k]) for k in ENGINE_ARGS if k in raw) or None


def pools_from_list(r: FieldReader, items: list[Any], where: str) -> tuple[FleetEntry, ...]:
    """The pools of a ``fleet`` list; a pool's name is not repeated."""
    out = tuple(FleetEntry.from_dict(r, e, f"{where}[{i}]") for i, e in enumerate(items))
    seen: dict[str, int] = {}
    for i, p in enumerate(out):
        if p.pool in seen:
            raise r.fail(f"{where}[{i}].pool", p.pool,
                         f"a name not used by {where}[{seen[p.pool]}]")
        seen[p.pool] = i
    return out



@dataclass(frozen=True)
class ClassResult:
    """One class: its SLO, what the simulation measured, and where its traffic goes."""

    name: str
    rate_rps: float
    slo_ttft_p99_ms: float | None
    ttft_p99_ms: float | None
    met: bool
    split: dict[str, float]
    slo_tpot_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    slo_e2e_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    ttft_p99_ci_ms: tuple[float, float] | None = None
    # solve --confidence only: the chance the SLO holds given the model's measured error, and
    # the latency margin (ms off the TTFT SLO) the plan was sized with
    slo_met_probability: float | None = None
    margin_ms: float | None = None
    # the replica model's own error (fleetplan.optimize.model_band): where the real P99 TTFT
    # fell for 80% of held-out runs, given the simulated one [lo, hi]; the words naming the
    # error table; whether every pool carrying the class is calibrated
    ttft_p99_band_ms: tuple[float, float] | None = None
    band_basis: str | None = None
    calibrated: bool | None = None
    # the model that serves the class: set in a plan of several models only
    model: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.model is not None:
            out["model"] = self.model
        out.update({
            "rate_rps": self.rate_rps, "slo_ttft_p99_ms": self.slo_ttft_p99_ms,
            "ttft_p99_ms": self.ttft_p99_ms, "met": self.met, "split": dict(self.split),
        })
        if self.ttft_p99_ci_ms is not None:
            out["ttft_p99_ci_ms"] = list(self.ttft_p99_ci_ms)
        for k in ("slo_tpot_p99_ms", "tpot_p99_ms", "slo_e2e_p99_ms", "e2e_p99_ms",
                  "slo_met_probability", "margin_ms"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if self.ttft_p99_band_ms is not None:
            out["ttft_p99_band_ms"] = list(self.ttft_p99_band_ms)
        for k in ("band_basis", "calibrated"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        return out

    @classmethod
    def from_dict(cls, r: FieldReader, d: Any, where: str, *, split_required: bool
                  ) -> ClassResult:
        """A ``classes[]`` item; ``split_required``: a plan with a fleet splits every class."""
        d = r.obj(d, where)
        name = r.str_(d, "name", where)
        split: dict[str, float] = {}
        raw = r.field(d, "split", where) if split_required else d.get("split") or {}
        if not isinstance(raw, Mapping):
            raise r.fail(f"{where}.split", raw, "an object of pool name -> share")
        for k, v in raw.items():
            if isinstance(v, bool) or not isinstance(v, int | float) \
                    or not 0.0 <= v <= 1.0 + 1e-9:
                raise r.fail(f"{where}.split.{k}", v, "a share in [0, 1]")
            split[str(k)] = float(v)
        total = sum(split.values())
        if split and abs(total - 1.0) > SPLIT_TOLERANCE:
            raise r.fail(f"{where}.split", dict(raw),
                         f"shares summing to 1 (they sum to {total:.6g})")
        ci = r.interval(d, "ttft_p99_ci_ms", where, lo=None)
        band = r.interval(d, "ttft_p99_band_ms", where, lo=0.0)
        prob = r.opt_num(d, "slo_met_probability", where)
        if prob is not None and prob > 1:
            raise r.fail(f"{where}.slo_met_probability", prob, "a probability in [0, 1]")
        return cls(
            name=name, rate_rps=r.num(d, "rate_rps", where, finite=True),
            slo_ttft_p99_ms=r.opt_num(d, "slo_ttft_p99_ms", where),
            ttft_p99_ms=r.opt_num(d, "ttft_p99_ms", where),
            met=r.bool_(d, "met", where), split=split,
            ttft_p99_ci_ms=ci,
            slo_tpot_p99_ms=r.opt_num(d, "slo_tpot_p99_ms", where),
            tpot_p99_ms=r.opt_num(d, "tpot_p99_ms", where),
            slo_e2e_p99_ms=r.opt_num(d, "slo_e2e_p99_ms", where),
            e2e_p99_ms=r.opt_num(d, "e2e_p99_ms", where),
            slo_met_probability=prob, margin_ms=r.opt_num(d, "margin_ms", where),
            ttft_p99_band_ms=band,
            band_basis=r.opt_str(d, "band_basis", where),
            calibrated=r.opt_bool(d, "calibrated", where),
            model=r.opt_str(d, "model", where))


@dataclass(frozen=True)
class SolverReport:
    """How the answer was found: solver, its stop criteria, time, rounds of the closed loop."""

    name: str
    status: str
    seconds: float | None
    gap: float | None  # None only in a plan file that lacks it (the report reads such files)
    rounds: int | None
    time_limit_s: float | None
    gap_achieved: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "seconds": self.seconds,
                "gap": self.gap, "rounds": self.rounds, "time_limit_s": self.time_limit_s,
                "gap_achieved": self.gap_achieved}

    @classmethod
    def from_dict(cls, r: FieldReader, d: Any) -> SolverReport:
        d = r.obj(d, "solver")
        rounds = d.get("rounds")
        if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, int)):
            raise r.fail("solver.rounds", rounds, "a whole number")
        return cls(
            name=r.str_(d, "name", "solver"), status=r.str_(d, "status", "solver"),
            seconds=r.opt_num(d, "seconds", "solver"),
            gap=r.opt_num(d, "gap", "solver"), rounds=rounds,
            time_limit_s=r.opt_num(d, "time_limit_s", "solver"),
            gap_achieved=r.opt_num(d, "gap_achieved", "solver"))


@dataclass(frozen=True)
class HourPlan:
    """One hour of a diurnal plan."""

    hour: int
    rate_rps: float
    fleet: tuple[FleetEntry, ...]
    cost_per_hour_usd: float
    g_co2_per_hour: float
    met: bool
    on_demand: tuple[FleetEntry, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "hour": self.hour, "rate_rps": self.rate_rps,
            "fleet": [e.to_dict() for e in self.fleet],
            "cost_per_hour_usd": self.cost_per_hour_usd, "g_co2_per_hour": self.g_co2_per_hour,
            "met": self.met,
        }
        if self.on_demand:
            out["on_demand"] = [e.to_dict() for e in self.on_demand]
        return out

    @classmethod
    def from_dict(cls, r: FieldReader, d: Any, where: str) -> HourPlan:
        d = r.obj(d, where)
        fleet = r.list_(d, "fleet", where) or []
        on_demand = r.opt_list(d, "on_demand", where) or []
        return cls(
            hour=r.int_(d, "hour", where), rate_rps=r.num(d, "rate_rps", where, finite=True),
            fleet=pools_from_list(r, fleet, f"{where}.fleet"),
            on_demand=pools_from_list(r, on_demand, f"{where}.on_demand"),
            cost_per_hour_usd=r.num(d, "cost_per_hour_usd", where, finite=True),
            g_co2_per_hour=r.num(d, "g_co2_per_hour", where, finite=True),
            met=r.bool_(d, "met", where))


@dataclass(frozen=True)
class CapacityNote:
    """A per-replica capacity (sustained, at the tier's SLO, with its source): of a pool the plan
    uses, or (infeasible plans) of every candidate configuration at the class's own SLO."""

    class_name: str
    config: str
    tier_ttft_p99_ms: float | None
    capacity_rps: float
    derate: float | None  # None only in a plan file that lacks it (the report reads such files)
    source: str | None
    pool: str | None = None
    region: str | None = None
    ttft_p99_ms_at_capacity: float | None = None
    model: str | None = None  # the model measured: set in a plan of several models only

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"class": self.class_name}
        if self.model is not None:
            out["model"] = self.model
        if self.pool is not None:
            out["pool"] = self.pool
        out.update({"config": self.config, "region": self.region,
                    "tier_ttft_p99_ms": self.tier_ttft_p99_ms, "capacity_rps": self.capacity_rps,
                    "ttft_p99_ms_at_capacity": self.ttft_p99_ms_at_capacity,
                    "derate": self.derate, "source": self.source})
        return out

    @classmethod
    def from_dict(cls, r: FieldReader, d: Any, where: str) -> CapacityNote:
        d = r.obj(d, where)
        pool = r.opt_str(d, "pool", where)
        config = r.opt_str(d, "config", where)
        if config is None:
            if pool is None:
                raise InputError(f"{r.source}: {where}: missing config (or pool)")
            config = split_model(pool)[1].split("@", 1)[0]
        return cls(
            class_name=r.str_(d, "class", where), config=config,
            capacity_rps=r.num(d, "capacity_rps", where, finite=True),
            pool=pool, region=r.opt_str(d, "region", where),
            tier_ttft_p99_ms=r.opt_num(d, "tier_ttft_p99_ms", where),
            ttft_p99_ms_at_capacity=r.opt_num(d, "ttft_p99_ms_at_capacity", where),
            derate=r.opt_num(d, "derate", where), source=r.opt_str(d, "source", where),
            model=r.opt_str(d, "model", where))


@dataclass(frozen=True)
class MeasureNext:
    """The benchmark to run next: ``model`` on ``config``; the plan's cost per hour when its
    throughput is at either end of its 80% band (``cost_range_usd_per_hour``, low first);
    ``None`` as the high end: at the band's low end no plan meets every SLO);
    ``capacity_factors``: the two ends as multiples of the predicted capacity; ``basis``: the
    held-out errors they come from; ``commands``: what measures it and plans on it."""

    model: str
    config: str
    cost_range_usd_per_hour: tuple[float, float | None]
    capacity_factors: tuple[float, float]
    basis: str
    commands: tuple[str, ...]

    @property
    def span_usd_per_hour(self) -> float:
        lo, hi = self.cost_range_usd_per_hour
        return math.inf if hi is None else hi - lo

    def sentence(self) -> str:
        """The one line ``solve`` prints."""
        return f"measure next: {self.why()}"

    def why(self) -> str:
        """What to measure and why: the model on the configuration, its band, the cost range."""
        lo, hi = self.cost_range_usd_per_hour
        cost = (f"costs ${lo:.2f}/h at its high end and has no plan meeting every SLO at its "
                "low end" if hi is None else f"costs ${lo:.2f}-${hi:.2f}/h")
        return (f"{self.model} on {self.config}: its throughput is predicted from datasheets, "
                f"and across its 80% band ({self.capacity_factors[0]:.2g}-"
                f"{self.capacity_factors[1]:.2g}x the prediction) this plan {cost}; no other "
                "benchmark moves the cost more")

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "config": self.config,
                "cost_range_usd_per_hour": list(self.cost_range_usd_per_hour),
                "capacity_factors": list(self.capacity_factors), "basis": self.basis,
                "commands": list(self.commands)}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> MeasureNext:
        lo, hi = obj["cost_range_usd_per_hour"]
        f_lo, f_hi = obj["capacity_factors"]
        return cls(str(obj["model"]), str(obj["config"]),
                   (float(lo), None if hi is None else float(hi)),
                   (float(f_lo), float(f_hi)), str(obj["basis"]),
                   tuple(str(c) for c in obj["commands"]))
