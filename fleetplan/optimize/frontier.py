"""Cost frontiers: cost vs carbon cap, vs SLO, vs traffic rate; each point a full verified solve.

Sweeps (``sweep=``):

- ``carbon``: ``carbon.max_g_per_mtok`` from the lowest carbon any plan reaches (MILP, min-carbon
  objective) to the carbon of the cheapest plan, evenly spaced: the simulated carbon of the plan
  the closed loop verifies without a cap (``solve``'s answer without the scenario's cap, run
  first), or the MILP's cheapest plan's where that is higher or the loop verifies nothing;
- ``slo``: every class's SLO targets scaled by factors from ``lo`` (0.5) to ``hi`` (2.0),
  geometrically spaced;
- ``rate``: every class's rate scaled by factors from ``lo`` (0.5) to ``hi`` (2.0);
- ``confidence``: ``solve --confidence P`` for ``P`` from ``lo`` (0.5) to ``hi`` (0.99), evenly
  spaced: the price of certainty about the replica model's own error;
- ``churn``: the failure rate of the scenario's ``reliability:`` entries that state one (all
  entries when none does; the others keep their bundled defaults) set to values from ``lo`` (0)
  to ``hi`` (0.2) failures per replica-hour, evenly spaced (replacement times kept): the price of
  hosts that come and go.

Capacities are computed first (once, or once per SLO scale), through the executor; then the
points' closed loops (MILP + simulation) run in parallel on the same executor: local processes by
default, a Dask cluster when ``scheduler`` names one (an address or a ``distributed.Client``).
Results come back in sweep order, so the output does not depend on the executor. In a carbon
sweep a point takes the cheapest plan another point (or the loop without a cap) verified within
its cap when that is cheaper than its own (:func:`share_verified`, with a note): no point is
dearer than one at an equal or tighter cap.

Main entries: :func:`frontier` -> :class:`Frontier` (``to_dict``, ``to_frame``, ``plot``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from fleetplan._notebook import NotebookRepr
from fleetplan._progress import Progress, tracked_map
from fleetplan.catalog.grid import DEFAULT_REGION
from fleetplan.errors import InputError
from fleetplan.optimize.capacity import CapacitySettings
from fleetplan.optimize.confidence import Margins, check_confidence
from fleetplan.optimize.executors import SerialExecutor, get_executor
from fleetplan.optimize.frontier_file import point_outcome
from fleetplan.optimize.inputs import Inputs, class_workload
from fleetplan.optimize.inputs import build_problem as _build_one
from fleetplan.optimize.loop import DEFAULT_MAX_ROUNDS
from fleetplan.optimize.milp import candidate_key, solve_problem
from fleetplan.optimize.plan import Plan, PlanStatus
from fleetplan.optimize.problem import Demand
from fleetplan.optimize.solve import confident, solve_inputs, solver_settings
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.scenario import Scenario


class Sweep(StrEnum):
    carbon = "carbon"
    slo = "slo"
    rate = "rate"
    confidence = "confidence"
    churn = "churn"


_PARAM = {Sweep.carbon: ("carbon.max_g_per_mtok", "g CO2e/Mtok"),
          Sweep.slo: ("slo scale", "x every class's SLO"),
          Sweep.rate: ("rate scale", "x every class's rate"),
          Sweep.confidence: ("confidence", "probability the SLOs hold given the model's error"),
          Sweep.churn: ("reliability.*.failures_per_replica_hour", "failures per replica-hour")}
_TITLE = {Sweep.slo: "cost vs SLO scale",
          Sweep.confidence: "cost vs confidence (the price of certainty about the model)",
          Sweep.churn: "cost vs churn (spares for hosts that fail)"}
_XLABEL = {Sweep.confidence: "confidence (solve --confidence)",
           Sweep.churn: "failures per replica-hour (reliability entries that state one)"}


#: What a fleet label says (the table's caption, the plot's legend)
LABEL_NOTE = "fleet: replicas x configuration/P99 TTFT target of the pool (its tier)"
# the same for a frontier of a scenario with several models (pools named model/configuration)
LABEL_NOTE_MODELS = ("fleet: replicas x model/configuration/P99 TTFT target of the pool "
                     "(its tier)")


def outcome(plan: Plan) -> str:
    """What became of a point's plan (:func:`~fleetplan.optimize.frontier_file.point_outcome`)."""
    return point_outcome(plan.status.value, plan.verified)


