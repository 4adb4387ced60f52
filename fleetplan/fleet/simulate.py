"""The library entry of the fleet simulator: :func:`simulate` (scenario -> SimulationResult).

It resolves the fleet's pools (replica parameters, context windows, prices, power, grid), draws
each replication's traffic from an independent seed (``SeedSequence(seed).spawn``), runs the
replications one after another and aggregates them: per-class latency percentiles with 95%
CIs, per-pool utilization and power activity, overload (offered vs sustainable rate) and the
fleet's cost, energy and carbon (energy by the scenario's ``power:`` model,
:mod:`fleetplan.fleet.accounting`). Same scenario and seed: identical result, byte for byte
once serialized.

With a ``reliability:`` block, replicas of the pools it names fail and are replaced
(:mod:`fleetplan.fleet.churn`, its own seeded stream per replication): each class then reports
its requests retried and lost, and each pool its availability.

``simulate(scenario, plan=...)`` replays an optimizer's plan (a :class:`fleetplan.optimize.Plan`
or the file ``fleetplan solve --out`` wrote): exactly its pools (configuration, region, SLO
tier), and its split per class under ``planned`` routing, or another router to stress-test it
(:func:`planned_scenario` builds that scenario).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from fleetplan._notes import P_ACCURACY, P_FIT, P_NOT_MET, PLAN, Note, datasheet_band
from fleetplan.context import DataContext
from fleetplan.errors import InputError
from fleetplan.fleet.accounting import account
from fleetplan.fleet.churn import churn_seeds
from fleetplan.fleet.pools import (
    PoolModel,
    build_pools,
    class_pools,
    p99_prompt_tokens,
    split_weights,
)
from fleetplan.fleet.results import (
    ClassResult,
    PoolResult,
    SimStatus,
    SimulationResult,
    class_result,
)
from fleetplan.fleet.routing import RoutingPolicy, get_router
from fleetplan.fleet.sim import Replication, RoutingInputs, run_replication
from fleetplan.fleet.traffic import Traffic, build_traffic, load_traces
from fleetplan.profiles.store import ProfileStore
from fleetplan.replica.power import TDP_MODE
from fleetplan.replica.steady import prefill_tokens
from fleetplan.scenario import Pool, Scenario, parse_fleet
from fleetplan.scenario.reliability import PoolReliability, resolve
from fleetplan.scenario.served import class_variants, is_multi_model, served_models

Progress = Callable[[float], None]


def _windows(pools: Sequence[PoolModel], allowed: Sequence[Sequence[int]]) -> list[tuple[int, str]]:
    out = []
    for cp in allowed:
        p = min(cp, key=lambda i: pools[i].context_window)
        out.append((pools[p].context_window, pools[p].spec.config))
    return out


def _routing_inputs(scenario: Scenario, pools: Sequence[PoolModel],
                    allowed: Sequence[Sequence[int]], traffic: Traffic) -> RoutingInputs:
    prefill = prefill_tokens(traffic.input_tokens, traffic.cached_tokens)
    p99 = [p99_prompt_tokens(scenario, c, prefill[traffic.cls == c])
           for c in range(len(scenario.classes))]
    slo = [c.slo.ttft_p99_ms / 1e3 if c.slo is not None and c.slo.ttft_p99_ms is not None
           else None for c in scenario.classes]
    mean_prompt = float(prefill.mean()) if len(traffic) else 0.0
    return RoutingInputs(scenario.routing, allowed, split_weights(scenario, pools), slo, p99,
                         mean_prompt)


def pool_churn(scenario: Scenario, pools: Sequence[PoolModel]) -> list[PoolReliability | None]:
    """Per pool, its failure model from the scenario's ``reliability:`` block (or ``None``)."""
    out = []
    for pm in pools:
        hw = pm.spec.hardware
        out.append(resolve(scenario.reliability, pm.spec.config, hw.gpu, hw.gpu_count,
                           pm.spec.market))
    return out


