"""A vLLM-like serving engine (one replica) as an exact, event-skipping SimPy model.

Main entries: :class:`ReplicaEngine` (``submit(req)`` at the request's arrival, or earlier with
``at=`` its arrival time when arrivals are known in advance; ``on_finish`` is called when its
last token is out) and :class:`Request` (one request, filled in by the engine;
defined with the engine's counters in :mod:`fleetplan.replica.records`).

Scheduling follows vLLM V1 (0.8.x) iteration by iteration (FCFS queue, running requests first,
then admissions within the token budget, running cap and free KV blocks; preemption of the most
recently admitted request on a KV shortage), or V0's default scheduler where the parameters say
the server does not chunk prefills (steps of whole prompts first, decode steps when no prompt
fits): :class:`fleetplan.replica.scheduler.Scheduler`
decides each step and applies its effects; this module times the steps (the cost model, SimPy
events) and skips over decode-only ones. A request's first token comes out
at the end of the step that completes its prefill; TTFT includes ``overhead_s`` (the request
reaches the scheduler ``overhead_s`` after it is submitted).

Speed without approximation: while a step holds only decodes, the steps that follow differ only
by the KV tokens read, which grow by one per sequence per step, so the end of the n-th step is
closed-form (``n*A + B*n*(n-1)/2``). The engine jumps over all such steps in one SimPy event, to
the next state change: a request finishing, a KV block running out, or a newly arrived request
that can join at a step boundary (a ``submit`` during a jump shortens it to that boundary).
"""

from __future__ import annotations

import math
import operator
from collections import deque
from collections.abc import Callable

import simpy

from fleetplan.errors import ModelError
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.power import step_activity
from fleetplan.replica.records import (
    DECODE,
    DONE,
    PENDING,
    PREFILL,
    WAITING,
    EngineStats,
    Request,
)
from fleetplan.replica.scheduler import Chunks, Scheduler
from fleetplan.replica.step_math import decode_plan, plan_duration, step_time, steps_until

_EPS = 1e-12
_TOKENS = operator.itemgetter(1)  # of a prefill chunk (request, tokens)

__all__ = ["DECODE", "DONE", "PENDING", "PREFILL", "WAITING", "EngineStats", "ReplicaEngine",
           "Request"]


def check_limits(p: ReplicaParams) -> None:
    """:class:`ModelError` for engine limits no schedule can keep."""
    if p.max_num_batched_tokens < p.max_num_seqs:
        raise ModelError(
            f"{p.config}: max_num_batched_tokens(={p.max_num_batched_tokens}) must be >= "
            f"max_num_seqs(={p.max_num_seqs}) (every running sequence decodes each step)")


def refusal(p: ReplicaParams, rid: int, input_tokens: int, output_tokens: int) -> ModelError:
    """Why ``p``'s engine refuses a request of these lengths (a request it refuses: fewer than
    one token either way, longer than ``max_model_len``, a prompt longer than the token budget
    without chunked prefill, or more KV blocks than the cache)."""
    if input_tokens < 1 or output_tokens < 1:
        return ModelError(f"request {rid}: input and output tokens must be >= 1")
    if not p.chunked_prefill and input_tokens > p.max_num_batched_tokens:
        # vLLM V0 ignores such a prompt (Scheduler._schedule_prefills' prompt limit)
        return ModelError(f"request {rid}: a prompt of {input_tokens} tokens exceeds "
                          f"max_num_batched_tokens {p.max_num_batched_tokens} of {p.config} "
                          "without chunked prefill")
    if input_tokens + output_tokens > p.max_model_len:
        return ModelError(f"request {rid}: {input_tokens} + {output_tokens} tokens exceed "
                          f"max_model_len {p.max_model_len} of {p.config}")
    return ModelError(f"request {rid}: needs more KV blocks than the cache holds")


