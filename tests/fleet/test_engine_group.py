"""A replica laid out as several engines (data-parallel ranks, pipeline micro-batches) in the
fleet simulator: one replica of k engines serves as k engines behind one endpoint."""

from __future__ import annotations

import pytest

from fleetplan.fleet import simulate
from fleetplan.replica.engine import Request
from fleetplan.replica.engine_group import EngineGroup
from fleetplan.replica.params import replica_params
from fleetplan.replica.steady import steady_state
from fleetplan.scenario import scenario_from_dict
from fleetplan.workload.lengths import LengthModel

MODEL = "DeepSeek-R1-Distill-Qwen-7B"
LENGTHS = {"input_tokens": {"dist": "lognormal", "mean": 300, "cv": 0.8, "max": 2000},
           "output_tokens": {"dist": "lognormal", "mean": 120, "cv": 0.6, "max": 600}}


def _fleet(config: str, count: int, rate: float, seed: int = 5):
    return simulate(scenario_from_dict({
        "model": MODEL,
        "classes": [{"name": "chat", "rate_rps": rate, "slo": {"ttft_p99_ms": 2000}, **LENGTHS}],
        "fleet": [{"config": config, "count": count}],
        "routing": "least-outstanding",
        "sim": {"duration_s": 120, "warmup_s": 20, "seed": seed, "replications": 2},
    }))


def test_a_replica_of_two_data_parallel_ranks_serves_as_two_replicas_of_one_rank() -> None:
    """Two ranks behind one endpoint, each request to the rank with fewer outstanding, are
    the least-outstanding router's two one-GPU replicas: same latencies, GPUs, cost and
    power (the pool's busy share is its ranks' mean). Each rank is the measured one-GPU
    server: its calibrated parameters serve the layout too."""
    rate = 14.0  # one RTX 4090 alone: P99 TTFT 330 ms; two: 192 ms
    two = _fleet("1xRTX-4090", 2, rate)
    dp = _fleet("2xRTX-4090+tp1dp2", 1, rate)
    (a,), (b,) = two.classes, dp.classes
    assert not two.overloaded and not dp.overloaded
    assert b.requests == a.requests and b.unfinished == a.unfinished == 0
    for field in ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms"):
        assert getattr(b, field) == pytest.approx(getattr(a, field), rel=0.05), field
    (pa,), (pb,) = two.pools, dp.pools
    assert pb.calibrated and pa.calibrated
    assert (pb.count, pb.gpus) == (1, 2) and (pa.count, pa.gpus) == (2, 2)
    assert pb.cost_per_hour_usd == pytest.approx(pa.cost_per_hour_usd)
    assert pb.utilization == pytest.approx(pa.utilization, rel=0.03)
    assert pb.power_w == pytest.approx(pa.power_w, rel=0.03)


def test_a_pipeline_replica_in_the_fleet_matches_its_steady_state() -> None:
    """The fleet simulator's pipeline-parallel replica (two micro-batch engines, each request
    to the less loaded) and the replica model's steady state (the load split evenly over the
    engines), which gives the capacity the MILP plans with, agree; a load beyond it overloads
    both. A replica run as one engine would be overloaded at 20 req/s already."""
    config = "8xRTX-4090+tp4pp2"
    params = replica_params(MODEL, config)
    lengths = LengthModel(input=LENGTHS["input_tokens"], output=LENGTHS["output_tokens"])
    for rate in (10.0, 20.0):
        steady = steady_state(params, rate=rate, lengths=lengths, duration_s=300)
        (fleet,) = _fleet(config, 1, rate).classes
        assert steady.stable
        assert fleet.ttft_p50_ms == pytest.approx(steady.ttft_p50_ms, rel=0.1), rate
        assert fleet.tpot_p50_ms == pytest.approx(steady.tpot_p50_ms, rel=0.1), rate
    assert not steady_state(params.with_(config="4xRTX-4090"), rate=20.0, lengths=lengths,
                            duration_s=300).stable  # one of its engines alone
    assert _fleet(config, 1, 30.0).overloaded
    assert not steady_state(params, rate=30.0, lengths=lengths, duration_s=300).stable


def test_a_group_sends_each_request_to_its_least_loaded_engine() -> None:
    import simpy

    env = simpy.Environment()
    group = EngineGroup(env, replica_params(MODEL, "8xRTX-4090+tp4pp2"), None,
                        record_itl=False, engines=2)
    for i in range(5):
        group.submit(Request(i, 0.0, 200, 50, 0))
    assert sorted(m.outstanding for m in group.members) == [2, 3]
    assert group.outstanding == 5
    with pytest.raises(ValueError, match="at least 2 engines"):
        EngineGroup(env, replica_params(MODEL, "1xH100-PCIe"), None, record_itl=False,
                    engines=1)
