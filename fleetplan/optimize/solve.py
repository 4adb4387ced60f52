"""``solve(scenario) -> Plan``: capacities at SLO, the MILP, the closed loop, the report.

Main entries: :func:`solve` and :func:`save_model` (the LP file of a plan's final MILP, re-solvable
by any LP/MILP solver, plus PuLP's model dict as JSON beside it). The steps are:

1. :func:`fleetplan.optimize.inputs.build_problem`: demands, candidate pools, capacities at SLO
   (replica model in steady state, searches cached on disk and run on the executor);
2. :func:`fleetplan.optimize.loop.closed_loop`: MILP, simulation of the answer, tightening;
3. the outcome is written up as a plan (:mod:`fleetplan.optimize.plan_build`); an infeasible
   MILP is explained (:func:`fleetplan.optimize.explain.explain_infeasible`).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from fleetplan._io import atomic_write_text
from fleetplan._progress import Progress, step, warn
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
from fleetplan.optimize.inputs import Inputs, build_problem
from fleetplan.optimize.loop import DEFAULT_MAX_ROUNDS, DEFAULT_MAX_TRIMS, closed_loop
from fleetplan.optimize.milp import build_model
from fleetplan.optimize.multi_model import bare_config, build_multi_problem
from fleetplan.optimize.plan import Plan, PlanStatus
from fleetplan.optimize.plan_build import configs_of, infeasible_plan, solved_plan
from fleetplan.optimize.pricing import price_tiers
from fleetplan.optimize.problem import PlanProblem
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.optimize.variants import choose, variant_classes
from fleetplan.optimize.verify import ClassCheck, HourCheck, verify_plan
from fleetplan.scenario import Scenario
from fleetplan.scenario.served import is_multi_model


def solver_settings(scenario: Scenario, solver: str | None = None) -> SolverSettings:
    """The scenario's solver block, with ``solver`` (``--solver``) overriding its name."""
    s = scenario.solver
    return SolverSettings(name=solver or s.name, time_limit_s=s.time_limit_s, gap=s.gap)


