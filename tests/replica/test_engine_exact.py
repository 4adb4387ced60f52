"""The event-skipping engine equals a naive step-by-step vLLM V1 scheduler, request by request."""

from __future__ import annotations

import numpy as np
import pytest
from reference_sim import reference_run  # tests/replica is on sys.path (rootdir-less)

from fleetplan.catalog import HardwareConfig, bundled_catalog
from fleetplan.replica.priors import prior_params
from fleetplan.replica.protocol import simulate_requests

BASE = prior_params(bundled_catalog().model("DeepSeek-R1-Distill-Qwen-14B"),
                    HardwareConfig.parse("1xH100-PCIe"))


@pytest.mark.parametrize("case", range(12))
def test_engine_matches_step_by_step_reference(case: int) -> None:
    rng = np.random.default_rng(1000 + case)
    # every running sequence's fixed-size state (a linear-attention model), in blocks; the
    # cache grows by two such states so the longest request still fits
    state = (0, 0, 3, 9)[case % 4]
    params = BASE.with_(
        kv_capacity_tokens=int(rng.choice([600, 1500, 4000, 100_000])) + state * 16 * 2,
        max_num_seqs=int(rng.choice([4, 16, 256])),
        max_num_batched_tokens=int(rng.choice([256, 512, 2048])),
        max_model_len=600, c_kv_tok=1e-6, overhead_s=float(rng.choice([0.0, 0.005])),
        seq_state_blocks=state)
    n = 50
    arr = np.sort(rng.uniform(0, n / float(rng.choice([2, 10, 50])), n))
    arr[0] = 0.0
    ins, outs = rng.integers(1, 300, n), rng.integers(1, 200, n)
    cached = ins if case % 3 == 0 else None
    reqs, engine = simulate_requests(params, arr, ins, outs, cached=cached)
    ref = reference_run(params, list(arr), list(ins), list(outs),
                        cached=None if cached is None else list(cached))
    got = np.array([[r.first_token_s, r.finish_s, r.preemptions] for r in reqs])
    np.testing.assert_allclose(got, np.array(ref), rtol=0, atol=1e-9)
    assert engine.stats.finished == n


def test_preemption_happens_and_matches_when_cache_is_tiny() -> None:
    params = BASE.with_(kv_capacity_tokens=800, max_model_len=600)
    rng = np.random.default_rng(5)
    n = 40
    arr = np.zeros(n)
    ins, outs = rng.integers(50, 200, n), rng.integers(100, 300, n)
    outs = np.minimum(outs, 600 - ins)
    reqs, engine = simulate_requests(params, arr, ins, outs)
    ref = reference_run(params, list(arr), list(ins), list(outs))
    assert engine.stats.preemptions > 0
    np.testing.assert_allclose([r.finish_s for r in reqs], [x[1] for x in ref], atol=1e-9)


def test_a_decode_jump_is_one_event_not_one_per_step() -> None:
    # one request of 500 tokens alone: 500 steps, a handful of SimPy events
    import simpy

    from fleetplan.replica.engine import ReplicaEngine, Request

    env = simpy.Environment()
    eng = ReplicaEngine(env, BASE)
    eng.submit(Request(0, 0.0, 100, 500))
    events = 0
    while env.peek() != float("inf"):
        env.step()
        events += 1
    assert eng.stats.steps == 500
    assert events < 10
