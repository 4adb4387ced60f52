"""The MILP on a fixed capacity table: one shared suite every available solver must pass."""

from __future__ import annotations

import math
from dataclasses import replace

import pulp
import pytest
from optimize_helpers import H100, R2, R4, highs_objective, synth_problem

from fleetplan.errors import InputError, UnknownNameError
from fleetplan.optimize.milp import MilpStatus, build_model, solve_problem
from fleetplan.optimize.problem import CommitmentMode, Limits
from fleetplan.optimize.solvers import SolverSettings, make_solver, resolve_solver

EXACT = dict(time_limit_s=30, gap=0.0)


def _solve(problem, solver_name, **kw):
    return solve_problem(problem, SolverSettings(solver_name, **EXACT), **kw)


def _pools(sol):
    """The candidates (config@region) the plan opens, whatever their tiers."""
    return {k.partition("/")[0] for (k, _h), n in sol.counts.items() if n > 0}


def _count(sol, key, hour=0):
    """Replicas of candidate ``key`` in ``hour``, all its tiers together."""
    return sum(n for (k, h), n in sol.counts.items() if h == hour and k.partition("/")[0] == key)


def test_tight_slo_uses_only_the_pool_that_can_meet_it(solver_name):
    sol = _solve(synth_problem([("chat", 16.0, 55.0, 1.0)]), solver_name)
    assert sol.status is MilpStatus.optimal
    assert _pools(sol) == {"1xH100-PCIe@EU27"}
    cap = 7.0 * (1 - math.exp(-15 / 80))
    assert sol.counts[("1xH100-PCIe@EU27/55ms", 0)] == math.ceil(16.0 / cap)


def test_loose_slo_prefers_cheaper_capacity(solver_name):
    loose = _solve(synth_problem([("batch", 16.0, 1000.0, 1.0)]), solver_name)
    h100_only = _solve(synth_problem([("batch", 16.0, 1000.0, 1.0)], pools=(H100,)), solver_name)
    assert _pools(loose) & {"2xRTX-4090@EU27", "4xRTX-4090@EU27"}
    assert loose.cost_per_day_usd < h100_only.cost_per_day_usd


def test_mixed_classes_route_by_tier_and_beat_every_single_tier_fleet(solver_name):
    p = synth_problem([("chat", 8.0, 55.0, 1.0), ("batch", 16.0, 1000.0, 1.0)])
    mix = _solve(p, solver_name)
    for (key, h), tier in mix.tiers.items():  # a pool runs at its strictest class's SLO
        users = [d for d in p.demands if mix.shares.get((d.name, key, h), 0) > 0]
        assert tier.ttft_p99_ms == min(d.ttft_p99_ms for d in users)
    chat_pools = {k for (c, k, _h), s in mix.shares.items() if c == "chat" and s > 0}
    assert chat_pools == {"1xH100-PCIe@EU27/55ms"}
    single = _solve(replace(p, pools=(H100,)), solver_name)
    assert mix.cost_per_day_usd < single.cost_per_day_usd


def test_shares_sum_to_one_and_capacity_holds(solver_name):
    p = synth_problem([("a", 5.0, 300.0, 1.0), ("b", 9.0, 800.0, 1.5), ("c", 3.0, 60.0, 0.8)])
    sol = _solve(p, solver_name)
    for d in p.demands:
        assert sum(s for (c, _k, _h), s in sol.shares.items() if c == d.name) == pytest.approx(1)
    for (key, _h), tier in sol.tiers.items():
        pool = next(q for q in p.pools if q.key == key.partition("/")[0])
        assert key == pool.name(tier)
        load = sum(d.rates_rps[0] * sol.shares.get((d.name, key, 0), 0) / p.cap(d, pool, tier)
                   for d in p.demands if sol.shares.get((d.name, key, 0), 0) > 0)
        assert load <= sol.counts[(key, 0)] + 1e-6


