"""Frontiers (library), executors (serial, local processes, Dask) and a diurnal plan."""

from __future__ import annotations

import json

import pytest

from fleetplan.errors import InputError, UnknownNameError
from fleetplan.optimize import PlanStatus, frontier, solve
from fleetplan.optimize.executors import LocalExecutor, SerialExecutor, get_executor
from fleetplan.scenario import scenario_from_dict

BASE = {
    "model": "DeepSeek-R1-Distill-Qwen-14B",
    "sim": {"duration_s": 240, "warmup_s": 60, "seed": 7, "replications": 2},
    "capacity": {"duration_s": 120, "warmup_s": 30, "min_requests": 300, "seeds": 2},
}
LOOSE = scenario_from_dict({**BASE, "classes": [
    {"name": "chat", "rate_rps": 16, "slo": {"ttft_p99_ms": 1000}}]})


def _square(x: int) -> int:
    return x * x


def test_executors_keep_input_order():
    items = list(range(7))
    assert SerialExecutor().map(_square, items) == LocalExecutor(2).map(_square, items) \
        == [x * x for x in items]
    assert isinstance(get_executor("local:3"), LocalExecutor)
    with pytest.raises(UnknownNameError, match="valid: .*serial"):
        get_executor("cloud")
    with pytest.raises(InputError):
        get_executor("local:x")


def test_frontier_sweeps(capacity_cache_dir):
    kw = dict(points=3, scheduler="serial", cache_dir=capacity_cache_dir, max_rounds=1)
    carbon = frontier(LOOSE, "carbon", **kw)
    assert [p.value for p in carbon.points] == sorted(p.value for p in carbon.points)
    costs = [p.plan.cost_per_hour_usd for p in carbon.points
             if p.plan.status is not PlanStatus.infeasible]
    assert costs == sorted(costs, reverse=True)  # a looser cap never costs more
    for p in carbon.points:
        if p.plan.verified:
            assert p.plan.g_co2_per_mtok <= p.value * 1.000001
    df = carbon.to_frame()
    assert list(df.columns)[:6] == ["value", "status", "verified", "cost_per_hour_usd",
                                    "cost_per_mtok_usd", "g_co2_per_mtok"]
    assert df["pareto"].any()
    ax = carbon.plot()
    assert ax.get_xlabel() and ax.get_ylabel()
    rate = frontier(LOOSE, "rate", lo=0.5, hi=1.0, **{**kw, "points": 2})
    low, high = (p.plan.cost_per_hour_usd for p in rate.points)
    assert low <= high  # more traffic never costs less
    with pytest.raises(InputError, match="valid sweeps"):
        frontier(LOOSE, "latency")


def test_frontier_on_a_local_dask_cluster_matches_local_processes(capacity_cache_dir):
    distributed = pytest.importorskip("distributed")
    kw = dict(points=2, cache_dir=capacity_cache_dir, max_rounds=1)
    local = frontier(LOOSE, "carbon", scheduler=None, **kw)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        by_address = frontier(LOOSE, "carbon", scheduler=cluster.scheduler_address, **kw)
        with distributed.Client(cluster) as client:
            assert get_executor(client).map(_square, [3, 4]) == [9, 16]
    assert json.dumps(by_address.to_dict(timing=False)) == json.dumps(
        local.to_dict(timing=False))


def test_diurnal_per_hour_plan(capacity_cache_dir):
    # The day rate is well beyond one replica's capacity at 1 s on any candidate, whatever the
    # calibration; the night rate fits on one.
    profile = [1.0 + 15.0 * (1 if 9 <= h < 18 else 0) for h in range(24)]
    sc = scenario_from_dict({**BASE, "sim": {**BASE["sim"], "duration_s": 180, "warmup_s": 40},
                             "classes": [
        {"name": "chat", "rate_profile_rps": profile, "slo": {"ttft_p99_ms": 1000}}]})
    plan = solve(sc, executor="local:2", cache_dir=capacity_cache_dir, max_rounds=3,
                 max_trims=0)
    assert plan.verified and plan.hours is not None and len(plan.hours) == 24
    night, day = plan.hours[0], plan.hours[12]
    assert sum(e.count for e in night.fleet) <= sum(e.count for e in day.fleet)
    assert night.cost_per_hour_usd < day.cost_per_hour_usd
    assert plan.cost_per_hour_usd == pytest.approx(
        sum(h.cost_per_hour_usd for h in plan.hours) / 24, rel=1e-6)
    assert all(h.met for h in plan.hours)
    out = plan.to_dict()
    assert len(out["hours"]) == 24 and {"hour", "fleet", "cost_per_hour_usd"} <= set(
        out["hours"][0])