def solve(scenario: Scenario, *, solver: str | None = None, executor: Any = None,
          capacity: CapacitySettings | None = None, cache_dir: str | bool | None = True,
          max_rounds: int = DEFAULT_MAX_ROUNDS, max_trims: int = DEFAULT_MAX_TRIMS,
          progress: Progress | None = None, confidence: float | None = None) -> Plan:
    """The cheapest fleet meeting every class's SLO (and the scenario's constraints), verified.

    ``solver``: a solver name (``cbc``, ``highs`` ...) overriding ``scenario.solver.name``.
    ``executor``: where capacity searches and verification runs go (``None``: local processes;
    ``"serial"``; a Dask scheduler address or client; see :func:`get_executor`).
    ``capacity``: how capacities are measured (default: the scenario's ``capacity:`` block).
    ``cache_dir``: ``True`` (default folder: the scenario's data context's, else
    :func:`~fleetplan.optimize.cache.default_cache_dir`), a folder, or ``False`` (no disk
    cache). The catalog, profile store and calibration are the scenario's data context's
    (:meth:`fleetplan.scenario.Scenario.data_context`), passed to whatever reads them.
    ``max_rounds``: bound on solve + simulate rounds; ``max_trims``: once a plan passed, how
    many probes of a cheaper plan may fail in simulation (one that passes is not counted).
    ``progress``: receives the steps (capacity searches, each round's MILP and simulation; see
    :mod:`fleetplan._progress`); the default reports nothing.
    ``confidence``: a probability (0.95): every SLO must hold when latencies are as much worse
    as the replica model's measured error allows at that quantile
    (:mod:`fleetplan.optimize.confidence`); ``None`` (default): the model's figures as they are.
    """
    check_confidence(confidence)
    settings = solver_settings(scenario, solver)
    settings.pulp_name  # noqa: B018 - fail early on an unknown or unavailable solver
    several = is_multi_model(scenario)
    if several and variant_classes(scenario):  # one solve per combination of the variants
        return choose(scenario, lambda sc: solve(
            sc, solver=solver, executor=executor, capacity=capacity, cache_dir=cache_dir,
            max_rounds=max_rounds, max_trims=max_trims, progress=progress,
            confidence=confidence))
    ex = get_executor(executor)
    # stricter-tier capacities on demand (optimize/pricing.py); --confidence rescales every
    # entry of the table, so it searches them all
    build_inputs = build_multi_problem if several else build_problem
    inputs = build_inputs(scenario, executor=ex, settings=capacity, cache_dir=cache_dir,
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
    return with_measure_next(scenario, plan, settings, progress)


def with_measure_next(scenario: Scenario, plan: Plan, settings: SolverSettings,
                      progress: Progress | None = None) -> Plan:
    """``plan`` with :attr:`Plan.measure_next` (:mod:`fleetplan.optimize.measure_next`) when it
    leans on an uncalibrated pool."""
    from fleetplan.optimize.measure_next import measure_next
    from fleetplan.replica.params import replica_params

    if (plan.status is PlanStatus.infeasible or plan.problem is None
            or not any(e.calibrated is False for e in plan.fleet)):
        return plan
    ctx = scenario.data_context()
    with step(progress, "what to measure next (MILP at each uncalibrated candidate's band)"):
        found = measure_next(scenario, plan.problem, settings,
                             lambda model, config: replica_params(
                                 model, config, catalog=ctx.catalog,
                                 calibration=ctx.calibration).calibrated)
    return plan if found is None else replace(plan, measure_next=found)


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
    spares (churn, or the scenario's ``redundancy``), each round simulates the plan twice: as
    planned (failures on, with churn), and on its working replicas alone (every spare down); a
    class meets its SLO only in both."""
    problem = with_reliability(scenario, inputs.problem)
    inputs = replace(inputs, problem=problem)

    simulated: dict[str, Any] = {}  # hour scenario -> its check, kept across rounds
    cache = verification_cache(cache_dir, scenario.data_context().cache_dir)

    def verify(sol, ex):  # type: ignore[no-untyped-def]
        # --confidence: each class must meet its SLO with its pools' model-error margin
        sc = scenario if margins is None else tighten(scenario, margins, configs_of(sol))
        checks = verify_plan(sc, problem, sol, ex, simulated, cache)
        if any(n > 0 for n in sol.spares.values()):
            # spares (of churn, or of the scenario's redundancy N+k) carry load while up, so
            # the plan must also hold with them all down: the working replicas alone (no
            # further failures), else trimming would spend them and the loop would credit
            # the working replicas with the spares' share of the load
            down = replace(sol, counts={k: n - sol.spares.get(k, 0)
                                        for k, n in sol.counts.items()}, spares={})
            worst = verify_plan(sc.with_updates(reliability=None), problem, down, ex, simulated,
                                cache)
            checks = [_worse(a, b) for a, b in zip(checks, worst, strict=True)]
        if margins is not None:  # the plan must hold at the confidence it promises
            checks = hold_confidence(checks, scenario, margins, configs_of(sol))
        return checks

    out = closed_loop(problem, settings, verify, executor=executor, max_rounds=max_rounds,
                      max_trims=max_trims, progress=progress)
    if cache is not None and cache.rejected:
        path, why = min(cache.rejected)
        n = len(cache.rejected)
        warn(progress, f"plan-check cache: {n} entr{'y' if n == 1 else 'ies'} failed validation "
             f"and {'was' if n == 1 else 'were'} simulated again (e.g. {path}: {why})")
    if not out.solution.has_plan:
        return infeasible_plan(scenario, problem, settings, out, inputs, margins)
    return solved_plan(scenario, inputs, settings, out, margins)


def verification_cache(cache_dir: str | bool | None,
                       default: str | os.PathLike[str] | None = None) -> DiskCache | None:
    """The disk cache of plan checks for ``cache_dir`` (``True``: the default folder, of
    ``default``, a data context's ``cache_dir``; a folder; ``False`` / ``None``: none), the
    folder the capacities use."""
    root = cache_root(cache_dir, default)
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

    def merged(a: tuple[ClassCheck, ...], b: tuple[ClassCheck, ...]) -> tuple[ClassCheck, ...]:
        by = {c.name: c for c in b}
        return tuple(worse(c, by[c.name]) if c.name in by else c for c in a)

    # each pool's own verdicts too (the loop blames pools on them): the worse of both; a pool
    # with every replica a spare has no share in ``down``, and keeps the churn-on verdicts
    pools = {pc.pool: pc for pc in down.pools}
    return replace(full, overloaded=full.overloaded or down.overloaded,
                   classes=merged(full.classes, down.classes),
                   pools=tuple(replace(pc, overloaded=pc.overloaded or pools[pc.pool].overloaded,
                                       classes=merged(pc.classes, pools[pc.pool].classes))
                               if pc.pool in pools else pc for pc in full.pools))


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
        config = bare_config(p.config)  # a candidate of a plan of several models: model/config
        rel = resolve(scenario.reliability, config, p.gpu, p.gpu_count, p.market)
        if rel is None:
            pools.append(p)
            continue
        # the price rule the simulator and the report use, per replica-hour
        spec = entry(scenario.reliability, config, p.gpu, p.market)
        overridden = p.gpu in scenario.prices_usd_per_gpu_hour
        price, _src = pool_price(spec, p.gpu, p.price_usd_per_hour, "", overridden,
                                 gpus=p.gpu_count, catalog=scenario.data_context().catalog)
        churn = scenario.reliability is not None
        pools.append(replace(
            p, unavailability=rel.unavailability if churn else 0.0,
            spare_quantile=rel.quantile if churn else p.spare_quantile,
            price_usd_per_hour=price))
    return problem.replace(pools=tuple(pools))


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
