"""A saved plan (``fleetplan solve --format json``) and frontier (``fleetplan frontier --format
json``) read back as typed records, checked field by field and as a whole.

Main entries: :func:`load_plan` / :func:`plan_from_dict` (a :class:`PlanDoc`) and
:func:`load_frontier` / :func:`frontier_from_dict` (a :class:`FrontierDoc`).

Two shapes of ``fleet[]`` are read: pools per SLO tier (``{pool, config, region,
tier_ttft_p99_ms, count}``, with ``classes[].split`` keyed by pool name) and the older one pool
per (configuration, region) (``{config, count, region}``, split keyed by configuration), whose
pools are named ``config@region`` with no tier. Fields the report does not use are ignored, so a
plan that gains fields still loads. A bad file is refused with one line naming the file, the
field and its value (:class:`~fleetplan.errors.InputError`). The records are the optimizer's own
(:mod:`fleetplan.optimize.plan`), and this is the one plan reader and validator: ``fleetplan
report`` and a replay (:func:`fleetplan.optimize.plan.plan_from_dict`, ``fleetplan simulate
--plan``) both read through it, so a plan one accepts the other accepts (a replay needs a fleet:
an infeasible plan is reported, never replayed).

Rules across fields (:func:`_check_whole`), each refused naming the field and its value: an
infeasible plan has no fleet and is not verified; a plan with a fleet has at least one pool;
a verified plan met every class (and every hour); each pool holds 1..``MAX_POOL_COUNT``
replicas (``simulate --plan``'s bound), its spares within them; class names and hours are not
repeated; a class's simulated P99 TTFT lies in its 95% interval; every share is sent to a pool
of the fleet (the older shape's configuration keys resolve to one pool); money and carbon are
finite and a fleet costs at most :data:`MAX_USD_PER_GPU_HOUR` per GPU; a diurnal plan's cost is
the mean of its hours'. Given the scenario (:func:`check_plan_scenario`: ``simulate --plan``
always, ``report --scenario``), its classes, candidates and prices must agree with the plan.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetplan._io import read_data_file
from fleetplan.errors import FleetplanError, InputError
from fleetplan.optimize.plan import (
    CapacityNote,
    ClassResult,
    FleetEntry,
    HourPlan,
    SolverReport,
)

STATUSES = ("optimal", "feasible", "infeasible")
TOP = "(top level)"
SPLIT_TOLERANCE = 1e-3
# No GPU rents for more per hour: a plan's cost above this per GPU of its fleet is a broken
# file (1e308), not a price (the dearest catalog row is a few dollars per GPU-hour).
MAX_USD_PER_GPU_HOUR = 1000.0
# A figure solve rounds to 6 digits (fleetplan.optimize.solve), compared with one recomputed.
COST_TOLERANCE = 1e-4
_HINT = "write it with fleetplan solve --format json"


# The records of a plan are the optimizer's own (one family): a pool is a FleetEntry, a class a
# ClassResult, ...; the report's names stay as aliases.
PoolRow = FleetEntry
ClassRow = ClassResult
HourRow = HourPlan
CapacityRow = CapacityNote
SolverRow = SolverReport


@dataclass(frozen=True)
class PlanDoc:
    """A plan file as read: every field the report shows, typed."""

    source: str  # the file's path, or "<dict>"
    status: str
    fleet: tuple[PoolRow, ...]
    cost_per_hour_usd: float | None
    cost_per_mtok_usd: float | None
    g_co2_per_mtok: float | None
    g_co2_per_hour: float | None
    classes: tuple[ClassRow, ...]
    solver: SolverRow
    verified: bool
    capacities: tuple[CapacityRow, ...]
    notes: tuple[str, ...]
    tiered: bool  # the pools-per-SLO-tier shape (issue 10)
    reason: str | None = None
    binding: str | None = None
    relaxation: str | None = None
    hours: tuple[HourRow, ...] | None = None
    base_fleet: tuple[PoolRow, ...] | None = None

    @property
    def replicas(self) -> int:
        return sum(p.count for p in self.fleet)

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.fleet)

    def fleet_label(self) -> str:
        """``2x1xH100-PCIe + 4x2xRTX-4090`` (see :func:`fleet_label`; ``-`` when empty)."""
        return fleet_label(self.fleet)


def fleet_label(fleet: tuple[PoolRow, ...]) -> str:
    """Replicas per configuration and market, tiers and regions added up: ``2x1xH100-PCIe +
    4x2xRTX-4090 (spot)``."""
    counts: dict[tuple[str, str | None], int] = {}
    for p in fleet:
        if p.count:
            counts[(p.config, p.market)] = counts.get((p.config, p.market), 0) + p.count
    return " + ".join(f"{n}x{c}" + (f" ({m})" if m else "")
                      for (c, m), n in counts.items()) or "-"


@dataclass(frozen=True)
class FrontierPointRow:
    value: float
    status: str
    verified: bool
    cost_per_hour_usd: float | None
    cost_per_mtok_usd: float | None
    g_co2_per_mtok: float | None
    pareto: bool
    fleet: tuple[PoolRow, ...]
    classes: tuple[ClassRow, ...]


@dataclass(frozen=True)
class FrontierDoc:
    source: str
    sweep: str
    parameter: str
    unit: str
    points: tuple[FrontierPointRow, ...]


class _Reader:
    """Typed field access that names the file, the field path and the value on failure."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, value: Any, expected: str) -> InputError:
        shown = json.dumps(value)[:80] if _jsonable(value) else repr(value)[:80]
        if isinstance(value, float) and math.isinf(value):
            shown = "Infinity" if value > 0 else "-Infinity"
        return InputError(f"{self.source}: {where} = {shown}: expected {expected}")

    def obj(self, d: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(d, Mapping):
            raise self.fail(where, d, "an object")
        return d

    def field(self, d: Mapping[str, Any], key: str, where: str) -> Any:
        if key not in d:
            raise InputError(f"{self.source}: {_at(where, key)}: missing")
        return d[key]

    def opt_num(self, d: Mapping[str, Any], key: str, where: str,
                lo: float | None = 0.0, finite: bool = False) -> float | None:
        """A number or null (absent reads as null); ``finite``: infinity refused (money,
        carbon, rates: a latency may be infinite, an overloaded class's)."""
        v = d.get(key)
        return None if v is None else self._num(v, _at(where, key), lo, " or null", finite)

    def num(self, d: Mapping[str, Any], key: str, where: str, lo: float | None = 0.0,
            finite: bool = False) -> float:
        return self._num(self.field(d, key, where), _at(where, key), lo, "", finite)

    def _num(self, v: Any, where: str, lo: float | None, tail: str, finite: bool) -> float:
        if v == "inf" and not finite:  # how JSON writers spell infinity (fleetplan._io.json_safe)
            v = math.inf
        if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v) \
                or (lo is not None and v < lo) or (finite and math.isinf(v)):
            raise self.fail(where, v, ("a finite number" if finite else "a number")
                            + (f" >= {lo:g}" if lo is not None else "") + tail)
        return float(v)

    def int_(self, d: Mapping[str, Any], key: str, where: str, lo: int = 0) -> int:
        v = self.field(d, key, where)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise self.fail(_at(where, key), v, f"a whole number >= {lo}")
        return v

    def str_(self, d: Mapping[str, Any], key: str, where: str) -> str:
        v = self.field(d, key, where)
        if not isinstance(v, str) or not v:
            raise self.fail(_at(where, key), v, "a non-empty string")
        return v

    def opt_str(self, d: Mapping[str, Any], key: str, where: str) -> str | None:
        return None if d.get(key) is None else self.str_(d, key, where)

    def bool_(self, d: Mapping[str, Any], key: str, where: str) -> bool:
        v = self.field(d, key, where)
        if not isinstance(v, bool):
            raise self.fail(_at(where, key), v, "true or false")
        return v

    def list_(self, d: Mapping[str, Any], key: str, where: str) -> list[Any]:
        v = self.field(d, key, where)
        if not isinstance(v, list):
            raise self.fail(_at(where, key), v, "a list")
        return v

    def opt_list(self, d: Mapping[str, Any], key: str, where: str) -> list[Any] | None:
        return None if d.get(key) is None else self.list_(d, key, where)


