"""A vLLM-like serving engine (one replica) as an exact, event-skipping SimPy model.

Main entries: :class:`Request` (one request, filled in by the engine) and :class:`ReplicaEngine`
(``submit(req)`` at the request's arrival; ``on_finish`` is called when its last token is out).

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
from dataclasses import dataclass, field

import simpy

from fleetplan.errors import ModelError
from fleetplan.replica.params import ReplicaParams

_NAN = math.nan
_EPS = 1e-12
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
    _visible: float = 0.0
    _computed: int = 0  # tokens whose KV is computed (prefill progress)
    _target: int = 0  # tokens to prefill before the next token comes out
    _slots: int = 0  # KV slots held while prefilling
    _off: int = 0  # while decoding: context at global step k is _off + k
    _fin: int = 0  # while decoding: global step of the last token
    _gen0: int = 0  # tokens out when decoding started

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
    preemptions: int = 0
    finished: int = 0
    # token-gap record: (first step duration, growth per step, steps, sequences) per jump
    itl_segments: list[tuple[float, float, int, int]] = field(default_factory=list)
    itl_single: list[float] = field(default_factory=list)  # gaps across a preemption


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
        self._s_off = 0  # sum of _off over decoding requests
        self._phase = [0] * self._bs  # decoding requests by _off mod block size
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
        req._visible = now + self.params.overhead_s
        req._target = req.input_tokens
        req.state = PENDING
        self._pending.append(req)
        if not self._busy:
            if self._plan_end > req._visible + _EPS:
                self._arm(req._visible, 0)
            return
        # mid-plan: can the new request join at an earlier step boundary?
        if self._plan_n > 1 and not self._waiting and len(self._running) < self._max_seqs:
            m = self._steps_until(req._visible - self._plan_t0)
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
        while pend and pend[0]._visible <= now + _EPS:
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
            if r.state != DECODE or r._fin > last:
                continue  # stale entry (preempted and re-queued)
            self._n_dec -= 1
            self._s_off -= r._off
            self._phase[r._off % self._bs] -= 1
            r.generated = r.output_tokens
            self._finish(r, now)
        pf = self._plan_pf
        if pf is not None:
            self._plan_pf = None
            for r, chunk in pf:
                if r.state != PREFILL:
                    continue
                r._computed += chunk
                if r._computed < r._target:
                    continue
                self._pf_slots -= r._slots
                r._slots = 0
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
                r._off = r._target - s
                r._gen0 = r.generated
                r._fin = s + r.output_tokens - r.generated
                self._n_dec += 1
                self._s_off += r._off
                self._phase[r._off % self._bs] += 1
                self._seq += 1
                heapq.heappush(heap, (r._fin, self._seq, r))

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
        return self._dec_blocks(self._G - 1) + sum(-(-r._slots // bs)
                                                    for r in self._pf_reqs.values())

    def _preempt_last(self, now: float) -> tuple[Request, int]:
        """Preempt the most recently admitted request; returns it and the blocks it freed."""
        _, r = self._running.popitem()
        bs = self._bs
        if r.state == DECODE:
            freed = -(-(r._off + self._G - 1) // bs)
            self._n_dec -= 1
            self._s_off -= r._off
            self._phase[r._off % bs] -= 1
            r.generated = r._gen0 + (self._G - 1 - (r._fin - (r.output_tokens - r._gen0)))
            r.last_token_s = now
        else:
            freed = -(-r._slots // bs)
            self._pf_slots -= r._slots
            del self._pf_reqs[r.rid]
        r._slots = 0
        r._computed = 0
        r._target = r.input_tokens + r.generated
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
                self._arm(self._pending[0]._visible, 0)
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
        new = min(r._target - cached, budget)
        need = -(-(cached + new) // self._bs)
        if self._held_upper() + need <= self._blocks:
            return True
        return need <= self._blocks - self._held_blocks()

    def _cached(self, r: Request) -> int:
        if r.cached_tokens <= 0 or r.generated:
            return 0
        bs = self._bs
        return min(r.cached_tokens, (r._target - 1) // bs * bs)

    def _jump_len(self, now: float) -> int:
        """Decode steps that can run before the next state change (0: preemption needed)."""
        G = self._G
        heap = self._heap
        while heap[0][2].state != DECODE or heap[0][2]._fin != heap[0][0]:
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
            n = min(n, self._steps_until(self._pending[0]._visible - now))
        return n

    def _single_step(self, now: float) -> None:
        """One step by vLLM V1's rules: running first (preempting on KV shortage), then
        waiting admissions."""
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
                new_tokens = min(r._target - r._computed, room)
                if new_tokens <= 0:
                    break
                room -= new_tokens
                demand += -(-(r._computed + new_tokens) // bs) - (-(-r._slots // bs))
            tight = demand > self._blocks - held
            if not tight:
                held += dec_demand  # the decoders' new blocks of this step
        free = self._blocks - held
        chunks: list[tuple[Request, int]] = []
        n_dec = 0
        kv_read = 0
        preempted = False
        if not tight and self._pf_reqs:
            # no allocation can fail: decoders (which precede prefilling requests in admission
            # order) take one token each, then the prefilling requests their chunks
            n_dec = self._n_dec
            budget -= n_dec
            kv_read = self._s_off + n_dec * G
            order = list(self._pf_reqs.values())
        elif not tight:
            n_dec = self._n_dec
            budget -= n_dec
            kv_read = self._s_off + n_dec * G
            order = []
        else:
            order = list(self._running.values())
        for r in order:
            if budget <= 0:
                break
            if r.rid not in self._running:
                continue  # preempted earlier in this loop
            if r.state == DECODE:
                have = -(-(r._off + G - 1) // bs)
                want = -(-(r._off + G) // bs)
                new_tokens = 1
            else:
                new_tokens = min(r._target - r._computed, budget)
                have = -(-r._slots // bs)
                want = -(-(r._computed + new_tokens) // bs)
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
                kv_read += r._off + G
            else:
                self._pf_slots += (r._computed + new_tokens) - r._slots
                r._slots = r._computed + new_tokens
                kv_read += r._computed
                chunks.append((r, new_tokens))
        if not preempted:
            while self._waiting and budget > 0 and len(self._running) < self._max_seqs:
                r = self._waiting[0]
                cached = self._cached(r)
                new_tokens = min(r._target - cached, budget)
                need = -(-(cached + new_tokens) // bs)
                if need > free:
                    break
                self._waiting.popleft()
                self._wait_cached_blocks -= cached // bs
                free -= need
                budget -= new_tokens
                r._computed = cached
                r._slots = cached + new_tokens
                self._pf_slots += r._slots
                kv_read += cached
                r.state = PREFILL
                self._pf_reqs[r.rid] = r
                if r.scheduled_s != r.scheduled_s:  # NaN: first admission
                    r.scheduled_s = now
                self._running[r.rid] = r
                chunks.append((r, new_tokens))
        prefill = sum(c for _, c in chunks)
        if not chunks and not n_dec:
            # nothing schedulable (cannot happen with a consistent cache); wait for arrivals
            if self._pending:
                self._arm(self._pending[0]._visible, 0)
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
