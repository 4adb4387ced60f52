"""Fleet energy that follows the work (scenario ``power: {model: activity}``, the default).

Bounds from the cited measurements (data/README.md, fleetplan/replica/power.py): a GPU serving
an LLM draws more as its batches grow (ML.ENERGY v3.0: ~300 W at batch 1, ~600 W at batch 128
of 700 W), never above TDP, and utilization alone moves energy per token by 3-5x.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fleet_cases import base_dict

from fleetplan.catalog import bundled_catalog
from fleetplan.fleet import simulate
from fleetplan.replica.power import F_LOW
from fleetplan.scenario import Scenario, load_scenario, scenario_from_dict

EXAMPLE = Path(__file__).parents[2] / "examples" / "hybrid-chat-batch.yaml"


def _one_h100(rate: float, model: str = "activity", **over: Any) -> Scenario:
    d = base_dict(fleet=[{"config": "1xH100-PCIe", "count": 1}], power={"model": model},
                  sim={"duration_s": 60, "warmup_s": 10, "seed": 5, "replications": 1}, **over)
    cls = {k: v for k, v in d["classes"][0].items() if k != "slo"}
    d["classes"] = [{**cls, "rate_rps": rate}]
    return scenario_from_dict(d)


def test_energy_per_token_of_a_pool_falls_as_its_load_rises() -> None:
    gpu = bundled_catalog().gpu("H100-PCIe")
    # its capacity: what the pool completes per second when overloaded
    flood = simulate(_one_h100(200.0))
    assert flood.overloaded
    cap = flood.pools[0].completed_rps
    watts, per_token = [], []
    for share in (0.1, 0.5, 1.0):
        res = simulate(_one_h100(share * cap))
        pool = res.pools[0]
        assert pool.utilization > 0.9  # continuous batching: busy whatever the load
        # every step of at least one token draws at least the batch-1 share; at most TDP
        assert gpu.idle_w + (gpu.tdp_w - gpu.idle_w) * F_LOW * pool.utilization * 0.999 \
            <= pool.power_w <= gpu.tdp_w
        watts.append(pool.power_w)
        per_token.append(pool.power_w / res.to_dict()["tokens_per_s"])
    assert watts[0] < watts[1] < watts[2]
    assert watts[2] / watts[0] < 700 / 300  # no more than the batch-1 to batch-128 rise
    assert per_token[0] > per_token[1] > per_token[2]
    assert per_token[0] / per_token[2] >= 3  # ML.ENERGY: 3-5x from utilization alone
    # the study's assumption (every GPU at TDP whenever it serves) is the upper bound
    tdp = simulate(_one_h100(0.1 * cap, "tdp")).pools[0]
    assert tdp.power_w == pytest.approx(gpu.idle_w + (gpu.tdp_w - gpu.idle_w) * tdp.utilization)
    assert watts[0] < 0.8 * tdp.power_w


def test_tdp_mode_gives_the_figures_of_busy_share_accounting() -> None:
    # power: tdp charges idle + (busy - idle) x the busy share, as fleetplan did before power:
    # the bundled example (its pools at datasheet TDP), on a shorter run
    example = load_scenario(EXAMPLE).with_updates(
        sim={"duration_s": 60, "warmup_s": 10, "seed": 1, "replications": 1})
    res = simulate(example.with_updates(power={"model": "tdp"}))
    for pool in res.pools:
        gpu = bundled_catalog().gpu(pool.config.split("x", 1)[1])
        assert pool.power_model == "tdp" and "datasheet TDP" in pool.power_source
        assert pool.power_w == pytest.approx(
            pool.gpus * (gpu.idle_w + (gpu.tdp_w - gpu.idle_w) * pool.utilization))
    act = simulate(example)
    # same traffic, same routing, same latencies: only the energy differs, and it is lower
    assert [c.ttft_p99_ms for c in act.classes] == [c.ttft_p99_ms for c in res.classes]
    assert act.account.energy_kwh_per_hour < res.account.energy_kwh_per_hour


def test_same_seed_gives_byte_identical_json_with_failures_too() -> None:
    over = {"reliability": {"2xRTX-4090": {"failures_per_replica_hour": 60, "replace_s": 20}}}
    runs = [json.dumps(simulate(scenario_from_dict(base_dict(**over))).to_dict(),
                       sort_keys=True) for _ in range(2)]
    assert runs[0] == runs[1]
    pools = json.loads(runs[0])["pools"]
    assert all(0 < p["power_activity"] <= 1 and p["power_model"] == "activity" for p in pools)


def test_the_optimizers_carbon_is_an_upper_bound_of_the_simulated_power() -> None:
    from fleetplan.optimize.inputs import build_problem

    d = base_dict(candidates=["1xH100-PCIe"], capacity={
        "duration_s": 40, "warmup_s": 10, "min_requests": 50, "seeds": 1, "refine_steps": 0})
    d.pop("fleet")
    d["classes"] = [d["classes"][0]]
    inputs = build_problem(scenario_from_dict(d), cache_dir=False)
    problem = inputs.problem
    (pool,) = problem.pools
    (cap,) = problem.capacity.values()
    per_rps = problem.dyn_w_per_rps[("chat", "1xH100-PCIe")]
    assert per_rps == 0.0 and any("upper bound" in n for n in inputs.notes)
    for share in (0.1, 0.5, 1.0):
        sim = simulate(_one_h100(share * cap)).pools[0]
        assert sim.power_w <= pool.idle_w + per_rps * share * cap