def _at(where: str, key: str) -> str:
    return key if where == TOP else f"{where}.{key}"


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return False
    return True


def _pool(r: _Reader, d: Any, where: str) -> PoolRow:
    from fleetplan.catalog.hardware import HardwareConfig

    d = r.obj(d, where)
    config = r.str_(d, "config", where)
    try:
        HardwareConfig.parse(config)
    except (FleetplanError, ValueError):
        raise r.fail(f"{where}.config", config, "a configuration such as 1xH100-PCIe") from None
    row = PoolRow(config=config, count=r.int_(d, "count", where),
                  region=r.opt_str(d, "region", where) or "EU27",
                  tier_ttft_p99_ms=r.opt_num(d, "tier_ttft_p99_ms", where),
                  tier_tpot_p99_ms=r.opt_num(d, "tier_tpot_p99_ms", where),
                  market=_market(r, d, where),
                  spare=None if d.get("spare") is None else r.int_(d, "spare", where),
                  calibrated=_opt_bool(r, d, "calibrated", where))
    pool = r.opt_str(d, "pool", where)
    if pool is not None and pool != row.pool:
        raise r.fail(f"{where}.pool", pool, f"the name of its config, region and tier ({row.pool})")
    return row


def _market(r: _Reader, d: Mapping[str, Any], where: str) -> str | None:
    """``fleet[].market`` (written for a spot pool only; absent: the default market)."""
    market = r.opt_str(d, "market", where)
    if market not in (None, "on-demand", "spot"):
        raise r.fail(f"{where}.market", market, "on-demand or spot")
    return None if market == "on-demand" else market


