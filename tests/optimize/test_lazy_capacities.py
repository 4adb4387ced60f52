"""Capacities simulated on demand (issue 10, cold start): the analytic bound is a bound, and a
solve that simulates only the capacities its plans use gives the plan of the full table."""

from __future__ import annotations

import json

import pytest

from fleetplan.optimize import lazy as lazy_mod
from fleetplan.optimize.cache import DiskCache
from fleetplan.optimize.capacity import CapacityJob, CapacitySettings, find_capacities
from fleetplan.optimize.executors import SerialExecutor
from fleetplan.optimize.inputs import build_problem, setup_problem
from fleetplan.optimize.lazy import LazyCapacities, capacity_bound
from fleetplan.optimize.milp import solve_problem
from fleetplan.optimize.solve import solve, solve_inputs, solver_settings, with_reliability
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.replica.params import replica_params
from fleetplan.scenario import Scenario
from fleetplan.workload.lengths import LengthModel

MODEL = "DeepSeek-R1-Distill-Qwen-14B"
FAST = CapacitySettings(duration_s=120, warmup_s=30, min_requests=300, seeds=2)
EXACT = SolverSettings("cbc", time_limit_s=30, gap=0.0)


def lengths(i_mean: float, o_mean: float, cv: float = 0.6) -> LengthModel:
    return LengthModel.model_validate({
        "input": {"dist": "lognormal", "mean": i_mean, "cv": cv, "max": 8 * i_mean},
        "output": {"dist": "lognormal", "mean": o_mean, "cv": cv, "max": 8 * o_mean}})


@pytest.mark.parametrize(("config", "i_mean", "o_mean", "hit"), [
    ("1xH100-PCIe", 60, 40, 0.0), ("1xH100-PCIe", 1500, 300, 0.0), ("2xRTX-4090", 300, 600, 0.0),
    ("4xRTX-4090", 2500, 80, 0.0), ("1xH100-PCIe", 1000, 200, 0.9), ("1xL40S", 200, 100, 0.0)])
def test_no_certified_capacity_exceeds_the_analytic_bound(config, i_mean, o_mean, hit):
    # an SLO no queue reaches within a run: the search climbs to where the replica stops
    # keeping up, the highest capacity any SLO can give; the bound must still be above it
    job = CapacityJob(MODEL, config, replica_params(MODEL, config), lengths(i_mean, o_mean),
                      1.0, 1e7, None, None, FAST, None, hit)
    cap = find_capacities([job], cache=DiskCache(None))[0].capacity_rps
    bound = capacity_bound(job)
    assert 0 < cap <= bound
    # and it is a bound with room, not a guess: within 2x of what the replica sustains
    assert bound < 2.0 * cap


def scenario(**extra: object) -> Scenario:
    return Scenario.model_validate({
        "model": MODEL,
        "classes": [
            {"name": "chat", "rate_rps": 6, "slo": {"ttft_p99_ms": 300}},
            {"name": "rag", "rate_rps": 2, "slo": {"ttft_p99_ms": 1500},
             "input_tokens": {"dist": "lognormal", "mean": 2000, "cv": 0.5, "max": 6000},
             "output_tokens": {"dist": "lognormal", "mean": 150, "cv": 0.5, "max": 600}},
            {"name": "batch", "rate_rps": 8, "slo": {"ttft_p99_ms": 5000}},
            {"name": "short", "rate_rps": 4, "slo": {"ttft_p99_ms": 1000},
             "input_tokens": {"dist": "uniform", "low": 20, "high": 80},
             "output_tokens": {"dist": "uniform", "low": 20, "high": 60}}],
        "candidates": ["1xH100-PCIe", "2xRTX-4090", "4xRTX-4090", "1xA100-80GB", "1xL40S"],
        "grid_g_per_kwh": {"EU27": 242},
        "sim": {"duration_s": 240, "warmup_s": 60, "seed": 3, "replications": 2},
        "capacity": FAST.model_dump(),
        **extra})


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One capacity cache for the module: the scenario's searches are simulated once."""
    return str(tmp_path_factory.mktemp("lazy-cache"))


