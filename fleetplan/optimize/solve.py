"""``solve(scenario) -> Plan``: capacities at SLO, the MILP, the closed loop, the report.

Main entries: :func:`solve` and :func:`save_model` (the LP file of a plan's final MILP, re-solvable
by any LP/MILP solver, plus PuLP's model dict as JSON beside it). The steps are:

1. :func:`fleetplan.optimize.inputs.build_problem`: demands, candidate pools, capacities at SLO
   (replica model in steady state, searches cached on disk and run on the executor);
2. :func:`fleetplan.optimize.loop.closed_loop`: MILP, simulation of the answer, tightening;
3. an infeasible MILP is explained (:func:`fleetplan.optimize.explain.explain_infeasible`).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from fleetplan._io import atomic_write_text
from fleetplan._notes import (
    P_ACCURACY,
    P_FIT,
    P_NOT_MET,
    P_PRICE,
    P_SPARES,
    PLAN,
    Note,
    as_note,
    datasheet_band,
)
from fleetplan._progress import Progress, warn
from fleetplan.context import with_scenario_context
from fleetplan.optimize.cache import DiskCache, cache_root
from fleetplan.optimize.capacity import CapacitySettings
from fleetplan.optimize.confidence import (
    Margins,
    check_confidence,
    confident_inputs,
    hold_confidence,
    tighten,
)
from fleetplan.optimize.confidence import margins as model_margins
from fleetplan.optimize.executors import Executor, get_executor
from fleetplan.optimize.explain import explain_infeasible, near_floor_notes
from fleetplan.optimize.inputs import Inputs, build_problem
from fleetplan.optimize.loop import (
    DEFAULT_MAX_ROUNDS,
    DEFAULT_MAX_TRIMS,
    LoopOutcome,
    closed_loop,
)
from fleetplan.optimize.milp import MilpStatus, build_model, candidate_key
from fleetplan.optimize.model_band import with_model_bands
from fleetplan.optimize.plan import (
    CapacityNote,
    ClassResult,
    FleetEntry,
    HourPlan,
    Plan,
    PlanStatus,
    SolverReport,
)
from fleetplan.optimize.pricing import price_tiers
from fleetplan.optimize.problem import CommitmentMode, PlanProblem, Tier
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.optimize.verify import ClassCheck, HourCheck, verify_plan
from fleetplan.scenario import Scenario
from fleetplan.scenario.fleet import split_pool_name
from fleetplan.scenario.reliability import spot_price_source

BURST_NOTE = ("capacities are sustained per-replica rates of the replica model in steady state "
              "(fresh prompts, warm-up excluded), not the measured runs' nominal rates: those "
              "are bursts of 200 requests that the server drains afterwards (one H100 with the "
              "14B model 'at 16 req/s' completed 7.2 req/s), and their low TTFTs partly come "
              "from prompts already in the prefix cache")


def solver_settings(scenario: Scenario, solver: str | None = None) -> SolverSettings:
    """The scenario's solver block, with ``solver`` (``--solver``) overriding its name."""
    s = scenario.solver
    return SolverSettings(name=solver or s.name, time_limit_s=s.time_limit_s, gap=s.gap)


def _r(v: float | None, digits: int = 6) -> float | None:
    return None if v is None else round(float(v), digits)


