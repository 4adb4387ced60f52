"""Helpers of the optimizer tests: a synthetic, monotone capacity table for fast MILP tests, and
the random small problems the closed loop is judged on."""

from __future__ import annotations

import math
import random

import pulp

from fleetplan.optimize.problem import Demand, Limits, PlanProblem, Pool, Tier

SOLVERS = ["cbc"] + (["highs"] if "HiGHS" in pulp.listSolvers(onlyAvailable=True) else [])

# Per-replica economics of the study's hardware (alternative market prices, EU27 grid).
H100 = Pool("1xH100-PCIe", "EU27", "H100-PCIe", 1, 2.0, 350.0, 242.0, 4.3)
R2 = Pool("2xRTX-4090", "EU27", "RTX-4090", 2, 0.5, 900.0, 242.0, 6.8)
R4 = Pool("4xRTX-4090", "EU27", "RTX-4090", 4, 1.0, 1800.0, 242.0, 13.7)


def synth_capacity(config: str, lengths_scale: float, slo_ms: float) -> float:
    """A monotone capacity curve: zero below the configuration's best P99, then rising with the
    SLO and saturating (the shape the replica model shows)."""
    floor, top = {"1xH100-PCIe": (40.0, 7.0), "2xRTX-4090": (260.0, 3.5),
                  "4xRTX-4090": (180.0, 5.0)}[config]
    if slo_ms <= floor:
        return 0.0
    return top / lengths_scale * (1.0 - math.exp(-(slo_ms - floor) / (2.0 * floor)))


def synth_problem(classes: list[tuple[str, float, float, float]], pools=(H100, R2, R4),
                  limits: Limits | None = None) -> PlanProblem:
    """``classes``: (name, rate or rates, slo_ms, lengths_scale). Capacities at every tier."""
    demands = tuple(Demand(n, r if isinstance(r, tuple) else (r,), slo, None, None, 416.0 * s)
                    for n, r, slo, s in classes)
    tiers = {d.tier for d in demands}
    cap = {}
    dyn = {}
    for (name, _r, _slo, scale), d in zip(classes, demands, strict=True):
        for p in pools:
            dyn[(name, p.config)] = 20.0 * p.gpu_count
            for t in tiers:
                if t.serves(d.ttft_p99_ms, d.tpot_p99_ms):
                    cap[(name, p.config, t)] = synth_capacity(p.config, scale, t.ttft_p99_ms)
    return PlanProblem(demands, tuple(pools), cap, dyn, limits or Limits())


def highs_objective(lp_path: object) -> float:
    """Objective value of an LP file re-solved by HiGHS (skips when highspy is missing)."""
    import pytest

    highspy = pytest.importorskip("highspy")
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(lp_path))
    h.run()
    return float(h.getInfo().objective_function_value)


def random_case(seed: int) -> tuple[PlanProblem, dict[tuple[str, Tier], float]]:
    """A random small problem and its hidden truth, for judging the closed loop: one or two
    classes on the three synthetic pools, and a true capacity multiplier in [0.5, 1.4] per
    (configuration, tier). ``tests/optimize/test_loop_optimum.py`` and
    ``experiments/try_loop_paths.py`` draw the same cases from the same seed."""
    rng = random.Random(seed)
    classes = [("a", rng.uniform(2, 20), rng.choice([150.0, 300.0, 600.0]),
                rng.uniform(0.7, 1.5))]
    if rng.random() < 0.5:
        classes.append(("b", rng.uniform(2, 20), rng.choice([300.0, 2000.0]),
                        rng.uniform(0.7, 2)))
    problem = synth_problem(classes)
    # sorted: the capacity table's order follows a set of tiers, whose order differs between
    # processes (string hashing); the truths must not
    truth = {(k[1], k[2]): rng.uniform(0.5, 1.4)
             for k in sorted(problem.capacity, key=lambda k: (k[0], k[1], k[2].ttft_p99_ms))}
    return problem, truth