def _pool_results(pools: Sequence[PoolModel], reps: Sequence[Replication],
                  util: Sequence[float], activity: Sequence[float], over: Sequence[bool],
                  acct_pools: Sequence, churn: bool = False) -> list:
    out = []
    for p, pm in enumerate(pools):
        routed = sum(int((rep.pool == p).sum()) for rep in reps)
        a = acct_pools[p]
        e = pm.economics
        out.append(PoolResult(
            config=pm.spec.config, count=pm.count, region=pm.spec.region,
            utilization=util[p], requests=routed, label=pm.label, gpus=e.gpus,
            overloaded=over[p],
            completed_rps=float(np.mean([rep.pool_completed_rps[p] for rep in reps])),
            calibrated=pm.params.calibrated, params_source=pm.params.source,
            context_window=pm.context_window,
            price_usd_per_gpu_hour=e.price_usd_per_gpu_hour, price_source=e.price_source,
            power_w=a.power_w, power_source=e.power.source, power_model=e.power.mode,
            power_activity=activity[p], power_share=a.power_share,
            power_w_per_gpu=a.power_w / e.gpus,
            grid_g_per_kwh=e.grid_g_per_kwh, grid_source=e.grid_source,
            embodied_source=e.embodied_source, cost_per_hour_usd=a.cost_per_hour_usd,
            energy_kwh_per_hour=a.energy_kwh_per_hour,
            g_co2_operational_per_hour=a.g_co2_operational_per_hour,
            g_co2_embodied_per_hour=a.g_co2_embodied_per_hour,
            availability=(float(np.mean([r.availability[p] if r.availability else 1.0
                                         for r in reps])) if churn else None),
        ))
    return out


def _power_note(pools: Sequence[PoolModel]) -> str:
    if all(pm.economics.power.mode == TDP_MODE for pm in pools):
        return ("utilization is the share of time a replica's engine is stepping (any request in "
                "flight); power (power: {model: tdp}) = idle + (busy - idle) x utilization per "
                "GPU: a loaded replica draws its full busy power, an upper bound")
    return ("utilization is the share of time a replica's engine is stepping (any request in "
            "flight); power follows the work (power: {model: activity}): idle + (TDP - idle) x "
            "power_activity per GPU, power_activity the engine steps' mean share of the "
            "idle-to-TDP range over the window (fleetplan/replica/power.py: ML.ENERGY v3.0 "
            "H100 anchors, the same shares on every GPU type: an assumption; uncalibrated "
            "against this fleet's own energy)")


def _notes(pools: Sequence[PoolModel], classes: Sequence[ClassResult], reps: Sequence[Replication],
           over: Sequence[bool], offered: float, sustainable: float | None,
           ctx: DataContext) -> list[str]:
    notes: list[str] = [
        Note("rates are sustained arrivals simulated to steady state (after warm-up), not the "
             "measured runs' 200-request bursts; sustainable rates are far below burst rates",
             "capacity"),
        Note(_power_note(pools), "power")]
    from fleetplan.validate import own_runs as own

    for pm in pools:
        model, cfg, cal = pm.params.model, pm.params.config, ctx.calibration
        if not pm.params.calibrated:
            lo, hi, doc = datasheet_band(model, pm.spec.hardware.gpu, store=ctx.store,
                                         moe=pm.params.is_moe,
                                         mla=ctx.catalog.model(model).is_mla)
            notes.append(Note(f"pool {pm.label}: latencies predicted from datasheets, not from "
                              "measured runs (calibrated: false): real P99 TTFT was "
                              f"{lo:.2g}-{hi:.2g}x such predictions in 80% of held-out cases "
                              f"({doc})", "accuracy",
                              pools=(pm.label,), level=PLAN, priority=P_ACCURACY))
            notes.append(Note(f"pool {pm.label}: replica parameters are {pm.params.source}",
                              "accuracy", pools=(pm.label,)))
        elif rates := own.flagged_rates(model, cfg, calibration=cal):
            # planner's words; own.FLAGGED_MEANING and the calibration say why (predict
            # shows the runs themselves)
            notes.append(Note(f"pool {pm.label}: near {own.rates_text(rates)} per replica "
                              "expect a higher TTFT than simulated: its runs measured there "
                              "had a higher TTFT than the model reproduces (their first "
                              "tokens left out of its fit, docs/replica-model.md)", "accuracy",
                              pools=(pm.label,), level=PLAN, priority=P_FIT))
            if (gap := own.slow_light_load_step(model, cfg, calibration=cal)) is not None:
                notes.append(Note(f"pool {pm.label}: its calibration replays the token gaps "
                                  f"of its flagged runs up to {gap:.0f} % slower than measured "
                                  f"({own.SLOW_STEP_MEANING}): at light load expect token "
                                  "gaps below the simulated", "accuracy", pools=(pm.label,)))
    for p, pm in enumerate(pools):
        if over[p]:
            stops = sorted({f"{r.stop_reason} at t={r.stopped_at_s:.0f} s" for r in reps})
            notes.append(Note(
                f"pool {pm.label} overloaded: its queue grows without bound; it completes "
                f"{np.mean([r.pool_completed_rps[p] for r in reps]):.3g} req/s (runs stopped: "
                f"{', '.join(stops)})", "overload", pools=(pm.label,), level=PLAN,
                priority=P_NOT_MET))
    if sustainable is not None:
        notes.append(Note(f"overloaded: offered {offered:.3g} req/s, sustainable "
                          f"{sustainable:.3g} req/s; latency figures include censored waits "
                          "(lower bounds)", "overload", level=PLAN, priority=P_NOT_MET))
    for c in classes:
        if c.requests == 0:
            notes.append(Note(f"class {c.name}: no request arrived in the measured window; "
                              "its SLO is not judged (slo_met: null)", "verification",
                              level=PLAN, priority=P_NOT_MET + 1))
        if c.dropped:
            notes.append(Note(f"class {c.name}: {c.dropped} request(s) longer than the "
                              "context window dropped (overlong: drop)", "verification",
                              level=PLAN, priority=P_NOT_MET + 1))
    return notes


