"""Arrivals known in advance may be handed to the engine early (``submit(req, at=t)``): the run
is the one a submission at each arrival gives, request by request, and a steady-state run that
never nears its overload limit does not depend on how often its source wakes up."""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.catalog import HardwareConfig, bundled_catalog
from fleetplan.replica.engine import ReplicaEngine, Request
from fleetplan.replica.priors import prior_params
from fleetplan.replica.steady import steady_state

BASE = prior_params(bundled_catalog().model("DeepSeek-R1-Distill-Qwen-14B"),
                    HardwareConfig.parse("1xH100-PCIe"))


def _run(params, arr, ins, outs, ahead: bool) -> list[tuple[float, float, int]]:
    env = simpy.Environment()
    engine = ReplicaEngine(env, params)
    reqs = [Request(i, float(t), int(a), int(b)) for i, (t, a, b)
            in enumerate(zip(arr, ins, outs, strict=True))]
    if ahead:
        for r in reqs:
            engine.submit(r, at=r.arrival_s)
    else:
        def source(env):
            for r in reqs:
                if r.arrival_s > env.now:
                    yield env.timeout(r.arrival_s - env.now)
                engine.submit(r)

        env.process(source(env))
    env.run()
    return [(r.first_token_s, r.finish_s, r.preemptions) for r in reqs]


@pytest.mark.parametrize("case", range(8))
def test_submitting_ahead_is_the_run_of_submitting_at_each_arrival(case: int) -> None:
    rng = np.random.default_rng(77 + case)
    params = BASE.with_(
        kv_capacity_tokens=int(rng.choice([800, 4000, 100_000])),  # small caches preempt
        max_num_seqs=int(rng.choice([4, 32, 256])),
        max_num_batched_tokens=int(rng.choice([256, 2048])),
        max_model_len=700, overhead_s=float(rng.choice([0.0, 0.004])))
    n = 120
    arr = np.cumsum(rng.exponential(1.0 / float(rng.choice([2.0, 20.0, 80.0])), n))
    ins, outs = rng.integers(1, 400, n), rng.integers(1, 300, n)
    at_arrival = _run(params, arr, ins, outs, ahead=False)
    ahead = _run(params, arr, ins, outs, ahead=True)
    assert ahead == at_arrival


@settings(max_examples=10, deadline=None)
@given(rate=st.sampled_from([0.5, 3.0, 9.0]), seed=st.integers(0, 50))
def test_a_stable_run_does_not_depend_on_how_often_its_source_wakes(rate, seed):
    # the overload limit sets how many arrivals are submitted ahead between checks
    often = steady_state(BASE, rate=rate, duration_s=90, warmup_s=10, seed=seed,
                         overload_queue_s=1.0)
    rarely = steady_state(BASE, rate=rate, duration_s=90, warmup_s=10, seed=seed,
                          overload_queue_s=1e5)
    if often.stable:  # every figure equal (NaN where both are); the reason names the limit
        da, db = often.to_dict(), rarely.to_dict()
        assert db.pop("reason") != da.pop("reason")
        assert all(da[k] == db[k] or (da[k] != da[k] and db[k] != db[k]) for k in da)


def test_a_submission_ahead_out_of_order_or_in_the_past_is_refused() -> None:
    from fleetplan.errors import ModelError

    env = simpy.Environment()
    engine = ReplicaEngine(env, BASE)
    engine.submit(Request(0, 5.0, 10, 10), at=5.0)
    with pytest.raises(ModelError, match="before a request already submitted"):
        engine.submit(Request(1, 4.0, 10, 10), at=4.0)
    with pytest.raises(ModelError, match=r"submit\(at=nan\)"):
        engine.submit(Request(2, 6.0, 10, 10), at=float("nan"))
    env.run(until=6.0)
    with pytest.raises(ModelError, match="before the clock"):
        engine.submit(Request(3, 5.5, 10, 10), at=5.5)