def _pools(r: _Reader, items: list[Any], where: str) -> tuple[PoolRow, ...]:
    out = tuple(_pool(r, e, f"{where}[{i}]") for i, e in enumerate(items))
    seen: dict[str, int] = {}
    for i, p in enumerate(out):
        if p.pool in seen:
            raise r.fail(f"{where}[{i}].pool", p.pool,
                         f"a name not used by {where}[{seen[p.pool]}]")
        seen[p.pool] = i
    return out


def _class(r: _Reader, d: Any, where: str, *, split_required: bool) -> ClassRow:
    d = r.obj(d, where)
    name = r.str_(d, "name", where)
    split: dict[str, float] = {}
    raw = r.field(d, "split", where) if split_required else d.get("split") or {}
    if not isinstance(raw, Mapping):
        raise r.fail(f"{where}.split", raw, "an object of pool name -> share")
    for k, v in raw.items():
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= v <= 1.0 + 1e-9:
            raise r.fail(f"{where}.split.{k}", v, "a share in [0, 1]")
        split[str(k)] = float(v)
    total = sum(split.values())
    if split and abs(total - 1.0) > SPLIT_TOLERANCE:
        raise r.fail(f"{where}.split", dict(raw), f"shares summing to 1 (they sum to {total:.6g})")
    ci = None
    raw_ci = d.get("ttft_p99_ci_ms")
    if raw_ci is not None:
        if (not isinstance(raw_ci, list) or len(raw_ci) != 2
                or not all(isinstance(x, int | float) and not isinstance(x, bool)
                           for x in raw_ci) or raw_ci[0] > raw_ci[1]):
            raise r.fail(f"{where}.ttft_p99_ci_ms", raw_ci, "[lo, hi] in ms with lo <= hi")
        ci = (float(raw_ci[0]), float(raw_ci[1]))
    band = None
    raw_band = d.get("ttft_p99_band_ms")
    if raw_band is not None:
        if (not isinstance(raw_band, list) or len(raw_band) != 2
                or not all(isinstance(x, int | float) and not isinstance(x, bool)
                           for x in raw_band) or not 0 <= raw_band[0] <= raw_band[1]):
            raise r.fail(f"{where}.ttft_p99_band_ms", raw_band,
                         "[lo, hi] in ms with 0 <= lo <= hi")
        band = (float(raw_band[0]), float(raw_band[1]))
    prob = r.opt_num(d, "slo_met_probability", where)
    if prob is not None and prob > 1:
        raise r.fail(f"{where}.slo_met_probability", prob, "a probability in [0, 1]")
    return ClassRow(
        name=name, rate_rps=r.num(d, "rate_rps", where, finite=True),
        slo_ttft_p99_ms=r.opt_num(d, "slo_ttft_p99_ms", where),
        ttft_p99_ms=r.opt_num(d, "ttft_p99_ms", where),
        met=r.bool_(d, "met", where), split=split, ttft_p99_ci_ms=ci,
        slo_tpot_p99_ms=r.opt_num(d, "slo_tpot_p99_ms", where),
        tpot_p99_ms=r.opt_num(d, "tpot_p99_ms", where),
        slo_e2e_p99_ms=r.opt_num(d, "slo_e2e_p99_ms", where),
        e2e_p99_ms=r.opt_num(d, "e2e_p99_ms", where),
        slo_met_probability=prob, margin_ms=r.opt_num(d, "margin_ms", where),
        ttft_p99_band_ms=band, band_basis=r.opt_str(d, "band_basis", where),
        calibrated=_opt_bool(r, d, "calibrated", where))


