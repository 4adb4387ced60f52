"""Which prompt and reply lengths a measured run is replayed with, when it did not record every
request's (``MeasuredRun.request_lengths``, replayed as they are).

- **The study's runs** (no server recorded with them): the protocol length model (vLLM's
  ShareGPT sampler, its spread fitted to those runs, :func:`~fleetplan.workload.lengths.
  protocol_length_model`), each seed's draws conditioned on the run's token totals.
- **Anyone else's run** keeps its own workload, read from its token totals and its dataset:
  ShareGPT prompts (the dataset names it, or names nothing, and the run's mean lengths are
  under half of what that sampler sends: prompts under 1024 tokens, prompt and reply under
  2048) are drawn from the protocol model at the run's mean lengths; prompts of any other dataset
  (``random``, ``sonnet``, a custom one: fixed-length synthetic prompts), or too long for the
  ShareGPT sampler, are sent at the run's mean lengths, the totals spread over its requests
  as evenly as whole tokens allow. Before, every run was drawn from the protocol model at the
  study's caps, so a run of 4,000-token prompts was refused ("cannot spread ... tokens") and
  one of 1,000-token prompts was squeezed under 1,024.

Main entry: :func:`replay_lengths`, the keyword arguments of
:func:`~fleetplan.replica.protocol.replay` that carry them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fleetplan.replica.measured_run import MeasuredRun
from fleetplan.workload.lengths import (
    PROTOCOL_MAX_INPUT,
    PROTOCOL_MAX_TOTAL,
    protocol_length_model,
)

SHAREGPT = "sharegpt"
# an unnamed dataset is taken for ShareGPT when its means leave this much room under the
# sampler's caps (the study's runs: 208 / 208 tokens of 1023 / 2047)
ROOM = 0.5


def even_split(total: int, n: int) -> list[int]:
    """``total`` tokens over ``n`` requests, as evenly as whole tokens allow (each >= 1)."""
    base, extra = divmod(max(int(total), n), n)
    return [base + 1] * extra + [base] * (n - extra)


def is_sharegpt(run: MeasuredRun) -> bool:
    """Whether ``run``'s prompts are taken for ShareGPT's: its dataset names it or names
    nothing, and its mean lengths are well within that sampler's caps (longer ones are not
    what it sends, whatever the name says)."""
    if run.dataset and SHAREGPT not in run.dataset.lower():
        return False
    n = max(run.num_prompts, 1)
    mean_in, mean_out = run.total_input_tokens / n, run.total_output_tokens / n
    return (mean_in <= ROOM * PROTOCOL_MAX_INPUT
            and mean_in + mean_out <= ROOM * PROTOCOL_MAX_TOTAL)


def replay_lengths(run: MeasuredRun) -> dict[str, Any]:
    """The length keywords of ``replay`` for ``run`` (see the module docstring): none for the
    study's runs and for runs that recorded every request (their callers' defaults stand)."""
    if run.server is None or run.request_lengths is not None:
        return {}
    n = run.num_prompts
    if is_sharegpt(run):
        return {"lengths": protocol_length_model(mean_input=run.total_input_tokens / n,
                                                 mean_output=run.total_output_tokens / n)}
    ins = even_split(run.total_input_tokens, n)
    outs = even_split(run.total_output_tokens, n)
    rng = np.random.default_rng(0)  # which requests carry the odd token: no order implied
    return {"request_lengths": (tuple(int(v) for v in rng.permutation(ins)),
                                tuple(int(v) for v in rng.permutation(outs)))}
