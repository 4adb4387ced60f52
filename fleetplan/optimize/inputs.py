"""From a scenario to the MILP's inputs: demands, candidate pools, capacities at SLO, power.

Main entry: :func:`build_problem` (scenario -> :class:`Inputs`, running every capacity search the
scenario needs through an executor, each cached on disk). Economics come from the same functions
the fleet simulator accounts with (catalog prices, :func:`fleetplan.fleet.accounting.power_model`,
grid intensity, amortized embodied carbon), so a plan's MILP carbon and its simulated carbon use
one power model.

Power, linear in the decision variables: a replica draws ``gpus x (idle_w + (busy_w - idle_w) x
u)`` with ``u`` its busy share. ``u`` grows concavely with the rate (continuous batching keeps the
engine busy at modest load), so it is modelled by the chord through the replica model's busy
share at capacity and one ladder step below: the intercept is charged per replica (the largest over
the classes a configuration may serve) and the slope per req/s of each class. For a concave
``u`` the extended chord lies above ``u`` at lower loads, so the MILP errs on the high side there.
That is ``power: {model: tdp}``, the only model whose searches run the point below capacity
(``CapacityJob.chord``). Under ``activity`` (the default; the simulator charges the steps'
activity ``a <= u``, which is not linear in the rate) each replica is charged an upper bound, its
busy share at the class tier's capacity (``a(r) <= u(r) <= u(capacity)``), with no per-req/s part.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from fleetplan._notes import P_FIT, PLAN, Note
from fleetplan._progress import Progress, tracked_map, warn
from fleetplan.catalog.grid import DEFAULT_REGION
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import DoesNotFit, FleetplanError, InputError
from fleetplan.optimize.bracket import bracket
from fleetplan.optimize.cache import cache_root
from fleetplan.optimize.capacity import (
    CapacityJob,
    CapacityResult,
    CapacitySettings,
    search_group,
)
from fleetplan.optimize.executors import Executor, SerialExecutor
from fleetplan.optimize.problem import (
    CommitmentMode,
    Demand,
    Limits,
    PlanProblem,
    Pool,
    Probe,
    Tier,
    every_hour,
)
from fleetplan.profiles.store import load_profiles
from fleetplan.scenario import Scenario
from fleetplan.workload.lengths import LengthModel
from fleetplan.workload.trace import fit_trace, read_trace

K = TypeVar("K")


@dataclass(frozen=True)
class ClassWorkload:
    """What the capacity search needs about a class's requests."""

    lengths: LengthModel
    burstiness: float
    rates_rps: tuple[float, ...]
    tokens_per_request: float
    prefix_cache_hit: float = 0.0  # stated share of each prompt already in the prefix cache


@dataclass(frozen=True)
class Inputs:
    """The MILP problem plus what produced it (for reports and tightening)."""

    problem: PlanProblem
    results: dict[tuple[str, str, Tier], CapacityResult]
    power_sources: dict[str, str]
    notes: tuple[str, ...] = field(default_factory=tuple)
    # searches deferred by build_problem(defer_stricter=True): the problem's capacity for these
    # keys is an upper bound (the class's capacity at its own, looser SLO) until
    # fleetplan.optimize.pricing searches or drops them
    pending: dict[tuple[str, str, Tier], CapacityJob] = field(default_factory=dict)


def class_workload(scenario: Scenario, index: int) -> ClassWorkload:
    """Lengths, burstiness and rates of ``classes[index]`` (a trace class is fitted)."""
    c = scenario.classes[index]
    if c.trace is not None:
        try:
            fit = fit_trace(read_trace(c.trace.file))
        except InputError as exc:
            raise InputError(f"classes[{index}].trace.file: {exc}") from None
        lengths = LengthModel(input=fit.input_tokens, output=fit.output_tokens,
                              source=f"fitted to trace {fit.source}")
        rate = c.trace.scale_to_rps or fit.rate_rps
        rates: tuple[float, ...] = (float(rate),)
        burst = fit.burstiness
    else:
        lengths, burst = c.length_model(), c.burstiness
        rates = ((float(c.rate_rps),) if c.rate_rps is not None
                 else tuple(float(r) for r in c.rate_profile_rps or ()))
    try:
        ins, outs = lengths.sample(20000, np.random.default_rng(20250610))
    except ValueError as exc:  # a length model that validates but cannot be drawn from
        raise InputError(f"classes[{index}] ({c.name}): {exc}") from None
    return ClassWorkload(lengths, float(burst), rates, float(ins.mean() + outs.mean()),
                         float(c.prefix_cache_hit))