@with_scenario_context
def solve(scenario: Scenario, *, solver: str | None = None, executor: Any = None,
          capacity: CapacitySettings | None = None, cache_dir: str | bool | None = True,
          max_rounds: int = DEFAULT_MAX_ROUNDS, max_trims: int = DEFAULT_MAX_TRIMS,
          progress: Progress | None = None, confidence: float | None = None) -> Plan:
    """The cheapest fleet meeting every class's SLO (and the scenario's constraints), verified.

    ``solver``: a solver name (``cbc``, ``highs`` ...) overriding ``scenario.solver.name``.
    ``executor``: where capacity searches and verification runs go (``None``: local processes;
    ``"serial"``; a Dask scheduler address or client; see :func:`get_executor`).
    ``capacity``: how capacities are measured (default: the scenario's ``capacity:`` block).
    ``cache_dir``: ``True`` (default folder), a folder, or ``False`` (no disk cache).
    ``max_rounds``: bound on solve + simulate rounds; ``max_trims``: of those, how many may try
    one replica fewer in the dearest pool once a plan passed.
    ``progress``: receives the steps (capacity searches, each round's MILP and simulation; see
    :mod:`fleetplan._progress`); the default reports nothing.
    ``confidence``: a probability (0.95): every SLO must hold when latencies are as much worse
    as the replica model's measured error allows at that quantile
    (:mod:`fleetplan.optimize.confidence`); ``None`` (default): the model's figures as they are.
    """
    check_confidence(confidence)
    settings = solver_settings(scenario, solver)
    settings.pulp_name  # noqa: B018 - fail early on an unknown or unavailable solver
    ex = get_executor(executor)
    # stricter-tier capacities on demand (optimize/pricing.py); --confidence rescales every
    # entry of the table, so it searches them all
    inputs = build_problem(scenario, executor=ex, settings=capacity, cache_dir=cache_dir,
                           progress=progress, defer_stricter=confidence is None)
    inputs = price_tiers(inputs, settings, ex, progress)
    m = None
    base = inputs
    build: dict[str, Any] = {"executor": ex, "settings": capacity, "cache_dir": cache_dir,
                             "progress": progress}
    if confidence is not None:
        inputs, m = confident(scenario, inputs, confidence, **build)
    plan = solve_inputs(scenario, inputs, settings, executor=ex, max_rounds=max_rounds,
                        max_trims=max_trims, progress=progress, margins=m, cache_dir=cache_dir)
    if m is not None and plan.status is PlanStatus.infeasible:
        plan = _highest_confidence(scenario, base, settings, plan, m, build)
    return plan


def _highest_confidence(scenario: Scenario, base: Inputs, settings: SolverSettings,
                        plan: Plan, m: Margins, build: dict[str, Any]) -> Plan:
    """An infeasible ``--confidence`` plan with the highest confidence that has a plan (MILP
    over the capacities at each level; :mod:`fleetplan.optimize.confidence_limit`), when the
    scenario has one without ``--confidence``."""
    from fleetplan.optimize.confidence_limit import LOWEST, floor_confidence, highest_confidence
    from fleetplan.optimize.milp import solve_problem

    if m.confidence <= LOWEST:
        return plan
    problem = with_reliability(scenario, base.problem)
    if not solve_problem(problem, settings).has_plan:
        return plan  # no plan without the margins either: they are not what binds

    def feasible(level: float) -> bool:
        inputs, _m = confident(scenario, base, level, **build)
        return solve_problem(with_reliability(scenario, inputs.problem), settings).has_plan

    # where one replica's best P99 (in the searches at the requested confidence, which walk
    # down to the lowest rate) stops meeting the margin of its configuration: above it, no
    # candidate has capacity for the class
    probes = plan.problem.probes if plan.problem is not None else problem.probes
    keep = 1.0 - problem.slo_margin
    guess = None
    for d in problem.demands:
        best = max((floor_confidence(m.configs[p.config], d.ttft_p99_ms, probe.ttft_p99_ms, keep)
                    for p in problem.pools
                    if (probe := probes.get((d.name, p.config))) is not None
                    and p.config in m.configs and math.isfinite(d.ttft_p99_ms)), default=None)
        if best is not None:
            guess = best if guess is None else min(guess, best)
    bracket = highest_confidence(feasible, m.confidence, guess)
    relax = plan.relaxation or ""
    if bracket.has_plan is not None:
        lower = f"--confidence {bracket.has_plan:g}"
        relax = (relax.replace("a lower --confidence", lower) if "a lower --confidence" in relax
                 else f"{relax}; {lower}" if relax else lower)
    return replace(plan, reason=f"{plan.reason}; {bracket.phrase()}", relaxation=relax)