def fleet_label(fleet: list[dict[str, Any]], *, regions: bool = False) -> str:
    """``2x1xH100-SXM/150ms + 3x1xRTX-4090 spot/2000ms``: each pool's replicas, configuration,
    market (spot) and tier (``regions``: ``@region`` too, for a frontier over several)."""
    parts = []
    for e in fleet:
        where = f"@{e['region']}" if regions and e.get("region") else ""
        spot = " spot" if e.get("market") == "spot" else ""
        # the pool's tier, its figures as the table prints numbers (106.066ms -> 106.1ms)
        pool = str(e["pool"])  # model/config@region/tier in a plan of several models
        tier = re.sub(r"\d+\.\d+", lambda m: f"{float(m[0]):.4g}",
                      pool[len(candidate_key(pool)) + 1:])
        model = f"{e['model']}/" if e.get("model") else ""
        parts.append(f"{e['count']}x{model}{e['config']}{where}{spot}"
                     + (f"/{tier}" if tier else ""))
    return " + ".join(parts) or "-"


@dataclass(frozen=True)
class FrontierPoint:
    value: float
    plan: Plan
    pareto: bool | None

    def to_dict(self, *, timing: bool = True) -> dict[str, Any]:
        p = self.plan
        return {
            "value": self.value, "status": p.status.value, "verified": p.verified,
            "outcome": outcome(p),
            "cost_per_hour_usd": p.cost_per_hour_usd, "cost_per_mtok_usd": p.cost_per_mtok_usd,
            "g_co2_per_mtok": p.g_co2_per_mtok, "pareto": self.pareto,
            "fleet": [e.to_dict() for e in p.fleet],
            "classes": [{"name": c.name, "rate_rps": c.rate_rps,
                         "slo_ttft_p99_ms": c.slo_ttft_p99_ms, "ttft_p99_ms": c.ttft_p99_ms,
                         "met": c.met} for c in p.classes],
            "solver": p.to_dict(timing=timing)["solver"],
            "reason": p.reason,
        }


@dataclass(frozen=True)
class Frontier(NotebookRepr):
    """The points of a sweep, in sweep order."""

    sweep: Sweep
    parameter: str
    unit: str
    points: tuple[FrontierPoint, ...]
    # what a planner should know of the sweep as a whole (e.g. why it has fewer points than
    # asked); JSON ``notes`` (since 7 Dec 2026)
    notes: tuple[str, ...] = ()

    def label_note(self) -> str:
        """What a fleet label says (:data:`LABEL_NOTE`; its pools name their model when the
        scenario has several)."""
        several = any(e.model for pt in self.points for e in pt.plan.fleet)
        return LABEL_NOTE_MODELS if several else LABEL_NOTE

    def to_dict(self, *, timing: bool = True) -> dict[str, Any]:
        return {"sweep": self.sweep.value, "parameter": self.parameter, "unit": self.unit,
                "points": [p.to_dict(timing=timing) for p in self.points],
                "notes": list(self.notes)}

    def to_frame(self) -> pd.DataFrame:
        """One row per point: the swept value, status, verified, cost, carbon, the strictest
        TTFT SLO and its class, the total rate, whether it is on the frontier, the fleet (as
        ``label``, :func:`fleet_label`) and the point's :func:`outcome`."""
        rows = []
        # regions are named where there are several, or where the one is not the default
        # (a plan of FRA pools read as EU27's)
        seen = {e.region for pt in self.points for e in pt.plan.fleet}
        regions = len(seen) > 1 or bool(seen - {DEFAULT_REGION})
        for pt in self.points:
            d = pt.to_dict()
            slos = [c["slo_ttft_p99_ms"] for c in d["classes"] if c["slo_ttft_p99_ms"]]
            strict = [c["name"] for c in d["classes"] if slos and c["slo_ttft_p99_ms"] == min(slos)]
            rows.append({
                "value": d["value"], "status": d["status"], "verified": d["verified"],
                "cost_per_hour_usd": d["cost_per_hour_usd"],
                "cost_per_mtok_usd": d["cost_per_mtok_usd"], "g_co2_per_mtok": d["g_co2_per_mtok"],
                "slo_ttft_p99_ms": min(slos) if slos else None,
                "slo_class": ", ".join(strict) or None,  # whose SLO that is (the plot says so)
                "rate_rps": sum(c["rate_rps"] or 0.0 for c in d["classes"]) or None,
                "pareto": bool(d["pareto"]),
                "label": fleet_label(d["fleet"], regions=regions),
                "outcome": d["outcome"],  # added last: the CSV's earlier columns keep their place
            })
        return pd.DataFrame(rows)

    def _summary(self) -> str:
        return f"frontier over {self.sweep.value}: {len(self.points)} point(s)"

    def plot(self, ax: Any = None, *, annotate: bool | None = None) -> Any:
        """Cost ($/h) against carbon (or the strictest SLO, or the total rate); the frontier
        joined and labelled with their fleets (``annotate=False``: not; see
        :func:`fleetplan.viz.plans.plot_frontier`). Returns the matplotlib Axes."""
        from fleetplan.viz.plans import plot_frontier

        df = self.to_frame()  # its outcome column: only verified points are drawn
        x = {Sweep.carbon: "g_co2_per_mtok", Sweep.rate: "rate_rps"}.get(self.sweep, "value")
        xlabel = self.slo_axis() if self.sweep is Sweep.slo else _XLABEL.get(self.sweep)
        out = plot_frontier(df, x=x, ax=ax, annotate=annotate, xlabel=xlabel,
                            label_note=self.label_note())
        if self.sweep in _TITLE:  # keeps the "(not shown: ...)" tail
            out.set_title(_TITLE[self.sweep] + out.get_title().partition(" vs value")[2])
        return out

    def slo_axis(self) -> str:
        """An SLO sweep's axis: the scale factor of every class's P99 TTFT SLO, with each
        class's SLO at 1x (from any point whose plan has classes)."""
        for pt in self.points:
            if pt.plan.classes and pt.value > 0:
                base = ", ".join(f"{c.name} {c.slo_ttft_p99_ms / pt.value:.4g} ms"
                                 for c in pt.plan.classes if c.slo_ttft_p99_ms)
                return f"SLO scale (x every class's P99 TTFT SLO; 1x: {base})"
        return "SLO scale (x every class's P99 TTFT SLO)"


