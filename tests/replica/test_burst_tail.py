"""The replies that end a burst are recovered from run durations, and the replay honours them."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.replica.burst_tail import family_key, infer_burst_tails, tail_for
from fleetplan.replica.measured_run import MeasuredRun
from fleetplan.replica.protocol import sample_lengths, vllm_arrivals
from fleetplan.workload.lengths import protocol_length_model

N, LAST, K, LONG = 200, 200, 190, 800


def _run(i: int, rate: float, tau: float, *, ttft_p99_ms: float | None = None,
         config: str = "1xH100-PCIe") -> MeasuredRun:
    s, _ = vllm_arrivals(N, 1.0, 1.0, 42)
    tail = max(LAST * tau, LONG * tau - (s[-1] - s[K]) / rate)
    ttft = 0.03
    return MeasuredRun(
        run_id=f"r{i}", model=f"m{tau}", config=config, gpu="H100-PCIe", gpu_count=1,
        request_rate=rate, num_prompts=N, burstiness=1.0, total_input_tokens=41650,
        total_output_tokens=43000, series_max_rate=32.0,
        measured={"ttft_p50_ms": ttft * 1e3, "tpot_p50_ms": tau * 1e3,
                  "ttft_p99_ms": ttft_p99_ms if ttft_p99_ms is not None else 2 * ttft * 1e3},
        duration_s=s[-1] / rate + ttft + tail)


def test_the_long_reply_and_the_last_one_are_recovered_from_durations() -> None:
    runs = [_run(i, rate, tau) for i, (rate, tau) in enumerate(
        (r, t) for t in (0.01, 0.02, 0.04) for r in (1.0, 4.0, 16.0))]
    tail = infer_burst_tails(runs)[family_key(N, 41650)]
    assert abs(tail.last_tokens - LAST) <= 5
    assert abs(tail.long_index - K) <= 1 and abs(tail.long_tokens - LONG) <= 20
    assert tail.rms_log_error < 0.02


def test_queueing_runs_and_other_prompt_sets_do_not_take_part() -> None:
    good = [_run(i, rate, 0.01) for i, rate in enumerate((1.0, 4.0, 16.0))]
    queued = _run(9, 16.0, 0.01, ttft_p99_ms=5000.0, config="2xH100-PCIe")
    assert infer_burst_tails(good) == infer_burst_tails([*good, queued])
    assert tail_for(infer_burst_tails(good), N, 40000) == ()


def test_pinned_replies_keep_their_length_and_the_run_keeps_its_total() -> None:
    lm = protocol_length_model()
    pins = ((K, LONG), (N - 1, LAST))
    for seed in (0, 1):
        ins, outs = sample_lengths(lm, N, seed, (41650, 43000), pins)
        assert outs[K] == LONG and outs[N - 1] == LAST
        assert int(outs.sum()) == 43000 and int(ins.sum()) == 41650
        assert np.all(ins + outs <= lm.max_total)


@pytest.mark.parametrize("totals", [None, (200 * 71, 200 * 900)])
def test_replayed_lengths_never_exceed_the_servers_context(totals):
    """A run's requests all fit the server's max_model_len (vLLM completes no other), so the
    replay of a run never draws one that does: a 1024-token tiny model with outputs of up to
    1010 tokens failed the live test with "71 + 1010 tokens exceed max_model_len 1024"."""
    from fleetplan.workload.lengths import LengthModel

    lm = LengthModel.model_validate({
        "input": {"dist": "uniform", "low": 40, "high": 120},
        "output": {"dist": "uniform", "low": 600, "high": 1010}})
    for seed in range(5):
        ins, outs = sample_lengths(lm, 200, seed, totals, max_model_len=1024)
        assert int((ins + outs).max()) <= 1024
        assert int(outs.min()) >= 1
        free, _ = sample_lengths(lm, 200, seed, totals)
        if totals is not None:
            assert int(ins.sum()) == int(free.sum())  # the prompts' total is the run's
