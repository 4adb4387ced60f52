"""What to measure next: the one benchmark whose uncertainty moves the plan's cost most.

A plan that leans on uncalibrated pools (predicted from datasheets) is only as cheap as those
predictions are right. For every uncalibrated candidate configuration of the final MILP (in
the plan or not: a candidate left out may be cheaper than predicted), its per-replica
capacities are scaled to the two ends of the 80% band of its throughput prediction (the spec
path's held-out errors, ``data/spec_errors.json``, the table ``fleetplan predict`` prints its
bands from: measured = predicted / (1 + e), 80% of held-out runs between e10 and e90) and the
MILP is solved again at each end, every other capacity as planned. The configuration whose two
ends give the widest span of cost per hour is the one to measure, with that cost range and the
commands that measure it and plan on the measurement (``fleetplan bench ... --ingest``,
``fleetplan calibrate``, ``fleetplan solve``).

Named assumption: a replica's capacity scales with its throughput; the latency part of the
error (how far the model's P99 TTFT is off) is what ``solve --confidence`` plans for and is not
in the range. Main entries: :func:`measure_next` and :func:`cost_range`; the record is
:class:`~fleetplan.optimize.plan_parts.MeasureNext` (the plan's ``measure_next`` field).
"""

from __future__ import annotations

import json
import math
import os
import shlex
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from fleetplan.optimize.plan_parts import MeasureNext
from fleetplan.optimize.problem import PlanProblem
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.scenario import Scenario
from fleetplan.scenario.fleet import split_model
from fleetplan.scenario.served import model_config_of

BAND_METRIC = "request_throughput"


def capacity_factors(model: str, gpu: str, store: str | os.PathLike[str] | None = None,
                     *, moe: bool = False, mla: bool = False) -> tuple[float, float, str]:
    """``(low, high, basis)``: the ends of the 80% band of a spec-path throughput prediction of
    ``model`` on ``gpu``, as multiples of the prediction (measured = predicted / (1 + e));
    ``store``: whose runs say whether the model was measured at all (default: the usual);
    ``moe``: the model is a mixture of experts, ``mla`` one of multi-head latent attention
    (:meth:`~fleetplan.validate.bands.ErrorTable.lookup`)."""
    from fleetplan.optimize.model_band import spec_fold
    from fleetplan.validate.bands import error_table

    q, basis = error_table().quantiles(gpu, BAND_METRIC, spec_fold(model, store=store),
                                       moe=moe, mla=mla)
    return (*q.measured_range(), f"data/spec_errors.json: {basis}")


def scaled(problem: PlanProblem, config: str, factor: float) -> PlanProblem:
    """``problem`` with every capacity of ``config`` multiplied by ``factor``."""
    cap = {k: (v * factor if k[1] == config else v) for k, v in problem.capacity.items()}
    return replace(problem, capacity=cap)


def bench_commands(model: str, config: str, problem: PlanProblem, hf_id: str | None,
                   gpu: str, gpu_count: int, model_config: str | None = None,
                   catalog: str | None = None, lengths: tuple[Any, Any] = (None, None)
                   ) -> tuple[str, ...]:
    """The commands that measure ``model`` on ``config`` and plan on it: a sweep of rates
    around one replica's planned capacity (2x, 1x, 1/2, 1/4 of its largest), ingested into the
    user's store, that configuration calibrated on them, and the scenario solved again
    (``model_config``, ``catalog``: the scenario's config.json and catalog folder, so that
    ``ingest`` and ``calibrate`` know its model and GPU; ``lengths``: the prompt and output
    length distributions of the class the configuration serves most, as the scenario states
    them, ``None`` for the protocol's, bench's default). A model of a ``config.json`` is served
    from the weights beside it (the folder the scenario names), under the name it is planned
    by, so that ``bench`` and ``calibrate`` name the same model."""
    caps = [v for (_c, cfg, _t), v in problem.capacity.items() if cfg == config and v > 0]
    top = max(caps) if caps else 1.0
    rates = sorted({_nice(top * f) for f in (2.0, 1.0, 0.5, 0.25)}, reverse=True)
    served = hf_id or model
    bare = split_model(config)[1]
    serve = served
    if model_config:  # the server runs the weights beside the config.json, named as planned
        folder = Path(model_config)
        folder = folder.parent if folder.suffix == ".json" else folder
        serve, served = f"{shlex.quote(str(folder))} --served-model-name {model}", model
    extra = (f" --catalog {shlex.quote(catalog)}" if catalog else "") + (
        f" --model-config {shlex.quote(model_config)}" if model_config else "")
    workload = "".join(f" --{flag} '{_dist_json(dist)}'"
                       for flag, dist in zip(("input-len", "output-len"), lengths, strict=True)
                       if dist is not None)
    if lengths[1] is not None:  # the class's output lengths, not wherever the model stops
        workload += " --ignore-eos"
    where = f"on one {bare}" + (", from the weights beside its config.json" if model_config
                                else "")
    return (f"vllm serve {serve} --tensor-parallel-size {gpu_count}   # {where}",
            f"fleetplan bench --endpoint http://HOST:8000 --model {served} --sweep "
            f"{','.join(f'{r:g}' for r in rates)} --num-prompts 200{workload} --gpu {gpu} "
            f"--gpu-count {gpu_count} --tp {gpu_count} --ingest{extra}",
            f"fleetplan calibrate --model {model} --config {bare}{extra}",
            "fleetplan solve SCENARIO   # now plans on the measured runs")