def test_redundancy_adds_spare_replicas(solver_name):
    base = synth_problem([("chat", 8.0, 55.0, 1.0)])
    plain = _solve(base, solver_name)
    spare = _solve(replace(base, limits=Limits(redundancy=1)), solver_name)
    n0 = _count(plain, "1xH100-PCIe@EU27")
    assert _count(spare, "1xH100-PCIe@EU27") == n0 + 1
    assert spare.spares == {("1xH100-PCIe@EU27/55ms", 0): 1}


def test_availability_and_max_replicas_bind(solver_name):
    base = synth_problem([("batch", 16.0, 1000.0, 1.0)])
    free = _solve(base, solver_name)
    used_4090 = sum(n * (2 if "2x" in k else 4) for (k, _h), n in free.counts.items()
                    if "4090" in k)
    capped = _solve(replace(base, limits=Limits(availability={"RTX-4090": used_4090 - 2})),
                    solver_name)
    assert capped.status is MilpStatus.optimal
    gpus = sum(n * (2 if "2x" in k else 4) for (k, _h), n in capped.counts.items()
               if "4090" in k)
    assert gpus <= used_4090 - 2
    assert capped.cost_per_day_usd >= free.cost_per_day_usd
    none = replace(base, pools=(replace(R2, max_replicas=1), replace(R4, max_replicas=1)))
    assert _solve(none, solver_name).status is MilpStatus.infeasible


def test_budget_and_carbon_caps(solver_name):
    base = synth_problem([("batch", 16.0, 1000.0, 1.0)])
    free = _solve(base, solver_name)
    cost_h = free.cost_per_day_usd / 24
    assert _solve(replace(base, limits=Limits(budget_usd_per_hour=cost_h * 0.9)),
                  solver_name).status is MilpStatus.infeasible
    mtok = base.mtok_per_hour(0)
    g = free.g_co2_per_day / 24 / mtok
    green = _solve(replace(base, limits=Limits(max_g_per_mtok=g * 0.8)), solver_name)
    assert green.status is MilpStatus.optimal
    assert green.g_co2_per_day / 24 / mtok <= g * 0.8 + 1e-6
    assert green.cost_per_day_usd > free.cost_per_day_usd
    assert _pools(green) != _pools(free) or green.counts != free.counts
    kg = _solve(replace(base, limits=Limits(max_kg_per_day=free.g_co2_per_day / 1000 * 0.8)),
                solver_name)
    assert kg.g_co2_per_day / 1000 <= free.g_co2_per_day / 1000 * 0.8 + 1e-6


def test_carbon_breaks_cost_ties(solver_name):
    # two identical pools but for the grid: the same cost, the cleaner region must win
    dirty, clean = replace(H100, region="POL", grid_g_per_kwh=700.0), H100
    p = synth_problem([("chat", 8.0, 55.0, 1.0)], pools=(dirty, clean))
    sol = _solve(p, solver_name)
    assert _pools(sol) == {"1xH100-PCIe@EU27"}


PROFILE = tuple(4.0 + 12.0 * math.sin(math.pi * h / 23) ** 2 for h in range(24))


@pytest.mark.parametrize("mode", list(CommitmentMode))
def test_diurnal_modes(solver_name, mode):
    limits = Limits(commitment=mode, on_demand_price_factor=1.5)
    p = synth_problem([("chat", PROFILE, 55.0, 1.0), ("batch", tuple(r / 2 for r in PROFILE),
                                                      1000.0, 1.0)], limits=limits)
    sol = _solve(p, solver_name)
    assert sol.status is MilpStatus.optimal and sol.hours == 24
    per_pool = {}
    for (k, h), n in sol.counts.items():
        per_pool.setdefault(k, [0] * 24)[h] = n
    if mode is CommitmentMode.fixed_peak:
        assert all(len(set(v)) == 1 for v in per_pool.values())
    if mode is CommitmentMode.base_plus_on_demand:
        for k, v in per_pool.items():
            assert min(v) >= sol.base_counts.get(k, 0)
    assert sum(v for (_k, h), v in sol.counts.items() if h == 11) >= \
        sum(v for (_k, h), v in sol.counts.items() if h == 0)