Job = tuple[Scenario, Inputs, SolverSettings, int, Margins | None]


def _run_point(job: Job) -> Plan:
    """Executor entry: one point's closed loop (serial inside the worker)."""
    scenario, inputs, settings, rounds, m = job
    plan = solve_inputs(scenario, inputs, settings, executor=SerialExecutor(), max_rounds=rounds,
                        margins=m)
    return replace(plan, problem=None)


def _with_churn(scenario: Scenario, rate: float) -> Scenario:
    """``scenario`` whose reliability entries that state a failure rate (all of them when none
    does) fail ``rate`` times per replica-hour; entries on bundled defaults keep them."""
    if not scenario.reliability:
        raise InputError("churn sweep: the scenario has no reliability block; name the GPU "
                         "types whose churn to sweep, e.g. reliability: {RTX-4090: {}}")
    stated = {k for k, r in scenario.reliability.items()
              if r.failures_per_replica_hour is not None} or set(scenario.reliability)
    block = {k: {**r.model_dump(exclude_none=True),
                 **({"failures_per_replica_hour": rate} if k in stated else {})}
             for k, r in scenario.reliability.items()}
    return scenario.with_updates(reliability=block)


def _scale_slo(scenario: Scenario, f: float) -> Scenario:
    classes = []
    for c in scenario.classes:
        data = c.model_dump(mode="python", by_alias=True, exclude_unset=True)
        if c.slo is not None:
            data["slo"] = {k: v * f for k, v in c.slo.model_dump(exclude_none=True).items()}
        classes.append(data)
    return _swept(scenario, classes, f, "the SLOs")


def _swept(scenario: Scenario, classes: list[dict[str, Any]], f: float, what: str) -> Scenario:
    """``scenario`` with the scaled ``classes``; a factor that takes a value out of its bounds
    is the sweep's fault (``--lo`` / ``--hi``), said so, not the scenario's."""
    try:
        return scenario.with_updates(classes=classes)
    except InputError as exc:
        why = str(exc).removeprefix("scenario: ")
        raise InputError(f"sweep factor {f:g} (--lo / --hi) scales {what} out of bounds: "
                         f"{why}") from None


def _scale_rate(scenario: Scenario, f: float) -> Scenario:
    classes = []
    for i, c in enumerate(scenario.classes):
        data = c.model_dump(mode="python", by_alias=True, exclude_unset=True)
        if c.rate_rps is not None:
            data["rate_rps"] = c.rate_rps * f
        elif c.rate_profile_rps is not None:
            data["rate_profile_rps"] = [r * f for r in c.rate_profile_rps]
        else:
            base = class_workload(scenario, i).rates_rps[0]
            data["trace"] = {**data["trace"], "scale_to_rps": base * f}
        classes.append(data)
    return _swept(scenario, classes, f, "the rates")