def _normalized(split: Mapping[str, float]) -> dict[str, float]:
    """Shares rounded to 12 digits and re-summed to exactly 1 (the largest takes the rest)."""
    total = sum(split.values())
    out = {k: round(v / total, 12) for k, v in split.items() if v > 0}
    fix = 1.0 - sum(out.values())
    if out and fix:
        top = max(out, key=lambda k: out[k])
        out[top] += fix
    return out


def planned_scenario(scenario: Scenario, fleet: Sequence[Mapping[str, Any]],
                     splits: Mapping[str, Mapping[str, float]], *,
                     rates: Mapping[str, float] | None = None, routing: Any = None,
                     min_replications: int = 1, limits: bool = True) -> Scenario:
    """``scenario`` with a plan's fleet (scenario pools, tiers included) and each class's split.

    ``routing``: ``None`` for ``planned`` (the split), or another policy (pins kept, the split
    carried but not followed). ``rates``: class name -> steady rate (one hour of a diurnal plan;
    classes not named are left out). ``limits=False`` drops the carbon cap, budget and
    availability (the plan already chose within them).
    """
    planned = routing is None
    classes = []
    for c in scenario.classes:
        if rates is not None and c.name not in rates:
            continue
        data: dict[str, Any] = c.model_dump(mode="python", by_alias=True, exclude_unset=True)
        if planned:
            data.pop("pin", None)
        split = splits.get(c.name)
        if split:
            data["split"] = _normalized(split)
        if rates is not None and c.rate_profile_rps is not None:
            data.pop("rate_profile_rps")
            data["rate_rps"] = float(rates[c.name])
        classes.append(data)
    updates: dict[str, Any] = {"fleet": [dict(e) for e in fleet],
                               "routing": "planned" if planned else routing, "classes": classes}
    if scenario.sim.replications < min_replications:
        sim = scenario.sim.model_dump()
        sim["replications"] = min_replications
        updates["sim"] = sim
    if not limits:
        updates.update(carbon=None, budget_usd_per_hour=None, availability=None)
    return scenario.with_updates(**updates)


if TYPE_CHECKING:  # read at run time inside _plan_scenario only
    from fleetplan.optimize.plan import Plan


class ReplicationExecutor(Protocol):
    """Where :func:`simulate` runs its replications: anything that maps a function over items,
    results in input order (:func:`fleetplan.optimize.get_executor` gives one); an optional
    ``workers`` attribute says how many run at once."""

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Any: ...


def _plan_scenario(scenario: Scenario, plan: Plan | str | os.PathLike[str],
                   routing: str | RoutingPolicy | None) -> Scenario:
    """The scenario that replays ``plan`` (a Plan, or a plan file's path), checked against
    ``scenario`` by the report's rules (:func:`fleetplan.optimize.plan_rules.check_plan_scenario`:
    classes, candidate configurations, prices)."""
    from fleetplan.optimize.plan import load_plan
    from fleetplan.optimize.plan_rules import check_plan_scenario

    source = "plan"
    if isinstance(plan, str | os.PathLike):
        source = str(plan)
        plan = load_plan(plan, scenario.data_context().catalog)
    plan = plan.for_replay()
    check_plan_scenario(plan, scenario, source)  # the report's rules too (one validator)
    fleet = [e.scenario_pool() for e in plan.fleet]
    try:
        return planned_scenario(scenario, fleet, {c.name: c.split for c in plan.classes},
                                routing=routing)
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None