def confident(scenario: Scenario, inputs: Inputs, confidence: float,
              **build: Any) -> tuple[Inputs, Margins]:
    """``inputs`` with the capacities of ``--confidence`` and the margins they used."""
    m = model_margins(scenario, {p.config for p in inputs.problem.pools}, confidence)
    return confident_inputs(scenario, inputs, m, **build), m


def solve_inputs(scenario: Scenario, inputs: Inputs, settings: SolverSettings, *,
                 executor: Executor, max_rounds: int = DEFAULT_MAX_ROUNDS,
                 max_trims: int = DEFAULT_MAX_TRIMS, progress: Progress | None = None,
                 margins: Margins | None = None, cache_dir: str | bool | None = None) -> Plan:
    """Closed loop and report for a scenario whose MILP inputs are already built
    (``margins``: of ``--confidence``, the capacities in ``inputs`` already use them;
    ``cache_dir``: where simulated plans' checks are cached, as in :func:`solve`; default
    none: every round's plan is simulated). With
    churn spares, each round simulates the plan twice: with the scenario's failures on, and on
    its working replicas alone (every spare down); a class meets its SLO only in both."""
    problem = with_reliability(scenario, inputs.problem)
    inputs = replace(inputs, problem=problem)

    churn = any(p.unavailability > 0 for p in problem.pools)

    simulated: dict[str, Any] = {}  # hour scenario -> its check, kept across rounds
    cache = verification_cache(cache_dir)

    def verify(sol, ex):  # type: ignore[no-untyped-def]
        # --confidence: each class must meet its SLO with its pools' model-error margin
        sc = scenario if margins is None else tighten(scenario, margins, _configs_of(sol))
        checks = verify_plan(sc, problem, sol, ex, simulated, cache)
        if churn and any(n > 0 for n in sol.spares.values()):
            # spares carry load while up, so the plan must also hold with them all down: the
            # working replicas alone (no further failures), else trimming would spend them
            down = replace(sol, counts={k: n - sol.spares.get(k, 0)
                                        for k, n in sol.counts.items()}, spares={})
            worst = verify_plan(sc.with_updates(reliability=None), problem, down, ex, simulated,
                                cache)
            checks = [_worse(a, b) for a, b in zip(checks, worst, strict=True)]
        if margins is not None:  # the plan must hold at the confidence it promises
            checks = hold_confidence(checks, scenario, margins, _configs_of(sol))
        return checks

    out = closed_loop(problem, settings, verify, executor=executor, max_rounds=max_rounds,
                      max_trims=max_trims, progress=progress)
    if cache is not None and cache.rejected:
        path, why = min(cache.rejected)
        n = len(cache.rejected)
        warn(progress, f"plan-check cache: {n} entr{'y' if n == 1 else 'ies'} failed validation "
             f"and {'was' if n == 1 else 'were'} simulated again (e.g. {path}: {why})")
    if not out.solution.has_plan:
        return _infeasible(scenario, problem, settings, out, inputs, margins)
    return _report(scenario, inputs, settings, out, margins)


def verification_cache(cache_dir: str | bool | None) -> DiskCache | None:
    """The disk cache of plan checks for ``cache_dir`` (``True``: the default folder, a
    folder, ``False`` / ``None``: none), the folder the capacities use."""
    root = cache_root(cache_dir)
    return DiskCache(root) if root is not None else None