def _opt_bool(r: _Reader, d: Mapping[str, Any], key: str, where: str) -> bool | None:
    """true, false or absent (None: a plan file written before the field was recorded)."""
    return None if d.get(key) is None else r.bool_(d, key, where)


def _classes(r: _Reader, d: Mapping[str, Any], where: str, *, split_required: bool
             ) -> tuple[ClassRow, ...]:
    items = r.list_(d, "classes", where)
    out = tuple(_class(r, c, f"classes[{i}]", split_required=split_required)
                for i, c in enumerate(items))
    if not out and split_required:  # an infeasible plan may carry none (solve writes [])
        raise r.fail("classes", [], "at least one class")
    return out


def _solver(r: _Reader, d: Any) -> SolverRow:
    d = r.obj(d, "solver")
    rounds = d.get("rounds")
    if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, int)):
        raise r.fail("solver.rounds", rounds, "a whole number")
    return SolverRow(
        name=r.str_(d, "name", "solver"), status=r.str_(d, "status", "solver"),
        seconds=r.opt_num(d, "seconds", "solver"),
        gap=r.opt_num(d, "gap", "solver"), rounds=rounds,
        time_limit_s=r.opt_num(d, "time_limit_s", "solver"),
        gap_achieved=r.opt_num(d, "gap_achieved", "solver"))


def _capacity(r: _Reader, d: Any, where: str) -> CapacityRow:
    d = r.obj(d, where)
    pool = r.opt_str(d, "pool", where)
    config = r.opt_str(d, "config", where)
    if config is None:
        if pool is None:
            raise InputError(f"{r.source}: {where}: missing config (or pool)")
        config = pool.split("@", 1)[0]
    cls = r.str_(d, "class", where)
    return CapacityRow(
        class_name=cls, config=config, capacity_rps=r.num(d, "capacity_rps", where, finite=True),
        pool=pool, region=r.opt_str(d, "region", where),
        tier_ttft_p99_ms=r.opt_num(d, "tier_ttft_p99_ms", where),
        ttft_p99_ms_at_capacity=r.opt_num(d, "ttft_p99_ms_at_capacity", where),
        derate=r.opt_num(d, "derate", where), source=r.opt_str(d, "source", where))


def _hour(r: _Reader, d: Any, where: str) -> HourRow:
    d = r.obj(d, where)
    fleet = r.list_(d, "fleet", where) or []
    on_demand = r.opt_list(d, "on_demand", where) or []
    return HourRow(
        hour=r.int_(d, "hour", where), rate_rps=r.num(d, "rate_rps", where, finite=True),
        fleet=_pools(r, fleet, f"{where}.fleet"),
        on_demand=_pools(r, on_demand, f"{where}.on_demand"),
        cost_per_hour_usd=r.num(d, "cost_per_hour_usd", where, finite=True),
        g_co2_per_hour=r.num(d, "g_co2_per_hour", where, finite=True),
        met=r.bool_(d, "met", where))