class ReplicaEngine:
    """One serving replica inside a SimPy environment (many may share one environment)."""

    def __init__(self, env: simpy.Environment, params: ReplicaParams,
                 on_finish: Callable[[Request], None] | None = None, *,
                 record_itl: bool = True) -> None:
        self.env = env
        self.params = params
        self.on_finish = on_finish
        self.record_itl = record_itl
        self.stats = EngineStats()
        p = params
        check_limits(p)
        self._sched = Scheduler(p, self.stats, self._finished, record_itl=record_itl)
        self._c = (p.c_step, p.c_prefill_tok, p.c_seq, p.c_kv_tok)
        self._experts = (p.c_experts, p.expert_share)
        self._pending: deque[Request] = deque()  # submitted, not yet at the scheduler
        self._gen = 0  # plan generation: stale SimPy events are ignored
        self._plan_t0 = 0.0
        self._plan_A = 0.0
        self._plan_B = 0.0
        self._plan_n = 0  # steps of the plan in progress (0: idle wake-up)
        self._plan_end = math.inf
        self._plan_pf: Chunks | None = None  # prefill chunks of a 1-step plan
        self._plan_act = 0.0  # power activity of the plan's steps (fleetplan.replica.power)
        self._busy = False
        # without chunked prefill, decoders wait out the steps of prompts: (time of their last
        # token, how many) for each group since the last decode step, for their next ITL
        self._stalled: list[tuple[float, int]] = []
        self._on_timer = self._timer  # bound once: one callback object for every event
        self._overhead = p.overhead_s  # read once per submit
        self._max_len = p.max_model_len

    # ------------------------------------------------------------------ public
    @property
    def outstanding(self) -> int:
        """Requests submitted and not finished (pending, waiting and running)."""
        return len(self._pending) + len(self._sched.waiting) + len(self._sched.running)

    @property
    def busy_s(self) -> float:
        """Engine time spent stepping so far (completed steps)."""
        return self.stats.busy_s

    def busy_s_at(self, now: float) -> float:
        """Engine time spent stepping up to ``now``: :attr:`busy_s` plus the part of the step
        (or jump of steps) in progress already elapsed."""
        busy = self.stats.busy_s
        if self._busy:
            busy += max(0.0, now - self._plan_t0)
        return busy

    def active_s_at(self, now: float) -> float:
        """Power activity (:mod:`fleetplan.replica.power`) accumulated up to ``now``, the step
        in progress included: the dynamic part of the replica's energy."""
        act = self.stats.active_s
        if self._busy:
            act += self._plan_act * max(0.0, now - self._plan_t0)
        return act

    @property
    def queue_len(self) -> int:
        """Requests waiting for admission (including those still in the overhead stage)."""
        return len(self._pending) + len(self._sched.waiting)

    @property
    def running(self) -> int:
        return len(self._sched.running)

    @property
    def kv_tokens_used(self) -> int:
        return self._sched.kv_tokens_used

    def submit(self, req: Request, at: float | None = None) -> None:
        """Hand ``req`` to the replica now (``env.now``), or at the later time ``at`` (a caller
        that knows its arrivals in advance submits them early, in order of ``at``, and saves an
        event per request; the engine behaves as if each came at ``at``); it reaches the
        scheduler ``overhead_s`` later. Call it at ``req.arrival_s``, or with ``at`` that."""
        total = req.input_tokens + req.output_tokens
        sched = self._sched
        if (req.input_tokens < 1 or req.output_tokens < 1 or total > self._max_len
                or -(-total // sched.block_size) + sched.state > sched.kv_blocks
                or (not sched.chunked and req.input_tokens > sched.token_budget)):
            raise refusal(self.params, req.rid, req.input_tokens, req.output_tokens)
        if req.cached_tokens and not self.params.prefix_caching:
            req.cached_tokens = 0  # a server without a prefix cache prefills every prompt whole
        overhead = self._overhead
        pend = self._pending
        if at is None:
            now = self.env.now
        elif at >= self.env.now - _EPS and (not pend or at + overhead
                                           >= pend[-1].visible_s - _EPS):
            now = at
        else:
            # the pending queue is in order of arrival: an earlier time would be served late
            raise ModelError(f"request {req.rid}: submit(at={at!r}) is before the clock "
                             f"({self.env.now:g} s) or before a request already submitted")
        req.visible_s = now + overhead
        req.target = req.input_tokens
        req.state = PENDING
        pend.append(req)
        if not self._busy:
            if self._plan_end > req.visible_s + _EPS:
                self._arm(req.visible_s, 0)
            return
        # mid-plan: can the new request join at an earlier step boundary?
        if self._plan_n > 1 and not sched.waiting and len(sched.running) < sched.max_seqs:
            m = steps_until(self._plan_A, self._plan_B, req.visible_s - self._plan_t0)
            if m < self._plan_n:
                self._plan_n = m
                self._arm(self._plan_t0 + plan_duration(self._plan_A, self._plan_B, m), m)

    def _finished(self, r: Request) -> None:
        if self.on_finish is not None:
            self.on_finish(r)

    # ------------------------------------------------------------------ plumbing
    def _arm(self, t: float, n: int) -> None:
        self._gen += 1
        self._plan_end = t
        # the plan's generation rides as the event's value: no closure per event
        ev = self.env.timeout(max(0.0, t - self.env.now), self._gen)
        ev.callbacks.append(self._on_timer)

    def _timer(self, ev: simpy.Event) -> None:
        """A plan's end (or an idle wake-up): apply it, take in arrivals, plan the next."""
        if ev.value != self._gen:  # the generation _arm gave it: a superseded plan's event
            return
        now = self.env.now
        if self._busy:
            self._complete(now)
        self._plan_end = math.inf
        self._busy = False
        pend = self._pending
        while pend and pend[0].visible_s <= now + _EPS:
            self._sched.enqueue(pend.popleft())
        self._plan(now)

    # ------------------------------------------------------------------ stepping
    def _complete(self, now: float) -> None:
        """Apply the effects of the plan's steps, which end at ``now``."""
        n = self._plan_n
        st = self.stats
        st.steps += n
        dur = n * self._plan_A + self._plan_B * n * (n - 1) / 2.0  # plan_duration, inlined
        st.busy_s += dur
        st.active_s += self._plan_act * dur
        n_dec = self._sched.n_dec
        pf = self._plan_pf
        self._plan_pf = None
        if not self._sched.chunked and pf:  # V0: a step of prompts, the decoders stalled
            if self.record_itl:
                if n_dec and not self._stalled:
                    self._stalled.append((self._plan_t0, n_dec))
                self._sched.advance(n, now, pf)
                if self._sched.n_dec > n_dec:  # the prompts' first tokens, at its end
                    self._stalled.append((now, self._sched.n_dec - n_dec))
                return
        elif self.record_itl and n_dec:
            if self._stalled:
                self._record_stalled(n, n_dec)
            else:
                # every decoding sequence got one token per step, gap = that step's duration
                st.itl_segments.append((self._plan_A, self._plan_B, n, n_dec))
        self._sched.advance(n, now, pf)

    def _record_stalled(self, n: int, n_dec: int) -> None:
        """The ITL of a decode plan after steps of prompts (V0): each group's first gap runs
        from its last token to the plan's first step's end, the later gaps are the steps'. A
        preemption since took the most recently admitted decoders: the newest groups shrink."""
        st = self.stats
        end1 = self._plan_t0 + self._plan_A
        left = n_dec
        groups = []
        for t, k in reversed(self._stalled):
            k = min(k, left)
            left -= k
            if k:
                groups.append((end1 - t, k))
        for gap, k in reversed(groups):
            st.itl_segments.append((gap, 0.0, 1, k))
        if n > 1:
            st.itl_segments.append((self._plan_A + self._plan_B, self._plan_B, n - 1, n_dec))
        self._stalled.clear()

    def _plan(self, now: float) -> None:
        """Decide the next step (or jump of decode steps) at a step boundary ``now``."""
        sched = self._sched
        if not sched.running and not sched.waiting:
            if self._pending:
                self._arm(self._pending[0].visible_s, 0)
            return
        G = sched.step
        n_dec = sched.n_dec
        # Fast path: every running request decodes and nobody waiting can be admitted.
        if len(sched.running) == n_dec and n_dec and (
                not sched.waiting or len(sched.running) >= sched.max_seqs
                or not sched.admissible(sched.waiting[0], sched.token_budget - n_dec)):
            c_step, _, c_seq, c_kv = self._c
            self._plan_A, self._plan_B = decode_plan(c_step, c_seq, c_kv, n_dec, sched.s_off, G,
                                                     *self._experts)
            n = self._jump_len(now)
            if n > 0:
                self._plan_t0 = now
                self._plan_n = n
                self._plan_pf = None
                self._plan_act = step_activity(n_dec)
                self._busy = True
                self._arm(now + plan_duration(self._plan_A, self._plan_B, n), n)
                return
        self._single_step(now)

    def _jump_len(self, now: float) -> int:
        """Decode steps that can run before the next state change (0: preemption needed):
        a decoder finishing, a KV block running out, or a pending request reaching the
        scheduler while it could join (the decode plan, ``_plan_A`` and ``_plan_B``, is set)."""
        sched = self._sched
        n = sched.decode_run_len()
        if n == 0:
            return 0
        if self._pending and not sched.waiting and len(sched.running) < sched.max_seqs:
            n = min(n, steps_until(self._plan_A, self._plan_B, self._pending[0].visible_s - now))
        return n

    def _single_step(self, now: float) -> None:
        """Plan the one step the scheduler picks (its duration from the cost model)."""
        chunks, n_dec, kv_read = self._sched.schedule(now)
        prefill = sum(map(_TOKENS, chunks))
        if not chunks and not n_dec:
            # nothing schedulable (cannot happen with a consistent cache); wait for arrivals
            if self._pending:
                self._arm(self._pending[0].visible_s, 0)
            return
        c_step, c_pf, c_seq, c_kv = self._c
        dur = step_time(c_step, c_pf, c_seq, c_kv, prefill, n_dec, kv_read, *self._experts)
        self._plan_t0 = now
        self._plan_A = dur
        self._plan_B = 0.0
        self._plan_n = 1
        self._plan_pf = chunks
        self._plan_act = step_activity(prefill + n_dec)
        self._busy = True
        # internal invariant: every decoder is scheduled each step (V0: each step but a step of
        # prompts)
        if n_dec != self._sched.n_dec and (self._sched.chunked or not chunks):
            raise ModelError(f"{self.params.config}: a decoding sequence was not scheduled")
        self._arm(now + dur, 1)