def _worse(full: HourCheck, down: HourCheck) -> HourCheck:
    """One hour's check of a plan with churn: the fleet with churn on (``full``: its carbon and
    utilization) and its working replicas alone (``down``); each class at the worse of both."""
    def worse(a: ClassCheck, b: ClassCheck) -> ClassCheck:
        def key(c: ClassCheck) -> float:
            return float("inf") if c.ttft_p99_ms is None else c.ttft_p99_ms

        w = b if key(b) > key(a) else a
        hi = [x for x in (a.tpot_p99_ms, b.tpot_p99_ms) if x is not None]
        he = [x for x in (a.e2e_p99_ms, b.e2e_p99_ms) if x is not None]
        return replace(w, met=a.met and b.met, tpot_p99_ms=max(hi) if hi else None,
                       e2e_p99_ms=max(he) if he else None)

    by = {c.name: c for c in down.classes}
    return replace(full, overloaded=full.overloaded or down.overloaded,
                   classes=tuple(worse(c, by[c.name]) if c.name in by else c
                                 for c in full.classes))


def _configs_of(sol: Any) -> dict[str, set[str]]:
    """Class name -> the configurations carrying its traffic (in any hour)."""
    out: dict[str, set[str]] = {}
    for (name, key, _h), share in sol.shares.items():
        if share > 0:
            out.setdefault(name, set()).add(key.partition("@")[0])
    return out


def _infeasible(scenario: Scenario, problem: PlanProblem, settings: SolverSettings,
                out: LoopOutcome, inputs: Inputs, margins: Margins | None = None) -> Plan:
    """The plan of a scenario with none: its classes (rates and SLOs, nothing simulated), the
    reason, binding constraint and cheapest relaxation, every candidate's capacity."""
    sol = out.solution
    report = SolverReport(settings.name, sol.status.value, _r(out.solve_seconds, 3),
                          settings.gap, out.rounds, settings.time_limit_s, None)
    classes = _unserved_classes(scenario, problem)
    if sol.status is MilpStatus.no_solution:
        reason = (f"no plan found within the solver time limit of {settings.time_limit_s:g} s "
                  "(not proven infeasible)")
        return Plan(PlanStatus.infeasible, (), None, None, None, classes, report, False, reason,
                    "solver.time_limit_s", "raise solver.time_limit_s", problem=problem,
                    capacities=_candidate_capacities(inputs), notes=inputs.notes)
    why = explain_infeasible(problem, settings, margins)
    reason = why.reason
    if margins is not None and not why.binding.startswith("classes["):
        from fleetplan.optimize.confidence_limit import margins_phrase

        phrase = margins_phrase(margins)
        if phrase:
            reason += f" (capacities at confidence {margins.confidence:g}: {phrase})"
    return Plan(PlanStatus.infeasible, (), None, None, None, classes, report, False, reason,
                why.binding, why.relaxation, problem=problem,
                capacities=_candidate_capacities(inputs), notes=inputs.notes)


def _unserved_classes(scenario: Scenario, problem: PlanProblem) -> tuple[ClassResult, ...]:
    """An infeasible plan's classes: rate and SLOs only (no fleet, nothing simulated)."""
    out = []
    for c, d in zip(scenario.classes, problem.demands, strict=True):
        slo = c.slo
        out.append(ClassResult(
            name=d.name, rate_rps=_r(sum(d.rates_rps) / len(d.rates_rps)) or 0.0,
            slo_ttft_p99_ms=slo.ttft_p99_ms if slo else None, ttft_p99_ms=None, met=False,
            split={}, slo_tpot_p99_ms=slo.tpot_p99_ms if slo else None,
            slo_e2e_p99_ms=slo.e2e_p99_ms if slo else None))
    return tuple(out)


def _candidate_capacities(inputs: Inputs) -> tuple[CapacityNote, ...]:
    """Every candidate pool's capacity for every class at the class's own SLO (what an
    infeasible plan reports, so the user sees how far each candidate is)."""
    problem = inputs.problem
    notes = []
    for d in problem.demands:
        for pool in problem.pools:
            res = inputs.results.get((d.name, pool.config, d.tier))
            cap = float(problem.capacity.get((d.name, pool.config, d.tier), 0.0))
            at = res.at_capacity if res is not None else None
            notes.append(CapacityNote(
                d.name, pool.config, d.tier.ttft_ms, round(cap, 4), 1.0,
                "replica model, steady state", pool=pool.name(d.tier), region=pool.region,
                ttft_p99_ms_at_capacity=_r(at.ttft_p99_ms, 3) if at is not None and cap > 0
                else None))
    return tuple(notes)


