"""Why a scenario is infeasible: the binding constraint, its numbers, the cheapest relaxation.

Order of diagnosis:

1. A class whose SLO no candidate configuration meets even at the lowest rate the capacity search
   tried: the SLO itself binds ("class chat: ttft_p99_ms 20 is below the best any candidate
   reaches, 27 ms on 1xH100-PCIe at 0.25 req/s"); the relaxation is the smallest SLO some
   candidate meets, safety margin included. When TTFT binds and the class assumes prompts not
   (fully) in vLLM's prefix cache, the reason adds that a stated ``prefix_cache_hit`` changes
   the prefill work (the measured benchmark's low TTFTs came with cached prompts). Under
   ``solve --confidence P`` each candidate's P99 counts its latency factor times (the margin
   of :mod:`fleetplan.optimize.confidence`): the sentence names the margin, its size and error
   table, and what it leaves of the SLO, and the relaxation is the SLO with the margin, or a
   lower confidence.
2. Otherwise each optional constraint family (carbon, budget, availability, max_replicas) is made
   elastic in turn: phase 1 finds the smallest relative relaxation of that family that admits a
   plan, phase 2 the cheapest plan at that relaxation. Of the families that restore feasibility on
   their own, the one whose relaxed plan is cheapest is reported. Redundancy is lowered step by
   step. If no single family suffices, all are relaxed together and every one that moved is named.

Main entry: :func:`explain_infeasible` (returns an :class:`Explanation`). For a plan that never
passed its simulation, :func:`near_floor_notes` names the classes whose SLO a lone replica of
their configuration barely meets (which no replica count fixes in a shared pool).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulp

from fleetplan._notes import usd
from fleetplan.optimize.capacity import CapacityResult
from fleetplan.optimize.confidence import Margins
from fleetplan.optimize.milp import MilpSolution, build_model, solve_model
from fleetplan.optimize.problem import Demand, PlanProblem, Tier
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.optimize.verify import HourCheck

ELASTIC_FAMILIES = ("carbon", "budget", "availability", "max_replicas")
# a class whose P99 TTFT alone on a replica, at the lowest load its search passed, is at least
# this share of its SLO cannot absorb the load other classes put on a shared pool
FLOOR_SHARE = 0.9


@dataclass(frozen=True)
class Explanation:
    """``binding``: the constraint (scenario field path); ``reason``: one line with numbers."""

    binding: str
    reason: str
    relaxation: str

    @property
    def message(self) -> str:
        return f"{self.reason}; cheapest relaxation: {self.relaxation}"


def _ms(v: float) -> str:
    return f"{v:.0f}" if v >= 10 else f"{v:.1f}"


def _up(v: float, digits: int = 3) -> float:
    """``v`` rounded up to ``digits`` significant digits (a relaxation must be enough)."""
    if v <= 0:
        return v
    scale = 10 ** (digits - 1 - math.floor(math.log10(v)))
    return math.ceil(v * scale - 1e-9) / scale


_METRICS = (("ttft_p99_ms", "ttft_p99_ms"), ("tpot_p99_ms", "tpot_p99_ms"),
            ("e2e_p99_ms", "e2e_p99_ms"))


def _slo_explanation(problem: PlanProblem, index: int, d: Demand,
                     margins: Margins | None = None) -> Explanation:
    keep = 1.0 - problem.slo_margin
    # ratio, config, metric, seen, rate, factor
    best: tuple[float, str, str, float, float, float] | None = None
    for pool in problem.pools:
        probe = problem.probes.get((d.name, pool.config))
        if probe is None:
            continue
        f = (margins.configs[pool.config].factor
             if margins is not None and pool.config in margins.configs else 1.0)
        worst: tuple[float, str, float] | None = None
        for slo_field, probe_field in _METRICS:
            target = getattr(d, slo_field)
            seen = getattr(probe, probe_field)
            if target is None or seen is None:
                continue
            ratio = seen * f / (keep * target)
            if worst is None or ratio > worst[0]:
                worst = (ratio, slo_field, seen)
        if worst is not None and (best is None or worst[0] < best[0]):
            best = (worst[0], pool.config, worst[1], worst[2], probe.rate_rps, f)
    field = f"classes[{index}].slo"
    unfit = [(p.config, problem.unfit[(d.name, p.config)]) for p in problem.pools
             if (d.name, p.config) in problem.unfit]
    if best is None and unfit:
        cands = "; ".join(dict.fromkeys(f"{c}: {why}" for c, why in unfit))
        return Explanation(
            f"classes[{index}].input_tokens",
            f"class {d.name}: no candidate configuration holds its requests ({cands})",
            "shorter requests for the class (input_tokens / output_tokens max), or a "
            "candidate with a longer context")
    if best is None:
        target = d.ttft_p99_ms
        return Explanation(
            f"{field}.ttft_p99_ms",
            f"class {d.name}: ttft_p99_ms {target:g} is met by no candidate configuration "
            "(no capacity at this SLO)",
            "loosen the SLO or add candidate configurations")
    _ratio, config, metric, seen, rate, f = best
    target = getattr(d, metric)
    need = _up(seen * f / keep)
    safety = f" + {problem.slo_margin:.0%} safety margin" if problem.slo_margin else ""
    note = ""
    if metric == "ttft_p99_ms" and d.prefix_cache_hit < 1.0:
        note = (f" with prefix_cache_hit {d.prefix_cache_hit:g} (prefill of "
                f"{'fresh' if d.prefix_cache_hit == 0 else 'partly cached'} prompts); if the "
                f"prompts share cached prefixes, stating classes[{index}].prefix_cache_hit "
                "lowers prefill time")
    if f > 1.0 and margins is not None:
        from fleetplan.optimize.confidence_limit import margin_phrase

        allowed = keep * target / f
        return Explanation(
            f"{field}.{metric}",
            f"class {d.name}: {metric} {target:g} with the "
            f"{margin_phrase(margins.configs[config], margins.confidence)} leaves "
            f"{_ms(allowed)} ms for the simulated P99{safety and ' (safety margin included)'}; "
            f"the closest candidate, {config}, reaches {_ms(seen)} ms alone on one replica at "
            f"{rate:.3g} req/s{note}",
            f"{field}.{metric} >= {need:g} ({_ms(seen)} ms x{f:.3g} margin{safety}), or a "
            "lower --confidence")
    margin = f" ({_ms(seen)} ms{safety})" if problem.slo_margin else ""
    return Explanation(
        f"{field}.{metric}",
        f"class {d.name}: {metric} {target:g} is below the best any candidate reaches, "
        f"{_ms(seen)} ms on {config} at {rate:g} req/s{note}",
        f"{field}.{metric} >= {need:g}{margin}")


def _elastic(problem: PlanProblem, settings: SolverSettings, families: tuple[str, ...],
             drop: tuple[str, ...] = ()) -> MilpSolution | None:
    """Smallest relaxation of ``families`` (phase 1), then the cheapest plan there (phase 2)."""
    model = build_model(problem, objective="slack", elastic=families, drop=drop)
    if model.unservable:
        return None
    first = solve_model(model, settings, objective="slack", ties=False)
    if not first.has_plan:
        return None
    objective = model.objectives["slack"]
    value = float(pulp.value(objective) or 0.0)
    model.prob += objective <= value * (1 + 1e-6) + 1e-7, "phase1_relaxation"
    model.prob.setObjective(model.objectives["cost"])
    second = solve_model(model, settings, objective="cost")
    return second if second.has_plan else first


def _num(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def _family_explanation(family: str, sol: MilpSolution) -> Explanation:
    moved = [(label, lim, s) for label, (lim, s) in sorted(sol.slack.items()) if s > 1e-6]
    cost_h = sol.cost_per_day_usd / 24.0
    plan = f" (cheapest such plan: ${cost_h:.2f}/h)"
    if not moved:  # solver round-off: the relaxation is nil
        return Explanation(family, f"{family}: binds at its limit", f"none needed{plan}")
    label, lim, s = max(moved, key=lambda m: m[2] / max(m[1], 1.0))
    need = lim + s
    if family in ("availability", "max_replicas"):
        need = math.ceil(need - 1e-6)
        unit = " GPUs" if family == "availability" else " replicas"
        reason = (f"{label}: {lim:g}{unit} cannot carry the traffic at the SLOs; the plan needs "
                  f"{need:g}")
    elif family == "budget":
        reason = (f"budget_usd_per_hour {lim:g} is below the cheapest plan meeting every SLO, "
                  f"{usd(_up(need))}/h at the capacities one replica was measured to carry "
                  "(not simulated: the verified plan may need more)")
    elif label.endswith("max_g_per_mtok"):
        reason = (f"{label} {lim:g} is below the lowest carbon any plan meeting the SLOs "
                  f"reaches, {_num(need)} g CO2e/Mtok")
    else:
        reason = (f"{label} {lim:g} is below the lowest carbon any plan meeting the SLOs "
                  f"reaches, {_num(need)} kg CO2e/day")
    whole = family in ("availability", "max_replicas")
    parts = [f"{lb} >= {(math.ceil(li + sl - 1e-6) if whole else _up(li + sl)):g}"
             for lb, li, sl in moved]
    return Explanation(label, reason, ", ".join(parts) + plan)


def explain_infeasible(problem: PlanProblem, settings: SolverSettings,
                       margins: Margins | None = None) -> Explanation:
    """The binding constraint of an infeasible ``problem`` (see the module docstring);
    ``margins``: of ``--confidence``, whose factors the capacities of ``problem`` already use
    (an SLO is then compared with each candidate's best P99 times its factor)."""
    for i, d in enumerate(problem.demands):
        if not any(problem.cap(d, p, d.tier) > 0 for p in problem.pools):
            return _slo_explanation(problem, i, d, margins)
    lim = problem.limits
    present = [f for f in ELASTIC_FAMILIES if (
        (f == "carbon" and lim.carbon_capped)
        or (f == "budget" and lim.budget_usd_per_hour is not None)
        or (f == "availability" and lim.availability)
        or (f == "max_replicas" and any(p.max_replicas is not None for p in problem.pools)))]
    found: list[tuple[float, Explanation]] = []
    for family in present:
        sol = _elastic(problem, settings, (family,))
        if sol is not None:
            found.append((sol.cost_per_day_usd, _family_explanation(family, sol)))
    if lim.redundancy > 0:
        for r in range(lim.redundancy - 1, -1, -1):
            relaxed = problem.replace(limits=_with_redundancy(lim, r))
            sol = _elastic(relaxed, settings, ())
            if sol is not None:
                found.append((sol.cost_per_day_usd, Explanation(
                    "redundancy",
                    f"redundancy {lim.redundancy} (N+{lim.redundancy} replicas per pool) "
                    "needs more replicas than the other constraints allow",
                    f"redundancy <= {r} (cheapest such plan: "
                    f"${sol.cost_per_day_usd / 24:.2f}/h)")))
                break
    if found:
        return min(found, key=lambda f: f[0])[1]
    relaxed = problem.replace(limits=_with_redundancy(lim, 0))
    sol = _elastic(relaxed, settings, tuple(present))
    if sol is None:
        return Explanation("classes", "no plan serves every class at its SLO with any "
                           "relaxation of the optional constraints", "loosen the SLOs")
    moved = [f"{label} {lim_:g} -> {_up(lim_ + s):g}"
             for label, (lim_, s) in sorted(sol.slack.items()) if s > 1e-6]
    if lim.redundancy:
        moved.append(f"redundancy {lim.redundancy} -> 0")
    return Explanation("several", "several constraints bind together: " + ", ".join(moved),
                       "; ".join(moved) + f" (plan ${sol.cost_per_day_usd / 24:.2f}/h)")


def _with_redundancy(lim, r: int):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    return replace(lim, redundancy=r)


def near_floor_notes(problem: PlanProblem,
                     results: Mapping[tuple[str, str, Tier], CapacityResult],
                     sol: MilpSolution, checks: Sequence[HourCheck]) -> list[str]:
    """One note per class that missed its TTFT SLO in ``checks`` although a lone replica of a
    configuration it ran on, at the lowest load its capacity search passed there, already
    reaches :data:`FLOOR_SHARE` of that SLO: in a pool shared with other classes, every
    replica carries their load too, so more replicas (the closed loop's remedy) cannot bring
    it down to the lone figure."""
    failing: dict[str, float] = {}
    for chk in checks:
        for c in chk.classes:
            if not c.met and c.ttft_p99_ms is not None:
                failing[c.name] = max(failing.get(c.name, 0.0), c.ttft_p99_ms)
    slo = {d.name: d.ttft_p99_ms for d in problem.demands}
    notes = []
    for name in sorted(failing):
        target = slo.get(name, math.inf)
        if not math.isfinite(target):
            continue
        floors = []
        for (cls, pool, h), share in sorted(sol.shares.items()):
            if cls != name or share <= 0:
                continue
            config = pool.partition("@")[0]
            res = results.get((cls, config, sol.tiers[(pool, h)]))
            if res is not None and res.capacity_rps > 0:
                floors.append((res.probe.ttft_p99_ms, res.probe.rate_rps, config))
        if not floors:
            continue
        p99, rate, config = min(floors)
        if p99 >= FLOOR_SHARE * target:
            notes.append(
                f"class {name}: simulated P99 TTFT {_ms(failing[name])} ms against its SLO "
                f"{target:g} ms; alone on one {config} replica at {rate:g} req/s (the lowest "
                f"load its capacity search passed) it already reaches {_ms(p99)} ms "
                f"({p99 / target:.0%} of the SLO), so in a pool shared with other classes it "
                "misses whatever the replica count: loosen its SLO or offer a faster candidate "
                "(replicas of its own are not modelled)")
    return notes
