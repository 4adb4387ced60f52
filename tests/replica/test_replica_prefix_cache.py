"""Prefix-cache hit in steady state: cached prompt tokens skip prefill, as the engine models it."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.errors import InputError
from fleetplan.replica.params import replica_params
from fleetplan.replica.steady import cached_prompt_tokens, prefill_tokens, steady_state

P = replica_params("DeepSeek-R1-Distill-Qwen-14B", "1xH100-PCIe")
RUN = {"duration_s": 120.0, "warmup_s": 20.0, "seed": 4}


def test_cached_tokens_are_the_floor_of_the_stated_share():
    ins = np.array([1, 10, 999, 1000])
    assert cached_prompt_tokens(ins, 0.0) is None
    assert cached_prompt_tokens(ins, 0.5).tolist() == [0, 5, 499, 500]
    assert cached_prompt_tokens(ins, 1.0).tolist() == [1, 10, 999, 1000]
    # at least one prompt token is always prefilled (vLLM recomputes the last one)
    assert prefill_tokens(ins, cached_prompt_tokens(ins, 1.0)).tolist() == [1, 1, 1, 1]


def test_cached_prompts_lower_ttft_but_never_to_zero():
    fresh = steady_state(P, rate=2.0, **RUN)
    cached = steady_state(P, rate=2.0, prefix_cache_hit=1.0, **RUN)
    assert fresh.stable and cached.stable
    assert cached.ttft_p99_ms < 0.8 * fresh.ttft_p99_ms
    assert cached.ttft_p50_ms < fresh.ttft_p50_ms
    # overhead plus the prefill of the last block remain
    assert cached.ttft_p50_ms > P.overhead_s * 1e3
    assert (fresh.prefix_cache_hit, cached.prefix_cache_hit) == (0.0, 1.0)


@pytest.mark.parametrize("rate", [1.0, 4.0])
def test_raising_the_hit_rate_never_raises_p99_ttft_beyond_noise(rate):
    p99 = [steady_state(P, rate=rate, prefix_cache_hit=h, **RUN).ttft_p99_ms
           for h in (0.0, 0.25, 0.5, 0.75, 1.0)]
    for lo, hi in zip(p99, p99[1:], strict=False):
        assert hi <= lo * 1.03 + 1.0, p99


def test_default_is_fresh_prompts_and_runs_are_deterministic():
    a = steady_state(P, rate=2.0, **RUN).to_dict()
    b = steady_state(P, rate=2.0, prefix_cache_hit=0.0, **RUN).to_dict()
    assert a == b
    c = steady_state(P, rate=2.0, prefix_cache_hit=0.5, **RUN).to_dict()
    assert c == steady_state(P, rate=2.0, prefix_cache_hit=0.5, **RUN).to_dict()
    assert c["measured_requests"] == a["measured_requests"]  # same draws, less prefill


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), True])
def test_out_of_range_hit_is_refused(bad):
    with pytest.raises(InputError, match=r"prefix_cache_hit\(=.*\) must be a number within"):
        steady_state(P, rate=1.0, prefix_cache_hit=bad, **RUN)
