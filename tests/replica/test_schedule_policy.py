"""The scheduling rules both replica engines share (``schedule_policy``, ``step_math``), checked
against a request-by-request count of what vLLM's block manager does."""

from __future__ import annotations

import math

import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.replica import ReplicaEngine, Request, replica_params
from fleetplan.replica import schedule_policy as sp
from fleetplan.replica.steady import cached_prompt_tokens
from fleetplan.replica.step_math import decode_plan, plan_duration, step_time

BLOCK_SIZES = st.sampled_from([1, 2, 16])
# decoders' contexts at a step; a decoder's offset is its context less the global step, which
# outgrows contexts, so offsets are mostly negative
CONTEXTS = st.lists(st.integers(1, 200), max_size=12)


def _phase(offsets: list[int], bs: int) -> list[int]:
    phase = [0] * bs
    for off in offsets:
        phase[off % bs] += 1
    return phase


def _blocks(tokens: int, bs: int) -> int:
    return math.ceil(tokens / bs)


@settings(max_examples=200, deadline=None)
@given(contexts=CONTEXTS, bs=BLOCK_SIZES, k=st.integers(1, 10_000))
def test_decoders_blocks_are_the_sum_of_each_decoders_blocks(contexts, bs, k) -> None:
    offsets = [c - k for c in contexts]
    expected = sum(_blocks(off + k, bs) for off in offsets)
    got = sp.dec_blocks(_phase(offsets, bs), bs, sum(offsets), len(offsets), k)
    assert got == expected
    assert sum(sp.decoder_blocks(off, k, bs) for off in offsets) == expected
    # a step's new blocks are the growth of the count from the step before
    new = sum(sp.decode_new_blocks(off, k, bs) for off in offsets)
    assert new == expected - sum(_blocks(off + k - 1, bs) for off in offsets)


@settings(max_examples=200, deadline=None)
@given(contexts=st.lists(st.integers(1, 200), min_size=1, max_size=12), bs=BLOCK_SIZES,
       step=st.integers(1, 10_000), n=st.integers(1, 60), spare=st.integers(-20, 40),
       state=st.sampled_from([0, 0, 1, 3, 17]))
def test_a_decode_run_stops_at_the_first_step_the_cache_cannot_hold(contexts, bs, step, n,
                                                                    spare, state) -> None:
    """Every decoder also holds ``state`` blocks (a linear-attention model's fixed-size
    state), for the whole run."""
    offsets = [c - step for c in contexts]
    states = len(offsets) * state
    kv_blocks = sum(_blocks(off + step, bs) for off in offsets) + states + spare
    fits = 0  # steps from `step` on whose allocation fits, counted one by one
    while (fits < n
           and sum(_blocks(off + step + fits, bs) for off in offsets) + states <= kv_blocks):
        fits += 1
    got = sp.decode_run_cap(_phase(offsets, bs), bs, sum(offsets), len(offsets), step, n,
                            kv_blocks, state)
    assert got == fits


@settings(max_examples=200, deadline=None)
@given(prompt=st.integers(1, 5000), hit=st.integers(0, 5000), bs=BLOCK_SIZES,
       budget=st.integers(1, 4096), state=st.sampled_from([0, 1, 5, 294]))
def test_an_admission_computes_what_the_cache_lacks_within_the_budget(prompt, hit, bs,
                                                                      budget, state) -> None:
    cached = sp.admission(hit, 0, prompt, 0, bs, state)[0]
    assert cached <= hit
    assert cached < prompt  # the last prompt token is always computed
    # a recomputed request: its blocks are gone
    assert sp.admission(hit, 1, prompt, 0, bs, state)[0] == 0
    assert sp.admission(hit, 0, prompt, budget, bs, state)[0] == cached  # whatever the budget
    _, new_tokens, need = sp.admission(hit, 0, prompt, budget, bs, state)
    assert new_tokens == min(prompt - cached, budget) and new_tokens >= 1
    # its tokens' blocks and, for a model with linear-attention layers, its state's
    assert need == _blocks(cached + new_tokens, bs) + state


@settings(max_examples=200, deadline=None)
@given(prompt=st.integers(2, 5000), done=st.integers(1, 4999), bs=BLOCK_SIZES,
       budget=st.integers(1, 4096))
def test_a_prefill_chunk_takes_the_blocks_its_tokens_reach(prompt, done, bs, budget) -> None:
    computed = min(done, prompt - 1)
    new_tokens, new_blocks = sp.prefill_chunk(computed, computed, prompt, budget, bs)
    assert new_tokens == min(prompt - computed, budget)
    assert new_blocks == _blocks(computed + new_tokens, bs) - _blocks(computed, bs)


@settings(max_examples=200, deadline=None)
@given(target=st.integers(1, 4000), step=st.integers(0, 10_000), out=st.integers(2, 500),
       data=st.data())
def test_a_preempted_decoder_keeps_one_token_per_step_it_decoded(target, step, out,
                                                                 data) -> None:
    generated = data.draw(st.integers(1, out - 1))
    step_off, last = sp.decode_start(target, step, out, generated)
    assert step_off + step == target  # its context at the step that completed its prefill
    assert last - step == out - generated  # one token a step until the last
    decoded = data.draw(st.integers(0, out - generated - 1))
    # preempted before the step after `decoded` decode steps
    assert (sp.generated_when_preempted(generated, step + 1 + decoded, last, out)
            == generated + decoded)


@settings(max_examples=100, deadline=None)
@given(n_dec=st.integers(1, 64), s_off=st.integers(0, 10_000), step=st.integers(0, 1000),
       n=st.integers(1, 50))
def test_a_decode_plan_lasts_as_long_as_its_steps(n_dec, s_off, step, n) -> None:
    c = (0.012, 3e-5, 2e-4, 1e-7)
    a, b = decode_plan(c[0], c[2], c[3], n_dec, s_off, step)
    steps = sum(step_time(*c, 0, n_dec, s_off + n_dec * (step + j)) for j in range(n))
    assert math.isclose(plan_duration(a, b, n), steps, rel_tol=1e-12)


@settings(max_examples=200, deadline=None)
@given(prompt=st.integers(2, 5000), hit=st.integers(1, 5000), bs=BLOCK_SIZES)
def test_the_prefix_cache_serves_whole_blocks_only(prompt, hit, bs) -> None:
    """vLLM caches full blocks; a hit share that ends inside a block (a scenario's
    ``prefix_cache_hit``: floor(hit x prompt) tokens) is served up to the block before."""
    assert sp.admission(hit, 0, prompt, 0, bs, 0)[0] == min(hit // bs, (prompt - 1) // bs) * bs


def test_a_hit_share_ending_inside_a_block_prefills_the_rest_of_that_block() -> None:
    p = replica_params("DeepSeek-R1-Distill-Qwen-14B", "1xH100-PCIe")
    hits = cached_prompt_tokens([1000], 0.5)  # 500 tokens: 31 whole blocks of 16 and 4 more
    assert hits is not None and int(hits[0]) == 500
    env = simpy.Environment()
    eng = ReplicaEngine(env, p)
    r = Request(0, 0.0, 1000, 1, cached_tokens=int(hits[0]))
    eng.submit(r)
    env.run()
    # one step prefills 1000 - 496 tokens and reads the 496 cached ones
    step = p.c_step + p.c_prefill_tok * 504 + p.c_kv_tok * 496
    assert abs((r.first_token_s - r.arrival_s) - (p.overhead_s + step)) < 1e-12
