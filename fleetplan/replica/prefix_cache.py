"""vLLM V1's prefix cache across a sequence of benchmark runs, as an LRU over KV blocks.

The bundled protocol ran the rates of one configuration in the order
:data:`PROTOCOL_RATE_ORDER` against one running server, each run sending the same prompts in the
same order (``--seed 42``; greedy sampling, so the replies are the same too). vLLM V1 keeps the
blocks of finished requests in its free queue with their hashes: a later request whose prompt
starts with the same full blocks reuses them, until a new allocation evicts them. Eviction takes
the least recently freed block first, and a finished request's blocks are freed in reverse
order, so its reply blocks leave before its prompt blocks (``KVCacheManager.free``, vLLM 0.8.5).

:func:`cached_prompt_tokens` replays that bookkeeping request by request over the runs that
preceded a run (requests in send order, each holding its prompt and reply blocks while it runs,
one at a time: a named simplification, since the blocks of concurrent requests cannot be evicted
either, which can only lower the hits), and returns each request's cached prompt tokens in the
run itself: whole blocks, never the prompt's last token (vLLM recomputes it). A cache that holds
every prompt and reply block of the run keeps all prompts from the second run on; one that holds
less thrashes, as LRU does on a loop: most prompts are evicted before they come round again.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache

import numpy as np

PROTOCOL_RATE_ORDER = (32.0, 16.0, 8.0, 4.0, 1.0)


def runs_before(rate: float, series_max_rate: float) -> int:
    """How many runs of the same prompts the server served before the run at ``rate``: the
    protocol's rates above it up to the series' first (highest) rate; at least one when the
    rate is below the series' highest."""
    if rate >= series_max_rate:
        return 0
    n = sum(1 for r in PROTOCOL_RATE_ORDER if rate < r <= series_max_rate)
    return max(n, 1)


def cached_prompt_tokens(ins: np.ndarray, outs: np.ndarray, capacity_tokens: int,
                         block_size: int, before: int) -> np.ndarray:
    """Cached prompt tokens of each request of a run that follows ``before`` runs of the same
    requests on a KV cache of ``capacity_tokens`` (see the module docstring)."""
    n = len(ins)
    if before <= 0:
        return np.zeros(n, dtype=np.int64)
    full = (np.asarray(ins, dtype=np.int64) - 1) // block_size  # cacheable prompt blocks
    need = -(-(np.asarray(ins, dtype=np.int64) + np.asarray(outs, dtype=np.int64)) // block_size)
    blocks = capacity_tokens // block_size
    if int(need.sum()) <= blocks:  # everything stays: every prompt is cached from run 2 on
        return full * block_size
    key = (tuple(int(v) for v in full), tuple(int(v) for v in need), blocks, before)
    return np.asarray(_lru_hits(*key), dtype=np.int64) * block_size


@lru_cache(maxsize=256)
def _lru_hits(full: tuple[int, ...], need: tuple[int, ...], blocks: int,
              before: int) -> tuple[int, ...]:
    lru: OrderedDict[tuple[int, int], None] = OrderedDict()  # free blocks, oldest first
    hits = [0] * len(full)
    fresh = 0  # ids of reply blocks (never hit again)
    for run in range(before + 1):
        for i, (nf, nb) in enumerate(zip(full, need, strict=True)):
            h = 0
            while h < nf and (i, h) in lru:
                del lru[(i, h)]  # in use again
                h += 1
            if run == before:
                hits[i] = h
            # the request holds nb blocks while it runs; the free queue keeps the rest
            room = max(blocks - nb, 0)
            while len(lru) > room:
                lru.popitem(last=False)
            # freed in reverse order: reply blocks first (evicted first), then the prompt's
            for _ in range(nb - nf):
                fresh += 1
                lru[(-1, fresh)] = None
            for b in range(nf - 1, -1, -1):
                lru[(i, b)] = None
            while len(lru) > blocks:
                lru.popitem(last=False)
    return tuple(hits)


def hit_share(ins: np.ndarray, cached: np.ndarray) -> float:
    """Share of the run's prompt tokens served from the cache."""
    total = float(np.sum(ins))
    return float(np.sum(cached)) / total if total > 0 else 0.0
