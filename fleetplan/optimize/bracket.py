"""An analytic bracket of a replica's capacity: where the capacity search starts its ladder.

The replica model's step-time law (:class:`fleetplan.replica.params.ReplicaParams`) gives two
figures without simulating, for a class's length distribution and prefix-cache hit:

- ``saturation_rps``: the engine's throughput with perfect batching. Each request costs its
  prefill tokens, its decode steps' per-sequence work and the KV context those steps read; the
  fixed cost of a step is shared by the sequences batched in it (at most ``max_num_seqs``, or
  as many as the KV cache holds, and a step carries at most ``max_num_batched_tokens``).
- ``unloaded_ttft_ms``: the P99 over requests of a lone request's TTFT (overhead plus its
  prefill chunks), the floor of the P99 TTFT at any load.

- ``bound_rps``: an upper bound on any rate the replica sustains (work conservation): every
  request costs the engine at least its prefill tokens, its ``output - 1`` decode slots and the
  KV context those decode steps read, and its share of the steps' fixed cost (a step holds at
  most ``max_num_seqs`` decoders, ``max_num_batched_tokens`` tokens and the KV cache's tokens),
  so a busy engine completes at most ``1 / E[work]`` requests per second.
  :data:`BOUND_SLACK` covers what a finite run lets pass above it (a backlog too small to be
  called an overload within the run, and the run's lengths being shorter than the mean).

A queueing curve through the first two, ``ttft(r) ~ unloaded / (1 - r / saturation)``, turns
a TTFT target into a starting rate (:meth:`Bracket.start_rps`). The start only decides *where* the
search looks first: every capacity it reports is still a simulated pass with the next rate of
the search's grid a simulated fail (:mod:`fleetplan.optimize.capacity`). The start depends on
the SLO only through the TTFT target and never decreases as it loosens, which keeps the search
monotone in the SLO. Main entry: :func:`bracket`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fleetplan.workload.lengths import LengthModel

SAMPLES = 4000  # length draws per bracket (a fixed stream: the bracket is deterministic)
# a capacity search may certify a rate up to this factor above the work bound: a run of 300 s
# calls a queue an overload past 30 s of arrivals (10% above the service rate goes unnoticed),
# and the mean work of a run's requests may fall a few per cent below the bound's 4000 draws
BOUND_SLACK = 1.25


@dataclass(frozen=True)
class Bracket:
    """Throughput with perfect batching and the unloaded P99 TTFT of one replica."""

    saturation_rps: float
    unloaded_ttft_ms: float
    bound_rps: float = math.inf

    def start_rps(self, ttft_target_ms: float | None, keep: float) -> float:
        """Where the queueing curve crosses ``keep x ttft_target_ms`` (0: the unloaded P99 is
        already above it; the saturation rate when the SLO sets no TTFT target)."""
        if ttft_target_ms is None or not math.isfinite(ttft_target_ms):
            return self.saturation_rps
        target = keep * ttft_target_ms
        if target <= self.unloaded_ttft_ms:
            return 0.0
        return self.saturation_rps * (1.0 - self.unloaded_ttft_ms / target)


def bracket(params: Any, lengths: LengthModel, prefix_cache_hit: float = 0.0) -> Bracket | None:
    """The analytic bracket of ``params`` (a ``ReplicaParams``) for these lengths, or ``None``
    when ``params`` is not a replica parameter set (the search then starts at its first rate)."""
    from fleetplan.replica.params import ReplicaParams

    if not isinstance(params, ReplicaParams):
        return None
    ins, outs = lengths.sample(SAMPLES, np.random.default_rng(0xB2AC4E7))
    ins = ins.astype(float)
    outs = outs.astype(float)
    prefill = np.maximum(ins - np.floor(prefix_cache_hit * ins + 1e-9), 1.0)
    p = params
    budget = float(p.max_num_batched_tokens)
    batch = max(1.0, min(float(p.max_num_seqs), p.kv_capacity_tokens / float(np.mean(ins + outs))))
    steps_per_request = max(float(np.mean(outs)) / batch, float(np.mean(prefill + outs)) / budget)
    per_request_s = (p.c_step * steps_per_request + p.c_prefill_tok * float(np.mean(prefill))
                     + p.c_seq * float(np.mean(outs))
                     + p.c_kv_tok * float(np.mean(outs * (ins + outs / 2.0))))
    chunks = np.ceil(prefill / budget)
    lone_ttft_s = p.overhead_s + chunks * p.c_step + p.c_prefill_tok * prefill
    return Bracket(1.0 / per_request_s, 1e3 * float(np.percentile(lone_ttft_s, 99)),
                   BOUND_SLACK / _least_work_s(p, ins, outs, prefill))


def _least_work_s(p: Any, ins: np.ndarray, outs: np.ndarray, prefill: np.ndarray) -> float:
    """The least engine time a request of these lengths costs on average (the cost model of
    :class:`fleetplan.replica.engine.ReplicaEngine`, every term a lower bound): its prefill
    tokens, ``output - 1`` decode slots (the first token comes with the prefill), the KV
    context of those decode steps (at least the prompt plus the tokens already generated),
    and its share of the fixed cost of the steps it needs: at least its decode slots over
    ``max_num_seqs``, its tokens over ``max_num_batched_tokens``, and the KV it reads over the
    cache's capacity (a step's decoders hold at most the whole cache)."""
    dec = np.maximum(outs - 1.0, 0.0)
    kv = dec * ins + dec * np.maximum(dec - 1.0, 0.0) / 2.0
    steps = max(float(np.mean(dec)) / float(p.max_num_seqs),
                float(np.mean(prefill + dec)) / float(p.max_num_batched_tokens),
                float(np.mean(kv)) / float(p.kv_capacity_tokens))
    work = (p.c_step * steps + p.c_prefill_tok * float(np.mean(prefill))
            + p.c_seq * float(np.mean(dec)) + p.c_kv_tok * float(np.mean(kv)))
    return max(work, 1e-12)
