"""Infeasible scenarios: the binding constraint, its numbers, and the cheapest relaxation."""

from __future__ import annotations

from dataclasses import replace

import pytest
from optimize_helpers import synth_problem

from fleetplan.optimize.explain import explain_infeasible
from fleetplan.optimize.milp import solve_problem
from fleetplan.optimize.problem import Limits, Probe
from fleetplan.optimize.solvers import SolverSettings

S = SolverSettings("cbc", time_limit_s=30, gap=0.0)
BASE = synth_problem([("chat", 8.0, 55.0, 1.0), ("batch", 16.0, 1000.0, 1.0)])


def _feasible(problem) -> bool:
    return solve_problem(problem, S).has_plan


def test_unreachable_slo_names_the_class_the_best_candidate_and_the_relaxation():
    p = synth_problem([("chat", 8.0, 20.0, 1.0)])
    p = replace(p, probes={("chat", "1xH100-PCIe"): Probe(0.25, 27.0),
                           ("chat", "2xRTX-4090"): Probe(0.25, 240.0)}, slo_margin=0.05)
    why = explain_infeasible(p, S)
    assert why.binding == "classes[0].slo.ttft_p99_ms"
    assert why.reason == ("class chat: ttft_p99_ms 20 is below the best any candidate reaches, "
                          "27 ms on 1xH100-PCIe at 0.25 req/s with prefix_cache_hit 0 (prefill "
                          "of fresh prompts); if the prompts share cached prefixes, stating "
                          "classes[0].prefix_cache_hit lowers prefill time")
    assert "ttft_p99_ms >= 28.5" in why.relaxation
    # prompts already stated fully cached: nothing left to suggest
    cached = replace(p, demands=(replace(p.demands[0], prefix_cache_hit=1.0),))
    why = explain_infeasible(cached, S)
    assert why.reason == ("class chat: ttft_p99_ms 20 is below the best any candidate reaches, "
                          "27 ms on 1xH100-PCIe at 0.25 req/s")


def test_impossible_carbon_cap_reports_the_lowest_reachable_carbon():
    p = replace(BASE, limits=Limits(max_g_per_mtok=0.5))
    assert not _feasible(p)
    why = explain_infeasible(p, S)
    assert why.binding == "carbon.max_g_per_mtok"
    need = float(why.relaxation.split(">= ")[1].split(" ")[0])
    assert need > 0.5
    # the relaxation is enough, and (nearly) no more than enough
    assert _feasible(replace(p, limits=Limits(max_g_per_mtok=need)))
    assert not _feasible(replace(p, limits=Limits(max_g_per_mtok=need * 0.97)))


def test_budget_below_the_cheapest_plan():
    cheapest = solve_problem(BASE, S).cost_per_day_usd / 24
    why = explain_infeasible(replace(BASE, limits=Limits(budget_usd_per_hour=1.0)), S)
    assert why.binding == "budget_usd_per_hour"
    # money as money, and said to be the MILP's figure before any simulation: the closed loop
    # may need more replicas than one replica's measured capacity asks for
    from fleetplan._notes import usd

    assert f"{usd(cheapest)}/h at the capacities one replica was measured to carry" in why.reason
    assert "not simulated" in why.reason


@pytest.mark.parametrize("limits, binding", [
    (Limits(availability={"H100-PCIe": 1}), "availability H100-PCIe"),
    (Limits(redundancy=3, availability={"H100-PCIe": 9}), "redundancy"),
])
def test_availability_and_redundancy(limits, binding):
    p = replace(BASE, limits=limits)
    assert not _feasible(p)
    why = explain_infeasible(p, S)
    assert why.binding == binding
    assert "cheapest such plan" in why.relaxation


def test_cheapest_relaxation_wins_among_several():
    # either more H100s or a looser budget would do; the explanation names the cheaper way
    free = solve_problem(BASE, S).cost_per_day_usd / 24
    p = replace(BASE, limits=Limits(availability={"H100-PCIe": 2},
                                    budget_usd_per_hour=free * 2))
    why = explain_infeasible(p, S)
    assert why.binding == "availability H100-PCIe"


def _relaxed_to(relaxation: str, field: str) -> float:
    """The number a relaxation names for ``field`` (``field >= X``)."""
    part = next(p for p in relaxation.split(", ") if p.startswith(f"{field} >= "))
    return float(part.split(">= ")[1].split(" ")[0].lstrip("$").rstrip("/h"))


def test_the_budget_relaxation_is_enough_and_barely():
    p = replace(BASE, limits=Limits(budget_usd_per_hour=5.0))
    assert not _feasible(p)
    why = explain_infeasible(p, S)
    need = _relaxed_to(why.relaxation, "budget_usd_per_hour")
    assert _feasible(replace(p, limits=Limits(budget_usd_per_hour=need)))
    assert not _feasible(replace(p, limits=Limits(budget_usd_per_hour=need * 0.99)))


def test_the_availability_relaxation_is_enough_and_one_gpu_less_is_not():
    p = replace(BASE, limits=Limits(availability={"H100-PCIe": 2}))
    why = explain_infeasible(p, S)
    need = _relaxed_to(why.relaxation, "availability H100-PCIe")
    assert need == int(need) and need > 2
    assert _feasible(replace(p, limits=Limits(availability={"H100-PCIe": int(need)})))
    assert not _feasible(replace(p, limits=Limits(availability={"H100-PCIe": int(need) - 1})))


def _result(cap: float, probe_rate: float, probe_ttft: float):
    from fleetplan.optimize.capacity import CapacityResult, PointStats

    at = PointStats(cap, probe_ttft * 1.02, 20.0, 900.0, True, 0.5, cap)
    probe = PointStats(probe_rate, probe_ttft, 20.0, 900.0, True, 0.1, probe_rate)
    return CapacityResult(cap, at, None, probe, 5)


@pytest.mark.parametrize(("lone_ms", "named"), [(93.0, True), (91.0, True), (60.0, False)])
def test_an_unverified_plan_names_a_class_its_replicas_barely_serve_alone(lone_ms, named):
    """A class that misses its SLO in simulation although a lone replica at the lowest load its
    search passed is within 10% of that SLO is named, with the configuration and the figures:
    no replica count fixes it in a shared pool. A class with room is not."""
    from fleetplan.optimize.explain import near_floor_notes
    from fleetplan.optimize.verify import ClassCheck, HourCheck

    p = synth_problem([("chat", 8.0, 100.0, 1.0), ("batch", 16.0, 1000.0, 1.0)])
    sol = solve_problem(p, S)
    results = {}
    for (name, pool, h), share in sol.shares.items():
        if share > 0:
            config, tier = pool.partition("@")[0], sol.tiers[(pool, h)]
            ms = lone_ms if name == "chat" else 300.0
            results[(name, config, tier)] = _result(3.0, 0.03125, ms)
    checks = [HourCheck(0, (ClassCheck("chat", 106.4, None, None, False),
                            ClassCheck("batch", 800.0, None, None, True)), False, 0.0, 0.0)]
    notes = near_floor_notes(p, results, sol, checks)
    if not named:
        assert notes == []
        return
    (note,) = notes
    config = next(pool.partition("@")[0] for (n, pool, _h), s in sol.shares.items()
                  if n == "chat" and s > 0)
    assert note.startswith("class chat: simulated P99 TTFT 106 ms against its SLO 100 ms")
    assert f"alone on one {config} replica at 0.03125 req/s" in note
    assert f"reaches {lone_ms:.0f} ms ({lone_ms:.0f}% of the SLO)" in note