def _entries(counts: dict[str, int], tiers: dict[str, Tier],
             spares: dict[str, int] | None = None) -> tuple[FleetEntry, ...]:
    """Fleet entries; ``spares`` (reliability block only): each pool's replicas kept for churn."""
    return tuple(FleetEntry.of_pool(name, n, tiers[name],
                                    None if spares is None else spares.get(name, 0))
                 for name, n in sorted(counts.items()) if n > 0)


def with_reliability(scenario: Scenario, problem: PlanProblem) -> PlanProblem:
    """``problem`` with each candidate's steady-state unavailability from the scenario's
    ``reliability:`` block (the MILP then keeps churn spares) and, for spot pools (a spot
    candidate, or a ``market: spot`` entry), its spot price; unchanged without a block or a spot
    candidate. Failures are modelled only with a block (as in ``simulate``): a spot candidate
    of a scenario without one gets the spot price alone."""
    from fleetplan.scenario.reliability import entry, pool_price, resolve

    if scenario.reliability is None and not any(p.market == "spot" for p in problem.pools):
        return problem
    pools = []
    for p in problem.pools:
        rel = resolve(scenario.reliability, p.config, p.gpu, p.gpu_count, p.market)
        if rel is None:
            pools.append(p)
            continue
        # the price rule the simulator and the report use, per replica-hour
        spec = entry(scenario.reliability, p.config, p.gpu, p.market)
        overridden = p.gpu in scenario.prices_usd_per_gpu_hour
        price, _src = pool_price(spec, p.gpu, p.price_usd_per_hour, "", overridden,
                                 gpus=p.gpu_count)
        churn = scenario.reliability is not None
        pools.append(replace(
            p, unavailability=rel.unavailability if churn else 0.0,
            spare_quantile=rel.quantile if churn else p.spare_quantile,
            price_usd_per_hour=price))
    return problem.replace(pools=tuple(pools))


