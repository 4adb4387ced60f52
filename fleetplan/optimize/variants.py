"""Interchangeable variants: a class that several models may serve, and the one solve picks.

A class may list variants of one model the user accepts alike (``classes[].model:
[Llama-3.1-70B-Instruct, Llama-3.1-70B-Instruct-FP8]``, two precisions). Each class is served by
one of them: every combination of the classes' choices is a scenario of plain classes, solved
and verified as any scenario of several models (:func:`fleetplan.optimize.solve.solve`), and the
plan kept is the cheapest verified one (ties: the combination of the earliest-listed variants).
This is a brute force over the combinations, exact by construction and bounded by
:data:`MAX_COMBINATIONS`; the plan's ``classes[].model`` says which variant serves each class,
and a note names what each combination cost.

Main entries: :func:`variant_classes`, :func:`combinations` and :func:`choose`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace

from fleetplan._notes import usd
from fleetplan.errors import InputError
from fleetplan.optimize.plan import Plan, PlanStatus
from fleetplan.scenario import Scenario
from fleetplan.scenario.served import class_variants

MAX_COMBINATIONS = 16
"""Most combinations of variants one solve tries (each is a whole solve with its simulations)."""


def variant_classes(scenario: Scenario) -> list[tuple[int, tuple[str, ...]]]:
    """(class index, its variants) of every class that lists more than one model."""
    return [(i, v) for i in range(len(scenario.classes))
            if len(v := class_variants(scenario, i)) > 1]


def combinations(scenario: Scenario) -> list[dict[str, str]]:
    """Every choice of one variant per class that lists several (class name -> model), the
    earliest-listed variants first; :class:`InputError` beyond :data:`MAX_COMBINATIONS`."""
    listed = variant_classes(scenario)
    count = 1
    for _i, v in listed:
        count *= len(v)
    if count > MAX_COMBINATIONS:
        raise InputError(f"classes[].model: {count} combinations of variants "
                         f"({', '.join(scenario.classes[i].name for i, _v in listed)}), more "
                         f"than the {MAX_COMBINATIONS} one solve tries; name one model for "
                         "some of these classes")
    names = [scenario.classes[i].name for i, _v in listed]
    return [dict(zip(names, pick, strict=True))
            for pick in itertools.product(*(v for _i, v in listed))]


def concrete(scenario: Scenario, choice: dict[str, str]) -> Scenario:
    """``scenario`` with each class of ``choice`` served by its chosen model."""
    classes = [c.model_dump(mode="python", by_alias=True, exclude_unset=True)
               for c in scenario.classes]
    for c in classes:
        if c["name"] in choice:
            c["model"] = choice[c["name"]]
    return scenario.with_updates(classes=classes)


def _words(choice: dict[str, str]) -> str:
    return ", ".join(f"{name} on {model}" for name, model in choice.items())


def choose(scenario: Scenario, solve_one: Callable[[Scenario], Plan]) -> Plan:
    """The cheapest verified plan over every combination of variants (module docstring):
    ``solve_one`` solves one scenario of plain classes. Without a verified plan, the cheapest
    plan found (marked unverified as ever); without any, the first combination's answer."""
    tried = [(choice, solve_one(concrete(scenario, choice))) for choice in combinations(scenario)]
    has_plan = [(k, c, p) for k, (c, p) in enumerate(tried)
                if p.status is not PlanStatus.infeasible]
    verified = [t for t in has_plan if t[2].verified]
    pool = verified or has_plan
    if not pool:
        return tried[0][1]
    k, choice, plan = min(pool, key=lambda t: (t[2].cost_per_hour_usd or 0.0, t[0]))
    outcomes = "; ".join(
        f"{_words(c)}: " + ("no plan" if p.status is PlanStatus.infeasible else
                            f"{usd(p.cost_per_hour_usd)}/h"
                            + ("" if p.verified else " (not verified)"))
        for c, p in tried)
    tied = sum(abs((t[2].cost_per_hour_usd or 0.0) - (plan.cost_per_hour_usd or 0.0)) < 1e-9
               for t in pool) > 1
    kept = "; the first in the classes' lists is kept" if tied else ""
    note = (f"variants: {_words(choice)} ({'tied for ' if tied else ''}the cheapest "
            f"{'verified ' if verified else ''}plan of the {len(tried)} combinations of the "
            f"classes' variants, each solved and simulated{kept}: {outcomes})")
    return replace(plan, notes=(*plan.notes, note))
