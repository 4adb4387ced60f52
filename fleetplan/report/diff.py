"""What changed between two plans (A, then B) and what it costs: pools added, removed or resized,
cost and carbon per hour and per 1M tokens, each class's simulated P99 against its SLO, and the
traffic split.

Main entries: :func:`diff_plans` (two :class:`~fleetplan.optimize.plan.Plan` -> a
:class:`PlanDiff`) and :func:`diff_view` (what the diff template shows). Pools are matched by
name (``config@region[/tier]``); a pool in one plan only counts as 0 replicas in the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetplan._notes import exact_decimals, usd
from fleetplan.optimize.plan import FleetEntry, Plan, PlanStatus, fleet_label
from fleetplan.report.context import ReportContext

HOURS_PER_MONTH = 730.0  # 8760 h / 12


@dataclass(frozen=True)
class PoolChange:
    pool: str
    config: str
    region: str
    count_a: int
    count_b: int
    gpus_a: int
    gpus_b: int
    price_usd_per_gpu_hour: float | None  # from the context, when given
    no_plan: str | None = None  # "A" or "B": that plan is infeasible (it has no fleet)

    @property
    def delta(self) -> int:
        return self.count_b - self.count_a

    @property
    def cost_delta_per_hour(self) -> float | None:
        p = self.price_usd_per_gpu_hour
        return None if p is None or self.no_plan else (self.gpus_b - self.gpus_a) * p

    @property
    def kind(self) -> str:
        if self.no_plan:  # not a change of the fleet: one side has none
            return f"no plan in {self.no_plan}"
        if self.count_a == 0 and self.count_b > 0:
            return "added"
        if self.count_b == 0 and self.count_a > 0:
            return "removed"
        return "unchanged" if self.delta == 0 else ("grown" if self.delta > 0 else "shrunk")


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    a: float | None
    b: float | None
    digits: int = 2

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def relative(self) -> float | None:
        d = self.delta
        return None if d is None or not self.a else d / self.a


@dataclass(frozen=True)
class ClassChange:
    name: str
    slo_a: float | None
    slo_b: float | None
    p99_a: float | None
    p99_b: float | None
    met_a: bool | None  # None: the class is not in that plan
    met_b: bool | None
    # False: that plan is infeasible (no fleet was simulated): its verdict is "no plan"
    planned_a: bool = True
    planned_b: bool = True

    def verdict(self, side: str) -> str:
        """``"a"`` or ``"b"``: "met", "missed", "no plan" (an infeasible plan) or "absent"."""
        met, planned = (self.met_a, self.planned_a) if side == "a" else (self.met_b,
                                                                        self.planned_b)
        if met is None:
            return "absent"
        return "no plan" if not planned else "met" if met else "missed"


@dataclass(frozen=True)
class SplitChange:
    class_name: str
    key: str
    share_a: float
    share_b: float


@dataclass(frozen=True)
class PlanDiff:
    a: Plan
    b: Plan
    pools: tuple[PoolChange, ...]
    metrics: tuple[Metric, ...]
    classes: tuple[ClassChange, ...]
    splits: tuple[SplitChange, ...]

    @property
    def cost_delta_per_hour(self) -> float | None:
        return self.metrics[0].delta

    def summary(self) -> list[str]:
        """The changes in a few sentences, most important first."""
        out = []
        if self.a.status != self.b.status:
            out.append(f"Status: {self.a.status} \u2192 {self.b.status}.")
        none = [(n, p) for n, p in (("A", self.a), ("B", self.b))
                if p.status is PlanStatus.infeasible]
        if none:  # no fleet to compare on that side: say why, not "removed" pool by pool
            out.extend(f"{n} has no plan: {p.reason or 'infeasible'}." for n, p in none)
            return out
        d = self.cost_delta_per_hour
        if d is not None:
            if abs(d) < 0.005:
                out.append(f"Cost: unchanged at {usd(self.b.cost_per_hour_usd)}/h.")
            else:
                # money as the plans state it ($1.375 and $3.125, not $1.38 and $3.12, whose
                # difference is not the $1.75 said)
                word = "more" if d > 0 else "less"
                out.append(f"B costs {usd(abs(d))} {word} per hour than A "
                           f"(${abs(d) * 24:,.2f} a day, ${abs(d) * HOURS_PER_MONTH:,.0f} a "
                           f"month of {HOURS_PER_MONTH:g} h): {usd(self.a.cost_per_hour_usd)}"
                           f" \u2192 {usd(self.b.cost_per_hour_usd)}/h.")
        carbon = self.metrics[2]
        if carbon.delta is not None and abs(carbon.delta) >= 0.05:
            out.append(f"Carbon: {carbon.a:,.1f} \u2192 {carbon.b:,.1f} g CO2e per 1M tokens "
                       f"(input + output).")
        changed = [p for p in self.pools if p.delta]
        for p in changed:
            cost = p.cost_delta_per_hour
            tail = "" if cost is None else f" ({'+' if cost > 0 else '-'}${abs(cost):,.2f}/h)"
            out.append(f"{p.pool}: {p.count_a} \u2192 {p.count_b} replicas, {p.kind}{tail}.")
        if not changed:
            out.append("Fleet: unchanged.")
        for c in self.classes:
            if c.verdict("a") != c.verdict("b"):
                out.append(f"Class {c.name}: SLO {c.verdict('a')} \u2192 {c.verdict('b')}.")
        return out


def money_digits(*values: float | None) -> int:
    """The decimals (2 to 4) that show every one of ``values`` as it is, as :func:`usd` does
    for one (4 when some needs more)."""
    return max((exact_decimals(v) or 4 for v in values if v is not None), default=2)


def _by_pool(fleet: tuple[FleetEntry, ...]) -> dict[str, FleetEntry]:
    return {p.pool: p for p in fleet}


def diff_plans(a: Plan, b: Plan, ctx: ReportContext | None = None) -> PlanDiff:
    """The changes from plan ``a`` to plan ``b``; ``ctx`` prices each pool's change."""
    pa, pb = _by_pool(a.fleet), _by_pool(b.fleet)
    names = sorted(set(pa) | set(pb))
    pools = []
    for n in names:
        ref = pb.get(n) or pa[n]
        ea, eb = pa.get(n), pb.get(n)
        assumption = ctx.pool(ref) if ctx else None
        pools.append(PoolChange(
            pool=n, config=ref.config, region=ref.region,
            count_a=ea.count if ea else 0, count_b=eb.count if eb else 0,
            gpus_a=ea.gpus if ea else 0, gpus_b=eb.gpus if eb else 0,
            price_usd_per_gpu_hour=assumption.price_usd_per_gpu_hour if assumption else None,
            no_plan=next((n for n, p in (("A", a), ("B", b))
                          if p.status is PlanStatus.infeasible), None)))
    metrics = (
        Metric("cost", "$ per hour", a.cost_per_hour_usd, b.cost_per_hour_usd,
               money_digits(a.cost_per_hour_usd, b.cost_per_hour_usd)),
        Metric("cost", "$ per 1M tokens (input + output)", a.cost_per_mtok_usd,
               b.cost_per_mtok_usd, 3),
        Metric("carbon", "g CO2e per 1M tokens (input + output)", a.g_co2_per_mtok,
               b.g_co2_per_mtok, 1),
        Metric("carbon", "g CO2e per hour", a.g_co2_per_hour, b.g_co2_per_hour, 0),
        Metric("replicas", "", float(a.replicas), float(b.replicas), 0),
        Metric("GPUs", "", float(a.gpus), float(b.gpus), 0),
    )
    ca = {c.name: c for c in a.classes}
    cb = {c.name: c for c in b.classes}
    classes = []
    splits = []
    for name in [*ca, *(n for n in cb if n not in ca)]:
        x, y = ca.get(name), cb.get(name)
        classes.append(ClassChange(
            name=name, slo_a=x.slo_ttft_p99_ms if x else None,
            slo_b=y.slo_ttft_p99_ms if y else None, p99_a=x.ttft_p99_ms if x else None,
            p99_b=y.ttft_p99_ms if y else None, met_a=x.met if x else None,
            met_b=y.met if y else None, planned_a=a.status is not PlanStatus.infeasible,
            planned_b=b.status is not PlanStatus.infeasible))
        if PlanStatus.infeasible in (a.status, b.status):
            continue  # an infeasible plan splits nothing: no share to compare
        sa, sb = (x.split if x else {}), (y.split if y else {})
        for k in [*sa, *(k for k in sb if k not in sa)]:
            if abs(sa.get(k, 0.0) - sb.get(k, 0.0)) > 1e-9:
                splits.append(SplitChange(name, k, sa.get(k, 0.0), sb.get(k, 0.0)))
    return PlanDiff(a, b, tuple(pools), metrics, tuple(classes), tuple(splits))


def diff_view(diff: PlanDiff, ctx: ReportContext | None = None) -> dict[str, Any]:
    """Everything the diff template shows."""
    import os

    from fleetplan import __version__

    name_a = os.path.basename(diff.a.source) or diff.a.source
    name_b = os.path.basename(diff.b.source) or diff.b.source
    d = diff.cost_delta_per_hour
    return {
        "title": f"Plan diff: {name_a} \u2192 {name_b}", "version": __version__,
        "name_a": name_a, "name_b": name_b, "diff": diff, "summary": diff.summary(),
        "fleet_a": fleet_label(diff.a.fleet), "fleet_b": fleet_label(diff.b.fleet),
        "cost_day": None if d is None else d * 24, "cost_month": None if d is None
        else d * HOURS_PER_MONTH, "hours_per_month": HOURS_PER_MONTH,
        "priced": ctx is not None, "scenario_file": os.path.basename(ctx.scenario) if ctx
        else None,
    }
