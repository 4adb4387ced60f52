"""Servers of several engines (issue 41, item 2): data-parallel replicas behind one endpoint and
the micro-batches of a pipeline-parallel replica each take their share of a run
(fleetplan.replica.split_replay, docs/replica-model.md "Pipeline and data parallel")."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.replica.params import replica_params
from fleetplan.replica.protocol import replay
from fleetplan.replica.split_replay import deal, engine_count, proportional, shares
from fleetplan.workload.lengths import LengthModel

MODEL = "DeepSeek-R1-Distill-Qwen-1.5B"


@pytest.fixture(scope="module")
def one():
    """One replica of a small model on one H100 (its engine, a plain configuration)."""
    return replica_params(MODEL, "1xH100-SXM")


def _short() -> LengthModel:
    from fleetplan.workload.lengths import protocol_length_model

    return protocol_length_model(mean_input=200, mean_output=60)


def test_the_name_says_how_many_engines() -> None:
    assert engine_count("2xRTX-4090") == 1
    assert engine_count("4xRTX-3090+tp1dp4") == 4
    assert engine_count("8xH100-SXM+tp4pp2") == 2
    assert engine_count("16xH100-SXM+tp4pp2dp2n2+IB-NDR-400") == 4


def test_requests_are_dealt_as_evenly_as_whole_requests_go() -> None:
    assert deal(6, 2) == [3, 3]
    assert deal(5, 2) == [3, 2]
    assert deal(1, 4) == [1, 0, 0, 0]
    # prompts follow the slots: 3 slots of 2 + 1, 9 prompts -> 6 and 3
    assert proportional(9, [2, 1]) == [6, 3]
    assert proportional(7, [1, 0]) == [7, 0]


@given(k=st.integers(1, 64), n=st.integers(1, 2000))
def test_concurrency_2k_splits_k_each_and_every_prompt_is_dealt(k: int, n: int) -> None:
    parts = shares(n, 2 * k, 2)
    assert [p.cap for p in parts] == [k, k]
    assert sum(p.prompts for p in parts) == n and abs(parts[0].prompts - parts[1].prompts) <= 1


def test_concurrency_below_the_engines_leaves_engines_idle() -> None:
    """One request in flight on two engines: one engine takes every prompt (the bubble)."""
    parts = shares(10, 1, 2)
    assert [(p.prompts, p.cap) for p in parts] == [(10, 1), (0, None)]


@settings(max_examples=8, deadline=None)
@given(rate=st.floats(0.5, 40.0))
def test_dp2_at_twice_the_rate_is_twice_one_replica(one, rate: float) -> None:
    """Two identical replicas sharing 2r req/s (40 prompts): each serves r req/s (20 prompts),
    so the server's throughput is exactly twice one replica's, with the same latencies."""
    two = one.with_(config="2xH100-SXM+tp1dp2")
    lm = _short()
    a = replay(one, rate=rate, num_prompts=20, lengths=lm, seeds=(0,))
    b = replay(two, rate=2 * rate, num_prompts=40, lengths=lm, seeds=(0,))
    assert b["output_throughput"] == pytest.approx(2 * a["output_throughput"], rel=1e-12)
    assert b["request_throughput"] == pytest.approx(2 * a["request_throughput"], rel=1e-12)
    for m in ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "itl_p50_ms", "duration_s"):
        assert b[m] == pytest.approx(a[m], rel=1e-12), m


def test_dp2_at_concurrency_2k_is_twice_one_replica_at_k(one) -> None:
    two = one.with_(config="2xH100-SXM+tp1dp2")
    lm = _short()
    a = replay(one, rate=math.inf, num_prompts=24, max_concurrency=6, lengths=lm, seeds=(0,))
    b = replay(two, rate=math.inf, num_prompts=48, max_concurrency=12, lengths=lm, seeds=(0,))
    assert b["output_throughput"] == pytest.approx(2 * a["output_throughput"], rel=1e-12)
    assert b["tpot_p50_ms"] == pytest.approx(a["tpot_p50_ms"], rel=1e-12)


def test_an_uneven_split_pools_the_two_shares(one) -> None:
    """Concurrency 5 over two replicas with 25 prompts: one replica runs 3 in flight over 15
    prompts, the other 2 over 10; the server's run ends with the slower, and its request
    throughput is all 25 over that duration."""
    two = one.with_(config="2xH100-SXM+tp1dp2")
    lm = _short()
    big = replay(one, rate=math.inf, num_prompts=15, max_concurrency=3, lengths=lm, seeds=(0,))
    small = replay(one, rate=math.inf, num_prompts=10, max_concurrency=2, lengths=lm,
                   seeds=(0,))
    both = replay(two, rate=math.inf, num_prompts=25, max_concurrency=5, lengths=lm, seeds=(0,))
    longest = max(big["duration_s"], small["duration_s"])
    assert both["duration_s"] == pytest.approx(longest, rel=1e-12)
    assert both["request_throughput"] == pytest.approx(25 / longest, rel=1e-12)
    lo = min(big["ttft_p50_ms"], small["ttft_p50_ms"])
    hi = max(big["ttft_p50_ms"], small["ttft_p50_ms"])
    assert lo <= both["ttft_p50_ms"] <= hi


def test_recorded_lengths_are_dealt_round_robin(one) -> None:
    """Recorded requests alternate between two replicas: the long ones (even places) on one,
    the short on the other; the pooled TPOT median lies between the two replicas'."""
    two = one.with_(config="2xH100-SXM+tp1dp2")
    ins, outs = [300, 50] * 6, [200, 20] * 6
    both = replay(two, rate=math.inf, num_prompts=12, request_lengths=(ins, outs), seeds=(0,))
    longs = replay(one, rate=math.inf, num_prompts=6, request_lengths=([300] * 6, [200] * 6),
                   seeds=(0,))
    shorts = replay(one, rate=math.inf, num_prompts=6, request_lengths=([50] * 6, [20] * 6),
                    seeds=(0,))
    assert both["duration_s"] == pytest.approx(max(longs["duration_s"], shorts["duration_s"]))
    assert both["output_throughput"] == pytest.approx(
        (6 * 200 + 6 * 20) / both["duration_s"], rel=1e-12)


def test_sustained_load_on_dp2_is_twice_one_replica(one) -> None:
    """Planning's view (steady state): 2 replicas at 8 req/s serve twice one replica's
    throughput at 4 req/s, with its latencies."""
    from fleetplan.replica.steady import steady_state

    a = steady_state(one, rate=4.0, duration_s=40, warmup_s=10)
    b = steady_state(one.with_(config="2xH100-SXM+tp1dp2"), rate=8.0, duration_s=40,
                     warmup_s=10)
    assert b.config == "2xH100-SXM+tp1dp2" and b.rate == 8.0
    assert b.throughput_rps == pytest.approx(2 * a.throughput_rps, rel=1e-12)
    assert b.ttft_p99_ms == pytest.approx(a.ttft_p99_ms, rel=1e-12)
