"""Helpers of the optimizer tests: a synthetic, monotone capacity table for fast MILP tests."""

from __future__ import annotations

import math

import pulp

from fleetplan.optimize.problem import Demand, Limits, PlanProblem, Pool

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
