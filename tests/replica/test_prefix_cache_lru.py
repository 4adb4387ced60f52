"""The prefix cache across a sequence of runs of the same prompts, as vLLM's LRU over blocks."""

from __future__ import annotations

import numpy as np

from fleetplan.replica.prefix_cache import cached_prompt_tokens, hit_share, runs_before

BS = 16
RNG = np.random.default_rng(3)
INS = RNG.integers(20, 600, size=120)
OUTS = RNG.integers(20, 600, size=120)
WORKING_SET = int((-(-(INS + OUTS) // BS)).sum()) * BS


def test_the_protocol_order_gives_the_runs_before() -> None:
    assert runs_before(32.0, 32.0) == 0  # the first run of a series starts cold
    assert runs_before(16.0, 32.0) == 1
    assert runs_before(1.0, 32.0) == 4  # after 32, 16, 8 and 4 req/s
    assert runs_before(4.0, 16.0) == 2


def test_a_cache_that_holds_the_run_keeps_every_prompt_but_its_last_token() -> None:
    cold = cached_prompt_tokens(INS, OUTS, WORKING_SET, BS, 0)
    warm = cached_prompt_tokens(INS, OUTS, WORKING_SET, BS, 1)
    assert cold.sum() == 0
    assert np.array_equal(warm, (INS - 1) // BS * BS)
    assert 0.9 < hit_share(INS, warm) < 1.0


def test_a_smaller_cache_thrashes_like_lru_on_a_loop_and_more_room_never_hurts() -> None:
    shares = [hit_share(INS, cached_prompt_tokens(INS, OUTS, int(WORKING_SET * f), BS, 2))
              for f in (0.3, 0.6, 0.9, 0.99, 1.0)]
    assert shares[0] < 0.05 and shares[-1] > 0.9
    assert all(a <= b + 1e-12 for a, b in zip(shares, shares[1:], strict=False))
