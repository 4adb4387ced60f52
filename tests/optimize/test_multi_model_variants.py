"""Issue 44: a class that lists interchangeable variants gets the cheaper verified one.

Chat accepts the 14B and the 7B distill of one model family (listed in that order, so a tie would
keep the 14B). The expected choice is worked out by brute force over the capacity table: per
variant, the fewest H100 replicas whose capacities carry the rate, at the catalog's price.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from fleetplan.errors import InputError
from fleetplan.optimize import solve
from fleetplan.optimize.inputs import build_problem
from fleetplan.optimize.problem import Tier
from fleetplan.optimize.variants import MAX_COMBINATIONS, combinations
from fleetplan.scenario import scenario_from_dict

BIG, SMALL = "DeepSeek-R1-Distill-Qwen-14B", "DeepSeek-R1-Distill-Qwen-7B"
RATE = 32.0
SCENARIO: dict[str, Any] = {
    "models": [BIG, SMALL],
    "classes": [{"name": "chat", "model": [BIG, SMALL], "rate_rps": RATE,
                 "slo": {"ttft_p99_ms": 500}}],
    "candidates": ["1xH100-PCIe"],
    "capacity": {"duration_s": 60, "warmup_s": 10, "seeds": 1, "min_requests": 100},
    "sim": {"duration_s": 60, "warmup_s": 10, "seed": 1, "replications": 1},
}


def test_the_cheaper_variant_is_chosen_as_brute_force_says(capacity_cache_dir: str) -> None:
    sc = scenario_from_dict(SCENARIO)
    table_cost = {}
    for model in (BIG, SMALL):  # brute force over the capacity table, one variant at a time
        problem = build_problem(sc.for_model(model), cache_dir=capacity_cache_dir).problem
        (pool,) = problem.pools
        cap = problem.capacity[("chat", "1xH100-PCIe", Tier(500.0))]
        assert cap > 0
        table_cost[model] = math.ceil(RATE / cap) * pool.price_usd_per_hour
    cheapest = min(table_cost, key=lambda m: table_cost[m])
    assert table_cost[cheapest] < max(table_cost.values())  # a clear-cut choice
    plan = solve(sc, executor="serial", cache_dir=capacity_cache_dir)
    assert plan.verified
    (chat,) = plan.classes
    assert chat.model == cheapest and chat.met
    assert {e.model for e in plan.fleet} == {cheapest}
    assert all(k.startswith(f"{cheapest}/") for k in chat.split)
    # verified at the table's figure (the closed loop may only add replicas)
    assert plan.cost_per_hour_usd >= table_cost[cheapest] - 1e-9
    assert plan.cost_per_hour_usd < table_cost[BIG if cheapest == SMALL else SMALL]
    assert any(n.startswith(f"variants: chat on {cheapest}") for n in plan.notes)


def test_combinations_are_bounded() -> None:
    classes = [{"name": f"c{i}", "model": [BIG, SMALL], "rate_rps": 1} for i in range(5)]
    sc = scenario_from_dict({**SCENARIO, "classes": classes})
    assert MAX_COMBINATIONS < 2 ** 5
    with pytest.raises(InputError, match="32 combinations of variants"):
        combinations(sc)
    two = scenario_from_dict({**SCENARIO, "classes": classes[:2]})
    assert combinations(two) == [{"c0": BIG, "c1": BIG}, {"c0": BIG, "c1": SMALL},
                                 {"c0": SMALL, "c1": BIG}, {"c0": SMALL, "c1": SMALL}]


HF = Path(__file__).resolve().parents[1] / "data" / "hf-configs"
BF16, FP8 = "Llama-3.1-8B-Instruct", "Meta-Llama-3.1-8B-Instruct-FP8"


def test_a_class_accepting_fp8_and_bf16_gets_the_cheaper_verified_one(
        capacity_cache_dir: str) -> None:
    """The issue's case: two precisions of one model (each described by its config.json, so
    predicted uncalibrated) as variants of one class; brute force over the capacity table says
    which is cheaper, and solve serves the class with it, verified."""
    rate = 56.0  # 4 replicas of one precision, 5 of the other, at their predicted capacities
    sc = scenario_from_dict({
        "models": [{"name": BF16, "model_config": str(HF / BF16)},
                   {"name": FP8, "model_config": str(HF / FP8)}],
        "classes": [{"name": "chat", "model": [BF16, FP8], "rate_rps": rate,
                     "slo": {"ttft_p99_ms": 1000}}],
        "candidates": ["1xRTX-4090"],
        "capacity": SCENARIO["capacity"], "sim": SCENARIO["sim"]})
    table_cost = {}
    for model in (BF16, FP8):
        problem = build_problem(sc.for_model(model), cache_dir=capacity_cache_dir).problem
        (pool,) = problem.pools
        cap = problem.capacity[("chat", "1xRTX-4090", Tier(1000.0))]
        assert cap > 0
        table_cost[model] = math.ceil(rate / cap) * pool.price_usd_per_hour
    cheapest = min(table_cost, key=lambda m: table_cost[m])
    assert table_cost[cheapest] < max(table_cost.values()), table_cost  # a clear-cut choice
    plan = solve(sc, executor="serial", cache_dir=capacity_cache_dir)
    assert plan.verified
    (chat,) = plan.classes
    assert chat.model == cheapest and chat.met
    assert {e.model for e in plan.fleet} == {cheapest}
    # the closed loop adds replicas to both (the simulation holds fewer requests per replica
    # than the steady-state search), and the cheaper one stays cheaper
    assert any(n.startswith(f"variants: chat on {cheapest}") for n in plan.notes)


def test_a_tie_between_variants_is_said_to_be_one() -> None:
    """Two variants whose verified plans cost the same: the note said 'the cheapest' of the
    first; it says they tied and that the first listed was kept. Prices print as money."""
    from fleetplan.optimize.plan import Plan, PlanStatus, SolverReport
    from fleetplan.optimize.variants import choose

    sc = scenario_from_dict(SCENARIO)

    def plan_at(cost: float) -> Plan:
        return Plan(PlanStatus.optimal, (), cost, None, None, (),
                    SolverReport("cbc", "optimal", 0.1, 0.01, 1, 10.0), True)

    costs = {BIG: 1.75, SMALL: 1.75}
    tied = choose(sc, lambda one: plan_at(costs[one.classes[0].model]))
    (note,) = [n for n in tied.notes if n.startswith("variants:")]
    assert note.startswith(f"variants: chat on {BIG} (tied for the cheapest verified plan of "
                           "the 2 combinations")
    assert "the first in the classes' lists is kept" in note
    assert f"chat on {BIG}: $1.75/h; chat on {SMALL}: $1.75/h" in note
    costs[SMALL] = 1.5
    (note,) = [n for n in choose(sc, lambda one: plan_at(costs[one.classes[0].model])).notes
               if n.startswith("variants:")]
    assert note.startswith(f"variants: chat on {SMALL} (the cheapest verified plan of the 2 ")
    assert "tied" not in note and f"chat on {SMALL}: $1.50/h" in note