def _report(scenario: Scenario, inputs: Inputs, settings: SolverSettings,
            out: LoopOutcome, margins: Margins | None = None) -> Plan:
    problem, sol, checks = out.problem, out.solution, out.checks
    H = sol.hours
    pools = {p.key: p for p in problem.pools}
    tiers = {name: t for (name, _h), t in sol.tiers.items()}
    per_hour = [{k: n for (k, hh), n in sol.counts.items() if hh == h} for h in range(H)]
    peak = {k: max(c.get(k, 0) for c in per_hour) for k in tiers}
    spares: dict[str, int] | None = None
    if scenario.reliability is not None:  # the spares of each pool's peak hour
        spares = {}
        for k in tiers:
            held = [per_hour[h].get(k, 0) for h in range(H)]
            h_peak = held.index(max(held))  # the first hour at its peak
            spares[k] = sol.spares.get((k, h_peak), 0)
    mtok_day = sum(problem.mtok_per_hour(h) for h in range(H)) * 24 / H
    cost_h = sol.cost_per_day_usd / 24
    g_total = sum(c.g_co2_per_hour for c in checks)
    tokens = sum(c.tokens_per_hour for c in checks)
    by_class = {c.name: [] for c in scenario.classes}  # type: dict[str, list[Any]]
    for chk in checks:
        for cc in chk.classes:
            by_class[cc.name].append((chk, cc))
    classes = []
    carried = _configs_of(sol)
    for i, d in enumerate(problem.demands):
        rows = by_class[d.name]
        met = bool(rows) and all(cc.met and not chk.overloaded for chk, cc in rows)
        worst = max(rows, key=lambda r: r[1].ttft_p99_ms or 0.0)[1] if rows else None
        rate_day = sum(d.rates_rps)
        split: dict[str, float] = {}
        for (name, key, h), s in sorted(sol.shares.items()):
            if name == d.name:
                split[key] = split.get(key, 0.0) + s * d.rates_rps[h] / rate_day
        slo = scenario.classes[i].slo
        assert slo is not None
        prob = margin = None
        if margins is not None:
            used = carried.get(d.name, set())
            f = margins.factor(used)
            p99 = worst.ttft_p99_ms if worst else None
            prob = _r(margins.met_probability(slo.ttft_p99_ms, p99, used), 4)
            margin = (_r(slo.ttft_p99_ms * (1.0 - 1.0 / f), 3)
                      if slo.ttft_p99_ms is not None else None)
        classes.append(ClassResult(
            name=d.name, rate_rps=_r(rate_day / H) or 0.0, slo_ttft_p99_ms=slo.ttft_p99_ms,
            ttft_p99_ms=_r(worst.ttft_p99_ms, 3) if worst else None, met=met,
            split={k: round(v, 6) for k, v in split.items()},
            slo_tpot_p99_ms=slo.tpot_p99_ms,
            tpot_p99_ms=_r(worst.tpot_p99_ms, 3) if worst and slo.tpot_p99_ms else None,
            slo_e2e_p99_ms=slo.e2e_p99_ms,
            e2e_p99_ms=_r(worst.e2e_p99_ms, 3) if worst and slo.e2e_p99_ms else None,
            ttft_p99_ci_ms=(tuple(round(x, 3) for x in worst.ttft_p99_ci_ms)  # type: ignore[arg-type]
                            if worst and worst.ttft_p99_ci_ms and H == 1 else None),
            slo_met_probability=prob, margin_ms=margin))
    hours = None
    base = None
    diurnal = H > 1
    if diurnal:
        od = (problem.limits.commitment is CommitmentMode.base_plus_on_demand)
        factor = problem.limits.on_demand_price_factor
        hours = []
        for h in range(H):
            counts = per_hour[h]
            extra = {k: n - sol.base_counts.get(k, 0) for k, n in counts.items()} if od else {}
            cost = sum(pools[candidate_key(k)].price_usd_per_hour
                       * (n + (factor - 1) * extra.get(k, 0)) for k, n in counts.items())
            hour_check = checks[h] if h < len(checks) else None
            hours.append(HourPlan(
                h, _r(sum(d.rates_rps[h] for d in problem.demands)) or 0.0,
                _entries(counts, tiers), _r(cost) or 0.0,
                _r(hour_check.g_co2_per_hour if hour_check else None) or 0.0,
                bool(hour_check and hour_check.met), _entries(extra, tiers)))
        if od:
            base = _entries(sol.base_counts, tiers)
    status = PlanStatus.optimal if sol.status is MilpStatus.optimal else PlanStatus.feasible
    report = SolverReport(settings.name, sol.status.value, _r(out.solve_seconds, 3),
                          settings.gap, out.rounds, settings.time_limit_s,
                          _r(sol.gap_achieved))
    return with_model_bands(scenario.model, Plan(
        status=status, fleet=_entries(peak, tiers, spares), cost_per_hour_usd=_r(cost_h),
        cost_per_mtok_usd=_r(sol.cost_per_day_usd / mtok_day) if mtok_day else None,
        g_co2_per_mtok=_r(g_total / tokens * 1e6) if tokens else None,
        classes=tuple(classes), solver=report, verified=out.verified,
        hours=tuple(hours) if hours is not None else None, base_fleet=base,
        g_co2_per_hour=_r(g_total / max(len(checks), 1)),
        capacities=_capacity_notes(inputs, out),
        notes=_notes(scenario, inputs, out, peak, spares),
        problem=out.problem))