def _pareto(points: list[tuple[float, Plan]], sweep: Sweep) -> list[bool | None]:
    """Not dominated in (swept quantity, cost; a higher confidence is the better one); every
    verified point for a rate or churn sweep (the demand and the hosts are given, not an
    objective: the points trace the cost curve)."""
    if sweep in (Sweep.rate, Sweep.churn):
        return [p.status is not PlanStatus.infeasible and p.verified for _v, p in points]
    xy: list[tuple[float, float] | None] = []
    for value, plan in points:
        x = (plan.g_co2_per_mtok if sweep is Sweep.carbon
             else -value if sweep is Sweep.confidence else value)
        y = plan.cost_per_hour_usd
        if plan.status is PlanStatus.infeasible or not plan.verified or x is None or y is None:
            xy.append(None)
        else:
            xy.append((x, y))
    out: list[bool | None] = []
    for i, a in enumerate(xy):
        if a is None:
            out.append(False)
            continue
        dominated = any(b is not None and j != i and b[0] <= a[0] and b[1] <= a[1]
                        and (b[0] < a[0] or b[1] < a[1]) for j, b in enumerate(xy))
        out.append(not dominated)
    return out


def frontier(scenario: Scenario, sweep: str | Sweep = Sweep.carbon, points: int = 8,
             scheduler: Any = None, *, solver: str | None = None, lo: float | None = None,
             hi: float | None = None, capacity: CapacitySettings | None = None,
             cache_dir: str | bool | None = True,
             max_rounds: int = DEFAULT_MAX_ROUNDS,
             progress: Progress | None = None) -> Frontier:
    """Sweep ``scenario`` (see the module docstring); ``scheduler``: a Dask address or client,
    ``"serial"``, ``"local[:N]"``, or ``None`` for local processes. ``progress`` receives the
    capacity searches and the points (:mod:`fleetplan._progress`)."""
    from fleetplan.optimize.multi_model import build_multi_problem
    from fleetplan.optimize.variants import variant_classes
    from fleetplan.scenario.served import is_multi_model, not_for_several

    # several models: every point plans the whole fleet (their tables merged, one MILP); a
    # class of variants would make every point a choice among solves: not yet
    several = is_multi_model(scenario)
    if several and variant_classes(scenario):
        raise not_for_several(scenario, "fleetplan frontier of classes listing variants")
    build_problem = build_multi_problem if several else _build_one
    try:
        kind = Sweep(sweep)
    except ValueError:
        raise InputError(f"sweep {sweep!r}: valid sweeps are "
                         f"{', '.join(s.value for s in Sweep)}") from None
    if not 1 <= points <= 10000:
        raise InputError(f"points(={points}) must be within [1, 10000]")
    settings = solver_settings(scenario, solver)
    settings.pulp_name  # noqa: B018 - fail early on an unknown solver
    ex = get_executor(scheduler)
    jobs: list[Job] = []
    one_point: str | None = None  # why a carbon range is one cap (_carbon_values)
    free_plan: Plan | None = None
    build: dict[str, Any] = {"executor": ex, "settings": capacity, "cache_dir": cache_dir,
                             "progress": progress}
    if kind is Sweep.slo:
        values = _factors(lo or 0.5, hi or 2.0, points, geometric=True)
        built: dict[float, tuple[Scenario, Inputs]] = {}
        # loosest SLOs first: a capacity run they stopped early fails the stricter ones without
        # being simulated again (fleetplan.optimize.capacity); the inputs do not depend on order
        for f in sorted(values, reverse=True):
            variant = _scale_slo(scenario, f)
            built[f] = (variant, build_problem(variant, **build))
        for f in values:
            variant, inputs = built[f]
            jobs.append((variant, inputs, settings, max_rounds, None))
    elif kind in (Sweep.confidence, Sweep.churn):
        if kind is Sweep.churn:
            _with_churn(scenario, 0.0)  # refuses a scenario without a reliability block
        inputs = build_problem(scenario, **build)
        if kind is Sweep.confidence:
            values = _factors(0.5 if lo is None else lo, 0.99 if hi is None else hi, points,
                              geometric=False)
            for v in values:
                check_confidence(v)
                conf_inputs, m = confident(scenario, inputs, v, **build)
                jobs.append((scenario, conf_inputs, settings, max_rounds, m))
        else:
            values = _linear(0.0 if lo is None else lo, 0.2 if hi is None else hi, points)
            for v in values:
                jobs.append((_with_churn(scenario, v), inputs, settings, max_rounds, None))
    else:
        base = scenario.with_updates(carbon=None) if kind is Sweep.carbon else scenario
        inputs = build_problem(base, executor=ex, settings=capacity, cache_dir=cache_dir,
                               progress=progress)
        if kind is Sweep.carbon:
            if hi is None:  # the sweep ends where solve's closed loop ends without a cap
                (free_plan,) = tracked_map(ex, _run_point,
                                           [(base, inputs, settings, max_rounds, None)],
                                           progress, "frontier: the plan without a carbon cap")
            values, one_point = _carbon_values(inputs, settings, points, lo, hi, free_plan)
            for v in values:
                variant = scenario.with_updates(carbon={"max_g_per_mtok": v})
                lim = replace(inputs.problem.limits, max_g_per_mtok=v, max_kg_per_day=None)
                jobs.append((variant, replace(inputs, problem=replace(inputs.problem,
                                                                      limits=lim)),
                             settings, max_rounds, None))
        else:
            values = _factors(lo or 0.5, hi or 2.0, points, geometric=True)
            for f in values:
                variant = _scale_rate(scenario, f)
                demands = tuple(Demand(d.name, tuple(r * f for r in d.rates_rps), d.ttft_p99_ms,
                                       d.tpot_p99_ms, d.e2e_p99_ms, d.tokens_per_request,
                                       d.prefix_cache_hit)
                                for d in inputs.problem.demands)
                jobs.append((variant, replace(inputs, problem=replace(inputs.problem,
                                                                      demands=demands)),
                             settings, max_rounds, None))
    plans = tracked_map(ex, _run_point, jobs, progress, "frontier points")
    if kind is Sweep.carbon:
        plans = share_verified(values, plans, free_plan)
    pairs = list(zip(values, plans, strict=True))
    flags = _pareto(pairs, kind)
    param, unit = _PARAM[kind]
    notes: list[str] = []
    if len(values) < points:  # a range of one value: say why, not just fewer rows
        notes.append(f"one point, not {points}: "
                     + (one_point or f"the sweep's start and end are equal ({values[0]:.6g})"))
    notes.extend(_infeasible_notes(pairs, param))
    return Frontier(kind, param, unit, tuple(
        FrontierPoint(round(float(v), 6), p, fl) for (v, p), fl in zip(pairs, flags, strict=True)),
        tuple(notes))