def _run_jobs(executor: ReplicationExecutor, jobs: list[tuple[Any, ...]],
              apart: bool) -> list[Replication]:
    """The replications of ``jobs`` on ``executor``. When the replications do not fill its
    workers evenly (3 on 2) and the pools may run apart (``apart``: a ``pools_apart`` router,
    no churn, 2+ pools), the replications left over run in parts, one per worker
    (:mod:`fleetplan.fleet.parts`), merged into the same result; a part that cannot be merged
    (an overloaded fleet) has its replication run whole, as do all of them when the load sits
    in one pool. Items go out whole replications first, then the parts, heaviest first."""
    from fleetplan.fleet.parts import merge_parts, split_pools

    workers = int(getattr(executor, "workers", 1) or 1)
    rest = len(jobs) % workers if apart and workers > 1 else 0
    whole = len(jobs) - rest
    groups = [split_pools(job[0], job[1], job[2], workers) for job in jobs[whole:]]
    if any(len(g) < 2 for g in groups):  # the load sits in one pool: nothing to split
        whole, groups = len(jobs), []
    items: list[tuple[str, tuple[Any, ...]]] = [("whole", j) for j in jobs[:whole]]
    owner: list[int] = []  # per part item: the leftover replication it belongs to
    for g in range(max((len(x) for x in groups), default=0)):  # heaviest parts first
        for k, job in enumerate(jobs[whole:]):
            if g < len(groups[k]):
                items.append(("part", (*job[:3], groups[k][g], *job[3:5])))
                owner.append(k)
    done = list(executor.map(_run_item, items))
    reps: list[Replication | None] = list(done[:whole])
    parts: list[list[Any]] = [[] for _ in groups]
    for k, part in zip(owner, done[whole:], strict=True):
        parts[k].append(part)
    for k, job in enumerate(jobs[whole:]):
        pools, traffic, inputs, warmup_s, duration_s = job[:5]
        reps.append(merge_parts(pools, traffic, inputs, parts[k], warmup_s=warmup_s,
                                duration_s=duration_s))
    redo = [i for i, r in enumerate(reps) if r is None]
    for i, r in zip(redo, executor.map(run_replication_job, [jobs[i] for i in redo]),
                    strict=True):
        reps[i] = r
    return [r for r in reps if r is not None]


def _run_item(item: tuple[str, tuple[Any, ...]]) -> Any:
    """A whole replication or one part of one (executor entry: top level, picklable)."""
    from fleetplan.fleet.parts import run_part_job

    kind, job = item
    return run_replication_job(job) if kind == "whole" else run_part_job(job)


def run_replication_job(job: tuple[Any, ...]) -> Replication:
    """One replication of :func:`simulate` (executor entry: top level, picklable)."""
    pools, traffic, inputs, warmup_s, duration_s, churn, churn_seed = job
    return run_replication(pools, traffic, inputs, warmup_s=warmup_s, duration_s=duration_s,
                           churn=churn, churn_seed=churn_seed)