def _slo(scenario: Scenario, index: int) -> tuple[float, float | None, float | None]:
    slo = scenario.classes[index].slo
    if slo is None:
        raise InputError(f"classes[{index}].slo: the optimizer needs an SLO for every class, "
                         "e.g. slo: {ttft_p99_ms: 500}")
    ttft = slo.ttft_p99_ms if slo.ttft_p99_ms is not None else math.inf
    return ttft, slo.tpot_p99_ms, slo.e2e_p99_ms


def candidate_configs(scenario: Scenario) -> list[tuple[str, list[str], int | None]]:
    """(config, regions, max_replicas) per candidate; default: the model's measured configs."""
    if scenario.candidates:
        return [(c.config, list(c.regions), c.max_replicas) for c in scenario.candidates]
    configs = load_profiles(default=scenario.data_context().store).configs(scenario.one_model)
    if not configs:
        raise InputError(f"candidates: no measured configuration of {scenario.one_model} in the "
                         "profile store; list candidates in the scenario")
    return [(c, [DEFAULT_REGION], None) for c in configs]


def candidate_params(scenario: Scenario, config: str, index: int | None = None) -> Any:
    """The replica parameters of ``config`` serving the scenario's model, with the engine
    settings of its candidate's ``server:`` record where it states any
    (:func:`fleetplan.validate.server_params.apply_stated`, as the plan's simulation applies
    them). They are part of the parameters, hence of every capacity cache key: a capacity
    measured with other settings is never reused."""
    from fleetplan.replica.params import replica_params
    from fleetplan.scenario.engine import candidate_servers
    from fleetplan.validate.server_params import apply_stated

    ctx = scenario.data_context()
    cat = ctx.catalog
    return apply_stated(replica_params(scenario.one_model, config, catalog=cat,
                                      calibration=ctx.calibration),
                        candidate_servers(scenario.candidates).get(config), catalog=cat,
                        where=f"candidates[{index}].server" if index is not None else "server")


def _availability(scenario: Scenario) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, value in (scenario.availability or {}).items():
        if isinstance(value, dict):
            for gpu, n in value.items():
                out[f"{gpu}@{key}"] = int(n)
        else:
            out[key] = int(value)
    return out