def _infeasible_notes(pairs: Sequence[tuple[float, Plan]], param: str) -> list[str]:
    """Why the sweep's infeasible points have no plan: one note per binding constraint, with
    the points it binds and the first one's reason and cheapest relaxation (the table shows
    only "infeasible")."""
    groups: dict[str | None, list[tuple[float, Plan]]] = {}
    for v, p in pairs:
        if p.status is PlanStatus.infeasible:
            groups.setdefault(p.binding, []).append((v, p))
    out = []
    for rows in groups.values():
        v0, p0 = rows[0]
        at = ", ".join(f"{v:.4g}" for v, _p in rows)
        why = p0.reason or "no reason recorded"
        more = f" (at {v0:.4g})" if len(rows) > 1 else ""
        out.append(f"no plan at {param} {at}: {why}{more}"
                   + (f"; cheapest relaxation: {p0.relaxation}" if p0.relaxation else ""))
    return out


def share_verified(caps: list[float], plans: list[Plan],
                   free_plan: Plan | None = None) -> list[Plan]:
    """Each carbon cap's plan, or a cheaper plan another point verified whose simulated carbon
    is within this cap (the scenario is the same but for the cap, so that plan is verified
    here too): a point is never dearer than one at an equal or tighter cap, whatever path
    each point's closed loop took. ``free_plan``: the closed loop's plan without a cap (where
    the sweep ends), shared the same way."""
    pool = [(f"the point at carbon cap {c:.4g} g CO2e/Mtok", c, p)
            for c, p in zip(caps, plans, strict=True)]
    if free_plan is not None:
        pool.append(("the closed loop without a carbon cap (fleetplan solve's answer on the "
                     "scenario without its carbon: cap)", math.inf,
                     free_plan))
    out = []
    for cap, plan in zip(caps, plans, strict=True):
        mine = (plan.cost_per_hour_usd if plan.verified and plan.cost_per_hour_usd is not None
                else math.inf)
        better = [(p.cost_per_hour_usd, c, what, p) for what, c, p in pool
                  if p.verified and p.cost_per_hour_usd is not None
                  and p.g_co2_per_mtok is not None and p.g_co2_per_mtok <= cap * (1 + 1e-9)
                  and p.cost_per_hour_usd < mine - 1e-9]
        if not better:
            out.append(plan)
            continue
        cost, _c, what, p = min(better, key=lambda b: (b[0], b[1]))
        out.append(replace(p, notes=(*p.notes, (
            f"frontier: the plan of {what}, verified there at {p.g_co2_per_mtok:.4g} g "
            f"(within this cap of {cap:.4g}) and cheaper, ${cost:.2f}/h, than this point's own "
            "closed loop found "
            + (f"(${plan.cost_per_hour_usd:.2f}/h)" if plan.verified and
               plan.cost_per_hour_usd is not None else "(no verified plan)")))))
    return out