def test_per_hour_is_never_dearer_than_fixed_peak_and_commitment_sits_between(solver_name):
    costs = {}
    for mode in CommitmentMode:
        p = synth_problem([("chat", PROFILE, 55.0, 1.0)],
                          limits=Limits(commitment=mode, on_demand_price_factor=1.5))
        costs[mode] = _solve(p, solver_name).cost_per_day_usd
    assert costs[CommitmentMode.per_hour] <= costs[CommitmentMode.base_plus_on_demand] + 1e-6
    assert costs[CommitmentMode.base_plus_on_demand] <= costs[CommitmentMode.fixed_peak] + 1e-6


def test_unservable_class_is_infeasible_without_a_solve(solver_name):
    p = synth_problem([("chat", 8.0, 20.0, 1.0)])
    sol = _solve(p, solver_name)
    assert sol.status is MilpStatus.infeasible and not sol.has_plan


def test_time_limit_and_gap_are_always_set():
    s = make_solver(SolverSettings("cbc", time_limit_s=7, gap=0.02))
    assert s.timeLimit == 7 and s.optionsDict.get("gapRel") == 0.02 and s.msg is False
    sol = solve_problem(synth_problem([("chat", 8.0, 55.0, 1.0)]),
                        SolverSettings("cbc", time_limit_s=7, gap=0.02))
    assert (sol.time_limit_s, sol.gap) == (7, 0.02)


def test_unknown_solver_lists_valid_names():
    with pytest.raises(UnknownNameError, match="valid: .*cbc"):
        resolve_solver("gurobee")
    with pytest.raises(InputError):
        SolverSettings("cbc", time_limit_s=0)


def test_model_round_trips_through_dict_and_lp(tmp_path, solver_name):
    p = synth_problem([("chat", 8.0, 55.0, 1.0), ("batch", 16.0, 1000.0, 1.0)])
    sol = _solve(p, solver_name)
    model = build_model(p)
    _vars, again = pulp.LpProblem.fromDict(model.prob.toDict())
    again.solve(make_solver(SolverSettings(solver_name, **EXACT)))
    cost = sum(_count(sol, q.key) * q.price_usd_per_hour for q in p.pools)
    assert pulp.value(again.objective) == pytest.approx(cost, rel=1e-3)
    lp = tmp_path / "m.lp"
    model.prob.writeLP(str(lp))
    assert highs_objective(lp) == pytest.approx(cost, rel=1e-3)


def test_inputs_are_not_mutated(solver_name):
    p = synth_problem([("chat", 8.0, 55.0, 1.0)])
    before = (dict(p.capacity), p.limits, p.pools)
    _solve(replace(p, limits=Limits(max_g_per_mtok=1.0)), solver_name)
    assert (dict(p.capacity), p.limits, p.pools) == before


def test_highs_solves_after_another_highs_instance_ran():
    highspy = pytest.importorskip("highspy")
    other = highspy.Highs()
    other.setOptionValue("output_flag", False)
    other.run()  # starts HiGHS's process-wide thread pool at its default size
    sol = _solve(synth_problem([("chat", 8.0, 55.0, 1.0)]), "highs")
    assert sol.status is MilpStatus.optimal


