"""Stricter-tier capacities searched on demand (issue 10, part 5: a cold start with fewer
searches) give the full table's optimum: a relaxation bounds it from below, a restriction is a
plan of the full table, and the rounds stop only when the restriction is within the gap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from optimize_helpers import H100, R2, R4, synth_problem

from fleetplan.optimize import pricing as pricing_mod
from fleetplan.optimize import solve
from fleetplan.optimize.capacity import CapacityResult, PointStats
from fleetplan.optimize.executors import SerialExecutor
from fleetplan.optimize.inputs import Inputs
from fleetplan.optimize.milp import solve_problem
from fleetplan.optimize.problem import Limits, PlanProblem
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.scenario import load_scenario

EXACT = SolverSettings("cbc", time_limit_s=60, gap=0.0)
ROOT = Path(__file__).resolve().parents[2]


def _result(cap: float) -> CapacityResult:
    p = PointStats(max(cap, 0.03125), 50.0, 10.0, 900.0, True, 0.5, cap)
    return CapacityResult(cap, p if cap > 0 else None, None, p, 1)


def _deferred(full: PlanProblem) -> tuple[Inputs, dict]:
    """Inputs as build_problem(defer_stricter=True) leaves them: stricter tiers pending and
    bounded by the class's capacity at its own SLO (0 bounds are exact and not pending)."""
    own = {d.name: d.tier for d in full.demands}
    cap, pending = dict(full.capacity), {}
    for (name, config, t), v in full.capacity.items():
        if t != own[name]:
            bound = full.capacity[(name, config, own[name])]
            assert v <= bound  # the table is monotone in the SLO
            cap[(name, config, t)] = bound
            if bound > 0:
                pending[(name, config, t)] = object()  # a job: never run in these tests
    return Inputs(full.replace(capacity=cap), {}, {}, (), pending), pending


def _price(full: PlanProblem, monkeypatch) -> tuple[Inputs, list]:
    inputs, pending = _deferred(full)
    searched: list = []

    def fake_searches(jobs, executor, progress=None):
        searched.extend(jobs)
        return {k: _result(full.capacity[k]) for k in jobs}

    monkeypatch.setattr(pricing_mod, "run_searches", fake_searches)
    return pricing_mod.price_tiers(inputs, EXACT, SerialExecutor()), searched


CLASSES = st.lists(st.tuples(st.floats(0.5, 12.0), st.sampled_from([100.0, 300.0, 1000.0, 5000.0]),
                             st.floats(0.5, 3.0)), min_size=2, max_size=5)


@settings(max_examples=25, deadline=None)
@given(CLASSES, st.sampled_from([None, 60.0, 5.0]))
def test_priced_tiers_give_the_full_tables_optimum(classes, carbon):
    monkeypatch = pytest.MonkeyPatch()  # per example (hypothesis runs many in one test)
    try:
        full = synth_problem([(f"c{i}", r, slo, s) for i, (r, slo, s) in enumerate(classes)],
                             pools=(H100, R2, R4), limits=Limits(max_g_per_mtok=carbon))
        ref = solve_problem(full, EXACT, ties=False)
        priced, searched = _price(full, monkeypatch)
        got = solve_problem(priced.problem, EXACT, ties=False)
    finally:
        monkeypatch.undo()
    assert got.has_plan == ref.has_plan
    if ref.has_plan:
        assert got.cost_per_day_usd == pytest.approx(ref.cost_per_day_usd, rel=1e-6, abs=1e-6)
    else:  # no plan: the whole table is searched, so the explanation is the full table's
        assert priced.problem.capacity == full.capacity
    # the priced table: searched entries are the true ones, the others 0, own tiers untouched
    for k, v in priced.problem.capacity.items():
        assert v == full.capacity[k] or (v == 0.0 and k not in searched)
    assert not priced.pending


def test_a_rich_tier_is_searched_only_where_the_answer_could_use_it(monkeypatch):
    # a strict chat class and many lax ones: most lax classes never ride in the chat pool
    classes = [("chat", 6.0, 120.0, 1.0)] + [(f"batch{i}", 2.0 + i, 5000.0, 1.0 + 0.2 * i)
                                             for i in range(8)]
    full = synth_problem(classes, pools=(H100, R2))
    inputs, pending = _deferred(full)
    priced, searched = _price(full, monkeypatch)
    assert len(searched) < len(pending)
    assert any(f"{len(searched)} of {len(pending)} searched" in n for n in priced.notes)
    assert solve_problem(priced.problem, EXACT).cost_per_day_usd == pytest.approx(
        solve_problem(full, EXACT).cost_per_day_usd)


def test_nothing_pending_leaves_the_inputs_alone():
    full = synth_problem([("a", 3.0, 300.0, 1.0)])
    inputs = Inputs(full, {}, {}, ())
    assert pricing_mod.price_tiers(inputs, EXACT, SerialExecutor()) is inputs


