"""One plan for several models: their capacity tables side by side in one MILP over the fleet.

A scenario with ``models:`` is planned as one fleet. Each model's inputs are built as for a
one-model scenario (:meth:`~fleetplan.scenario.Scenario.for_model`: its classes, its candidate
configurations, its capacities at SLO, cached as ever), then merged into one
:class:`~fleetplan.optimize.problem.PlanProblem` whose candidates are named by model and
configuration, ``Meta-Llama-3-8B-Instruct/1xH100-PCIe``: a candidate of one model has no
capacity for another model's classes (their keys never meet), so a replica serves one model,
and the constraints over the whole fleet (``availability`` per GPU type, budget, carbon) bind
every model's pools together. The MILP itself is unchanged and stays exact: with no coupling
constraint it is the separate problems side by side, and its optimum their optima's sum.

The closed loop then simulates the whole fleet at once (every class routed to its own model's
replicas only, :func:`fleetplan.fleet.pools.class_pools`).

Main entries: :func:`build_multi_problem` (scenario -> merged inputs), :func:`merge_problems`
(the merge itself, on plain problems) and :func:`bare_config` (the configuration of a
candidate name). ``--confidence`` and churn follow the candidate names: a configuration's
margin is its own model's (:func:`fleetplan.optimize.confidence.margins`), and every pool
keeps its own spares (a pool is one model's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from fleetplan.optimize.inputs import Inputs, build_problem
from fleetplan.optimize.problem import Limits, PlanProblem, every_hour
from fleetplan.scenario import Scenario
from fleetplan.scenario.fleet import split_model
from fleetplan.scenario.served import MODEL_MARK, serving_models

V = TypeVar("V")


def model_config(model: str, config: str) -> str:
    """The candidate name of ``config`` serving ``model``: ``model/config``."""
    return f"{model}{MODEL_MARK}{config}"


def bare_config(config: str) -> str:
    """The hardware configuration of a candidate name (``model/config`` or ``config``)."""
    return split_model(config)[1]


def _renamed(table: Mapping[Any, V], model: str) -> dict[Any, V]:
    """A table keyed ``(class, config, ...)`` with its configurations named by ``model``."""
    return {(k[0], model_config(model, k[1]), *k[2:]): v for k, v in table.items()}


def merge_problems(parts: Sequence[tuple[str, PlanProblem]], limits: Limits,
                   order: Sequence[str] | None = None) -> PlanProblem:
    """One problem of several models' problems (``(model, problem)``; class names unique over
    all of them): candidates named ``model/config``, the tables keyed by those names, the
    demands in ``order`` (class names; default: as given) and ``limits`` over the whole fleet."""
    # a model of one-rate classes beside a diurnal one: its classes run at their rate every hour
    demands = list(every_hour(d for _m, p in parts for d in p.demands))
    if order is not None:
        rank = {n: i for i, n in enumerate(order)}
        demands.sort(key=lambda d: rank[d.name])
    pools = tuple(replace(pool, config=model_config(m, pool.config))
                  for m, p in parts for pool in p.pools)
    capacity: dict[Any, float] = {}
    dyn: dict[Any, float] = {}
    probes: dict[Any, Any] = {}
    unfit: dict[Any, str] = {}
    for m, p in parts:
        capacity.update(_renamed(p.capacity, m))
        dyn.update(_renamed(p.dyn_w_per_rps, m))
        probes.update(_renamed(p.probes, m))
        unfit.update(_renamed(p.unfit, m))
    return PlanProblem(tuple(demands), pools, capacity, dyn, limits, probes,
                       max(p.slo_margin for _m, p in parts), unfit=dict(sorted(unfit.items())))


def build_multi_problem(scenario: Scenario, **build: Any) -> Inputs:
    """The merged inputs of a scenario with several models (module docstring): each model's
    :func:`~fleetplan.optimize.inputs.build_problem` with ``build``'s options, the notes of each
    prefixed by its model."""
    parts = [(m, build_problem(scenario.for_model(m), **build))
             for m in serving_models(scenario)]
    # every part carries the scenario's own limits (for_model keeps them): they bind the fleet
    problem = merge_problems([(m, i.problem) for m, i in parts], parts[0][1].problem.limits,
                             [c.name for c in scenario.classes])
    results: dict[Any, Any] = {}
    pending: dict[Any, Any] = {}
    sources: dict[str, str] = {}
    for m, inp in parts:
        results.update(_renamed(inp.results, m))
        pending.update(_renamed(inp.pending, m))
        sources.update({model_config(m, c): s for c, s in inp.power_sources.items()})
    # a note every model's inputs make is said once; the others name their model
    common = [n for n in parts[0][1].notes if all(n in inp.notes for _m, inp in parts)]
    own = [f"{m}: {n}" for m, inp in parts for n in inp.notes if n not in common]
    return Inputs(problem, results, sources, (*common, *own), pending)
