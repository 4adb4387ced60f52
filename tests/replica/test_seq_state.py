"""A fixed KV cost per sequence (``ReplicaParams.seq_state_blocks``: the state of a model's
linear-attention layers, paged by vLLM from the KV block pool): every running sequence holds
those blocks besides its tokens', so a state big enough runs fewer sequences at once; a file or
plan written before the field reads 0, and the field enters the cache keys only when set."""

from __future__ import annotations

import json

import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.catalog import HardwareConfig, bundled_catalog
from fleetplan.replica.engine import ReplicaEngine, Request
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.priors import prior_params

BASE = prior_params(bundled_catalog().model("DeepSeek-R1-Distill-Qwen-14B"),
                    HardwareConfig.parse("1xH100-PCIe"))


def _most_running(params: ReplicaParams, n: int, prompt: int, out: int) -> tuple[int, int]:
    """``n`` requests at once; the most sequences running together (sampled every 0.1 ms,
    finer than any step) and how many finished."""
    env = simpy.Environment()
    eng = ReplicaEngine(env, params, record_itl=False)
    for i in range(n):
        eng.submit(Request(i, 0.0, prompt, out), at=0.0)
    most = [0]

    def watch():  # type: ignore[no-untyped-def]
        while eng.stats.finished < n:
            most[0] = max(most[0], eng.running)
            yield env.timeout(1e-4)

    env.process(watch())
    env.run()
    return most[0], eng.stats.finished


@settings(max_examples=25, deadline=None)
@given(blocks=st.integers(60, 400), state=st.integers(1, 40), n=st.integers(5, 60),
       prompt=st.integers(1, 200), out=st.integers(1, 60))
def test_every_running_sequence_holds_its_state_blocks(blocks, state, n, prompt, out) -> None:
    """At any moment, running sequences x (their state + at least one token block) fit the
    cache; with a state that bounds them below what runs without one, fewer run at once."""
    need = -(-(prompt + out) // 16)
    if need + state > blocks:
        return  # a request the cache cannot hold is refused (tested elsewhere)
    p0 = BASE.with_(kv_capacity_tokens=blocks * 16, max_num_seqs=256, max_model_len=2000)
    ps = p0.with_(seq_state_blocks=state)
    most_0, done_0 = _most_running(p0, n, prompt, out)
    most_s, done_s = _most_running(ps, n, prompt, out)
    assert done_0 == done_s == n  # everything is served either way
    assert most_s * (state + 1) <= blocks
    assert most_s <= ps.max_state_seqs
    if blocks // (state + 1) < most_0:
        assert most_s < most_0


def test_a_large_state_caps_the_batch_by_hand() -> None:
    """400 blocks; 40 requests of 100 + 20 tokens (8 blocks each at their longest). Without a
    state all 40 run at once (320 blocks); with 30 blocks of state each takes at least 31
    blocks on admission, so at most 400 // 31 = 12 run together."""
    p0 = BASE.with_(kv_capacity_tokens=400 * 16, max_num_seqs=256, max_model_len=2000)
    assert _most_running(p0, 40, 100, 20)[0] == 40
    p30 = p0.with_(seq_state_blocks=30)
    most, done = _most_running(p30, 40, 100, 20)
    assert done == 40
    assert most <= 12 == p30.max_state_seqs
    assert p0.max_state_seqs == 256  # no state: the running cap itself


def test_a_request_whose_tokens_and_state_exceed_the_cache_is_refused() -> None:
    import pytest

    from fleetplan.errors import ModelError

    p = BASE.with_(kv_capacity_tokens=20 * 16, max_model_len=2000, seq_state_blocks=15)
    env = simpy.Environment()
    eng = ReplicaEngine(env, p)
    eng.submit(Request(0, 0.0, 60, 20))  # 5 blocks + 15: fits exactly
    with pytest.raises(ModelError, match="request 1: needs more KV blocks than the cache"):
        eng.submit(Request(1, 0.0, 70, 20))  # 6 blocks + 15 > 20


def test_a_file_without_the_field_reads_zero_and_dumps_as_before() -> None:
    data = BASE.model_dump()
    assert "seq_state_blocks" not in data  # a model without a state: its dump is unchanged
    assert ReplicaParams.model_validate(data).seq_state_blocks == 0
    with_state = BASE.with_(seq_state_blocks=7)
    back = ReplicaParams.model_validate(json.loads(with_state.model_dump_json()))
    assert back.seq_state_blocks == 7 and back == with_state


def test_the_state_enters_the_capacity_cache_key() -> None:
    from fleetplan.optimize.cache import input_hash

    key0 = input_hash({"params": BASE})
    assert input_hash({"params": BASE.with_(seq_state_blocks=0)}) == key0
    assert input_hash({"params": BASE.with_(seq_state_blocks=3)}) != key0