def build_problem(scenario: Scenario, *, executor: Executor | None = None,
                  settings: CapacitySettings | None = None,
                  cache_dir: str | None | bool = True,
                  progress: Progress | None = None,
                  defer_stricter: bool = False) -> Inputs:
    """Everything the MILP needs for ``scenario``; capacity searches run on ``executor``.

    ``cache_dir``: ``True`` for the default cache folder (the scenario's data context's; it
    travels with each search to its worker), a path, or ``False`` for no disk cache.
    ``progress``: reports the capacity searches (one per candidate x class x tier).
    ``defer_stricter``: search each class only at its own SLO; its capacity at a stricter tier
    (in a pool shared with stricter classes) is left to :func:`fleetplan.optimize.pricing.
    price_tiers`, bounded meanwhile by the capacity at its own SLO, which is never lower (the
    search is monotone in the SLO); a bound of 0 is exact and never searched, and a tier that is
    another class's own SLO on the same workload (the same search) is searched with it.
    """
    from fleetplan.fleet.accounting import embodied_g_per_gpu_hour, power_model
    from fleetplan.replica.power import ACTIVITY_MODE
    from fleetplan.scenario.engine import server_notes

    settings = settings or getattr(scenario, "capacity", None) or CapacitySettings()
    executor = executor or SerialExecutor()
    ctx = scenario.data_context()
    root = cache_root(cache_dir, ctx.cache_dir)
    work = [class_workload(scenario, i) for i in range(len(scenario.classes))]
    slos = [_slo(scenario, i) for i in range(len(scenario.classes))]
    demands = every_hour(
        Demand(c.name, w.rates_rps, s[0], s[1], s[2], w.tokens_per_request, w.prefix_cache_hit)
        for c, w, s in zip(scenario.classes, work, slos, strict=True))
    tiers = sorted({d.tier for d in demands})

    cands = candidate_configs(scenario)
    params: dict[str, Any] = {}
    # a candidate the model does not fit on is no pool for any class: left out with a note,
    # as one too small for a class's requests is for that class (unfit_pairs); only when no
    # candidate holds the model is that an error
    left_out: dict[str, tuple[int, str]] = {}  # config -> (its first index, why)
    for i, (config, _regions, _mx) in enumerate(cands):
        try:
            params[config] = candidate_params(scenario, config, i)
        except DoesNotFit as exc:
            left_out.setdefault(config, (i, str(exc)))
        except FleetplanError as exc:
            raise InputError(f"candidates[{i}] ({config}): {exc}") from None
    if not params:
        config, (i, why) = next(iter(left_out.items()))
        raise InputError(f"candidates[{i}] ({config}): {why}"
                         + ("; no other candidate either" if len(cands) > 1 else ""))
    cands = [c for c in cands if c[0] not in left_out]

    unfit = unfit_pairs(demands, work, params)
    # only the tdp power model reads the busy share below capacity (module docstring)
    chord = scenario.power.model != ACTIVITY_MODE
    jobs: dict[tuple[str, str, Tier], CapacityJob] = {}
    for d, w in zip(demands, work, strict=True):
        for config in params:
            if (d.name, config) in unfit:  # not a pool for this class: capacity 0, no search
                continue
            for t in tiers:
                if not t.serves(d.ttft_p99_ms, d.tpot_p99_ms):
                    continue
                jobs[(d.name, config, t)] = CapacityJob(
                    scenario.one_model, config, params[config], w.lengths, w.burstiness,
                    None if math.isinf(t.ttft_p99_ms) else t.ttft_p99_ms, t.tpot_p99_ms,
                    d.e2e_p99_ms, settings, root, w.prefix_cache_hit, chord)
    pending: dict[tuple[str, str, Tier], CapacityJob] = {}
    if defer_stricter:
        from fleetplan.optimize.cache import input_hash

        own = {d.name: d.tier for d in demands}
        searched = {input_hash(j.key()) for k, j in jobs.items() if k[2] == own[k[0]]}
        # a stricter tier that is another class's own SLO on the same workload is searched anyway
        pending = {k: j for k, j in jobs.items()
                   if k[2] != own[k[0]] and input_hash(j.key()) not in searched}
        jobs = {k: j for k, j in jobs.items() if k not in pending}
    results = run_searches(jobs, executor, progress)

    store = load_profiles(default=ctx.store)
    cat = ctx.catalog
    capacity: dict[tuple[str, str, Tier], float] = {}
    probes: dict[tuple[str, str], Probe] = {}
    slope: dict[tuple[str, str], float] = {}
    intercept: dict[str, float] = {}
    power_sources: dict[str, str] = {}
    by_name = {d.name: d for d in demands}
    for d in demands:
        for config in params:
            if (d.name, config) in unfit:
                for t in tiers:
                    if t.serves(d.ttft_p99_ms, d.tpot_p99_ms):
                        capacity[(d.name, config, t)] = 0.0
    for key in list(pending):  # bounded by the capacity at the class's own SLO
        name, config, _t = key
        capacity[key] = results[(name, config, by_name[name].tier)].capacity_rps
        if capacity[key] == 0.0:  # a bound of 0 is the capacity
            del pending[key]
    for (name, config, t), res in results.items():
        capacity[(name, config, t)] = res.capacity_rps
        d = by_name[name]
        if t == d.tier:
            p = res.probe
            probes[(name, config)] = Probe(p.rate_rps, p.ttft_p99_ms, p.tpot_p99_ms,
                                           p.e2e_p99_ms)
            a, b = _chord(res)
            hw = HardwareConfig.parse(config, cat)
            pm = power_model(scenario.one_model, config, hw.gpu, hw.gpu_count, store,
                             scenario.power_w_per_gpu, scenario.power.model, cat)
            power_sources[config] = pm.source
            span = hw.gpu_count * (pm.busy_w - pm.idle_w)
            if pm.mode == "activity":  # an upper bound (module docstring)
                a, b = min(res.at_capacity.utilization if res.at_capacity else 1.0, 1.0), 0.0
            slope[(name, config)] = span * b
            intercept[config] = max(intercept.get(config, 0.0), span * a)

    pools: list[Pool] = []
    markets = ([c.market for c in scenario.candidates if c.config not in left_out]
               if scenario.candidates else [None] * len(cands))
    for (config, regions, max_rep), market in zip(cands, markets, strict=True):
        hw = HardwareConfig.parse(config, cat)
        price = cat.price(hw.gpu, scenario.market, scenario.prices_usd_per_gpu_hour)
        pm = power_model(scenario.one_model, config, hw.gpu, hw.gpu_count, store,
                         scenario.power_w_per_gpu, scenario.power.model, cat)
        emb, _src = embodied_g_per_gpu_hour(hw.gpu, scenario.embodied.include,
                                            scenario.embodied.lifetime_years, cat)
        for region in regions:
            grid = cat.grid_intensity(region, scenario.grid_g_per_kwh)
            pools.append(Pool(
                config=config, region=region, gpu=hw.gpu, gpu_count=hw.gpu_count,
                price_usd_per_hour=price.price_usd_per_gpu_hour * hw.gpu_count,
                idle_w=hw.gpu_count * pm.idle_w + intercept.get(config, 0.0),
                grid_g_per_kwh=grid.g_co2_per_kwh, embodied_g_per_hour=emb * hw.gpu_count,
                max_replicas=max_rep, market=market))
    carbon = scenario.carbon
    limits = Limits(
        availability=_availability(scenario), budget_usd_per_hour=scenario.budget_usd_per_hour,
        redundancy=scenario.redundancy,
        max_g_per_mtok=carbon.max_g_per_mtok if carbon else None,
        max_kg_per_day=carbon.max_kg_per_day if carbon else None,
        commitment=CommitmentMode(scenario.commitment.mode),
        on_demand_price_factor=scenario.commitment.on_demand_price_factor)
    problem = PlanProblem(demands, tuple(pools), capacity, slope, limits, probes,
                          settings.slo_margin,
                          unfit={k: v.reason for k, v in sorted(unfit.items())})
    uncal = sorted(c for c, p in params.items() if not p.calibrated)
    # a candidate the planner named and the plan cannot use is theirs to know (a plan note)
    notes: list[str] = [Note(f"candidate {config} left out (no pool for any class): {why}",
                             "candidates", level=PLAN, priority=P_FIT)
                        for config, (_i, why) in sorted(left_out.items())]
    notes += [f"{config} is not a pool for class " + "; nor for class ".join(
        f"{name}: {unfit[(name, c)].reason}" for name, c in sorted(unfit) if c == config)
        for config in sorted({c for _n, c in unfit})]
    if scenario.power.model == "activity":
        notes.append("MILP carbon is an upper bound: power that follows the work is not linear "
                     "in the load, so each replica is charged its busy share at its class's "
                     "capacity (at least its steps' activity at any lower load); the reported "
                     "carbon is the simulated plan's")
    if uncal:
        notes.append("spec-based (uncalibrated) replica parameters for: " + ", ".join(uncal))
    notes += server_notes(scenario.candidates)
    calibrated = [c for c, p in params.items() if p.calibrated]
    flagged = _flagged_servers(scenario.one_model, calibrated, ctx.calibration)
    if flagged:
        from fleetplan.validate.own_runs import FLAGGED_MEANING

        notes.append(f"calibrated with runs flagged and not fitted ({FLAGGED_MEANING}): expect "
                     "TTFT above the plan's near the flagged rates on " + "; ".join(flagged))
    slow = _slow_step_servers(scenario.one_model, calibrated, ctx.calibration)
    if slow:
        from fleetplan.validate.own_runs import SLOW_STEP_MEANING

        notes.append(f"calibrated with token gaps slower at light load than its flagged runs' "
                     f"({SLOW_STEP_MEANING}): expect token gaps below the plan's at light load "
                     "on " + "; ".join(slow))
    delayed = [f"{c} ({p.first_token_delay_s * 1e3:.0f} ms median, spread sigma "
               f"{p.first_token_delay_sigma:.2f}, "
               + ("fitted to its runs)" if p.calibrated else "its kind's median)")
               for c, p in sorted(params.items()) if p.first_token_delay_s > 0]
    if delayed:
        notes.append("first tokens reach the client later than the engine makes them on servers "
                     "whose all-reduces go through host memory (GeForce cards; "
                     "docs/replica-model.md): every simulated P99 TTFT and capacity includes "
                     "that delay on " + "; ".join(delayed))
    return Inputs(problem, results, power_sources, tuple(notes), pending)


