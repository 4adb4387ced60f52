"""Issue 44 at the MILP: several models' problems merged into one plan over the fleet.

The merge (:func:`fleetplan.optimize.multi_model.merge_problems`) names every candidate by its
model; a replica serves one model, and constraints over the fleet (availability) bind the models
together. Expected values are worked out by hand, or from the separate problems solved apart.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from optimize_helpers import H100, R2, synth_problem

from fleetplan.optimize.milp import candidate_key, solve_problem
from fleetplan.optimize.multi_model import bare_config, merge_problems, model_config
from fleetplan.optimize.problem import Demand, Limits, PlanProblem, Pool, Tier
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.scenario.fleet import split_model, split_pool_name

EXACT = SolverSettings("cbc", time_limit_s=30, gap=0.0)
T = Tier(500.0)


def _one(name: str, rate: float, pools: tuple[Pool, ...], caps: dict[str, float]) -> PlanProblem:
    """One class ``name`` at ``rate`` req/s, SLO 500 ms, with a capacity per configuration."""
    return PlanProblem((Demand(name, (rate,), 500.0),), pools,
                       {(name, p.config, T): caps[p.config] for p in pools})


# two configurations, priced and sized so that the H100 is the cheaper per req/s:
# H100 $2/h for 10 req/s (5 req/s per $), the other $1.5/h for 5 req/s (3.3 per $)
FAST = Pool("1xH100-PCIe", "EU27", "H100-PCIe", 1, 2.0, 50.0, 200.0)
SLOW = Pool("1xRTX-4090", "EU27", "RTX-4090", 1, 1.5, 30.0, 200.0)
CAPS = {"1xH100-PCIe": 10.0, "1xRTX-4090": 5.0}


def _gpus(problem: PlanProblem, sol, gpu: str) -> int:  # type: ignore[no-untyped-def]
    by_key = {p.key: p for p in problem.pools}
    return sum(n * by_key[candidate_key(k)].gpu_count for (k, _h), n in sol.counts.items()
               if by_key[candidate_key(k)].gpu == gpu)


def test_names_carry_the_model() -> None:
    merged = merge_problems([("A", _one("a", 20, (FAST,), CAPS)),
                             ("B", _one("b", 20, (FAST,), CAPS))], Limits())
    assert [p.key for p in merged.pools] == ["A/1xH100-PCIe@EU27", "B/1xH100-PCIe@EU27"]
    assert merged.pools[0].name(T) == "A/1xH100-PCIe@EU27/500ms"
    assert candidate_key("A/1xH100-PCIe@EU27/500ms") == "A/1xH100-PCIe@EU27"
    assert candidate_key("1xH100-PCIe@EU27/500ms") == "1xH100-PCIe@EU27"
    assert split_model("A/1xH100-PCIe@EU27/500ms") == ("A", "1xH100-PCIe@EU27/500ms")
    assert split_model("1xH100-PCIe@EU27/500ms") == (None, "1xH100-PCIe@EU27/500ms")
    assert split_pool_name("1xH100-PCIe@EU27~spot/500ms") == ("1xH100-PCIe", "EU27", "spot")
    assert bare_config(model_config("A", "2xRTX-4090")) == "2xRTX-4090"
    # a class has capacity on its own model's candidates only
    a = merged.demands[0]
    assert merged.cap(a, merged.pools[0], T) == 10.0
    assert merged.cap(a, merged.pools[1], T) == 0.0


def test_availability_binds_the_models_together() -> None:
    """Apart, each model takes 2 H100s (20 req/s at 10 each, $4/h rather than 4 of the other
    at $6/h): 4 H100s. Together with 2 H100s available, the cheapest plan spends them on either
    model and serves the remaining 20 req/s on 4 of the others: 2 x $2 + 4 x $1.5 = $10/h."""
    apart = [("A", _one("a", 20, (FAST, SLOW), CAPS)), ("B", _one("b", 20, (FAST, SLOW), CAPS))]
    avail = Limits(availability={"H100-PCIe": 2})
    separate = [solve_problem(p.replace(limits=avail), EXACT) for _m, p in apart]
    assert sum(_gpus(p, s, "H100-PCIe") for (_m, p), s in zip(apart, separate, strict=True)) == 4
    joint = merge_problems(apart, avail)
    sol = solve_problem(joint, EXACT)
    assert sol.has_plan
    assert _gpus(joint, sol, "H100-PCIe") == 2
    assert sol.cost_per_day_usd / 24 == pytest.approx(10.0)
    for (name, pool, _h), share in sol.shares.items():  # each class on its own model's pools
        if share > 0:
            assert split_model(pool)[0] == {"a": "A", "b": "B"}[name]


def test_budget_binds_the_fleet() -> None:
    """$7/h for both models: apart each fits (2 H100s, $4/h), together they need $8/h."""
    apart = [("A", _one("a", 20, (FAST, SLOW), CAPS)), ("B", _one("b", 20, (FAST, SLOW), CAPS))]
    budget = Limits(budget_usd_per_hour=7.0)
    assert all(solve_problem(p.replace(limits=budget), EXACT).has_plan for _m, p in apart)
    assert not solve_problem(merge_problems(apart, budget), EXACT).has_plan


_class = st.tuples(st.floats(1.0, 25.0), st.sampled_from([150.0, 300.0, 600.0, 2000.0]),
                   st.floats(0.7, 1.6))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=st.lists(_class, min_size=1, max_size=2), b=st.lists(_class, min_size=1, max_size=2))
def test_without_coupling_the_joint_plan_costs_the_separate_plans(a, b) -> None:  # type: ignore[no-untyped-def]
    """With no constraint over the fleet the merged MILP is the two problems side by side: its
    optimum is the sum of theirs (both solved exactly, so within the solver's tolerance)."""
    pa = synth_problem([(f"a{i}", r, slo, s) for i, (r, slo, s) in enumerate(a)], (H100, R2))
    pb = synth_problem([(f"b{i}", r, slo, s) for i, (r, slo, s) in enumerate(b)], (H100, R2))
    sa, sb = solve_problem(pa, EXACT), solve_problem(pb, EXACT)
    joint = solve_problem(merge_problems([("A", pa), ("B", pb)], Limits()), EXACT)
    assert joint.has_plan == (sa.has_plan and sb.has_plan)
    if joint.has_plan:
        assert joint.cost_per_day_usd == pytest.approx(
            sa.cost_per_day_usd + sb.cost_per_day_usd, rel=1e-6, abs=1e-6)


def test_availability_holds_in_every_hour() -> None:
    """Hourly rates: A peaks when B is low and the other way round. Each hour needs 20 req/s
    of one model and 10 of the other; with 2 H100s the cheapest hour is 2 H100s on the busy
    model's 20 req/s and 2 of the others on the quiet one's 10: 2 x $2 + 2 x $1.5 = $7/h,
    every hour (where 3 H100s, one for the quiet model, would cost $6/h)."""
    day_a = tuple([20.0] * 12 + [10.0] * 12)
    day_b = tuple([10.0] * 12 + [20.0] * 12)
    parts = [(m, PlanProblem((Demand(n, day, 500.0),), (FAST, SLOW),
                             {(n, p.config, T): CAPS[p.config] for p in (FAST, SLOW)}))
             for m, n, day in (("A", "a", day_a), ("B", "b", day_b))]
    free = solve_problem(merge_problems(parts, Limits()), EXACT)
    assert free.cost_per_day_usd == pytest.approx(24 * 6.0)
    joint = merge_problems(parts, Limits(availability={"H100-PCIe": 2}))
    sol = solve_problem(joint, EXACT)
    by_key = {p.key: p for p in joint.pools}
    for h in range(24):
        h100 = sum(n for (k, hh), n in sol.counts.items()
                   if hh == h and by_key[candidate_key(k)].gpu == "H100-PCIe")
        assert h100 <= 2
    assert sol.cost_per_day_usd == pytest.approx(24 * 7.0)


def test_a_model_of_one_rate_runs_at_it_every_hour_beside_a_diurnal_model() -> None:
    """Model A follows the clock, model B's class has one rate: merged, B's demand is its rate
    in every hour (a model of one-rate classes does not refuse the plan)."""
    day_a = tuple([20.0] * 12 + [10.0] * 12)
    parts = [("A", PlanProblem((Demand("a", day_a, 500.0),), (FAST,),
                               {("a", FAST.config, T): 10.0})),
             ("B", _one("b", 7.0, (SLOW,), CAPS))]
    merged = merge_problems(parts, Limits())
    assert merged.hours == 24
    assert [d.rates_rps for d in merged.demands] == [day_a, (7.0,) * 24]
    sol = solve_problem(merged, EXACT)
    # every hour: 2 (then 1) H100s for A and 2 RTX 4090s for B's 7 req/s at 5 each
    assert sol.cost_per_day_usd == pytest.approx(12 * (2 * 2.0 + 2 * 1.5)
                                                 + 12 * (1 * 2.0 + 2 * 1.5))