def eager_and_lazy(sc: Scenario, cache: str, settings: SolverSettings = EXACT):
    """The first MILP answer of the full table and of the on-demand one."""
    full = build_problem(sc, cache_dir=cache)
    eager = solve_problem(with_reliability(sc, full.problem), settings)
    table = LazyCapacities(setup_problem(sc, cache_dir=cache), SerialExecutor(),
                           finish=lambda p: with_reliability(sc, p))
    lazy, _problem = table.solve(lambda p: p, settings)
    return full, eager, table, lazy


def test_on_demand_capacities_give_the_full_tables_optimum_with_fewer_searches(cache):
    sc = scenario()
    full, eager, table, lazy = eager_and_lazy(sc, cache)
    assert lazy.has_plan and eager.has_plan
    assert lazy.cost_per_day_usd == pytest.approx(eager.cost_per_day_usd, rel=1e-9)
    # every capacity the lazy answer uses was simulated, and equals the full table's
    for (name, pool, h), share in lazy.shares.items():
        if share > 0:
            key = (name, pool.partition("@")[0], lazy.tiers[(pool, h)])
            assert table.results[key] == full.results[key]
    assert table.searched < table.total
    assert not table.exceeded


def test_a_carbon_cap_and_the_tie_stage_see_the_same_optimum(cache):
    # the cap binds: the cheapest plan is too dirty, so the answer moves; lazily as eagerly
    sc = scenario(carbon={"max_g_per_mtok": 12})
    _full, eager, table, lazy = eager_and_lazy(sc, cache)
    assert lazy.has_plan == eager.has_plan
    if eager.has_plan:
        assert lazy.cost_per_day_usd == pytest.approx(eager.cost_per_day_usd, rel=1e-9)


def test_a_bound_that_fails_sends_every_search_and_keeps_the_answer(cache, monkeypatch):
    sc = scenario()
    monkeypatch.setattr(lazy_mod, "capacity_bound", lambda job: 0.05)  # far too low
    _full, eager, table, lazy = eager_and_lazy(sc, cache)
    assert table.exceeded and table.searched == table.total
    # the table is then complete, so the next solve is the full table's
    again, _p = table.solve(lambda p: p, EXACT)
    assert again.cost_per_day_usd == pytest.approx(eager.cost_per_day_usd, rel=1e-9)


def test_solve_reports_the_plan_of_the_full_table_and_says_what_it_simulated(cache):
    sc = scenario()
    plan = solve(sc, cache_dir=cache, executor="serial")
    full = build_problem(sc, cache_dir=cache)
    eager = solve_inputs(sc, full, solver_settings(sc), executor=SerialExecutor())
    assert plan.cost_per_hour_usd == eager.cost_per_hour_usd
    assert [(e.pool, e.count) for e in plan.fleet] == [(e.pool, e.count) for e in eager.fleet]
    note = next(n for n in plan.notes if n.startswith("capacities: "))
    # chat and batch share one workload: 3 workloads x 5 candidates
    done = int(note.split()[1])
    assert done < 15 and " of 15 capacity searches" in note
    assert "bounded above analytically" in note
    # every capacity it relied on was simulated: the full table's, as the loop derated it
    tiers = {t.ttft_ms: t for t in full.problem.tiers}
    for c in plan.capacities:
        base = full.problem.capacity[(c.class_name, c.config, tiers[c.tier_ttft_p99_ms])]
        assert c.capacity_rps == pytest.approx(base * c.derate, rel=1e-3, abs=1e-4)
        assert c.ttft_p99_ms_at_capacity is not None


def test_an_infeasible_problem_is_explained_on_the_full_table(cache):
    sc = scenario(carbon={"max_g_per_mtok": 0.5})
    plan = solve(sc, cache_dir=cache, executor="serial")
    assert plan.status.value == "infeasible"
    assert "capacities: 15 of 15 capacity searches" in " ".join(plan.notes)
    # every (class, candidate) capacity is listed, as the full table gives them
    assert len(plan.capacities) == 4 * 5
    assert plan.binding == "carbon.max_g_per_mtok"


def test_the_closed_loop_on_demand_is_deterministic(cache, tmp_path):
    # the searches a solve simulates follow from its MILPs alone, never from what the cache
    # already holds: a solve on an empty cache and one on a full one give the same plan
    sc = scenario()
    cold = solve(sc, cache_dir=str(tmp_path), executor="serial")
    warm = solve(sc, cache_dir=cache, executor="serial")
    dump = [json.dumps(p.to_dict(timing=False), sort_keys=True) for p in (cold, warm)]
    assert dump[0] == dump[1]