def _capacity_notes(inputs: Inputs, out: LoopOutcome) -> tuple[CapacityNote, ...]:
    sol, problem = out.solution, inputs.problem
    used = sorted({(name, key, sol.tiers[(key, h)]) for (name, key, h), s in sol.shares.items()
                   if s > 0})
    notes = []
    for name, key, tier in used:
        config, region, _market = split_pool_name(key)
        base = problem.capacity.get((name, config, tier), 0.0)
        f = out.derate.get((config, tier), 1.0)
        res = inputs.results.get((name, config, tier))
        src = "replica model, steady state"
        at = res.at_capacity if res is not None else None
        if at is not None:
            src += f" (P99 TTFT {at.ttft_p99_ms:.0f} ms at capacity)"
        notes.append(CapacityNote(name, config, tier.ttft_ms, round(base * f, 4), round(f, 4),
                                  src, pool=key, region=region,
                                  ttft_p99_ms_at_capacity=_r(at.ttft_p99_ms, 3)
                                  if at is not None else None))
    return tuple(notes)


def _notes(scenario: Scenario, inputs: Inputs, out: LoopOutcome,
           counts: dict[str, int] | None = None,
           spares: dict[str, int] | None = None) -> tuple[str, ...]:
    """The plan's notes (:mod:`fleetplan._notes`): first what a planner should know about the
    pools in the plan (``counts``: pool name -> replicas, ``spares``: of those, spares), then
    every note on how the figures were made (the MILP inputs', the closed loop's, each
    candidate's churn and spot price)."""
    problem = inputs.problem
    counts = {k: n for k, n in (counts or {}).items() if n > 0}
    held = {candidate_key(k) for k in counts}
    in_plan = [p for p in problem.pools if p.key in held]
    plan: list[str] = []
    if not out.verified:
        plan.append(Note(
            f"NOT VERIFIED: after {out.rounds} round(s) the simulated plan still misses an SLO "
            "or the carbon cap; classes marked met=false did not meet it", "verification",
            level=PLAN, priority=P_NOT_MET))
        plan.extend(Note(n, "verification", level=PLAN, priority=P_NOT_MET + 1) for n in
                    near_floor_notes(out.problem, inputs.results, out.solution, out.checks))
    plan.extend(_accuracy_notes(scenario, in_plan))
    plan.extend(_market_notes(scenario, in_plan, counts, spares or {}))
    detail = [Note(BURST_NOTE, "capacity"), *map(as_note, inputs.notes),
              *(Note(h, "solver") for h in out.history)]
    for p in problem.pools:
        if p.unavailability > 0:
            detail.append(Note(
                f"churn: {p.key} replicas are down {p.unavailability * 100:.3g}% of the time "
                "(reliability block); the plan keeps the fewest spares k with P(more than k of "
                f"the pool down) <= {p.spare_quantile:g} (binomial, independent replicas)",
                "reliability", pools=(p.key,)))
    for p in problem.pools:
        if p.market == "spot":
            src = spot_price_source(scenario.reliability, p.config, p.gpu,
                                    p.gpu in scenario.prices_usd_per_gpu_hour)
            detail.append(Note(
                f"spot: {p.key} at ${p.price_usd_per_hour:.4g} per replica-hour ({src}); its "
                "replicas fail at the spot rate (reliability block or bundled spot default, "
                "docs/reliability.md)", "price", pools=(p.key,)))
    return (*plan, *detail)


def _pool_words(p: Any) -> str:
    """A candidate as a planner names it: ``1xRTX-4090 spot``."""
    return p.config + (" spot" if p.market == "spot" else "")


