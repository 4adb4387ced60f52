"""Pools per SLO tier (issue 10): several tiers of one configuration in one region, the MILP
against brute force on the same capacity table, lexicographic ties, and plans that replay.

The brute force below knows nothing of the MILP: it enumerates every fleet (replicas per
candidate x class-SLO tier, no tier pruned) up to a cost bound, and for each solves the traffic
split as a small LP (scipy's HiGHS) for the least carbon.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from optimize_helpers import H100, R2, synth_problem
from scipy.optimize import linprog

from fleetplan.optimize.milp import MilpStatus, solve_problem
from fleetplan.optimize.problem import Demand, Limits, PlanProblem, Tier
from fleetplan.optimize.solvers import SolverSettings

EXACT = SolverSettings("cbc", time_limit_s=30, gap=0.0)
ROOT = Path(__file__).resolve().parents[2]
FAST_CAPACITY = {"duration_s": 120, "warmup_s": 30, "min_requests": 300, "seeds": 2}
FAST_SIM = {"duration_s": 240, "warmup_s": 60, "seed": 7, "replications": 2}


# ---------------------------------------------------------------------------- brute force
def _split_carbon(problem: PlanProblem, fleet: dict[tuple[int, Tier], int]) -> float | None:
    """Least dynamic carbon (g/h) of a split that fits ``fleet``; None when none fits."""
    pairs = [(k, t) for (k, t), n in fleet.items() if n > 0]
    var = [(c, j) for c, d in enumerate(problem.demands) for j, (k, t) in enumerate(pairs)
           if problem.cap(d, problem.pools[k], t) > 0]
    if any(not any(c == cc for cc, _ in var) for c in range(len(problem.demands))):
        return None
    cost = []
    for c, j in var:
        d, (k, _t) = problem.demands[c], pairs[j]
        pool = problem.pools[k]
        w = problem.dyn_w_per_rps.get((d.name, pool.config), 0.0)
        cost.append(d.rates_rps[0] * w / 1000.0 * pool.grid_g_per_kwh)
    a_eq = np.zeros((len(problem.demands), len(var)))
    a_ub = np.zeros((len(pairs), len(var)))
    for i, (c, j) in enumerate(var):
        d, (k, t) = problem.demands[c], pairs[j]
        a_eq[c, i] = 1.0
        a_ub[j, i] = d.rates_rps[0] / problem.cap(d, problem.pools[k], t)
    res = linprog(cost, A_ub=a_ub, b_ub=[fleet[p] + 1e-9 for p in pairs], A_eq=a_eq,
                  b_eq=np.ones(len(problem.demands)), bounds=(0, 1), method="highs")
    return float(res.fun) if res.status == 0 else None


def brute_force(problem: PlanProblem, max_cost: float) -> tuple[float, float, int] | None:
    """(cost $/h, carbon g/h, replicas) of the lexicographic optimum over every fleet that
    costs at most ``max_cost``; None when no such fleet serves every class."""
    pools = [(k, t) for k in range(len(problem.pools)) for t in problem.tiers
             if any(problem.cap(d, problem.pools[k], t) > 0 for d in problem.demands)]
    most = [math.ceil(sum(d.rates_rps[0] / c for d in problem.demands
                          if (c := problem.cap(d, problem.pools[k], t)) > 0) - 1e-9)
            for k, t in pools]
    best: tuple[float, float, int] | None = None

    def visit(i: int, left: float, fleet: dict[tuple[int, Tier], int]) -> None:
        nonlocal best
        if i == len(pools):
            dyn = _split_carbon(problem, fleet)
            if dyn is None:
                return
            cost = sum(problem.pools[k].price_usd_per_hour * n for (k, _t), n in fleet.items())
            g = dyn + sum(problem.pools[k].idle_g_per_hour * n for (k, _t), n in fleet.items())
            key = (round(cost, 9), round(g, 6), sum(fleet.values()))
            if best is None or key < best:
                best = key
            return
        k, t = pools[i]
        price = problem.pools[k].price_usd_per_hour
        for n in range(min(most[i], int(left / price + 1e-9)) + 1):
            fleet[(k, t)] = n
            visit(i + 1, left - n * price, fleet)
        del fleet[(k, t)]

    visit(0, max_cost + 1e-9, {})
    return best


def _milp(problem: PlanProblem) -> tuple[float, float, int]:
    sol = solve_problem(problem, EXACT)
    assert sol.status is MilpStatus.optimal
    return (sol.cost_per_day_usd / 24, sol.g_co2_per_day / 24,
            sum(n for (_k, _h), n in sol.counts.items()))


def _random_problem(seed: int) -> PlanProblem:
    rng = random.Random(seed)
    pools = (replace(H100, price_usd_per_hour=rng.choice([1.0, 2.0])),
             replace(R2, price_usd_per_hour=rng.choice([0.5, 1.0]),
                     grid_g_per_kwh=rng.choice([50.0, 242.0, 700.0])))
    slos = sorted(rng.sample([100.0, 300.0, 1000.0, 3000.0], rng.choice([2, 3])))
    demands = tuple(Demand(f"c{i}", (round(rng.uniform(0.5, 5.0), 2),), slo)
                    for i, slo in enumerate(slos))
    tiers = sorted({d.tier for d in demands})
    cap, dyn = {}, {}
    for d in demands:
        for p in pools:
            dyn[(d.name, p.config)] = rng.choice([0.0, 15.0, 60.0])
            c = 0.0
            for t in tiers:  # capacity grows (or stays: ties exercise the pruning) with the SLO
                if t.serves(d.ttft_p99_ms, None):
                    c = c if rng.random() < 0.3 else c + rng.choice([0.0, 0.8, 1.5, 3.0])
                    if c > 0:
                        cap[(d.name, p.config, t)] = c
    return PlanProblem(demands, pools, cap, dyn)


@pytest.mark.parametrize("seed", range(8))
def test_milp_equals_the_brute_force_optimum_on_tiny_random_problems(seed):
    problem = _random_problem(seed)
    sol = solve_problem(problem, EXACT)
    if not sol.has_plan:
        assert brute_force(problem, 40.0) is None
        return
    cost, g, replicas = _milp(problem)
    best = brute_force(problem, cost)
    assert best is not None
    assert cost == pytest.approx(best[0], abs=1e-6), (seed, cost, best)
    assert g == pytest.approx(best[1], rel=1e-6, abs=1e-6), (seed, g, best)
    assert replicas == best[2], (seed, replicas, best)


def test_bundled_example_has_no_cleaner_plan_of_equal_cost(capacity_cache_dir):
    """The bundled example on its own capacity table (short capacity runs): the MILP's plan is
    the cheapest, and no fleet of that cost has less carbon."""
    from fleetplan.optimize.inputs import build_problem
    from fleetplan.scenario import CapacitySettings, load_scenario

    sc = load_scenario(ROOT / "examples" / "hybrid-chat-batch.yaml")
    problem = build_problem(sc, settings=CapacitySettings(**FAST_CAPACITY),
                            cache_dir=capacity_cache_dir).problem
    cost, g, replicas = _milp(problem)
    best = brute_force(problem, cost)
    assert best is not None
    assert cost == pytest.approx(best[0], abs=1e-6)
    assert g == pytest.approx(best[1], rel=1e-6)
    assert replicas == best[2]


# ---------------------------------------------------------------------------- tiers
def test_one_configuration_runs_two_tiers_in_one_region():
    """H100 is the only candidate: chat (55 ms) and batch (1000 ms) each get an H100 pool at
    their own tier, cheaper than holding every H100 to the chat SLO."""
    p = synth_problem([("chat", 8.0, 55.0, 1.0), ("batch", 16.0, 1000.0, 1.0)], pools=(H100,))
    sol = solve_problem(p, EXACT)
    assert {k for (k, _h) in sol.counts} == {"1xH100-PCIe@EU27/55ms", "1xH100-PCIe@EU27/1000ms"}
    strict = replace(p, open_pools=frozenset({"1xH100-PCIe@EU27/55ms"}))
    assert sol.cost_per_day_usd < solve_problem(strict, EXACT).cost_per_day_usd


def test_a_tier_dominated_by_a_stricter_one_is_pruned():
    """batch has the same capacity at 300 ms as at 1000 ms on the H100: the 1000 ms H100 pool is
    never needed; on the RTX pair (no capacity at 300 ms) the 1000 ms tier stays."""
    d = (Demand("chat", (2.0,), 300.0), Demand("batch", (4.0,), 1000.0))
    t300, t1000 = Tier(300.0), Tier(1000.0)
    cap = {("chat", H100.config, t300): 3.0, ("batch", H100.config, t300): 5.0,
           ("batch", H100.config, t1000): 5.0, ("batch", R2.config, t1000): 2.0}
    p = PlanProblem(d, (H100, R2), cap)
    assert p.tier_pairs() == {0: [0], 1: [1]}
    bigger = replace(p, capacity={**cap, ("batch", H100.config, t1000): 5.5})
    assert bigger.tier_pairs() == {0: [0, 1], 1: [1]}


def test_redundancy_and_availability_count_every_tier_of_a_candidate():
    p = synth_problem([("chat", 8.0, 55.0, 1.0), ("batch", 16.0, 1000.0, 1.0)], pools=(H100,))
    free = solve_problem(p, EXACT)
    n = sum(free.counts.values())
    spare = solve_problem(replace(p, limits=Limits(redundancy=1)), EXACT)
    assert sum(spare.counts.values()) == n + 1  # one spare for the candidate, not per tier
    assert sum(spare.spares.values()) == 1
    capped = solve_problem(replace(p, limits=Limits(availability={"H100-PCIe": n - 1})), EXACT)
    assert capped.status is MilpStatus.infeasible


def test_ties_prefer_less_carbon_then_fewer_replicas_never_a_dearer_plan():
    """Two regions at one price: the cleaner grid wins; and the tie stages never raise cost."""
    dirty = replace(H100, region="POL", grid_g_per_kwh=700.0)
    p = synth_problem([("chat", 8.0, 55.0, 1.0), ("batch", 16.0, 1000.0, 1.0)],
                      pools=(dirty, H100, R2))
    plain = solve_problem(p, EXACT, ties=False)
    tied = solve_problem(p, EXACT)
    assert tied.cost_per_day_usd <= plain.cost_per_day_usd + 1e-9
    assert tied.g_co2_per_day <= plain.g_co2_per_day + 1e-6
    assert not any(k.startswith("1xH100-PCIe@POL") for (k, _h) in tied.counts)


# ---------------------------------------------------------------------------- the case
THREE = {
    "model": "DeepSeek-R1-Distill-Qwen-14B",
    "classes": [
        {"name": "chat", "rate_rps": 10, "slo": {"ttft_p99_ms": 200}},
        {"name": "agent", "rate_rps": 5, "slo": {"ttft_p99_ms": 500},
         "input_tokens": {"dist": "lognormal", "mean": 2000, "cv": 0.5, "max": 6000},
         "output_tokens": {"dist": "lognormal", "mean": 200, "cv": 0.8, "max": 1000}},
        {"name": "batch", "rate_rps": 20, "slo": {"ttft_p99_ms": 5000}},
    ],
    "carbon": {"max_g_per_mtok": 20},
    "market": "alternative",
    "grid_g_per_kwh": {"EU27": 242},
    "sim": FAST_SIM,
    "capacity": FAST_CAPACITY,
}


@pytest.fixture
def three(tmp_path, monkeypatch, capacity_cache_dir):
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", capacity_cache_dir)
    path = tmp_path / "three.yaml"
    path.write_text(yaml.safe_dump(THREE))
    return path


def test_three_classes_in_one_region_solve_verify_and_replay_on_another_seed(cli, three,
                                                                             tmp_path):
    out = tmp_path / "plan.json"
    res = cli("solve", str(three), "--format", "json", "--no-timing", "--out", str(out))
    assert res.exit_code == 0, res.stderr
    assert out.read_text() == res.stdout  # --out holds what --format json prints
    plan = json.loads(res.stdout)
    assert plan["status"] in ("optimal", "feasible") and plan["verified"] is True
    assert {e["region"] for e in plan["fleet"]} == {"EU27"}
    assert all(c["met"] for c in plan["classes"])
    assert plan["g_co2_per_mtok"] <= 20
    pools = [e["pool"] for e in plan["fleet"]]
    assert len(set(pools)) == len(pools)
    for c in plan["classes"]:
        assert set(c["split"]) <= set(pools)
        assert sum(c["split"].values()) == pytest.approx(1.0)
    again = cli("simulate", str(three), "--plan", str(out), "--seed", "11", "--format", "json")
    assert again.exit_code == 0, again.stderr
    sim = json.loads(again.stdout)
    assert sim["routing"] == "planned" and sim["seed"] == 11
    assert sorted((p["label"], p["count"]) for p in sim["pools"]) == sorted(
        (e["pool"], e["count"]) for e in plan["fleet"])
    assert all(c["slo_met"] for c in sim["classes"]), [
        (c["name"], c["ttft_p99_ms"]) for c in sim["classes"]]


# ---------------------------------------------------------------------------- plan files
def _plan(split=None, config="1xH100-PCIe"):
    return {
        "status": "optimal",
        "fleet": [{"pool": f"{config}@EU27/150ms", "config": config, "region": "EU27",
                   "tier_ttft_p99_ms": 150, "count": 2},
                  {"pool": "2xRTX-4090@EU27/2000ms", "config": "2xRTX-4090", "region": "EU27",
                   "tier_ttft_p99_ms": 2000, "count": 3}],
        "cost_per_hour_usd": 5.5, "cost_per_mtok_usd": 0.1, "g_co2_per_mtok": 10.0,
        "classes": [
            {"name": "chat", "rate_rps": 4, "slo_ttft_p99_ms": 150, "ttft_p99_ms": 100,
             "met": True, "split": {f"{config}@EU27/150ms": 1.0}},
            {"name": "batch", "rate_rps": 6, "slo_ttft_p99_ms": 2000, "ttft_p99_ms": 900,
             "met": True, "split": split or {"2xRTX-4090@EU27/2000ms": 1.0}}],
        "solver": {"name": "cbc", "status": "optimal", "seconds": None, "gap": 0.01,
                   "rounds": 1, "time_limit_s": 10, "gap_achieved": None},
        "verified": True, "capacities": [], "notes": [],
    }


def _scenario(tmp_path):
    data = yaml.safe_load((ROOT / "examples" / "hybrid-chat-batch.yaml").read_text())
    data.update(sim={"duration_s": 60, "warmup_s": 10, "seed": 3, "replications": 1},
                candidates=["1xH100-PCIe", "2xRTX-4090"])
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_simulate_plan_follows_its_pools_and_split_or_another_router(cli, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(_plan()))
    sc = _scenario(tmp_path)
    res = cli("simulate", sc, "--plan", str(plan), "--format", "json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["routing"] == "planned"
    labels = {p["label"]: p for p in out["pools"]}
    assert set(labels) == {"1xH100-PCIe@EU27/150ms", "2xRTX-4090@EU27/2000ms"}
    # the split is followed: chat only on the H100 pool, batch only on the RTX pool
    assert labels["1xH100-PCIe@EU27/150ms"]["requests"] > 0
    chat, batch = out["classes"]
    assert chat["requests"] + batch["requests"] == sum(p["requests"] for p in out["pools"])
    other = cli("simulate", sc, "--plan", str(plan), "--routing", "least-outstanding",
                "--format", "json")
    assert other.exit_code == 0, other.stderr
    assert json.loads(other.stdout)["routing"] == "least-outstanding"


@pytest.mark.parametrize("content, expect", [
    (None, "no such plan file"),
    ("{not json", "not JSON (line 1"),
    (_plan(config="1xA100-80GB"), "fleet[0].config: 1xA100-80GB is not a candidate"),
    (_plan(split={"2xRTX-4090@EU27/2000ms": 0.7}),
     'classes[1].split = {"2xRTX-4090@EU27/2000ms": 0.7}: expected shares summing to 1 (they sum '
     'to 0.7)'),
    (_plan(split={"2xRTX-4090@EU27/999ms": 1.0}),
     'classes[1].split = "2xRTX-4090@EU27/999ms": expected a pool of the fleet'),
    ({**_plan(), "classes": _plan()["classes"] + _plan()["classes"][:1]},
     "classes[2].name = 'chat': repeated"),
    ({**_plan(), "fleet": [_plan()["fleet"][0], {**_plan()["fleet"][1], "count": 10**9}]},
     "fleet[1].count = 1000000000: expected a whole number within 1..100,000"),
])
def test_a_bad_plan_file_is_one_line_naming_file_field_and_value(cli, tmp_path, content, expect):
    plan = tmp_path / "plan.json"
    if content is not None:
        plan.write_text(content if isinstance(content, str) else json.dumps(content))
    res = cli("simulate", _scenario(tmp_path), "--plan", str(plan))
    assert res.exit_code == 2
    line = res.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert f"{plan}: " in line and expect in line, line


def test_simulate_accepts_a_plan_object(tmp_path):
    from fleetplan import simulate
    from fleetplan.optimize.plan import Plan
    from fleetplan.scenario import load_scenario

    plan = Plan.from_dict(_plan())
    res = simulate(load_scenario(_scenario(tmp_path)), plan=plan)
    assert {p.label for p in res.pools} == {e.pool for e in plan.fleet}
    assert res.routing == "planned"


@pytest.mark.parametrize("first", ["dirty", "clean"])
def test_a_large_models_tie_stage_keeps_the_fleet_and_only_resplits(monkeypatch, first):
    """Above TIE_FULL_MAX_INTEGERS integer variables the tie stage is an LP on the cost solve's
    fleet: the same replicas and cost, no more carbon than that solve's own split, and never
    cleaner than the full tie stage, which may change the fleet."""
    from fleetplan.optimize import milp_solve

    dirty = replace(H100, region="POL", grid_g_per_kwh=700.0)
    pools = (dirty, H100, R2) if first == "dirty" else (H100, dirty, R2)
    p = synth_problem([("chat", 8.0, 55.0, 1.0), ("batch", 16.0, 1000.0, 1.0)], pools=pools)
    plain = solve_problem(p, EXACT, ties=False)
    full = solve_problem(p, EXACT)
    monkeypatch.setattr(milp_solve, "TIE_FULL_MAX_INTEGERS", 0)
    kept = solve_problem(p, EXACT)
    assert kept.counts == plain.counts
    assert kept.cost_per_day_usd == pytest.approx(plain.cost_per_day_usd, rel=1e-12)
    assert kept.g_co2_per_day <= plain.g_co2_per_day + 1e-6
    assert full.g_co2_per_day <= kept.g_co2_per_day + 1e-6
