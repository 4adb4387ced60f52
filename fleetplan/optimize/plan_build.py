"""A solve's answer written up as a :class:`~fleetplan.optimize.plan.Plan`: the fleet entries,
each class's simulated outcome and split, cost and carbon, the capacities behind the plan, and
the notes that say how each figure was made (accuracy of the replica model, spot and on-demand
prices, spares).

Main entries: :func:`solved_plan` (a closed loop's outcome with a fleet) and
:func:`infeasible_plan` (none: the reason, binding constraint, cheapest relaxation and every
candidate's capacity). :func:`fleetplan.optimize.solve.solve_inputs` calls them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

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
    usd,
)
from fleetplan.optimize.confidence import Margins
from fleetplan.optimize.evidence import evidence_config
from fleetplan.optimize.explain import explain_infeasible, near_floor_notes
from fleetplan.optimize.inputs import Inputs
from fleetplan.optimize.loop import LoopOutcome
from fleetplan.optimize.milp import MilpSolution, MilpStatus, candidate_key
from fleetplan.optimize.model_band import with_model_bands
from fleetplan.optimize.multi_model import bare_config
from fleetplan.optimize.plan import (
    CapacityNote,
    ClassResult,
    FleetEntry,
    HourPlan,
    Plan,
    PlanStatus,
    SolverReport,
)
from fleetplan.optimize.problem import CommitmentMode, PlanProblem, Tier
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.optimize.verify import HourCheck
from fleetplan.scenario import Scenario
from fleetplan.scenario.engine import candidate_servers
from fleetplan.scenario.fleet import split_model, split_pool_name
from fleetplan.scenario.reliability import entry, gpu_class, spot_price_source
from fleetplan.scenario.served import class_model, is_multi_model, served_models

BURST_NOTE = ("capacities are sustained per-replica rates of the replica model in steady state "
              "(fresh prompts, warm-up excluded), not the measured runs' nominal rates: those "
              "are bursts of 200 requests that the server drains afterwards (one H100 with the "
              "14B model 'at 16 req/s' completed 7.2 req/s), and their low TTFTs partly come "
              "from prompts already in the prefix cache")

# how the note of a plan its simulation did not verify begins (solve's exit-4 line reads it)
NOT_VERIFIED_NOTE = "NOT VERIFIED: "


def rounded(v: float | None, digits: int = 6) -> float | None:
    return None if v is None else round(float(v), digits)


def configs_of(sol: Any) -> dict[str, set[str]]:
    """Class name -> the configurations carrying its traffic (in any hour)."""
    out: dict[str, set[str]] = {}
    for (name, key, _h), share in sol.shares.items():
        if share > 0:
            out.setdefault(name, set()).add(key.partition("@")[0])
    return out


def infeasible_plan(scenario: Scenario, problem: PlanProblem, settings: SolverSettings,
                out: LoopOutcome, inputs: Inputs, margins: Margins | None = None) -> Plan:
    """The plan of a scenario with none: its classes (rates and SLOs, nothing simulated), the
    reason, binding constraint and cheapest relaxation, every candidate's capacity."""
    sol = out.solution
    report = SolverReport(settings.name, sol.status.value, rounded(out.solve_seconds, 3),
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
    served = _class_models(scenario)
    for i, (c, d) in enumerate(zip(scenario.classes, problem.demands, strict=True)):
        slo = c.slo
        out.append(ClassResult(
            name=d.name, rate_rps=rounded(sum(d.rates_rps) / len(d.rates_rps)) or 0.0,
            slo_ttft_p99_ms=slo.ttft_p99_ms if slo else None, ttft_p99_ms=None, met=False,
            split={}, slo_tpot_p99_ms=slo.tpot_p99_ms if slo else None,
            slo_e2e_p99_ms=slo.e2e_p99_ms if slo else None, model=served[i]))
    return tuple(out)


def _class_models(scenario: Scenario) -> list[str | None]:
    """Per class, the model a plan names for it: its model in a plan of several, else none
    (a one-model plan is written as it always was)."""
    several = is_multi_model(scenario)
    return [class_model(scenario, i) if several else None for i in range(len(scenario.classes))]


def _capacity_note(name: str, config: str, tier_ms: float | None, capacity: float, derate: float,
                   source: str, **fields: Any) -> CapacityNote:
    """A capacity of a candidate named ``config`` (``model/config`` in a plan of several
    models: the note then names the model apart)."""
    model, bare = split_model(config)
    return CapacityNote(name, bare, tier_ms, capacity, derate, source, model=model, **fields)


def _candidate_capacities(inputs: Inputs) -> tuple[CapacityNote, ...]:
    """Every candidate pool's capacity for every class at the class's own SLO (what an
    infeasible plan reports, so the user sees how far each candidate is)."""
    problem = inputs.problem
    # in a plan of several models a class has capacities on its own model's pools only
    served = {(c, cfg) for c, cfg, _t in problem.capacity}
    several = any(split_model(p.config)[0] is not None for p in problem.pools)
    notes = []
    for d in problem.demands:
        for pool in problem.pools:
            if several and (d.name, pool.config) not in served:
                continue  # another model's pool: not a candidate for this class at all
            res = inputs.results.get((d.name, pool.config, d.tier))
            cap = float(problem.capacity.get((d.name, pool.config, d.tier), 0.0))
            at = res.at_capacity if res is not None else None
            notes.append(_capacity_note(
                d.name, pool.config, d.tier.ttft_ms, round(cap, 4), 1.0,
                "replica model, steady state", pool=pool.name(d.tier), region=pool.region,
                ttft_p99_ms_at_capacity=rounded(at.ttft_p99_ms, 3) if at is not None and cap > 0
                else None))
    return tuple(notes)


def _entries(counts: dict[str, int], tiers: dict[str, Tier],
             spares: dict[str, int] | None = None,
             servers: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[FleetEntry, ...]:
    """Fleet entries; ``spares`` (with a reliability block or redundancy): each pool's replicas
    kept for churn and N+k;
    ``servers``: the engine settings candidates state, per configuration (recorded on the
    pools of that configuration only)."""
    out = []
    for name, n in sorted(counts.items()):
        if n <= 0:
            continue
        e = FleetEntry.of_pool(name, n, tiers[name],
                               None if spares is None else spares.get(name, 0))
        stated = (servers or {}).get(e.config)
        out.append(replace(e, server=tuple(stated.items())) if stated else e)
    return tuple(out)


def _carriers_overloaded(sol: MilpSolution, name: str, chk: HourCheck) -> bool:
    """Whether a pool carrying class ``name`` in the hour of ``chk`` was overloaded (its
    backlog grew): a class is not failed by another class's overloaded pool. Where the
    simulation did not say per pool, whether any pool of the hour was."""
    verdicts = [chk.pool_overloaded(k) for k in sol.carriers(name, chk.hour)]
    if not verdicts or any(v is None for v in verdicts):
        return chk.overloaded
    return any(bool(v) for v in verdicts)


def solved_plan(scenario: Scenario, inputs: Inputs, settings: SolverSettings,
            out: LoopOutcome, margins: Margins | None = None) -> Plan:
    problem, sol, checks = out.problem, out.solution, out.checks
    H = sol.hours
    pools = {p.key: p for p in problem.pools}
    tiers = {name: t for (name, _h), t in sol.tiers.items()}
    per_hour = [{k: n for (k, hh), n in sol.counts.items() if hh == h} for h in range(H)]
    peak = {k: max(c.get(k, 0) for c in per_hour) for k in tiers}
    spares: dict[str, int] | None = None
    if scenario.reliability is not None or sol.spares:  # the spares of each pool's peak hour
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
    carried = configs_of(sol)
    served = _class_models(scenario)
    for i, d in enumerate(problem.demands):
        rows = by_class[d.name]
        met = bool(rows) and all(cc.met and not _carriers_overloaded(sol, d.name, chk)
                                 for chk, cc in rows)
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
            prob = rounded(margins.met_probability(slo.ttft_p99_ms, p99, used), 4)
            if not met and p99 is not None and slo.ttft_p99_ms is not None \
                    and p99 <= slo.ttft_p99_ms:
                # failed for another reason than its P99 (a pool's backlog grew, requests left
                # unfinished, a TPOT or E2E target): the P99 says nothing of the real one
                prob = 0.0
            margin = (rounded(slo.ttft_p99_ms * (1.0 - 1.0 / f), 3)
                      if slo.ttft_p99_ms is not None else None)
        classes.append(ClassResult(
            name=d.name, rate_rps=rounded(rate_day / H) or 0.0, slo_ttft_p99_ms=slo.ttft_p99_ms,
            ttft_p99_ms=rounded(worst.ttft_p99_ms, 3) if worst else None, met=met,
            split={k: round(v, 6) for k, v in split.items()},
            slo_tpot_p99_ms=slo.tpot_p99_ms,
            tpot_p99_ms=rounded(worst.tpot_p99_ms, 3) if worst and slo.tpot_p99_ms else None,
            slo_e2e_p99_ms=slo.e2e_p99_ms,
            e2e_p99_ms=rounded(worst.e2e_p99_ms, 3) if worst and slo.e2e_p99_ms else None,
            ttft_p99_ci_ms=(tuple(round(x, 3) for x in worst.ttft_p99_ci_ms)  # type: ignore[arg-type]
                            if worst and worst.ttft_p99_ci_ms and H == 1 else None),
            slo_met_probability=prob, margin_ms=margin, model=served[i]))
    hours = None
    base = None
    servers = candidate_servers(scenario.candidates)
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
                h, rounded(sum(d.rates_rps[h] for d in problem.demands)) or 0.0,
                _entries(counts, tiers, servers=servers), rounded(cost) or 0.0,
                rounded(hour_check.g_co2_per_hour if hour_check else None) or 0.0,
                bool(hour_check and hour_check.met), _entries(extra, tiers, servers=servers)))
        if od:
            base = _entries(sol.base_counts, tiers, servers=servers)
    status = PlanStatus.optimal if sol.status is MilpStatus.optimal else PlanStatus.feasible
    report = SolverReport(settings.name, sol.status.value, rounded(out.solve_seconds, 3),
                          settings.gap, out.rounds, settings.time_limit_s,
                          rounded(sol.gap_achieved))
    model = served_models(scenario)[0]  # a plan of several models names each class's own
    ctx = scenario.data_context()
    return with_model_bands(model, catalog=ctx.catalog, store=ctx.store,
                            calibration=ctx.calibration, plan=Plan(
        status=status, fleet=_entries(peak, tiers, spares, servers),
        cost_per_hour_usd=rounded(cost_h),
        cost_per_mtok_usd=rounded(sol.cost_per_day_usd / mtok_day) if mtok_day else None,
        g_co2_per_mtok=rounded(g_total / tokens * 1e6) if tokens else None,
        classes=tuple(classes), solver=report, verified=out.verified,
        hours=tuple(hours) if hours is not None else None, base_fleet=base,
        g_co2_per_hour=rounded(g_total / max(len(checks), 1)),
        capacities=_capacity_notes(inputs, out),
        notes=_notes(scenario, inputs, out, peak, spares),
        problem=out.problem))


