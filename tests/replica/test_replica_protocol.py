"""Benchmark replay: vLLM's send times, determinism, lengths, steady state."""

from __future__ import annotations

import json

import numpy as np

from fleetplan.profiles.store import load_profiles
from fleetplan.replica import replay, replica_params
from fleetplan.replica.protocol import vllm_arrivals
from fleetplan.replica.steady import SteadyStatus, steady_state
from fleetplan.workload.lengths import protocol_length_model

P = replica_params("DeepSeek-R1-Distill-Qwen-7B", "1xH100-PCIe")


def test_vllm_seed_42_send_times_explain_the_measured_durations() -> None:
    sends, _ = vllm_arrivals(200, 1.0, 1.0, 42)
    df = load_profiles().frame
    one = df[df["request_rate"] == 1.0]
    # every 1 req/s run ends after its last request was sent, by less than a long reply
    tail = one["duration_s"] - sends[-1]
    assert (tail > 0).all() and (tail < 30).all()
    assert sends[0] == 0.0 and np.all(np.diff(sends) > 0)


def test_replay_is_deterministic_to_the_byte() -> None:
    a = replay(P, rate=8, num_prompts=50, seeds=(0, 1)).to_dict()
    b = replay(P, rate=8, num_prompts=50, seeds=(0, 1)).to_dict()
    assert json.dumps(a) == json.dumps(b)
    assert set(a["metrics"]) >= {"request_throughput", "ttft_p99_ms", "tpot_p50_ms",
                                 "itl_p99_ms", "duration_s"}


def test_concurrency_cap_never_speeds_a_run_up() -> None:
    free = replay(P, rate=50, num_prompts=60, seeds=(0,))
    capped = replay(P, rate=50, num_prompts=60, seeds=(0,), max_concurrency=2)
    assert capped["duration_s"] >= free["duration_s"]


def test_protocol_lengths_have_the_measured_means_within_the_protocol_bounds() -> None:
    lm = protocol_length_model()
    ins, outs = lm.sample(50_000, np.random.default_rng(0))
    assert abs(ins.mean() - 208) < 4 and abs(outs.mean() - 208) < 4
    assert ins.max() <= 1023 and (ins + outs).max() <= 2047 and ins.min() >= 4


def test_steady_state_detects_overload_early_and_is_stable_below_capacity() -> None:
    low = steady_state(P, rate=1.0, duration_s=120, warmup_s=20)
    assert low.status is SteadyStatus.STABLE and low.stable
    assert low.throughput_rps <= 1.0 * 1.5
    high = steady_state(P, rate=500.0, duration_s=600, warmup_s=60)
    assert high.status is SteadyStatus.OVERLOADED and not high.stable
    assert high.simulated_s < 60  # stopped instead of simulating the whole window
    again = steady_state(P, rate=1.0, duration_s=120, warmup_s=20)
    assert again.to_dict() == low.to_dict()
