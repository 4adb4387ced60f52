"""The rules a plan file must keep across its fields, and against the scenario it was solved from.

Across fields (:func:`check_whole`, :func:`check_split_keys`), each refused naming the field and
its value: an infeasible plan has no fleet and is not verified; a plan with a fleet has at least
one pool; a verified plan met every class (and every hour); each pool holds
1..``MAX_POOL_COUNT`` replicas (``simulate --plan``'s bound), its spares within them; class
names and hours are not repeated; a class's simulated P99 TTFT lies in its 95% interval; every
share is sent to a pool of the fleet (the older shape's configuration keys resolve to one pool);
money and carbon are finite and a fleet costs at most :data:`MAX_USD_PER_GPU_HOUR` per GPU; a
diurnal plan's cost is the mean of its hours'.

Against the scenario (:func:`check_plan_scenario`: ``simulate --plan`` always, ``report
--scenario``): its classes, candidates and prices must agree with the plan.
:meth:`fleetplan.optimize.plan.Plan.from_dict` applies the first set to every plan it reads.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from fleetplan.errors import InputError
from fleetplan.optimize.plan_fields import FieldReader
from fleetplan.optimize.plan_parts import ClassResult, FleetEntry, HourPlan

# No GPU rents for more per hour: a plan's cost above this per GPU of its fleet is a broken
# file (1e308), not a price (the dearest catalog row is a few dollars per GPU-hour).
MAX_USD_PER_GPU_HOUR = 1000.0
# A figure solve rounds to 6 digits (fleetplan.optimize.solve), compared with one recomputed.
COST_TOLERANCE = 1e-4


class PlanFields(Protocol):
    """The fields of a plan the rules read (:class:`fleetplan.optimize.plan.Plan` has them; the
    rules sit below it, so that the record's ``from_dict`` can apply them)."""

    @property
    def status(self) -> str: ...
    @property
    def fleet(self) -> tuple[FleetEntry, ...]: ...
    @property
    def classes(self) -> tuple[ClassResult, ...]: ...
    @property
    def hours(self) -> tuple[HourPlan, ...] | None: ...
    @property
    def base_fleet(self) -> tuple[FleetEntry, ...] | None: ...
    @property
    def verified(self) -> bool: ...
    @property
    def cost_per_hour_usd(self) -> float | None: ...


def split_pool(plan: PlanFields, key: str) -> str | None:
    """The pool of ``plan``'s fleet a split key sends traffic to: a pool's name, or in the older
    shape its configuration or ``config@region`` when exactly one pool of the fleet has it
    (None: no pool, or several)."""
    if any(p.pool == key for p in plan.fleet):
        return key
    hits = [p.pool for p in plan.fleet if key in (p.config, f"{p.config}@{p.region}")]
    return hits[0] if len(hits) == 1 else None


def check_split_keys(r: FieldReader, plan: PlanFields) -> None:
    """Every share is sent to a pool of the fleet with replicas (a share sent nowhere, or to
    several pools at once, is a broken file); shares of one class sum to 1."""
    pools = ", ".join(sorted(p.pool for p in plan.fleet)) or "none"
    for i, c in enumerate(plan.classes):
        for k, share in c.split.items():
            if share > 0 and split_pool(plan, k) is None:
                raise r.fail(f"classes[{i}].split", k, f"a pool of the fleet (has: {pools})")


def check_whole(r: FieldReader, plan: PlanFields) -> None:
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
        raise r.fail("fleet", [], f"at least one pool (status is {str(plan.status)!r})")
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
    other than its pools' replicas at the scenario's prices. ``plan``: a
    :class:`~fleetplan.optimize.plan.Plan`; ``source`` names it (default: its own ``source``)."""
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
    _check_models(plan, scenario, source)
    known = [c.config for c in scenario.candidates or ()]
    for i, e in enumerate(plan.fleet):
        if known and e.config not in known:
            raise InputError(f"{source}: fleet[{i}].config: {e.config} is not a candidate "
                             f"configuration of the scenario (candidates: {', '.join(known)})")
    r = FieldReader(source)
    if plan.hours:
        for i, h in enumerate(plan.hours):
            _check_cost(r, f"hours[{i}].cost_per_hour_usd", h.cost_per_hour_usd, h.fleet,
                        scenario, h.on_demand)
    elif plan.cost_per_hour_usd is not None and plan.fleet:
        _check_cost(r, "cost_per_hour_usd", plan.cost_per_hour_usd, plan.fleet, scenario)


def _check_models(plan: Any, scenario: Any, source: str) -> None:
    """A plan of several models against its scenario: every pool's and class's model one the
    scenario serves (the class's own); a one-model scenario's plan names no model."""
    from fleetplan.scenario.served import class_variants, is_multi_model, served_models

    names = served_models(scenario)
    several = is_multi_model(scenario)
    for i, e in enumerate(plan.fleet):
        if several and e.model not in names:
            raise InputError(f"{source}: fleet[{i}].model: {e.model} is not a model of the "
                             f"scenario (models: {', '.join(names)})")
        if not several and e.model is not None:
            raise InputError(f"{source}: fleet[{i}].model: {e.model}: a plan of several models, "
                             f"and the scenario serves one ({names[0]})")
    for i, c in enumerate(plan.classes):
        if several and c.name in {k.name for k in scenario.classes}:
            want = class_variants(scenario, scenario.class_index(c.name))
            if c.model is not None and c.model not in want:
                raise InputError(f"{source}: classes[{i}].model: {c.model} is not a model "
                                 f"that serves {c.name} in the scenario ({', '.join(want)})")


def pool_usd_per_hour(scenario: Any, pool: FleetEntry) -> float:
    """What one replica of ``pool`` costs per hour at ``scenario``'s prices, as the simulator
    and the optimizer price it (a spot pool at its spot price)."""
    from fleetplan.catalog.hardware import HardwareConfig
    from fleetplan.scenario.reliability import entry, pool_price

    cat = scenario.data_context().catalog
    hw = HardwareConfig.parse(pool.config, cat)
    price = cat.price(hw.gpu, scenario.market, scenario.prices_usd_per_gpu_hour)
    per_gpu, _ = pool_price(entry(scenario.reliability, pool.config, hw.gpu, pool.market),
                            hw.gpu, price.price_usd_per_gpu_hour, "", price.market == "user",
                            catalog=cat)
    return float(per_gpu) * hw.gpu_count


def _check_cost(r: FieldReader, where: str, cost: float, pools: tuple[FleetEntry, ...] | list[Any],
                scenario: Any, on_demand: tuple[FleetEntry, ...] = ()) -> None:
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
