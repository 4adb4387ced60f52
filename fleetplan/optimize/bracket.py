"""An analytic bracket of a replica's capacity: where the capacity search starts its ladder.

The replica model's step-time law (:class:`fleetplan.replica.params.ReplicaParams`) gives two
figures without simulating, for a class's length distribution and prefix-cache hit:

- ``saturation_rps``: the engine's throughput with perfect batching. Each request costs its
  prefill tokens, its decode steps' per-sequence work and the KV context those steps read; the
  fixed cost of a step is shared by the sequences batched in it (at most ``max_num_seqs``, or
  as many as the KV cache holds, and a step carries at most ``max_num_batched_tokens``).
- ``unloaded_ttft_ms``: the P99 over requests of a lone request's TTFT (overhead plus its
  prefill chunks, plus the stream delay where the server has one), the floor of the P99 TTFT
  at any load.

A queueing curve through them, ``ttft(r) ~ unloaded / (1 - r / saturation)``, turns a TTFT
target into a starting rate (:meth:`Bracket.start_rps`). The start only decides *where* the
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


@dataclass(frozen=True)
class Bracket:
    """Throughput with perfect batching and the unloaded P99 TTFT of one replica."""

    saturation_rps: float
    unloaded_ttft_ms: float

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
    from fleetplan.replica.delivery import stream_delays
    from fleetplan.replica.params import ReplicaParams
    from fleetplan.replica.split_replay import params_engines
    from fleetplan.replica.step_math import expert_time

    if not isinstance(params, ReplicaParams):
        return None
    ins, outs = lengths.sample(SAMPLES, np.random.default_rng(0xB2AC4E7))
    ins = ins.astype(float)
    outs = outs.astype(float)
    if not params.prefix_caching:  # a server without a prefix cache prefills every prompt whole
        prefix_cache_hit = 0.0
    prefill = np.maximum(ins - np.floor(prefix_cache_hit * ins + 1e-9), 1.0)
    p = params
    budget = float(p.max_num_batched_tokens)
    batch = max(1.0, min(float(p.max_num_seqs), p.kv_capacity_tokens / float(np.mean(ins + outs))))
    steps_per_request = max(float(np.mean(outs)) / batch, float(np.mean(prefill + outs)) / budget)
    # a mixture-of-experts step also reads the routed experts its batch touches
    step_s = p.c_step + expert_time(p.c_experts, p.expert_share, int(batch))
    per_request_s = (step_s * steps_per_request + p.c_prefill_tok * float(np.mean(prefill))
                     + p.c_seq * float(np.mean(outs))
                     + p.c_kv_tok * float(np.mean(outs * (ins + outs / 2.0))))
    chunks = np.ceil(prefill / budget)
    # and the stream delay of a server whose first tokens come later than its steps
    # (fleetplan.replica.delivery; zeros elsewhere)
    lone_ttft_s = (p.overhead_s + chunks * p.c_step + p.c_prefill_tok * prefill
                   + stream_delays(SAMPLES, p.first_token_delay_s, p.first_token_delay_sigma))
    # a replica of several engines (data parallel, pipeline micro-batches) serves each in turn
    engines = params_engines(p)
    return Bracket(engines / per_request_s, 1e3 * float(np.percentile(lone_ttft_s, 99)))