def plan_from_dict(data: Any, source: str = "<dict>") -> PlanDoc:
    """A plan's JSON object as a :class:`PlanDoc` (``source`` names it in errors)."""
    r = _Reader(source)
    d = r.obj(data, "(top level)")
    if "points" in d and "sweep" in d:
        raise InputError(f"{source}: a frontier file (sweep {d.get('sweep')!r}), not a plan; "
                         "give it with --frontier")
    status = r.field(d, "status", "(top level)")
    if status not in STATUSES:
        raise r.fail("status", status, " | ".join(STATUSES))
    fleet_items = r.list_(d, "fleet", "(top level)")
    fleet = _pools(r, fleet_items, "fleet")
    tiered = any(isinstance(e, Mapping) and "pool" in e for e in fleet_items)
    feasible = status != "infeasible"
    caps = r.opt_list(d, "capacities", "(top level)") or []
    hours = r.opt_list(d, "hours", "(top level)")
    base = r.opt_list(d, "base_fleet", "(top level)")
    notes = r.opt_list(d, "notes", "(top level)") or []
    if not all(isinstance(n, str) for n in notes):
        raise r.fail("notes", notes, "a list of strings")
    plan = PlanDoc(
        source=source, status=status, fleet=fleet,
        cost_per_hour_usd=r.opt_num(d, "cost_per_hour_usd", TOP, finite=True),
        cost_per_mtok_usd=r.opt_num(d, "cost_per_mtok_usd", TOP, finite=True),
        g_co2_per_mtok=r.opt_num(d, "g_co2_per_mtok", TOP, finite=True),
        g_co2_per_hour=r.opt_num(d, "g_co2_per_hour", TOP, finite=True),
        classes=_classes(r, d, "(top level)", split_required=feasible),
        solver=_solver(r, r.field(d, "solver", "(top level)")),
        verified=r.bool_(d, "verified", "(top level)"),
        capacities=tuple(_capacity(r, c, f"capacities[{i}]") for i, c in enumerate(caps)),
        notes=tuple(notes), tiered=tiered,
        reason=r.opt_str(d, "reason", "(top level)"),
        binding=r.opt_str(d, "binding", "(top level)"),
        relaxation=r.opt_str(d, "relaxation", "(top level)"),
        hours=None if hours is None else tuple(_hour(r, h, f"hours[{i}]")
                                               for i, h in enumerate(hours)),
        base_fleet=None if base is None else _pools(r, base, "base_fleet"))
    if feasible and plan.cost_per_hour_usd is None:
        raise r.fail("cost_per_hour_usd", None, f"a number (status is {status})")
    _check_split_keys(r, plan)
    _check_whole(r, plan)
    return plan


def split_pool(plan: PlanDoc, key: str) -> str | None:
    """The pool of ``plan``'s fleet a split key sends traffic to: a pool's name, or in the older
    shape its configuration or ``config@region`` when exactly one pool of the fleet has it
    (None: no pool, or several)."""
    if any(p.pool == key for p in plan.fleet):
        return key
    hits = [p.pool for p in plan.fleet if key in (p.config, f"{p.config}@{p.region}")]
    return hits[0] if len(hits) == 1 else None


def _check_split_keys(r: _Reader, plan: PlanDoc) -> None:
    """Every share is sent to a pool of the fleet with replicas (a share sent nowhere, or to
    several pools at once, is a broken file); shares of one class sum to 1."""
    pools = ", ".join(sorted(p.pool for p in plan.fleet)) or "none"
    for i, c in enumerate(plan.classes):
        for k, share in c.split.items():
            if share > 0 and split_pool(plan, k) is None:
                raise r.fail(f"classes[{i}].split", k, f"a pool of the fleet (has: {pools})")