def _linear(lo: float, hi: float, n: int) -> list[float]:
    """``n`` evenly spaced values in ``[lo, hi]`` (``lo`` may be 0: a failure rate)."""
    if not 0 <= lo <= hi:
        raise InputError(f"sweep range: need 0 <= lo(={lo:g}) <= hi(={hi:g})")
    if n == 1 or math.isclose(lo, hi, rel_tol=1e-9):
        return [lo]
    return [float(x) for x in np.linspace(lo, hi, n)]


def _factors(lo: float, hi: float, n: int, *, geometric: bool) -> list[float]:
    if not 0 < lo <= hi:
        raise InputError(f"sweep range: need 0 < lo(={lo:g}) <= hi(={hi:g})")
    if n == 1 or math.isclose(lo, hi, rel_tol=1e-9):
        # a one-point range (e.g. the cheapest plan is already the lowest-carbon one): one solve
        return [lo]
    grid = np.geomspace(lo, hi, n) if geometric else np.linspace(lo, hi, n)
    return [float(x) for x in grid]


def _carbon_values(inputs: Inputs, settings: SolverSettings, n: int, lo: float | None,
                   hi: float | None, free_plan: Plan | None = None
                   ) -> tuple[list[float], str | None]:
    """Caps from the lowest-carbon plan's intensity (MILP figure) to the cheapest plan's: the
    simulated carbon of ``free_plan`` (the closed loop's plan without a cap, which may run
    pools above a lone replica's capacity, and so be cheaper and dirtier than the MILP's first
    answer) where it is verified and higher, else the MILP's cheapest plan's. Also, where the
    range is one cap though ``n`` were asked because of the scenario or a given end, why (the
    rest of the frontier's "one point" note), else None."""
    if lo is not None and hi is not None and lo > hi:
        raise InputError(f"sweep range: need 0 < lo(={lo:g}) <= hi(={hi:g})")
    given_lo, given_hi = lo, hi
    prob = inputs.problem
    free = replace(prob, limits=replace(prob.limits, max_g_per_mtok=None, max_kg_per_day=None))
    mtok_day = sum(free.mtok_per_hour(h) for h in range(free.hours)) * 24 / free.hours
    if hi is None:
        cheap = solve_problem(free, settings)
        if not cheap.has_plan:
            raise InputError("carbon sweep: the scenario has no plan even without a carbon cap "
                             "(run fleetplan solve for the reason)")
        hi = cheap.g_co2_per_day / mtok_day
        if free_plan is not None and free_plan.verified and free_plan.g_co2_per_mtok:
            hi = max(hi, free_plan.g_co2_per_mtok)
    if lo is None:
        clean = solve_problem(free, settings, objective="carbon")
        lo = clean.g_co2_per_day / mtok_day if clean.has_plan else hi
    values = _factors(lo, max(hi, lo), n, geometric=False)
    if len(values) == n:
        return values, None
    if given_lo is None and given_hi is None:
        return values, (f"the cheapest plan is also the lowest-carbon one ({lo:.4g} g CO2e/Mtok "
                        "as the MILP counts it), so no carbon cap trades cost for carbon on "
                        "this scenario")
    if given_hi is None and given_lo is not None and given_lo >= hi:
        return values, (f"--lo {given_lo:g} is at or above the sweep's end, the cheapest "
                         f"plan's carbon ({hi:.4g} g CO2e/Mtok), and every cap there gives "
                         "that plan")
    if given_lo is None and given_hi is not None and given_hi <= lo:
        return values, (f"--hi {given_hi:g} is at or below the lowest carbon any plan reaches "
                        f"({lo:.4g} g CO2e/Mtok)")
    return values, None  # the ends given are equal: the frontier's own note says so