def test_used_entries_are_the_shares_on_pending_tiers():
    full = synth_problem([("chat", 6.0, 120.0, 1.0), ("batch", 30.0, 5000.0, 1.0)],
                         pools=(H100,))
    sol = solve_problem(full, EXACT)
    keys = set(full.capacity)
    used = pricing_mod.used_entries(sol, keys)
    routed = {(n, p.partition("@")[0], sol.tiers[(p, h)])
              for (n, p, h), s in sol.shares.items() if s > 0}
    assert used == routed


def _plan_json(plan) -> dict:
    d = plan.to_dict()
    d["solver"].pop("seconds")
    d["notes"] = [n for n in d["notes"] if "stricter tiers" not in n]
    d["notes_detail"] = [n for n in d["notes_detail"] if "stricter tiers" not in n["text"]]
    return d


def test_the_bundled_example_solves_as_with_the_full_table(capacity_cache_dir, monkeypatch):
    sc = load_scenario(ROOT / "examples" / "hybrid-chat-batch.yaml")
    sc = sc.with_updates(capacity={"duration_s": 60, "warmup_s": 10, "min_requests": 100},
                         sim={"duration_s": 120, "warmup_s": 20, "replications": 3})
    priced = solve(sc, executor="serial", cache_dir=capacity_cache_dir)
    import importlib

    solve_mod = importlib.import_module("fleetplan.optimize.solve")
    real = solve_mod.build_problem
    monkeypatch.setattr(solve_mod, "build_problem",
                        lambda *a, **k: real(*a, **{**k, "defer_stricter": False}))
    full = solve(sc, executor="serial", cache_dir=capacity_cache_dir)
    assert json.dumps(_plan_json(priced), sort_keys=True) == json.dumps(_plan_json(full),
                                                                         sort_keys=True)


def test_the_last_round_searches_the_whole_table(monkeypatch):
    classes = [("chat", 6.0, 120.0, 1.0)] + [(f"batch{i}", 2.0 + i, 5000.0, 1.0 + 0.2 * i)
                                             for i in range(8)]
    full = synth_problem(classes, pools=(H100, R2))
    free, _ = _price(full, monkeypatch)
    assert any("(1 pricing round)" in n for n in free.notes)  # this problem needs a round
    monkeypatch.setattr(pricing_mod, "MAX_ROUNDS", 1)
    priced, searched = _price(full, monkeypatch)
    _inputs, pending = _deferred(full)
    assert set(searched) == set(pending)  # round 1 was the last: every entry searched
    assert priced.problem.capacity == full.capacity


def test_deferred_entries_are_bounds_and_the_others_the_full_tables(capacity_cache_dir):
    from fleetplan.optimize.inputs import build_problem
    from fleetplan.optimize.problem import Tier
    from fleetplan.scenario import Scenario

    short = {"input_tokens": {"dist": "uniform", "low": 200, "high": 400},
             "output_tokens": {"dist": "uniform", "low": 100, "high": 200}}
    long = {"input_tokens": {"dist": "uniform", "low": 1500, "high": 2000},
            "output_tokens": {"dist": "uniform", "low": 100, "high": 200}}
    sc = Scenario.model_validate({
        "model": "DeepSeek-R1-Distill-Qwen-14B", "candidates": ["1xH100-PCIe"],
        "capacity": {"duration_s": 60, "warmup_s": 10, "min_requests": 100},
        "classes": [{"name": "chat", "rate_rps": 2, **short, "slo": {"ttft_p99_ms": 300}},
                    {"name": "batch", "rate_rps": 4, **short, "slo": {"ttft_p99_ms": 3000}},
                    {"name": "agent", "rate_rps": 1, **long, "slo": {"ttft_p99_ms": 3000}}]})
    deferred = build_problem(sc, executor=SerialExecutor(), cache_dir=capacity_cache_dir,
                             defer_stricter=True)
    full = build_problem(sc, executor=SerialExecutor(), cache_dir=capacity_cache_dir)
    cfg, strict, lax = "1xH100-PCIe", Tier(300.0), Tier(3000.0)
    # batch at chat's tier is chat's own search (same lengths): searched, not pending
    assert ("batch", cfg, strict) not in deferred.pending
    assert deferred.problem.capacity[("batch", cfg, strict)] == \
        full.problem.capacity[("chat", cfg, strict)]
    assert ("agent", cfg, strict) in deferred.pending  # nobody's own SLO on its lengths
    assert deferred.problem.capacity[("agent", cfg, strict)] == \
        full.problem.capacity[("agent", cfg, lax)]
    for key, value in deferred.problem.capacity.items():
        if key in deferred.pending:  # a bound: never below what the search finds
            assert value >= full.problem.capacity[key]
        else:
            assert value == full.problem.capacity[key]