def _check_whole(r: _Reader, plan: PlanDoc) -> None:
    """The rules across fields (module docstring): a plan whose fields are each well-formed
    but contradict one another is refused, naming the first field that does."""
    from fleetplan.scenario.fleet import MAX_POOL_COUNT

    if plan.status == "infeasible":
        if plan.fleet:
            raise r.fail("fleet", [p.pool for p in plan.fleet],
                         "[] (status is \"infeasible\": an infeasible plan has no fleet)")
        if plan.verified:
            raise r.fail("verified", True, "false (status is \"infeasible\")")
    elif not plan.fleet:
        raise r.fail("fleet", [], f"at least one pool (status is {plan.status!r})")
    top = MAX_POOL_COUNT
    for where, rows in (("fleet", plan.fleet), ("base_fleet", plan.base_fleet or ())):
        for i, p in enumerate(rows):
            if not 1 <= p.count <= top:
                raise r.fail(f"{where}[{i}].count", p.count,
                             f"a whole number within 1..{top:,} (a scenario's pool bound)")
            if p.spare is not None and p.spare > p.count:
                raise r.fail(f"{where}[{i}].spare", p.spare,
                             f"at most the pool's count ({p.count})")
    for h, one in enumerate(plan.hours or ()):
        for kind, rows in (("fleet", one.fleet), ("on_demand", one.on_demand)):
            for i, p in enumerate(rows):
                if p.count > top:
                    raise r.fail(f"hours[{h}].{kind}[{i}].count", p.count,
                                 f"a whole number within 0..{top:,} (a scenario's pool bound)")
    seen: dict[str, int] = {}
    for i, c in enumerate(plan.classes):
        if c.name in seen:
            raise InputError(f"{r.source}: classes[{i}].name = {c.name!r}: repeated (each class "
                             f"has one entry, classes[{seen[c.name]}] is {c.name!r})")
        seen[c.name] = i
    given: dict[int, int] = {}
    for i, hr in enumerate(plan.hours or ()):
        if hr.hour > 23:
            raise r.fail(f"hours[{i}].hour", hr.hour, "an hour of the day, 0..23")
        if hr.hour in given:
            raise r.fail(f"hours[{i}].hour", hr.hour,
                         f"an hour not given by hours[{given[hr.hour]}]")
        given[hr.hour] = i
    if plan.verified:
        for i, c in enumerate(plan.classes):
            if not c.met:
                raise r.fail(f"classes[{i}].met", False,
                             "true (the plan says verified: every class met its SLO)")
        for i, hp in enumerate(plan.hours or ()):
            if not hp.met:
                raise r.fail(f"hours[{i}].met", False,
                             "true (the plan says verified: every hour met its SLOs)")
    for i, c in enumerate(plan.classes):
        ci, p99 = c.ttft_p99_ci_ms, c.ttft_p99_ms
        if ci is not None and p99 is not None and math.isfinite(p99) \
                and not ci[0] - 1e-3 <= p99 <= ci[1] + 1e-3:
            raise r.fail(f"classes[{i}].ttft_p99_ci_ms", list(ci),
                         f"an interval holding the class's ttft_p99_ms ({p99:g})")
    gpus = sum(p.gpus for p in plan.fleet)
    cost = plan.cost_per_hour_usd
    if cost is not None and plan.fleet and cost > gpus * MAX_USD_PER_GPU_HOUR:
        raise r.fail("cost_per_hour_usd", cost, f"at most ${MAX_USD_PER_GPU_HOUR:,.0f} per GPU "
                     f"of the fleet ({gpus} GPUs: ${gpus * MAX_USD_PER_GPU_HOUR:,.0f}/h)")
    if plan.hours and cost is not None:
        mean = sum(h.cost_per_hour_usd for h in plan.hours) / len(plan.hours)
        if abs(cost - mean) > COST_TOLERANCE * max(1.0, mean):
            raise r.fail("cost_per_hour_usd", cost, f"the mean of the hours' costs "
                         f"(${mean:,.6g}/h: a diurnal plan's cost is the day's average)")


def check_plan_scenario(plan: Any, scenario: Any, source: str | None = None) -> None:
    """Refuse ``plan`` where it contradicts ``scenario`` (a loaded
    :class:`~fleetplan.scenario.Scenario`), naming the plan's file, the field and the value:
    a class the scenario does not have (and, for a plan with a fleet, a scenario class the plan
    does not split), a configuration that is not a candidate, a cost (the plan's, or an hour's)
    other than its pools' replicas at the scenario's prices. ``plan``: a :class:`PlanDoc`, or
    a :class:`~fleetplan.optimize.plan.Plan` with ``source`` naming it."""
    source = str(source or getattr(plan, "source", None) or "plan")
    names = [c.name for c in scenario.classes]
    for i, c in enumerate(plan.classes):
        if c.name not in names:
            raise InputError(f"{source}: classes[{i}].name: {c.name!r} is not a class of the "
                             f"scenario (classes: {', '.join(names)})")
    if plan.fleet:
        given = {c.name for c in plan.classes}
        missing = [n for n in names if n not in given]
        if missing:
            raise InputError(f"{source}: classes: no split for the scenario's class "
                             f"{missing[0]!r}")
    known = [c.config for c in scenario.candidates or ()]
    for i, e in enumerate(plan.fleet):
        if known and e.config not in known:
            raise InputError(f"{source}: fleet[{i}].config: {e.config} is not a candidate "
                             f"configuration of the scenario (candidates: {', '.join(known)})")
    r = _Reader(source)
    if plan.hours:
        for i, h in enumerate(plan.hours):
            _check_cost(r, f"hours[{i}].cost_per_hour_usd", h.cost_per_hour_usd, h.fleet,
                        scenario, h.on_demand)
    elif plan.cost_per_hour_usd is not None and plan.fleet:
        _check_cost(r, "cost_per_hour_usd", plan.cost_per_hour_usd, plan.fleet, scenario)