def test_a_class_of_one_rate_beside_a_diurnal_one_runs_at_it_every_hour(capacity_cache_dir):
    """A planner's day: chat follows the clock, batch runs at 2 req/s all day. The constant
    class is planned at its rate in every hour (it was refused: 'every class needs one rate,
    or all need 24 hourly rates')."""
    from fleetplan.optimize.inputs import build_problem

    profile = [1.0 + 15.0 * (1 if 9 <= h < 18 else 0) for h in range(24)]
    sc = scenario_from_dict({**BASE, "classes": [
        {"name": "chat", "rate_profile_rps": profile, "slo": {"ttft_p99_ms": 1000}},
        {"name": "batch", "rate_rps": 2.0, "slo": {"ttft_p99_ms": 10000}}]})
    problem = build_problem(sc, cache_dir=capacity_cache_dir).problem
    assert problem.hours == 24
    chat, batch = problem.demands
    assert chat.rates_rps == tuple(profile) and batch.rates_rps == (2.0,) * 24


def test_a_one_point_carbon_range_is_one_solve_not_repeated_points():
    from fleetplan.optimize.frontier import _factors

    assert _factors(37.9, 37.9, 4, geometric=False) == [37.9]
    assert len(_factors(10.0, 40.0, 4, geometric=False)) == 4


def test_a_sweep_with_nothing_to_trade_is_one_point_that_says_why(capacity_cache_dir):
    """One candidate: the cheapest plan is the lowest-carbon one, so a carbon sweep asked for
    four points has one, and its notes (JSON and the table's note line) say why."""
    one = scenario_from_dict({**BASE, "candidates": ["1xH100-PCIe"],
                              "classes": [{"name": "chat", "rate_rps": 16,
                                           "slo": {"ttft_p99_ms": 1000}}]})
    front = frontier(one, "carbon", points=4, scheduler="serial", cache_dir=capacity_cache_dir,
                     max_rounds=1)
    assert len(front.points) == 1
    (note,) = front.notes
    assert note.startswith("one point, not 4: the cheapest plan is also the lowest-carbon one")
    assert front.to_dict(timing=False)["notes"] == [note]
    assert len(frontier(LOOSE, "rate", lo=1.0, hi=1.0, points=2, scheduler="serial",
                        cache_dir=capacity_cache_dir, max_rounds=1).notes) == 1
    above = frontier(one, "carbon", points=4, lo=1000.0, scheduler="serial",
                     cache_dir=capacity_cache_dir, max_rounds=1)
    assert [p.value for p in above.points] == [1000.0]
    assert above.notes[0].startswith("one point, not 4: --lo 1000 is at or above the sweep's end")
    with pytest.raises(InputError, match="sweep range"):  # a range that runs backwards
        frontier(one, "carbon", points=4, lo=5.0, hi=2.0, scheduler="serial",
                 cache_dir=capacity_cache_dir, max_rounds=1)


def test_infeasible_points_say_why_once_per_binding_constraint():
    """The table shows only "infeasible": the frontier's notes name the points each binding
    constraint leaves without a plan, the first one's reason and its cheapest relaxation."""
    from fleetplan.optimize.frontier import _infeasible_notes
    from fleetplan.optimize.plan import ClassResult, Plan, PlanStatus, SolverReport

    report = SolverReport("cbc", "infeasible", 0.1, 0.01, 1, 10.0, None)

    def plan(binding: str, reason: str) -> Plan:
        return Plan(PlanStatus.infeasible, (), None, None, None,
                    (ClassResult("chat", 4.0, 10.0, None, False, {}),), report, False,
                    reason=reason, binding=binding, relaxation=f"raise {binding}")

    pairs = [(0.5, plan("availability", "1 GPU is not enough at 0.5")),
             (0.75, plan("availability", "1 GPU is not enough at 0.75")),
             (0.99, plan("classes[0].slo", "no candidate meets chat's SLO"))]
    notes = _infeasible_notes(pairs, "confidence")
    assert notes == [
        "no plan at confidence 0.5, 0.75: 1 GPU is not enough at 0.5 (at 0.5); cheapest "
        "relaxation: raise availability",
        "no plan at confidence 0.99: no candidate meets chat's SLO; cheapest relaxation: raise "
        "classes[0].slo"]


def test_a_carbon_sweep_ends_at_the_plan_solve_verifies_without_a_cap(capacity_cache_dir):
    """The bundled example: the MILP's cheapest first answer is two H100s (5.3 g CO2e/Mtok), but
    the closed loop verifies one H100 and three RTX 4090 pairs, cheaper and dirtier. The sweep
    runs up to that plan's simulated carbon, so its loosest point is solve's answer and no
    point is dearer than solve without a cap."""
    from pathlib import Path

    from fleetplan.scenario import load_scenario

    sc = load_scenario(Path(__file__).resolve().parents[2] / "examples" / "hybrid-chat-batch.yaml")
    free = solve(sc.with_updates(carbon=None), cache_dir=capacity_cache_dir)
    assert free.verified
    fr = frontier(sc, "carbon", points=3, cache_dir=capacity_cache_dir)
    top = fr.points[-1]
    assert top.value == pytest.approx(free.g_co2_per_mtok, rel=1e-5)
    assert top.plan.verified and top.plan.cost_per_hour_usd == free.cost_per_hour_usd
    assert min(p.value for p in fr.points) < free.g_co2_per_mtok  # a real range below it
    for p in fr.points:
        if p.plan.verified:
            assert p.plan.g_co2_per_mtok <= p.value * 1.000001
            assert p.plan.cost_per_hour_usd >= free.cost_per_hour_usd - 1e-9
