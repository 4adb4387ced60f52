"""The records a replica engine fills in: one :class:`Request` and the engine's counters.

A request's life: ``PENDING`` (submitted, still in the ``overhead_s`` stage), ``WAITING`` (in the
scheduler's FCFS queue), ``PREFILL`` (admitted, its prompt being computed chunk by chunk),
``DECODE`` (one token per step), ``DONE``. A preempted request goes back to ``WAITING``.

The last fields of :class:`Request` are the engine's bookkeeping (in "steps", the engine's global
step counter): public so the engine (:mod:`fleetplan.replica.engine`) reads them as plain fields,
but meaningful only to it and only while the request runs.

Main entries: :class:`Request`, :class:`EngineStats`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

_NAN = math.nan
PENDING, WAITING, PREFILL, DECODE, DONE = range(5)


@dataclass(slots=True, eq=False)
class Request:
    """One request. The caller fills the first fields; the engine fills the rest."""

    rid: int
    arrival_s: float
    input_tokens: int
    output_tokens: int
    cls: int = 0
    cached_tokens: int = 0  # prompt tokens already in the prefix cache when it arrives
    scheduled_s: float = _NAN  # first admission into a step
    first_token_s: float = _NAN
    finish_s: float = _NAN
    last_token_s: float = _NAN
    generated: int = 0  # tokens out so far (exact once finished or preempted)
    preemptions: int = 0
    state: int = PENDING
    # engine bookkeeping
    visible_s: float = 0.0  # when it reaches the scheduler (submission + overhead)
    computed: int = 0  # tokens whose KV is computed (prefill progress)
    target: int = 0  # tokens to prefill before the next token comes out
    kv_slots: int = 0  # KV slots held while prefilling
    step_off: int = 0  # while decoding: context at global step k is step_off + k
    last_step: int = 0  # while decoding: global step of the last token
    gen0: int = 0  # tokens out when decoding started

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> float:
        return self.finish_s - self.arrival_s

    @property
    def tpot_s(self) -> float:
        """Mean time per output token after the first (NaN for one-token replies)."""
        if self.output_tokens <= 1:
            return _NAN
        return (self.finish_s - self.first_token_s) / (self.output_tokens - 1)

    @property
    def queue_s(self) -> float:
        """Time from submission to first admission into a step (overhead included)."""
        return self.scheduled_s - self.arrival_s


@dataclass(slots=True)
class EngineStats:
    """Counters of one engine (exposed for utilization and diagnostics)."""

    steps: int = 0
    busy_s: float = 0.0
    # sum of step_activity(tokens of the step) x step duration (fleetplan.replica.power)
    active_s: float = 0.0
    preemptions: int = 0
    finished: int = 0
    # token-gap record: (first step duration, growth per step, steps, sequences) per jump
    itl_segments: list[tuple[float, float, int, int]] = field(default_factory=list)
    itl_single: list[float] = field(default_factory=list)  # gaps across a preemption
