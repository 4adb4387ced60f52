"""vLLM V1's scheduler over one replica's KV cache: the waiting queue, the running batch, blocks.

The scheduler decides what one step computes and applies what the steps did; *when* steps end
(the cost model, SimPy events, jumps over decode-only steps) is
:class:`fleetplan.replica.engine.ReplicaEngine`'s part, as vLLM's ``Scheduler`` is beside its
engine loop. Rules (vLLM 0.8.x): a FCFS waiting queue; each step first serves running requests
in admission order (one token per decoding sequence, the rest of a chunked prefill), then admits
waiting requests while the token budget (``max_num_batched_tokens``), the running cap
(``max_num_seqs``) and free KV blocks allow; a running request that cannot get a KV block
preempts the most recently admitted one, which goes back to the head of the queue and is
recomputed from scratch.

A server without chunked prefill (``ReplicaParams.chunked_prefill`` False: vLLM V0's default
scheduler, every release before 0.8 on models of up to 32K context) follows V0's
``Scheduler._schedule_default`` instead (vLLM 0.5.4 ``vllm/core/scheduler.py`` 641-800): while
a waiting prompt can be admitted, a step takes whole prompts only, FCFS, while the token budget
(whole prompts), the running cap and the free KV blocks less V0's watermark (1% of the blocks,
``vllm/core/block_manager_v1.py`` 221-244, 286-295) allow, and decodes nothing; a step decodes
every running request only when no waiting prompt fits. The decoders' global step then counts
decode steps only (a prompt step leaves their contexts and KV blocks as they were).

KV accounting in O(block size), not O(running): a decoding request's context at global step
``k`` is ``step_off + k``, so the decoders' blocks follow from their count, the sum of their
offsets and their count per offset modulo the block size (:meth:`Scheduler.dec_blocks`).

The rules themselves (prefix-cache hits, chunk sizes, KV blocks, the decode run length) are the
functions of :mod:`fleetplan.replica.schedule_policy`, which the compiled steady-state loop calls
too; this class walks its queue and batch and keeps their state.

Main entry: :class:`Scheduler` (its state is public for the engine: read it, change it only
through the methods).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable

from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.records import DECODE, DONE, PREFILL, WAITING, EngineStats, Request
from fleetplan.replica.schedule_policy import (
    admission,
    dec_blocks,
    decode_new_blocks,
    decode_run_cap,
    decode_start,
    decoder_blocks,
    generated_when_preempted,
    held_exact,
    held_upper,
    may_run_short,
    prefill_chunk,
)

Chunks = list[tuple[Request, int]]  # (request, prompt tokens it computes) of one step


class Scheduler:
    """The queue, the running batch and the KV blocks of one replica."""

    def __init__(self, params: ReplicaParams, stats: EngineStats,
                 on_done: Callable[[Request], None], *, record_itl: bool) -> None:
        self.stats = stats
        self.on_done = on_done  # called with each finished request, once it is DONE
        self.record_itl = record_itl
        self.block_size = params.block_size
        self.kv_blocks = params.kv_blocks
        self.state = params.seq_state_blocks  # blocks each running sequence's state holds
        self.max_seqs = params.max_num_seqs
        self.token_budget = params.max_num_batched_tokens
        self.chunked = params.chunked_prefill
        # V0's block manager admits a prompt only if 1% of the blocks stay free after it
        self.watermark = 0 if self.chunked else int(0.01 * self.kv_blocks)
        self.waiting: deque[Request] = deque()
        self.running: dict[int, Request] = {}  # admission order
        self.decode_heap: list[tuple[int, int, Request]] = []  # (last step, seq, req)
        self.n_dec = 0
        self.s_off = 0  # sum of step_off over decoding requests
        self.phase = [0] * self.block_size  # decoding requests by step_off mod block size
        self.prefilling: dict[int, Request] = {}  # running requests still prefilling
        self.pf_slots = 0  # KV slots held by prefilling requests
        self.step = 0  # global step counter (steps completed)
        self.wait_cached_blocks = 0  # prefix-cache blocks waiting requests will take
        self._seq = 0  # heap tie-breaker

    @property
    def kv_tokens_used(self) -> int:
        return self.s_off + self.n_dec * self.step + self.pf_slots

    def enqueue(self, r: Request) -> None:
        """``r`` reaches the scheduler: to the back of the waiting queue."""
        r.state = WAITING
        bs = self.block_size
        self.wait_cached_blocks += admission(r.cached_tokens, r.generated, r.target, 0, bs,
                                             self.state)[0] // bs
        self.waiting.append(r)

    # ------------------------------------------------------------------ KV accounting
    def dec_blocks(self, k: int) -> int:
        """KV blocks all decoding requests hold after allocating for global step ``k``:
        sum of ceil((off + k) / bs), in O(block size) from the counts per phase."""
        return dec_blocks(self.phase, self.block_size, self.s_off, self.n_dec, k)

    def held_blocks(self) -> int:
        """KV blocks held now (before the next step allocates)."""
        bs = self.block_size
        return held_exact(self.dec_blocks(self.step - 1),
                          sum(-(-r.kv_slots // bs) for r in self.prefilling.values()),
                          len(self.running), self.state)

    def admissible(self, r: Request, budget: int) -> bool:
        """Whether waiting ``r`` could be admitted now with ``budget`` tokens left (without
        chunked prefill: its whole prompt, in a step of its own kind, so with the whole token
        budget and the watermark kept free)."""
        if not self.chunked:
            return self._whole_prompt(r, self.token_budget, self.kv_blocks - self.held_blocks(),
                                      alone=True) is not None
        if budget <= 0:
            return False
        bs = self.block_size
        need = admission(r.cached_tokens, r.generated, r.target, budget, bs, self.state)[2]
        if held_upper(self.s_off, self.n_dec, self.step, self.pf_slots, len(self.running),
                      bs, self.state) + need <= self.kv_blocks:
            return True
        return need <= self.kv_blocks - self.held_blocks()

    def decode_run_len(self) -> int:
        """Decode-only steps that can run before a decoder finishes or a KV block runs out
        (0: the next step needs a preemption). Needs a decoding request."""
        G = self.step
        heap = self.decode_heap
        while heap[0][2].state != DECODE or heap[0][2].last_step != heap[0][0]:
            heapq.heappop(heap)  # stale entries of preempted requests
        return decode_run_cap(self.phase, self.block_size, self.s_off, self.n_dec, G,
                              heap[0][0] - G + 1, self.kv_blocks, self.state)

    # ------------------------------------------------------------------ one step's schedule
    def schedule(self, now: float) -> tuple[Chunks, int, int]:
        """One step by vLLM V1's rules: running first (preempting on KV shortage), then
        waiting admissions. Returns the prefill chunks, the decoders scheduled and the KV
        tokens the step reads."""
        if not self.chunked and self.waiting:  # V0: prompts first, in a step of their own
            chunks: Chunks = []
            kv_read = self._admit_whole(now, chunks)
            if chunks:
                return chunks, 0, kv_read
        tight, free = self._kv_room()
        chunks, budget, free, n_dec, kv_read, preempted = self._schedule_running(now, tight,
                                                                                 free)
        if not preempted and self.chunked:
            kv_read += self._admit_waiting(now, chunks, budget, free)
        return chunks, n_dec, kv_read

    def _whole_prompt(self, r: Request, budget: int, free: int,
                      alone: bool) -> tuple[int, int, int] | None:
        """V0's admission of waiting ``r`` as a whole prompt with ``budget`` tokens and ``free``
        blocks left: :func:`admission`'s ``(cached, new tokens, blocks)``, or None when its
        prompt does not fit the budget, the running cap is reached or fewer than the watermark
        blocks would stay free. ``alone``: the step's first prompt, which may exceed the budget
        (a preempted request recomputing its prompt and output; vLLM ignores a new prompt
        longer than the budget, the engine refuses it at submission)."""
        if len(self.running) >= self.max_seqs:
            return None
        got = admission(r.cached_tokens, r.generated, r.target, r.target, self.block_size,
                        self.state)
        if (got[1] > budget and not alone) or free - got[2] < self.watermark:
            return None
        return got

    def _admit_whole(self, now: float, chunks: Chunks) -> int:
        """V0: admit waiting requests (FCFS) as whole prompts while the budget, the running cap
        and the free blocks (less the watermark) allow; appends them to ``chunks`` and returns
        the KV tokens they read (cached prefixes)."""
        budget, free = self.token_budget, self.kv_blocks - self.held_blocks()
        kv_read = 0
        waiting = self.waiting
        while waiting:
            r = waiting[0]
            got = self._whole_prompt(r, budget, free, alone=not chunks)
            if got is None:
                break
            cached, new_tokens, need = got
            free -= need
            budget -= new_tokens
            kv_read += cached
            self._start_prefill(now, chunks, cached, new_tokens)
        return kv_read

    def _kv_room(self) -> tuple[bool, int]:
        """Whether the step may run out of KV blocks (``tight``), and the free blocks: after
        the decoders' allocation of this step when not tight, before it when tight."""
        bs, G = self.block_size, self.step
        budget = self.token_budget
        held = held_upper(self.s_off, self.n_dec, G, self.pf_slots, len(self.running), bs,
                          self.state)
        tight = may_run_short(held, budget, bs, self.max_seqs, self.wait_cached_blocks,
                              self.kv_blocks, self.state)
        if tight:
            held = self.held_blocks()  # possibly tight: count exactly
            # running requests' demand this step; without a shortage no preemption can happen
            dec_demand = self.dec_blocks(G) - self.dec_blocks(G - 1)
            demand = dec_demand
            room = budget - self.n_dec
            for r in self.prefilling.values():
                new_tokens, new_blocks = prefill_chunk(r.computed, r.kv_slots, r.target, room, bs)
                if new_tokens <= 0:
                    break
                room -= new_tokens
                demand += new_blocks
            tight = demand > self.kv_blocks - held
            if not tight:
                held += dec_demand  # the decoders' new blocks of this step
        return tight, self.kv_blocks - held

    def _schedule_running(self, now: float, tight: bool, free: int
                          ) -> tuple[Chunks, int, int, int, int, bool]:
        """Running requests in admission order: a token per decoder, a chunk per prefill,
        preempting the most recently admitted on a KV shortage. Returns the prefill chunks,
        the budget and free blocks left, decoders scheduled, KV tokens read and whether a
        request was preempted."""
        bs, G = self.block_size, self.step
        budget = self.token_budget
        chunks: Chunks = []
        n_dec = 0
        kv_read = 0
        preempted = False
        if not tight:
            # no allocation can fail: decoders (which precede prefilling requests in admission
            # order) take one token each, then the prefilling requests their chunks
            n_dec = self.n_dec
            budget -= n_dec
            kv_read = self.s_off + n_dec * G
            order = list(self.prefilling.values())
        else:
            order = list(self.running.values())
        for r in order:
            if budget <= 0:
                break
            if r.rid not in self.running:
                continue  # preempted earlier in this loop
            if r.state == DECODE:
                new_tokens, new_blocks = 1, decode_new_blocks(r.step_off, G, bs)
            else:
                new_tokens, new_blocks = prefill_chunk(r.computed, r.kv_slots, r.target, budget,
                                                       bs)
            victim_self = False
            while new_blocks > free:
                victim, freed = self._preempt_last(now)
                preempted = True
                free += freed
                if victim is r:
                    victim_self = True
                    break
            if victim_self:
                break
            free -= new_blocks
            budget -= new_tokens
            if r.state == DECODE:
                n_dec += 1
                kv_read += r.step_off + G
            else:
                self.pf_slots += (r.computed + new_tokens) - r.kv_slots
                r.kv_slots = r.computed + new_tokens
                kv_read += r.computed
                chunks.append((r, new_tokens))
        return chunks, budget, free, n_dec, kv_read, preempted

    def _admit_waiting(self, now: float, chunks: Chunks, budget: int, free: int) -> int:
        """Admit waiting requests (FCFS) while budget, running cap and free blocks allow;
        appends their first chunks and returns the KV tokens they read (cached prefixes)."""
        bs = self.block_size
        kv_read = 0
        waiting, running, max_seqs = self.waiting, self.running, self.max_seqs
        while waiting and budget > 0 and len(running) < max_seqs:
            r = waiting[0]
            cached, new_tokens, need = admission(r.cached_tokens, r.generated, r.target, budget,
                                                 bs, self.state)
            if need > free:
                break
            free -= need
            budget -= new_tokens
            kv_read += cached
            self._start_prefill(now, chunks, cached, new_tokens)
        return kv_read

    def _start_prefill(self, now: float, chunks: Chunks, cached: int, new_tokens: int) -> None:
        """The first waiting request, admitted (either policy): its cached prefix counts as
        computed, its slots as the prefix and ``new_tokens``, and its first chunk joins
        ``chunks``."""
        r = self.waiting.popleft()
        self.wait_cached_blocks -= cached // self.block_size
        r.computed = cached
        r.kv_slots = cached + new_tokens
        self.pf_slots += r.kv_slots
        r.state = PREFILL
        self.prefilling[r.rid] = r
        if r.scheduled_s != r.scheduled_s:  # NaN: first admission
            r.scheduled_s = now
        self.running[r.rid] = r
        chunks.append((r, new_tokens))

    def _preempt_last(self, now: float) -> tuple[Request, int]:
        """Preempt the most recently admitted request; returns it and the blocks it freed."""
        _, r = self.running.popitem()
        bs = self.block_size
        if r.state == DECODE:
            freed = decoder_blocks(r.step_off, self.step - 1, bs)
            self.n_dec -= 1
            self.s_off -= r.step_off
            self.phase[r.step_off % bs] -= 1
            r.generated = generated_when_preempted(r.gen0, self.step, r.last_step,
                                                   r.output_tokens)
            r.last_token_s = now
        else:
            freed = -(-r.kv_slots // bs)
            self.pf_slots -= r.kv_slots
            del self.prefilling[r.rid]
        freed += self.state  # its state's blocks too
        r.kv_slots = 0
        r.computed = 0
        r.target = r.input_tokens + r.generated
        r.cached_tokens = 0
        r.state = WAITING
        r.preemptions += 1
        self.stats.preemptions += 1
        self.waiting.appendleft(r)
        return r, freed

    # ------------------------------------------------------------------ what the steps did
    def advance(self, n: int, now: float, chunks: Chunks | None) -> None:
        """Apply ``n`` steps ending at ``now``: decoders whose last token came out finish;
        ``chunks`` (the prefill of a one-step plan) progress, and a completed prefill emits a
        token and starts decoding. Without chunked prefill a step of prompts decodes nothing:
        the decoders' global step does not move."""
        if self.chunked or not chunks:
            self.step += n
        last = self.step - 1
        heap = self.decode_heap
        if heap and heap[0][0] <= last:
            phase, bs, pop = self.phase, self.block_size, heapq.heappop
            while heap and heap[0][0] <= last:
                _, _, r = pop(heap)
                if r.state != DECODE or r.last_step > last:
                    continue  # stale entry (preempted and re-queued)
                self.n_dec -= 1
                self.s_off -= r.step_off
                phase[r.step_off % bs] -= 1
                r.generated = r.output_tokens
                self.finish(r, now)
        if chunks is None:
            return
        for r, chunk in chunks:
            if r.state != PREFILL:
                continue
            r.computed += chunk
            if r.computed < r.target:
                continue
            # prefill complete: the next token is out, then it decodes
            self.pf_slots -= r.kv_slots
            r.kv_slots = 0
            del self.prefilling[r.rid]
            if r.generated == 0:
                r.first_token_s = now
            elif self.record_itl:
                self.stats.itl_single.append(now - r.last_token_s)
            r.generated += 1
            r.last_token_s = now
            if r.generated >= r.output_tokens:
                self.finish(r, now)
                continue
            s = last  # the step that produced this token
            r.state = DECODE
            r.step_off, r.last_step = decode_start(r.target, s, r.output_tokens, r.generated)
            r.gen0 = r.generated
            self.n_dec += 1
            self.s_off += r.step_off
            self.phase[r.step_off % self.block_size] += 1
            self._seq += 1
            heapq.heappush(heap, (r.last_step, self._seq, r))

    def finish(self, r: Request, now: float) -> None:
        """``r``'s last token is out at ``now``."""
        r.state = DONE
        r.finish_s = now
        r.last_token_s = now
        del self.running[r.rid]
        self.stats.finished += 1
        self.on_done(r)
