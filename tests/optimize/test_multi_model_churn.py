"""Churn spares on a plan of several models (issue 44): a ``reliability:`` block applies to
every model's pools, and each pool (one model's replicas) keeps its own spares.

Chat on Llama-3-8B and agents on Qwen-7B, each on RTX 4090s that fail 0.2 times per
replica-hour and are replaced after 600 s (down 1/31 of the time). Each pool's spares must be
the fewest that keep P(more than k of its replicas down) within 1%, for that pool's own working
replicas (not the fleet's together); the plan holds every SLO with its spares down, and replays
with failures on.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetplan.fleet import simulate
from fleetplan.optimize import solve
from fleetplan.scenario import load_scenario

LLAMA, QWEN = "Meta-Llama-3-8B-Instruct", "DeepSeek-R1-Distill-Qwen-7B"
SCENARIO: dict[str, Any] = {
    "models": [LLAMA, QWEN],
    "classes": [{"name": "chat", "model": LLAMA, "rate_rps": 20, "slo": {"ttft_p99_ms": 500}},
                {"name": "agent", "model": QWEN, "rate_rps": 20, "slo": {"ttft_p99_ms": 500}}],
    "candidates": ["1xRTX-4090"],
    "reliability": {"RTX-4090": {"failures_per_replica_hour": 0.2, "replace_s": 600}},
    "capacity": {"duration_s": 60, "warmup_s": 10, "seeds": 1, "min_requests": 100},
    "sim": {"duration_s": 60, "warmup_s": 10, "seed": 1, "replications": 1},
}
U = (0.2 * 600 / 3600) / (1 + 0.2 * 600 / 3600)  # = 1/31, the share of time a replica is down
QUANTILE = 0.01  # the block's default


def _tail(n: int, k: int) -> float:
    """P(Binomial(n, U) > k), summed by hand."""
    return sum(math.comb(n, j) * U ** j * (1 - U) ** (n - j) for j in range(k + 1, n + 1))


def _fewest_spares(working: int) -> int:
    return next(k for k in range(working + 1) if _tail(working + k, k) <= QUANTILE)


@pytest.fixture(scope="module")
def solved(tmp_path_factory: pytest.TempPathFactory, capacity_cache_dir: str
           ) -> tuple[Path, Any]:
    folder = tmp_path_factory.mktemp("churn")
    path = folder / "two.yaml"
    path.write_text(yaml.safe_dump(SCENARIO), encoding="utf-8")
    plan = solve(load_scenario(path), executor="serial", cache_dir=capacity_cache_dir)
    out = folder / "plan.json"
    out.write_text(json.dumps(plan.to_dict(), indent=1), encoding="utf-8")
    return out, plan


def test_each_models_pool_keeps_its_own_spares(solved: tuple[Path, Any]) -> None:
    _path, plan = solved
    assert plan.verified and all(c.met for c in plan.classes)
    assert {e.model for e in plan.fleet} == {LLAMA, QWEN}  # a pool per model
    for e in plan.fleet:
        assert e.spare is not None and e.spare > 0
        working = e.count - e.spare
        assert e.spare == _fewest_spares(working)
    # the spares are per pool: the fleet's replicas taken together would need fewer
    pooled = _fewest_spares(sum(e.count - (e.spare or 0) for e in plan.fleet))
    assert sum(e.spare or 0 for e in plan.fleet) > pooled


def test_the_working_replicas_alone_carry_each_class(solved: tuple[Path, Any]) -> None:
    _path, plan = solved
    rows = [c.to_dict() for c in plan.capacities]
    for c in plan.classes:
        (e,) = [e for e in plan.fleet if e.model == c.model]
        (cap,) = [r["capacity_rps"] for r in rows
                  if r["class"] == c.name and r["pool"] == e.pool]
        assert (e.count - (e.spare or 0)) * cap >= c.rate_rps - 1e-9


def test_the_plan_replays_with_failures_on(solved: tuple[Path, Any]) -> None:
    path, _plan = solved
    other = {**SCENARIO, "sim": {**SCENARIO["sim"], "seed": 2}}
    target = path.parent / "seed2.yaml"
    target.write_text(yaml.safe_dump(other), encoding="utf-8")
    res = simulate(load_scenario(target), plan=path)
    assert all(c.slo_met for c in res.classes)
    assert any("0.2 failures per replica-hour" in n for n in res.notes)