def _accuracy_notes(scenario: Scenario, pools: list[Any]) -> list[str]:
    """How far the latencies of the plan's pools may be off: uncalibrated pools (predicted
    from datasheets) with the held-out error band of such predictions; calibrated pools whose
    measured runs the model does not reproduce at some rates."""
    from fleetplan.replica.params import replica_params
    from fleetplan.validate.own_runs import flagged_rates, rates_text

    configs = sorted({p.config for p in pools})
    uncal = [c for c in configs if not replica_params(scenario.model, c).calibrated]
    notes: list[str] = []
    if uncal:
        gpus = {p.config: p.gpu for p in pools}
        bands = {gpus[c]: datasheet_band(scenario.model, gpus[c]) for c in uncal}
        ranges = ", ".join(f"{lo:.2g}-{hi:.2g}x" + (f" ({gpu})" if len(bands) > 1 else "")
                           for gpu, (lo, hi) in bands.items())
        notes.append(Note(
            f"{', '.join(uncal)}: latencies predicted from datasheets, not from measured runs "
            f"(uncalibrated): real P99 TTFT was {ranges} such predictions in 80% of held-out "
            "cases (docs/spec-path-validation.md); solve --confidence P plans for that "
            "error", "accuracy", pools=uncal, level=PLAN, priority=P_ACCURACY))
    for c in configs:
        if c in uncal:
            continue
        rates = flagged_rates(scenario.model, c)
        if rates:
            notes.append(Note(
                f"{c}: near {rates_text(rates)} per replica expect a higher TTFT than planned: "
                "its runs measured there had a higher TTFT than the model reproduces (left out "
                "of its fit, docs/replica-model.md)", "accuracy", pools=(c,), level=PLAN,
                priority=P_FIT))
    return notes


def _market_notes(scenario: Scenario, pools: list[Any], counts: dict[str, int],
                  spares: dict[str, int]) -> list[str]:
    """Spot prices and churn spares of the plan's pools (``counts``, ``spares``: by pool
    name, ``config@region/tier``), in a planner's words: one note each, however many pools."""
    notes: list[str] = []
    spot = [p for p in pools if p.market == "spot"]
    if spot:
        prices = []
        for p in spot:
            src = spot_price_source(scenario.reliability, p.config, p.gpu,
                                    p.gpu in scenario.prices_usd_per_gpu_hour)
            prices.append(f"{_pool_words(p)}: ${p.price_usd_per_hour:.4g} per replica-hour, "
                          f"{src.removeprefix('spot: ')}")
        notes.append(Note("; ".join(prices) + "; the provider can take spot replicas back",
                          "price", pools=[p.key for p in spot], level=PLAN, priority=P_PRICE))
    by_key = {p.key: p for p in pools}
    held = []
    for name, k in sorted(spares.items()):
        p = by_key.get(candidate_key(name))
        if k > 0 and p is not None and p.unavailability > 0:
            tier = name.partition("/")[2]
            held.append((p, f"{_pool_words(p)}{f' ({tier} tier)' if tier else ''}: {k} of its "
                            f"{counts.get(name, 0)} replicas are spares (a replica is down "
                            f"{p.unavailability * 100:.3g}% of the time)"))
    if held:
        notes.append(Note(
            "; ".join(text for _p, text in held) + ", by the failure and replacement times "
            "of the reliability block; the plan was also simulated with every spare down",
            "reliability", pools=sorted({p.key for p, _t in held}), level=PLAN,
            priority=P_SPARES))
    return notes


def save_model(problem: PlanProblem, path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write the MILP of ``problem`` as an LP file and PuLP's model dict (``<path>.json``).

    The LP file is solver-neutral (CPLEX LP format, re-solvable by CBC, HiGHS, GLPK ...); the
    JSON round-trips through ``pulp.LpProblem.fromDict``.
    """
    import tempfile

    target = Path(path)
    model = build_model(problem)
    with tempfile.TemporaryDirectory() as tmp:
        lp = Path(tmp) / "model.lp"
        model.prob.writeLP(str(lp))
        text = lp.read_text(encoding="utf-8")
    atomic_write_text(target, text)
    side = target.with_suffix(target.suffix + ".json")
    atomic_write_text(side, json.dumps(model.prob.toDict(), indent=1, sort_keys=True) + "\n")
    return target, side