def pool_usd_per_hour(scenario: Any, pool: PoolRow) -> float:
    """What one replica of ``pool`` costs per hour at ``scenario``'s prices, as the simulator
    and the optimizer price it (a spot pool at its spot price)."""
    from fleetplan.catalog.hardware import HardwareConfig
    from fleetplan.catalog.prices import price_for
    from fleetplan.scenario.reliability import entry, pool_price

    hw = HardwareConfig.parse(pool.config)
    price = price_for(hw.gpu, scenario.market, scenario.prices_usd_per_gpu_hour)
    per_gpu, _ = pool_price(entry(scenario.reliability, pool.config, hw.gpu, pool.market),
                            hw.gpu, price.price_usd_per_gpu_hour, "", price.market == "user")
    return float(per_gpu) * hw.gpu_count


def _check_cost(r: _Reader, where: str, cost: float, pools: tuple[PoolRow, ...] | list[Any],
                scenario: Any, on_demand: tuple[PoolRow, ...] = ()) -> None:
    """``cost`` is ``pools``' replicas at the scenario's prices; an hour's ``on_demand``
    replicas (counted in ``pools`` too) cost ``commitment.on_demand_price_factor`` times the
    price, as :func:`fleetplan.optimize.solve` prices the hour."""
    want = sum(p.count * pool_usd_per_hour(scenario, p) for p in pools)
    if on_demand:
        factor = scenario.commitment.on_demand_price_factor
        want += (factor - 1.0) * sum(p.count * pool_usd_per_hour(scenario, p) for p in on_demand)
    if abs(cost - want) > COST_TOLERANCE * max(1.0, want):
        raise r.fail(where, cost, f"${want:,.6g}/h, its pools' replicas at the scenario's "
                     "prices")


def load_plan(path: str | Path) -> PlanDoc:
    """Read and check a plan file written by ``fleetplan solve --format json``."""
    return plan_from_dict(read_data_file(path, "plan file", hint=_HINT), str(path))


def frontier_from_dict(data: Any, source: str = "<dict>") -> FrontierDoc:
    """A frontier's JSON object as a :class:`FrontierDoc`."""
    r = _Reader(source)
    d = r.obj(data, "(top level)")
    if "points" not in d and "fleet" in d:
        raise InputError(f"{source}: a plan file, not a frontier; write one with fleetplan "
                         "frontier SCENARIO --sweep carbon --format json")
    points = r.list_(d, "points", "(top level)")
    rows = []
    for i, raw in enumerate(points):
        where = f"points[{i}]"
        p = r.obj(raw, where)
        status = r.field(p, "status", where)
        if status not in STATUSES:
            raise r.fail(f"{where}.status", status, " | ".join(STATUSES))
        rows.append(FrontierPointRow(
            value=r.num(p, "value", where, lo=None), status=status,
            verified=r.bool_(p, "verified", where),
            cost_per_hour_usd=r.opt_num(p, "cost_per_hour_usd", where),
            cost_per_mtok_usd=r.opt_num(p, "cost_per_mtok_usd", where),
            g_co2_per_mtok=r.opt_num(p, "g_co2_per_mtok", where),
            pareto=p.get("pareto") is not None and r.bool_(p, "pareto", where),
            fleet=_pools(r, r.list_(p, "fleet", where) or [], f"{where}.fleet"),
            classes=tuple(_class(r, c, f"{where}.classes[{j}]", split_required=False)
                          for j, c in enumerate(r.list_(p, "classes", where) or []))))
    return FrontierDoc(source=source, sweep=r.str_(d, "sweep", "(top level)"),
                       parameter=r.str_(d, "parameter", "(top level)"),
                       unit=r.opt_str(d, "unit", "(top level)") or "",
                       points=tuple(rows))


def load_frontier(path: str | Path) -> FrontierDoc:
    """Read and check a frontier file written by ``fleetplan frontier --format json``."""
    data = read_data_file(path, "frontier file", hint="write it with fleetplan frontier "
                          "SCENARIO --sweep carbon --format json")
    return frontier_from_dict(data, str(path))
