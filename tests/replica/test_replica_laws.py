"""Laws of the replica model (hypothesis): load, KV capacity and throughput."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.catalog import HardwareConfig, bundled_catalog
from fleetplan.replica.priors import prior_params
from fleetplan.replica.protocol import replay, simulate_requests, vllm_arrivals

BASE = prior_params(bundled_catalog().model("DeepSeek-R1-Distill-Qwen-7B"),
                    HardwareConfig.parse("1xRTX-4090"))


def _workload(seed: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0, n)
    gaps[0] = 0.0
    return np.cumsum(gaps), rng.integers(4, 600, n), rng.integers(4, 400, n)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), r1=st.floats(0.5, 20), factor=st.floats(1.05, 4),
       kv=st.sampled_from([4_000, 20_000, 200_000]))
def test_more_load_never_lowers_mean_queueing_delay(seed: int, r1: float, factor: float,
                                                     kv: int) -> None:
    # the same requests, their gaps compressed: only the load changes
    unit, ins, outs = _workload(seed, 80)
    params = BASE.with_(kv_capacity_tokens=kv)
    q = []
    for rate in (r1, r1 * factor):
        reqs, _ = simulate_requests(params, unit / rate, ins, outs)
        q.append(np.mean([r.queue_s for r in reqs]))
    step = params.c_step + params.max_num_batched_tokens * params.c_prefill_tok
    assert q[1] >= q[0] - step  # within one step's phase


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), rate=st.floats(1, 40),
       kv=st.sampled_from([2_000, 5_000, 12_000]), more=st.floats(1.2, 8))
def test_a_bigger_kv_cache_never_raises_ttft(seed: int, rate: float, kv: int,
                                             more: float) -> None:
    unit, ins, outs = _workload(seed, 80)
    small = BASE.with_(kv_capacity_tokens=kv, c_kv_tok=0.0, c_seq=0.0)
    big = small.with_(kv_capacity_tokens=int(kv * more))
    t = []
    for p in (small, big):
        reqs, _ = simulate_requests(p, unit / rate, ins, outs)
        t.append(np.mean([r.ttft_s for r in reqs]))
    assert t[1] <= t[0] * 1.02 + small.c_step


@settings(max_examples=15, deadline=None)
@given(rate=st.floats(0.5, 200), seed=st.integers(0, 1000))
def test_throughput_never_exceeds_offered_load(rate: float, seed: int) -> None:
    res = replay(BASE, rate=rate, num_prompts=60, seeds=(seed,), arrival_seed=seed)
    sends, end = vllm_arrivals(60, rate, 1.0, seed)
    assert res["request_throughput"] <= 60 / end + 1e-9
    assert res["duration_s"] >= end


def test_ttft_includes_the_overhead_and_one_step_at_least() -> None:
    reqs, _ = simulate_requests(BASE, np.array([0.0]), np.array([100]), np.array([10]))
    r = reqs[0]
    assert r.ttft_s >= BASE.overhead_s + BASE.c_step
    assert r.finish_s > r.first_token_s