@dataclass(frozen=True)
class Unfit:
    """A class whose requests a configuration cannot hold (prompt + output above its
    ``max_model_len`` or its KV cache), measured on :data:`FIT_DRAWS` draws of its lengths."""

    share: float    # of the draws that do not fit
    longest: int    # the longest draw, tokens
    holds: int      # the most one sequence may hold on the configuration, tokens
    why: str        # "max_model_len" or "KV cache"

    @property
    def reason(self) -> str:
        share = f"{self.share:.2%}" if self.share >= 1e-4 else f"{self.share:.1e}"
        return (f"{share} of its requests (prompt + output, up to {self.longest:,} tokens) "
                f"exceed the {self.holds:,} tokens a replica holds ({self.why})")


FIT_DRAWS = 200_000


def unfit_pairs(demands: Sequence[Demand], work: Sequence[ClassWorkload],
                params: Mapping[str, Any]) -> dict[tuple[str, str], Unfit]:
    """(class, configuration) pairs where some requests of the class cannot be served (the
    engine refuses them; vLLM rejects a request longer than ``max_model_len``): such a
    configuration is not a pool for that class. Lengths are drawn :data:`FIT_DRAWS` times with
    a fixed seed, skipped where the length model's bounds already fit."""
    out: dict[tuple[str, str], Unfit] = {}
    for d, w in zip(demands, work, strict=True):
        bound = w.lengths.input.max + w.lengths.output.max
        if w.lengths.max_total is not None:
            bound = min(bound, w.lengths.max_total)
        total: np.ndarray | None = None
        for config, p in sorted(params.items()):
            kv = int(p.kv_blocks) * int(p.block_size)
            holds, why = ((int(p.max_model_len), "max_model_len") if p.max_model_len <= kv
                          else (kv, "KV cache"))
            if bound <= holds:
                continue
            if total is None:
                ins, outs = w.lengths.sample(FIT_DRAWS, np.random.default_rng(20251205))
                total = ins + outs
            over = int((total > holds).sum())
            if over:
                out[(d.name, config)] = Unfit(over / total.size, int(total.max()), holds, why)
    return out


