"""A vLLM-like serving engine (one replica) as an exact, event-skipping SimPy model.

Main entries: :class:`ReplicaEngine` (``submit(req)`` at the request's arrival; ``on_finish`` is
called when its last token is out) and :class:`Request` (one request, filled in by the engine;
defined with the engine's counters in :mod:`fleetplan.replica.records`).

Scheduling follows vLLM V1 (0.8.x) iteration by iteration: a FCFS waiting queue; each step first
serves running requests in admission order (one token per decoding sequence, the rest of a
chunked prefill), then admits waiting requests while the token budget
(``max_num_batched_tokens``), the running cap (``max_num_seqs``) and free KV blocks allow; a
running request that cannot get a KV block preempts the most recently admitted one, which goes
back to the head of the queue and is recomputed from scratch. A request's first token comes out
at the end of the step that completes its prefill; TTFT includes ``overhead_s`` (the request
reaches the scheduler ``overhead_s`` after it is submitted).

Speed without approximation: while a step holds only decodes, the steps that follow differ only
by the KV tokens read, which grow by one per sequence per step, so the end of the n-th step is
closed-form (``n*A + B*n*(n-1)/2``). The engine jumps over all such steps in one SimPy event, to
the next state change: a request finishing, a KV block running out, or a newly arrived request
that can join at a step boundary (a ``submit`` during a jump shortens it to that boundary).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable

import simpy

from fleetplan.errors import ModelError
from fleetplan.replica.params import ReplicaParams
from fleetplan.replica.records import (
    DECODE,
    DONE,
    PENDING,
    PREFILL,
    WAITING,
    EngineStats,
    Request,
)

_EPS = 1e-12

__all__ = ["DECODE", "DONE", "PENDING", "PREFILL", "WAITING", "EngineStats", "ReplicaEngine",
           "Request"]


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
        if p.max_num_batched_tokens < p.max_num_seqs:
            raise ModelError(
                f"{p.config}: max_num_batched_tokens(={p.max_num_batched_tokens}) must be >= "
                f"max_num_seqs(={p.max_num_seqs}) (every running sequence decodes each step)")
        self._bs = p.block_size
        self._blocks = p.kv_blocks
        self._max_seqs = p.max_num_seqs
        self._budget = p.max_num_batched_tokens
        self._c = (p.c_step, p.c_prefill_tok, p.c_seq, p.c_kv_tok)
        self._pending: deque[Request] = deque()  # submitted, not yet at the scheduler
        self._waiting: deque[Request] = deque()
        self._running: dict[int, Request] = {}  # admission order
        self._heap: list[tuple[int, int, Request]] = []  # (fin step, seq, req) of decoders
        self._n_dec = 0
        self._s_off = 0  # sum of step_off over decoding requests
        self._phase = [0] * self._bs  # decoding requests by step_off mod block size
        self._pf_reqs: dict[int, Request] = {}  # running requests still prefilling
        self._pf_slots = 0  # KV slots held by prefilling requests
        self._G = 0  # global step counter (steps completed)
        self._seq = 0  # heap tie-breaker
        self._wait_cached_blocks = 0  # prefix-cache blocks waiting requests will take
        self._gen = 0  # plan generation: stale SimPy events are ignored
        self._plan_t0 = 0.0
        self._plan_A = 0.0
        self._plan_B = 0.0
        self._plan_n = 0  # steps of the plan in progress (0: idle wake-up)
        self._plan_end = math.inf
        self._plan_pf: list[tuple[Request, int]] | None = None  # prefill chunks of a 1-step plan
        self._busy = False

    # ------------------------------------------------------------------ public
    @property
    def outstanding(self) -> int:
        """Requests submitted and not finished (pending, waiting and running)."""
        return len(self._pending) + len(self._waiting) + len(self._running)

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

    @property
    def queue_len(self) -> int:
        """Requests waiting for admission (including those still in the overhead stage)."""
        return len(self._pending) + len(self._waiting)

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def kv_tokens_used(self) -> int:
        return self._s_off + self._n_dec * self._G + self._pf_slots

    def submit(self, req: Request) -> None:
        """Hand ``req`` to the replica now (``env.now``); it reaches the scheduler after
        ``overhead_s``. Call it at ``req.arrival_s``."""
        total = req.input_tokens + req.output_tokens
        if req.input_tokens < 1 or req.output_tokens < 1:
            raise ModelError(f"request {req.rid}: input and output tokens must be >= 1")
        if total > self.params.max_model_len:
            raise ModelError(
                f"request {req.rid}: {req.input_tokens} + {req.output_tokens} tokens exceed "
                f"max_model_len {self.params.max_model_len} of {self.params.config}")
        if -(-total // self._bs) > self._blocks:
            raise ModelError(f"request {req.rid}: needs more KV blocks than the cache holds")
        now = self.env.now
        req.visible_s = now + self.params.overhead_s
        req.target = req.input_tokens
        req.state = PENDING
        self._pending.append(req)
        if not self._busy:
            if self._plan_end > req.visible_s + _EPS:
                self._arm(req.visible_s, 0)
            return
        # mid-plan: can the new request join at an earlier step boundary?
        if self._plan_n > 1 and not self._waiting and len(self._running) < self._max_seqs:
            m = self._steps_until(req.visible_s - self._plan_t0)
            if m < self._plan_n:
                self._plan_n = m
                self._arm(self._plan_t0 + self._cum(m), m)

    # ------------------------------------------------------------------ plumbing
    def _cum(self, n: int) -> float:
        return n * self._plan_A + self._plan_B * n * (n - 1) / 2.0

    def _steps_until(self, dt: float) -> int:
        """Fewest steps (>= 1) of the current plan whose cumulative duration reaches ``dt``."""
        A, B = self._plan_A, self._plan_B
        if dt <= A + _EPS:
            return 1
        if B <= 0:
            m = math.ceil(dt / A - 1e-9)
        else:
            a, b = B / 2.0, A - B / 2.0
            m = math.ceil((-b + math.sqrt(b * b + 4 * a * dt)) / (2 * a) - 1e-9)
        m = max(m, 1)
        while m > 1 and self._cum(m - 1) >= dt - _EPS:
            m -= 1
        while self._cum(m) < dt - _EPS:
            m += 1
        return m

    def _arm(self, t: float, n: int) -> None:
        self._gen += 1
        gen = self._gen
        self._plan_end = t
        ev = self.env.timeout(max(0.0, t - self.env.now))
        ev.callbacks.append(lambda _ev: self._fire(gen))

    def _fire(self, gen: int) -> None:
        if gen != self._gen:
            return
        now = self.env.now
        if self._busy:
            self._complete(now)
        self._plan_end = math.inf
        self._busy = False
        pend = self._pending
        while pend and pend[0].visible_s <= now + _EPS:
            r = pend.popleft()
            r.state = WAITING
            self._wait_cached_blocks += self._cached(r) // self._bs
            self._waiting.append(r)
        self._plan(now)

    # ------------------------------------------------------------------ stepping
    def _complete(self, now: float) -> None:
        """Apply the effects of the plan's steps, which end at ``now``."""
        n = self._plan_n
        st = self.stats
        st.steps += n
        dur = self._cum(n)
        st.busy_s += dur
        if self.record_itl and self._n_dec:
            # every decoding sequence got one token per step, gap = that step's duration
            st.itl_segments.append((self._plan_A, self._plan_B, n, self._n_dec))
        self._G += n
        last = self._G - 1
        heap = self._heap
        while heap and heap[0][0] <= last:
            _, _, r = heapq.heappop(heap)
            if r.state != DECODE or r.last_step > last:
                continue  # stale entry (preempted and re-queued)
            self._n_dec -= 1
            self._s_off -= r.step_off
            self._phase[r.step_off % self._bs] -= 1
            r.generated = r.output_tokens
            self._finish(r, now)
        pf = self._plan_pf
        if pf is not None:
            self._plan_pf = None
            for r, chunk in pf:
                if r.state != PREFILL:
                    continue
                r.computed += chunk
                if r.computed < r.target:
                    continue
                self._pf_slots -= r.kv_slots
                r.kv_slots = 0
                del self._pf_reqs[r.rid]
                if r.generated == 0:
                    r.first_token_s = now
                elif self.record_itl:
                    st.itl_single.append(now - r.last_token_s)
                r.generated += 1
                r.last_token_s = now
                if r.generated >= r.output_tokens:
                    self._finish(r, now)
                    continue
                s = last  # the step that produced this token
                r.state = DECODE
                r.step_off = r.target - s
                r.gen0 = r.generated
                r.last_step = s + r.output_tokens - r.generated
                self._n_dec += 1
                self._s_off += r.step_off
                self._phase[r.step_off % self._bs] += 1
                self._seq += 1
                heapq.heappush(heap, (r.last_step, self._seq, r))

    def _finish(self, r: Request, now: float) -> None:
        r.state = DONE
        r.finish_s = now
        r.last_token_s = now
        del self._running[r.rid]
        self.stats.finished += 1
        if self.on_finish is not None:
            self.on_finish(r)

    def _dec_blocks(self, k: int) -> int:
        """KV blocks all decoding requests hold after allocating for global step ``k``:
        sum of ceil((off + k) / bs), in O(block size) from the counts per phase."""
        bs = self._bs
        pad = 0
        for ph, cnt in enumerate(self._phase):
            if cnt:
                pad += cnt * ((-(ph + k)) % bs)
        return (self._s_off + self._n_dec * k + pad) // bs

    def _held_blocks(self) -> int:
        """KV blocks held now (before the next step allocates)."""
        bs = self._bs
        return self._dec_blocks(self._G - 1) + sum(-(-r.kv_slots // bs)
                                                    for r in self._pf_reqs.values())

    def _preempt_last(self, now: float) -> tuple[Request, int]:
        """Preempt the most recently admitted request; returns it and the blocks it freed."""
        _, r = self._running.popitem()
        bs = self._bs
        if r.state == DECODE:
            freed = -(-(r.step_off + self._G - 1) // bs)
            self._n_dec -= 1
            self._s_off -= r.step_off
            self._phase[r.step_off % bs] -= 1
            r.generated = r.gen0 + (self._G - 1 - (r.last_step - (r.output_tokens - r.gen0)))
            r.last_token_s = now
        else:
            freed = -(-r.kv_slots // bs)
            self._pf_slots -= r.kv_slots
            del self._pf_reqs[r.rid]
        r.kv_slots = 0
        r.computed = 0
        r.target = r.input_tokens + r.generated
        r.cached_tokens = 0
        r.state = WAITING
        r.preemptions += 1
        self.stats.preemptions += 1
        self._waiting.appendleft(r)
        return r, freed

    def _plan(self, now: float) -> None:
        """Decide the next step (or jump of decode steps) at a step boundary ``now``."""
        if not self._running and not self._waiting:
            if self._pending:
                self._arm(self._pending[0].visible_s, 0)
            return
        G = self._G
        n_dec = self._n_dec
        # Fast path: every running request decodes and nobody waiting can be admitted.
        if len(self._running) == n_dec and n_dec and (
                not self._waiting or len(self._running) >= self._max_seqs
                or not self._admissible(self._waiting[0], self._budget - n_dec, now)):
            n = self._jump_len(now)
            if n > 0:
                c_step, _, c_seq, c_kv = self._c
                self._plan_t0 = now
                self._plan_A = c_step + c_seq * n_dec + c_kv * (self._s_off + n_dec * G)
                self._plan_B = c_kv * n_dec
                self._plan_n = n
                self._plan_pf = None
                self._busy = True
                self._arm(now + self._cum(n), n)
                return
        self._single_step(now)

    def _held_upper(self) -> int:
        """An upper bound of the KV blocks held now (exact count is O(running))."""
        held_tokens = self._s_off + self._n_dec * (self._G - 1) + self._pf_slots
        return -(-held_tokens // self._bs) + len(self._running)

    def _admissible(self, r: Request, budget: int, now: float) -> bool:
        if budget <= 0:
            return False
        cached = self._cached(r)
        new = min(r.target - cached, budget)
        need = -(-(cached + new) // self._bs)
        if self._held_upper() + need <= self._blocks:
            return True
        return need <= self._blocks - self._held_blocks()

    def _cached(self, r: Request) -> int:
        if r.cached_tokens <= 0 or r.generated:
            return 0
        bs = self._bs
        return min(r.cached_tokens, (r.target - 1) // bs * bs)

    def _jump_len(self, now: float) -> int:
        """Decode steps that can run before the next state change (0: preemption needed)."""
        G = self._G
        heap = self._heap
        while heap[0][2].state != DECODE or heap[0][2].last_step != heap[0][0]:
            heapq.heappop(heap)  # stale entries of preempted requests
        n = heap[0][0] - G + 1
        bs, D = self._bs, self._n_dec
        # KV: step k needs ceil((off + k) / bs) blocks per decoding sequence
        tok_last = self._s_off + D * (G + n - 1)
        if tok_last // bs + D > self._blocks:
            blocks = self._blocks
            if self._dec_blocks(G) > blocks:
                return 0
            lo, hi = 0, n - 1  # largest j with the step G + j still allocatable
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if self._dec_blocks(G + mid) <= blocks:
                    lo = mid
                else:
                    hi = mid - 1
            n = min(n, lo + 1)
        if self._pending and not self._waiting and len(self._running) < self._max_seqs:
            c_step, _, c_seq, c_kv = self._c
            self._plan_A = c_step + c_seq * D + c_kv * (self._s_off + D * G)
            self._plan_B = c_kv * D
            n = min(n, self._steps_until(self._pending[0].visible_s - now))
        return n

    def _single_step(self, now: float) -> None:
        """One step by vLLM V1's rules: running first (preempting on KV shortage), then
        waiting admissions."""
        tight, free = self._kv_room()
        chunks, budget, free, n_dec, kv_read, preempted = self._schedule_running(now, tight,
                                                                                 free)
        if not preempted:
            kv_read += self._admit_waiting(now, chunks, budget, free)
        self._start_step(now, chunks, n_dec, kv_read)

    def _kv_room(self) -> tuple[bool, int]:
        """Whether the step may run out of KV blocks (``tight``), and the free blocks: after
        the decoders' allocation of this step when not tight, before it when tight."""
        bs, G = self._bs, self._G
        budget = self._budget
        held = self._held_upper()
        tight = held + budget // bs + self._max_seqs + 1 + self._wait_cached_blocks > self._blocks
        if tight:
            held = self._held_blocks()  # possibly tight: count exactly
            # running requests' demand this step; without a shortage no preemption can happen
            dec_demand = self._dec_blocks(G) - self._dec_blocks(G - 1)
            demand = dec_demand
            room = budget - self._n_dec
            for r in self._pf_reqs.values():
                new_tokens = min(r.target - r.computed, room)
                if new_tokens <= 0:
                    break
                room -= new_tokens
                demand += -(-(r.computed + new_tokens) // bs) - (-(-r.kv_slots // bs))
            tight = demand > self._blocks - held
            if not tight:
                held += dec_demand  # the decoders' new blocks of this step
        return tight, self._blocks - held

    def _schedule_running(self, now: float, tight: bool, free: int
                          ) -> tuple[list[tuple[Request, int]], int, int, int, int, bool]:
        """Running requests in admission order: a token per decoder, a chunk per prefill,
        preempting the most recently admitted on a KV shortage. Returns the prefill chunks,
        the budget and free blocks left, decoders scheduled, KV tokens read and whether a
        request was preempted."""
        bs, G = self._bs, self._G
        budget = self._budget
        chunks: list[tuple[Request, int]] = []
        n_dec = 0
        kv_read = 0
        preempted = False
        if not tight:
            # no allocation can fail: decoders (which precede prefilling requests in admission
            # order) take one token each, then the prefilling requests their chunks
            n_dec = self._n_dec
            budget -= n_dec
            kv_read = self._s_off + n_dec * G
            order = list(self._pf_reqs.values())
        else:
            order = list(self._running.values())
        for r in order:
            if budget <= 0:
                break
            if r.rid not in self._running:
                continue  # preempted earlier in this loop
            if r.state == DECODE:
                have = -(-(r.step_off + G - 1) // bs)
                want = -(-(r.step_off + G) // bs)
                new_tokens = 1
            else:
                new_tokens = min(r.target - r.computed, budget)
                have = -(-r.kv_slots // bs)
                want = -(-(r.computed + new_tokens) // bs)
            victim_self = False
            while want - have > free:
                victim, freed = self._preempt_last(now)
                preempted = True
                free += freed
                if victim is r:
                    victim_self = True
                    break
            if victim_self:
                break
            free -= want - have
            budget -= new_tokens
            if r.state == DECODE:
                n_dec += 1
                kv_read += r.step_off + G
            else:
                self._pf_slots += (r.computed + new_tokens) - r.kv_slots
                r.kv_slots = r.computed + new_tokens
                kv_read += r.computed
                chunks.append((r, new_tokens))
        return chunks, budget, free, n_dec, kv_read, preempted

    def _admit_waiting(self, now: float, chunks: list[tuple[Request, int]], budget: int,
                       free: int) -> int:
        """Admit waiting requests (FCFS) while budget, running cap and free blocks allow;
        appends their first chunks and returns the KV tokens they read (cached prefixes)."""
        bs = self._bs
        kv_read = 0
        while self._waiting and budget > 0 and len(self._running) < self._max_seqs:
            r = self._waiting[0]
            cached = self._cached(r)
            new_tokens = min(r.target - cached, budget)
            need = -(-(cached + new_tokens) // bs)
            if need > free:
                break
            self._waiting.popleft()
            self._wait_cached_blocks -= cached // bs
            free -= need
            budget -= new_tokens
            r.computed = cached
            r.kv_slots = cached + new_tokens
            self._pf_slots += r.kv_slots
            kv_read += cached
            r.state = PREFILL
            self._pf_reqs[r.rid] = r
            if r.scheduled_s != r.scheduled_s:  # NaN: first admission
                r.scheduled_s = now
            self._running[r.rid] = r
            chunks.append((r, new_tokens))
        return kv_read

    def _start_step(self, now: float, chunks: list[tuple[Request, int]], n_dec: int,
                    kv_read: int) -> None:
        """Plan the one step just scheduled (its duration from the cost model) and arm it."""
        prefill = sum(c for _, c in chunks)
        if not chunks and not n_dec:
            # nothing schedulable (cannot happen with a consistent cache); wait for arrivals
            if self._pending:
                self._arm(self._pending[0].visible_s, 0)
            return
        c_step, c_pf, c_seq, c_kv = self._c
        dur = c_step + c_pf * prefill + c_seq * n_dec + c_kv * kv_read
        self._plan_t0 = now
        self._plan_A = dur
        self._plan_B = 0.0
        self._plan_n = 1
        self._plan_pf = chunks
        self._busy = True
        if n_dec != self._n_dec:  # internal invariant: every decoder is scheduled each step
            raise ModelError(f"{self.params.config}: a decoding sequence was not scheduled")
        self._arm(now + dur, 1)