def simulate(scenario: Scenario, fleet: Sequence[Pool] | str | None = None, *,
             plan: Plan | str | os.PathLike[str] | None = None,
             routing: str | RoutingPolicy | None = None, progress: Progress | None = None,
             store: ProfileStore | None = None,
             executor: ReplicationExecutor | None = None) -> SimulationResult:
    """Simulate ``scenario`` on ``fleet`` (default: the scenario's own fleet), or replay a plan.

    ``fleet`` may be a list of :class:`~fleetplan.scenario.Pool` or a spec string
    (``"2x1xH100-PCIe+4x2xRTX-4090@FRA"``). ``plan``: a :class:`fleetplan.optimize.Plan` or the
    path of a plan file (``fleetplan solve --out``): its pools, tiers and split, routed
    ``planned``, or by ``routing`` (a policy name or record) when given. ``progress`` is called
    with the fraction done (0..1). The calibration and store are the scenario's data context's
    (``store``: a profile store whose measured power is used instead). ``executor`` (an object
    with ``map``, e.g. :func:`fleetplan.optimize.get_executor`) runs the replications there, in
    parallel, with the same traffic and result as one after another (without ``progress``);
    those left over when they do not fill the workers evenly run in parts of pools where the
    router allows it (:mod:`fleetplan.fleet.parts`), with the same result too.
    """
    if plan is not None and fleet is not None:
        raise InputError("simulate: give a fleet or a plan, not both")
    if plan is not None:
        scenario = _plan_scenario(scenario, plan, routing)
    elif routing is not None:
        scenario = scenario.with_updates(routing=routing)
    if isinstance(fleet, str):
        fleet = parse_fleet(fleet, scenario.data_context().catalog)
    if fleet is not None:
        scenario = scenario.with_fleet(fleet)
    if scenario.fleet is None:
        raise InputError("fleet: the scenario has no fleet to simulate; give one in the file "
                         "or with --fleet, e.g. --fleet 2x1xH100-PCIe+4x2xRTX-4090")
    pools = build_pools(scenario, scenario.fleet, store)
    allowed = class_pools(scenario, pools)
    windows = _windows(pools, allowed)
    traces = load_traces(scenario)
    sim = scenario.sim
    seeds = np.random.SeedSequence(sim.seed).spawn(sim.replications)
    churn = pool_churn(scenario, pools) if scenario.reliability is not None else None
    churn_ss = churn_seeds(sim.seed, sim.replications) if churn is not None else None
    reps: list[Replication] = []
    dropped = np.zeros(len(scenario.classes), dtype=np.int64)
    inputs: RoutingInputs | None = None
    jobs = []
    for k, ss in enumerate(seeds):
        traffic = build_traffic(scenario, ss, windows, traces)
        dropped += np.asarray(traffic.dropped, dtype=np.int64)
        if inputs is None:
            inputs = _routing_inputs(scenario, pools, allowed, traffic)
        if executor is not None and progress is None:  # run below, in parallel
            jobs.append((pools, traffic, inputs, sim.warmup_s, sim.duration_s, churn,
                         churn_ss[k] if churn_ss is not None else None))
            continue
        cb = None
        if progress is not None:
            def cb(f: float, k: int = k) -> None:
                progress((k + f) / sim.replications)
        reps.append(run_replication(pools, traffic, inputs, warmup_s=sim.warmup_s,
                                    duration_s=sim.duration_s, progress=cb, churn=churn,
                                    churn_seed=churn_ss[k] if churn_ss is not None else None))
    if jobs and executor is not None:  # jobs are queued only with an executor
        reps = _run_jobs(executor, jobs, churn is None and len(pools) > 1
                         and get_router(scenario.routing.policy).pools_apart)
    over = [any(r.pool_overloaded[p] for r in reps) for p in range(len(pools))]
    util = [float(np.mean([r.utilization[p] for r in reps])) for p in range(len(pools))]
    activity = [float(np.mean([r.power_activity[p] for r in reps])) for p in range(len(pools))]
    tokens_per_s = float(np.mean([
        (r.input_tokens[r.finished].sum() + r.output_tokens[r.finished].sum()) / r.window_s
        for r in reps]))
    acct = account([pm.economics for pm in pools], util, tokens_per_s, activity)
    classes = [class_result(scenario, c, reps, pools, int(dropped[c]), over,
                            churn=churn is not None)
               for c in range(len(scenario.classes))]
    offered = float(np.mean([r.cls.size / r.window_s for r in reps]))
    overloaded = any(over)
    sustainable = (float(np.mean([sum(r.pool_completed_rps) for r in reps]))
                   if overloaded else None)
    if overloaded:
        status = SimStatus.overloaded
    elif all(c.slo_met is None for c in classes):
        status = SimStatus.no_slo
    else:
        status = SimStatus.met if all(c.slo_met is not False for c in classes) else SimStatus.missed
    if progress is not None:
        progress(1.0)
    result = SimulationResult(
        status=status, model=", ".join(served_models(scenario)), routing=scenario.routing.policy,
        classes=tuple(classes),
        pools=tuple(_pool_results(pools, reps, util, activity, over, acct.pools,
                                  churn is not None)),
        account=acct,
        overloaded=overloaded, offered_rps=offered, sustainable_rps=sustainable,
        seed=sim.seed, replications=sim.replications, duration_s=sim.duration_s,
        warmup_s=sim.warmup_s,
        notes=(*_notes(pools, classes, reps, over, offered, sustainable, scenario.data_context()),
               *_churn_notes(pools, churn)),
    )
    if is_multi_model(scenario):  # each model's totals beside the fleet's
        from fleetplan.fleet.by_model import model_totals

        result = replace(result, models=model_totals(
            served_models(scenario), result.pools, result.classes,
            {c.name: v[0] for i, c in enumerate(scenario.classes)
             if len(v := class_variants(scenario, i)) == 1}))
    return result


def _churn_notes(pools: Sequence[PoolModel],
                 churn: Sequence[PoolReliability | None] | None) -> tuple[str, ...]:
    if churn is None:
        return ()
    out = []
    for pm, rel in zip(pools, churn, strict=True):
        if rel is None:
            out.append(Note(f"pool {pm.label}: no failures (the reliability block names "
                            f"neither {pm.spec.config} nor its GPU type)", "reliability",
                            pools=(pm.label,)))
        else:
            out.append(Note(f"pool {pm.label}: {rel.failures_per_hour:g} failures per "
                            f"replica-hour, replaced after {rel.replace_s:g} s (steady-state "
                            f"availability {1 - rel.unavailability:.4f}); {rel.source}",
                            "reliability", pools=(pm.label,)))
    return tuple(out)