def _flagged_servers(model: str, configs: Sequence[str], cal: Path | None) -> list[str]:
    """``config (rates req/s)`` for each configuration whose calibration flagged runs."""
    from fleetplan.validate.own_runs import flagged_rates, rates_text

    return [f"{c} ({rates_text(r)})" for c in sorted(configs)
            if (r := flagged_rates(model, c, calibration=cal))]


def _slow_step_servers(model: str, configs: Sequence[str], cal: Path | None) -> list[str]:
    """``config (token gaps replayed up to X % slower)`` for each configuration whose flagged
    runs' token gaps the calibration replays slower than
    :data:`~fleetplan.validate.own_runs.LIGHT_LOAD_SLOW_PCT`."""
    from fleetplan.validate.own_runs import slow_light_load_step

    return [f"{c} (token gaps replayed up to {g:.0f} % slower)" for c in sorted(configs)
            if (g := slow_light_load_step(model, c, calibration=cal)) is not None]


def run_searches(jobs: Mapping[K, CapacityJob], executor: Executor,
                 progress: Progress | None = None) -> dict[K, CapacityResult]:
    """The result of every capacity search in ``jobs``, run on ``executor``.

    Jobs that differ only in their SLO (the tiers of classes with one workload, on one
    configuration: same lengths, burstiness and prefix-cache hit) form one executor item that
    shares its simulated runs (:func:`~fleetplan.optimize.capacity.search_group`); equal jobs
    run once. Items go out dearest first (by the bracket's saturation rate: a run's cost grows
    with its rate) so that the last worker is not left with the longest one; results do not
    depend on the order. Cache entries that fail validation (here or in a worker) are
    recomputed and reported in one warning line (:func:`fleetplan._progress.warn`)."""
    from fleetplan.optimize.cache import DiskCache, input_hash

    keys = {k: input_hash(j.key()) for k, j in jobs.items()}
    caches: dict[str | None, DiskCache] = {}
    by_hash: dict[str, CapacityResult] = {}
    groups: dict[str, dict[str, CapacityJob]] = {}
    for k, j in jobs.items():
        cache = caches.setdefault(j.cache_root, DiskCache(j.cache_root))
        hit = (cache.get("capacity", j.key(), CapacityResult.from_dict)
               if j.cache_root is not None else None)
        if hit is not None:  # cached: no worker needed
            by_hash[keys[k]] = CapacityResult.from_dict(hit)
            continue
        ident = input_hash({"point": j.point_key(1.0), "settings": j.settings})
        groups.setdefault(ident, {}).setdefault(keys[k], j)
    ordered = [dict(sorted(g.items())) for _i, g in sorted(groups.items())]
    ordered.sort(key=lambda g: _cost(list(g.values())), reverse=True)
    if ordered and getattr(executor, "name", None) in ("serial", "local"):
        # compiled here, once, as a step of its own: forked workers inherit it
        from fleetplan.replica.steady_kernel import prepare

        prepare(next(iter(ordered[0].values())).params, progress)
    done = tracked_map(executor, search_group, [list(g.values()) for g in ordered],
                       progress, "capacity searches (candidate x workload)")
    rejected = dict(r for c in caches.values() for r in c.rejected)
    for g, out in zip(ordered, done, strict=True):
        rejected.update(out.rejected)
        for h, r in zip(g, out.results, strict=True):
            by_hash[h] = CapacityResult.from_dict(r)
    if rejected:
        path, why = min(rejected.items())
        warn(progress, f"capacity cache: {len(rejected)} "
             f"entr{'y' if len(rejected) == 1 else 'ies'} failed validation and "
             f"{'was' if len(rejected) == 1 else 'were'} recomputed (e.g. {path}: {why})")
    return {k: by_hash[keys[k]] for k in jobs}


def _cost(item: list[CapacityJob]) -> float:
    br = bracket(item[0].params, item[0].lengths, item[0].prefix_cache_hit)
    return (br.saturation_rps if br is not None else 1.0) * len(item)


def _chord(res: CapacityResult) -> tuple[float, float]:
    """Busy share ``u(r) ~ a + b r`` through the points at and below capacity (see module doc)."""
    hi = res.at_capacity
    if hi is None or hi.rate_rps <= 0:
        return 0.0, 0.0
    lo = res.below_capacity
    if lo is None or lo.rate_rps >= hi.rate_rps:
        return 0.0, min(hi.utilization, 1.0) / hi.rate_rps
    b = max(hi.utilization - lo.utilization, 0.0) / (hi.rate_rps - lo.rate_rps)
    a = min(max(hi.utilization - b * hi.rate_rps, 0.0), 1.0)
    return a, b