def _lengths(scenario: Scenario, problem: PlanProblem, config: str) -> tuple[Any, Any]:
    """The stated prompt and output lengths of the class with the most traffic among those
    ``config`` can serve (capacity above 0)."""
    served = {c for (c, cfg, _t), v in problem.capacity.items() if cfg == config and v > 0}
    rate = {d.name: sum(d.rates_rps) for d in problem.demands}
    names = sorted(served, key=lambda c: (-rate.get(c, 0.0), c))
    by_name = {c.name: c for c in scenario.classes}
    cls = by_name.get(names[0]) if names else None
    return (None, None) if cls is None else (cls.input_tokens, cls.output_tokens)


def _dist_json(dist: Any) -> str:
    """A length distribution in the JSON form ``fleetplan bench --input-len`` reads."""
    stated = dist.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
    return json.dumps({"dist": dist.dist, **stated}, separators=(",", ":"))


def _nice(rate: float) -> float:
    """A rate rounded to two significant figures (at least 0.1 req/s)."""
    if rate <= 0.1:
        return 0.1
    digits = 1 - int(math.floor(math.log10(rate)))
    return round(rate, max(digits, 0))


def cost_range(problem: PlanProblem, settings: SolverSettings, config: str,
               factors: tuple[float, float],
               solve: Callable[[PlanProblem, SolverSettings], Any] | None = None
               ) -> tuple[float, float]:
    """The cost per hour of the cheapest plan with ``config``'s capacities at each of
    ``factors`` (every other capacity as given), cheapest first; ``inf``: no plan."""
    if solve is None:
        from fleetplan.optimize.milp import solve_problem

        solve = solve_problem
    costs = []
    for f in factors:
        sol = solve(scaled(problem, config, f), settings)
        costs.append(sol.cost_per_day_usd / 24 if sol.has_plan else math.inf)
    return min(costs), max(costs)


def measure_next(scenario: Scenario, problem: PlanProblem, settings: SolverSettings,
                 is_calibrated: Callable[[str, str], bool],
                 factors: Callable[[str, str], tuple[float, float, str]] | None = None
                 ) -> MeasureNext | None:
    """The uncalibrated candidate of ``problem`` whose throughput band moves the plan's cost
    most (None: every candidate is calibrated, or no band moves the cost; a candidate laid out
    in pipeline stages or data-parallel replicas is not named: its runs cannot be ingested).
    ``is_calibrated(model, config)`` says whether a pair is measured; ``factors(model, gpu)``
    gives its band's ends and their basis (default: :func:`capacity_factors` on the
    scenario's store)."""
    ctx = scenario.data_context()
    catalog = ctx.catalog
    if factors is None:
        def factors(model: str, gpu: str) -> tuple[float, float, str]:
            spec = catalog.model(model)
            return capacity_factors(model, gpu, ctx.store, moe=spec.is_moe, mla=spec.is_mla)

    best: MeasureNext | None = None
    for config in sorted({p.config for p in problem.pools}):
        named, bare = split_model(config)
        model = named or scenario.one_model
        if is_calibrated(model, bare) or "+" in bare:
            # a server of pipeline stages or data-parallel replicas: the store keeps one
            # tensor-parallel group per run (ingest refuses --pp), so no bench closes the loop
            continue
        pool = next(p for p in problem.pools if p.config == config)
        lo_f, hi_f, basis = factors(model, pool.gpu)
        cheap, dear = cost_range(problem, settings, config, (lo_f, hi_f))
        if not math.isfinite(cheap) or dear - cheap <= 1e-9:
            continue
        found = MeasureNext(model, bare,
                            (round(cheap, 4), round(dear, 4) if math.isfinite(dear) else None),
                            (round(lo_f, 4), round(hi_f, 4)), basis,
                            bench_commands(model, config, problem, catalog.model(model).hf_id,
                                           pool.gpu, pool.gpu_count,
                                           model_config_of(scenario, model),
                                           scenario.catalog, _lengths(scenario, problem, config)))
        if best is None or found.span_usd_per_hour > best.span_usd_per_hour + 1e-9:
            best = found
    return best