def test_commitment_plan_is_never_dearer_than_fixed_peak_and_its_gap_is_proven(solver_name):
    """base-plus-on-demand with eight classes over four tiers: the plan costs no more than the
    fixed-peak fleet (one of its solutions), no less than the per-hour plan (a relaxation), and
    the gap it reports is what those bounds prove (benchmarks/bench_optimize.py times the
    100-class day, where the monolithic model cannot close the gap)."""
    classes = [(f"c{i}", tuple(r * (0.5 + 0.1 * i) for r in PROFILE), slo, 0.6 + 0.15 * i)
               for i, slo in enumerate((55.0, 100.0, 300.0, 1000.0, 100.0, 300.0, 1000.0, 55.0))]
    settings = SolverSettings(solver_name, time_limit_s=2, gap=0.01)
    cost = {}
    sols = {}
    for mode in CommitmentMode:
        p = synth_problem(classes, limits=Limits(commitment=mode, on_demand_price_factor=1.5))
        sols[mode] = solve_problem(p, settings)
        assert sols[mode].has_plan, mode
        cost[mode] = sols[mode].cost_per_day_usd
    sol = sols[CommitmentMode.base_plus_on_demand]
    assert cost[CommitmentMode.base_plus_on_demand] <= cost[CommitmentMode.fixed_peak] + 1e-6
    lower = cost[CommitmentMode.per_hour] * (1 - (sols[CommitmentMode.per_hour].gap_achieved
                                                  or 0.01))
    assert cost[CommitmentMode.base_plus_on_demand] >= lower - 1e-6
    assert sol.gap_achieved is not None
    # the bound behind the reported gap is at least the per-hour one
    assert sol.cost_per_day_usd * (1 - sol.gap_achieved) >= lower - 1e-6
    if sol.status is MilpStatus.feasible:
        assert sol.gap_achieved > 0.01
    for (k, h), n in sol.counts.items():
        assert n >= sol.base_counts.get(k, 0), (k, h)


def test_a_tie_stage_stopped_by_highss_node_limit_keeps_the_cost_solves_plan(monkeypatch):
    """PuLP's HiGHS API raises KeyError(kSolutionLimit) when HiGHS stops at the tie stage's node
    limit (a per-hour instance of the scaling table in docs/optimizer.md crashed on it): the
    solve must keep the cost solve's plan, not crash; any other KeyError still propagates."""
    p = synth_problem([("chat", 8.0, 55.0, 1.0), ("batch", 16.0, 1000.0, 1.0)])
    settings = SolverSettings("cbc", time_limit_s=30, gap=0.0)
    plain = solve_problem(p, settings, ties=False)
    real = pulp.LpProblem.solve
    calls = []

    def stopped(self, solver=None, **kw):  # type: ignore[no-untyped-def]
        calls.append(solver)
        if len(calls) == 2:  # the tie stage
            raise KeyError("<HighsModelStatus.kSolutionLimit: 16>")
        return real(self, solver, **kw)

    monkeypatch.setattr(pulp.LpProblem, "solve", stopped)
    got = solve_problem(p, settings)
    assert len(calls) == 2
    assert got.status is MilpStatus.optimal
    assert got.counts == plain.counts and got.shares == plain.shares
    calls.clear()

    def broken(self, solver=None, **kw):  # type: ignore[no-untyped-def]
        calls.append(solver)
        if len(calls) == 2:
            raise KeyError("something else")
        return real(self, solver, **kw)

    monkeypatch.setattr(pulp.LpProblem, "solve", broken)
    with pytest.raises(KeyError, match="something else"):
        solve_problem(p, settings)


def test_a_share_on_a_pool_the_solution_leaves_empty_is_dropped_and_the_rest_renormalized():
    # a cold 100-class solve crashed in verification: 'classes[30].split: 1xA100-80GB@EU27/5000ms
    # names no pool of the fleet', a solver-tolerance share on a pool with zero replicas
    from fleetplan.optimize.milp_solve import _normalized, _served

    shares = {("chat", "A@EU/100ms", 0): 0.7, ("chat", "B@EU/100ms", 0): 3e-7,
              ("chat", "A@EU/100ms", 1): 1.0, ("batch", "B@EU/100ms", 1): 1.0}
    counts = {("A@EU/100ms", 0): 2, ("A@EU/100ms", 1): 2, ("B@EU/100ms", 0): 0}
    out = _normalized(_served(shares, counts))
    assert out[("chat", "A@EU/100ms", 0)] == 1.0
    assert ("chat", "B@EU/100ms", 0) not in out
    # a class with no share left on a served pool keeps what it had (nothing to move it to)
    assert out[("batch", "B@EU/100ms", 1)] == 1.0