def _capacity_notes(inputs: Inputs, out: LoopOutcome) -> tuple[CapacityNote, ...]:
    sol, problem = out.solution, inputs.problem
    used = sorted({(name, key, sol.tiers[(key, h)]) for (name, key, h), s in sol.shares.items()
                   if s > 0})
    notes = []
    for name, key, tier in used:
        config, region, market = split_pool_name(key)
        base = problem.capacity.get((name, config, tier), 0.0)
        f = out.derate.get((evidence_config(config, market), tier), 1.0)
        res = inputs.results.get((name, config, tier))
        src = "replica model, steady state"
        at = res.at_capacity if res is not None else None
        if at is not None:
            src += f" (P99 TTFT {at.ttft_p99_ms:.0f} ms at capacity)"
        if abs(f - 1.0) > 5e-5:  # the MILP's figure is the closed loop's multiple of it
            src += (f": {base:.4g} req/s for one replica, x{f:.4g} "
                    + ("verified by simulating the plan's pools together" if f > 1.0 else
                       "after the simulated plans missed at more"))
        notes.append(_capacity_note(name, config, tier.ttft_ms, round(base * f, 4), round(f, 4),
                                    src, pool=key, region=region,
                                  ttft_p99_ms_at_capacity=rounded(at.ttft_p99_ms, 3)
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
        stop = out.no_plan_left  # the loop stopped: what its simulations found leaves none
        plan.append(Note(
            f"{NOT_VERIFIED_NOTE}after {out.rounds} round(s) the simulated plan still misses an "
            "SLO or the carbon cap; classes marked met=false did not meet it"
            + (f"; {stop}" if stop else ""), "verification",
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
                f"({_rate_source(scenario, p)}); the plan keeps the fewest spares k with P(more "
                f"than k of the pool down) <= {p.spare_quantile:g} (binomial, independent "
                "replicas)", "reliability", pools=(p.key,)))
    for p in problem.pools:
        if p.market == "spot":
            detail.append(Note(
                f"spot: {p.key} at {usd(p.price_usd_per_hour)} per replica-hour, "
                f"{_spot_source(scenario, p)}; its "
                "replicas fail at the spot rate (reliability block or bundled spot default, "
                "docs/reliability.md)", "price", pools=(p.key,)))
    return (*plan, *detail)


def _rate_source(scenario: Scenario, p: Any) -> str:
    """Where pool ``p``'s failure rate comes from: the scenario's ``reliability:`` block where
    it states the rate, else the bundled default of the GPU's class and market."""
    spec = entry(scenario.reliability, bare_config(p.config), p.gpu, p.market)
    if spec is None or spec.failures_per_replica_hour is not None:
        return "reliability block"
    kind = "data-centre" if gpu_class(p.gpu) == "datacenter" else gpu_class(p.gpu)
    return f"the bundled {spec.market} default of {kind} GPUs, docs/reliability.md"


def _spot_source(scenario: Scenario, p: Any) -> str:
    """Where spot pool ``p``'s price comes from, in the words after a note's ``spot``."""
    return spot_price_source(scenario.reliability, bare_config(p.config), p.gpu,
                             p.gpu in scenario.prices_usd_per_gpu_hour,
                             scenario.data_context().catalog)


def _pool_words(p: Any) -> str:
    """A candidate as a planner names it: ``1xRTX-4090 spot``."""
    return p.config + (" spot" if p.market == "spot" else "")


def _accuracy_notes(scenario: Scenario, pools: list[Any]) -> list[str]:
    """How far the latencies of the plan's pools may be off: uncalibrated pools (predicted
    from datasheets) with the held-out error band of such predictions; calibrated pools whose
    measured runs the model does not reproduce at some rates."""
    from fleetplan.replica.params import replica_params
    from fleetplan.validate.own_runs import flagged_rates, rates_text
    from fleetplan.validate.prediction import calibrated_spec_note

    ctx = scenario.data_context()
    catalog = ctx.catalog
    gpus = {p.config: p.gpu for p in pools}
    configs = sorted(gpus)
    # a candidate of a plan of several models is named model/config
    served = {c: (split_model(c)[0] or scenario.one_model, bare_config(c)) for c in configs}
    params = {c: replica_params(*served[c], catalog=catalog, calibration=ctx.calibration)
              for c in configs}
    uncal = [c for c in configs if not params[c].calibrated]
    notes: list[str] = []
    if uncal:
        bands = {gpus[c]: datasheet_band(served[c][0], gpus[c], store=ctx.store,
                                         moe=params[c].is_moe,
                                         mla=catalog.model(served[c][0]).is_mla)
                 for c in uncal}
        ranges = ", ".join(f"{b.lo:.2g}-{b.hi:.2g}x" + (f" ({gpu})" if len(bands) > 1 else "")
                           for gpu, b in bands.items())
        docs = "; ".join(dict.fromkeys(b.doc for b in bands.values()))
        notes.append(Note(
            f"{', '.join(uncal)}: latencies predicted from datasheets, not from measured runs "
            f"(uncalibrated): real P99 TTFT was {ranges} such predictions in 80% of held-out "
            f"cases ({docs}); solve --confidence P plans for that "
            "error", "accuracy", pools=uncal, level=PLAN, priority=P_ACCURACY))
    for c in configs:
        if c in uncal:
            continue
        model, bare = served[c]
        spec = calibrated_spec_note(True, c, catalog.replaced(model, gpus[c]))
        if spec is not None:
            notes.append(Note(spec, "accuracy", pools=(c,), level=PLAN, priority=P_FIT))
        rates = flagged_rates(model, bare, calibration=ctx.calibration)
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
            prices.append(f"{_pool_words(p)}: {usd(p.price_usd_per_hour)} per replica-hour, "
                          f"{_spot_source(scenario, p)}")
        notes.append(Note("; ".join(prices) + "; the provider can take spot replicas back",
                          "price", pools=[p.key for p in spot], level=PLAN, priority=P_PRICE))
    by_key = {p.key: p for p in pools}
    held = []
    for name, k in sorted(spares.items()):
        p = by_key.get(candidate_key(name))
        if k > 0 and p is not None and p.unavailability > 0:
            tier = name[len(candidate_key(name)) + 1:]
            are = "is a spare" if k == 1 else "are spares"
            # the spares are sized for the working replicas of every tier of the configuration
            # and sit in its strictest tier (milp_solve): say so where it has several
            tiers = [n for n in counts if candidate_key(n) == candidate_key(name)]
            cover = ""
            if len(tiers) > 1:
                working = sum(counts[n] for n in tiers) - k
                cover = (f" for the {working} working replicas of its {len(tiers)} tiers, "
                         "held in the strictest")
            held.append((p, f"{_pool_words(p)}{f' ({tier} tier)' if tier else ''}: {k} of its "
                            f"{counts.get(name, 0)} replicas {are}{cover} (a replica is down "
                            f"{p.unavailability * 100:.3g}% of the time)"))
    if held:
        notes.append(Note(
            "; ".join(text for _p, text in held) + ", by the failure and replacement times "
            "of the reliability block; the plan was also simulated with every spare down",
            "reliability", pools=sorted({p.key for p, _t in held}), level=PLAN,
            priority=P_SPARES))
    return notes


