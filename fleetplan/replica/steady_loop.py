"""The loop of a compiled steady-state run (:mod:`fleetplan.replica.steady_kernel`).

:func:`steady_loop` is :class:`fleetplan.replica.engine.ReplicaEngine` and
:class:`fleetplan.replica.scheduler.Scheduler` rewritten over arrays for one replica whose
arrivals are all known: request records become columns, the running batch and its prefilling
part become admission-ordered linked lists, the waiting queue a ring (preempted requests go back
to its head), the decoders' heap a list of ``(last step, seq, request)``. Each block says which
method of the Python engine it is. The scheduling rules (prefix-cache hits, chunk sizes, KV
blocks, the decode run length) are the scheduler's own functions of
:mod:`fleetplan.replica.schedule_policy`, compiled in; the codes and the array helpers it calls are
in :mod:`fleetplan.replica.steady_arrays`.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from fleetplan.replica.steady_arrays import (
    DECODE,
    EPS,
    ERR_BAD_REQUEST,
    ERR_NOT_SCHEDULED,
    ERR_STALLED,
    F_HEAD,
    PREFILL,
    R_HEAD,
    R_TAIL,
    STOP_ABOVE,
    STOP_DONE,
    STOP_OVERLOAD,
    WAITING,
    activity,
    admission,
    append,
    arm,
    dec_blocks,
    decode_new_blocks,
    decode_plan,
    decode_run_cap,
    decode_start,
    decoder_blocks,
    finish,
    generated_when_preempted,
    held_exact,
    held_upper,
    kv_room,
    prefill_blocks,
    prefill_chunk,
    source_clock,
    step_time,
    steps_until,
    unlink,
    wake,
)

__all__ = ["steady_loop"]


# ---------------------------------------------------------------------- the run
def steady_loop(arr_t, inp, out, hit, measured, bad, overhead, limit,  # noqa: C901, PLR0912, PLR0915
                c_step, c_pf, c_seq, c_kv, bs, kv_blocks, st_blocks, max_seqs, token_budget,
                f_low, slope, anchor, watch_kind, watch_lim,
                watch_need, c_exp, share):  # type: ignore[no-untyped-def]
    """One run (:func:`fleetplan.replica.steady_kernel.run_steady` documents the arguments and
    the result)."""
    n_req = arr_t.shape[0]
    nan, inf = math.nan, math.inf
    state = np.zeros(n_req, np.int64)  # PENDING
    cached_tok = hit.copy()
    target = inp.copy()
    computed = np.zeros(n_req, np.int64)
    kv_slots = np.zeros(n_req, np.int64)
    step_off = np.zeros(n_req, np.int64)
    last_step = np.zeros(n_req, np.int64)
    gen0 = np.zeros(n_req, np.int64)
    generated = np.zeros(n_req, np.int64)
    sched_s = np.full(n_req, nan)
    first_s = np.full(n_req, nan)
    fin_s = np.full(n_req, nan)
    # steady_state's source clock: a timeout of (t - now) from its last arrival lands on
    # now + (t - now); each request is submitted at that clock and seen overhead_s later
    clk = source_clock(arr_t)
    vis = np.zeros(n_req)  # when each submitted request reaches the scheduler
    r_prev = np.full(n_req, -1, np.int64)  # running, in admission order
    r_next = np.full(n_req, -1, np.int64)
    f_prev = np.full(n_req, -1, np.int64)  # running and prefilling, in admission order
    f_next = np.full(n_req, -1, np.int64)
    ends = np.full(4, -1, np.int64)
    n_run = 0
    wq = np.zeros(n_req, np.int64)  # the waiting queue, a ring
    wq_head = 0
    n_wait = 0
    heap = [(np.int64(0), np.int64(0), np.int64(0))]  # (last step, seq, request)
    heap.pop()
    phase = np.zeros(bs, np.int64)
    n_dec = 0
    s_off = 0
    pf_slots = 0
    step = 0
    wait_cached_blocks = 0
    seq = 0
    ch_rid = np.zeros(max_seqs + 1, np.int64)  # the one-step plan's prefill chunks
    ch_tok = np.zeros(max_seqs + 1, np.int64)
    n_ch = 0
    plan_pf = False
    plan_a = 0.0
    plan_b = 0.0
    plan_n = 0
    plan_act = 0.0
    busy = False
    busy_s = 0.0
    active_s = 0.0
    p_head = 0  # the first request not yet in the scheduler's queue
    n_sub = 0  # requests submitted so far (the engine's pending ones: p_head .. n_sub - 1)
    ctr = np.array([0, -1], np.int64)  # measured requests left, watch entry stopped on
    for i in range(n_req):
        if measured[i]:
            ctr[0] += 1
    seen = np.zeros(watch_kind.shape[0], np.int64)
    status = -1
    end_t = 0.0
    order = np.zeros(n_req, np.int64)  # a snapshot of running or prefilling for one step
    # SimPy's event order: by time, then by when the event was scheduled (eid)
    eid = 0
    timer_t = inf  # the engine's armed timer (one at a time: a re-armed plan replaces it)
    timer_eid = 0
    plan_end = inf  # ReplicaEngine._plan_end: the time the armed plan was asked to end at
    plan_t0 = 0.0
    # the source's next wake-up, for request n_sub (eid -1: it runs on without yielding)
    src_now = 0.0
    src_t, src_eid, eid = wake(clk, 0, n_req, src_now, eid)
    ended = False
    while not ended:
        if src_t == inf and timer_t == inf:
            status = ERR_STALLED
            end_t = src_now
            break
        if src_t < timer_t or (src_t == timer_t and src_eid < timer_eid):
            # ------------------------------------------------ steady_state's source wakes:
            # it submits request n_sub, checks the queue, submits the next limit - q ahead
            src_now = src_t
            j = n_sub
            n_ahead = -1  # unknown until the first submission's check
            while j < n_req:
                if n_ahead == 0:
                    break  # request j is the next check
                if n_ahead > 0:
                    n_ahead -= 1
                if bad[j]:
                    status = ERR_BAD_REQUEST
                    ctr[1] = j
                    end_t = src_now
                    ended = True
                    break
                # ReplicaEngine.submit(r, at=the source's clock), as steady_state calls it
                at = clk[j] if clk[j] >= src_now - EPS else src_now
                vis[j] = at + overhead
                n_sub = j + 1
                if not busy:
                    if plan_end > vis[j] + EPS:
                        plan_end, timer_t, eid = arm(src_now, vis[j], eid)
                        timer_eid = eid
                elif plan_n > 1 and n_wait == 0 and n_run < max_seqs:
                    # mid-plan: the new request may join at an earlier step boundary
                    m = steps_until(plan_a, plan_b, vis[j] - plan_t0)
                    if m < plan_n:
                        plan_n = m
                        t = plan_t0 + (m * plan_a + plan_b * m * (m - 1) / 2.0)
                        plan_end, timer_t, eid = arm(src_now, t, eid)
                        timer_eid = eid
                if n_ahead < 0:
                    q = n_wait + (n_sub - p_head)  # ReplicaEngine.queue_len
                    if q > limit:
                        status = STOP_OVERLOAD
                        end_t = src_now
                        ended = True
                        break
                    n_ahead = limit - q
                j += 1
            if ended:
                break
            src_t, src_eid, eid = wake(clk, n_sub, n_req, src_now, eid)
            continue
        # ------------------------------------------------ ReplicaEngine._timer
        now = timer_t
        timer_t = inf
        timer_eid = 0
        if busy:
            # ReplicaEngine._complete
            n = plan_n
            dur = n * plan_a + plan_b * n * (n - 1) / 2.0
            busy_s += dur
            active_s += plan_act * dur
            # Scheduler.advance
            step += n
            last = step - 1
            while len(heap) > 0 and heap[0][0] <= last:
                r = heapq.heappop(heap)[2]
                if state[r] != DECODE or last_step[r] > last:
                    continue  # stale entry (preempted and re-queued)
                n_dec -= 1
                s_off -= step_off[r]
                phase[step_off[r] % bs] -= 1
                generated[r] = out[r]
                n_run -= 1
                if finish(r, now, state, r_prev, r_next, ends, arr_t, out, first_s, fin_s,
                           measured, watch_lim, watch_kind, watch_need, seen, ctr):
                    ended = True
            for j in range(n_ch if plan_pf else 0):
                r = ch_rid[j]
                if state[r] != PREFILL:
                    continue
                computed[r] += ch_tok[j]
                if computed[r] < target[r]:
                    continue
                # prefill complete: the next token is out, then it decodes
                pf_slots -= kv_slots[r]
                kv_slots[r] = 0
                unlink(f_prev, f_next, ends, F_HEAD, r)
                if generated[r] == 0:
                    first_s[r] = now
                generated[r] += 1
                if generated[r] >= out[r]:
                    n_run -= 1
                    if finish(r, now, state, r_prev, r_next, ends, arr_t, out, first_s,
                               fin_s, measured, watch_lim, watch_kind, watch_need, seen, ctr):
                        ended = True
                    continue
                state[r] = DECODE
                step_off[r], last_step[r] = decode_start(target[r], last, out[r], generated[r])
                gen0[r] = generated[r]
                n_dec += 1
                s_off += step_off[r]
                phase[step_off[r] % bs] += 1
                seq += 1
                heapq.heappush(heap, (last_step[r], np.int64(seq), r))
            plan_pf = False
            if ended:
                # the run ends at this instant; the rest of the timer (queue, next plan) runs
                # as SimPy's does before the run's end condition is processed
                status = STOP_ABOVE if ctr[1] >= 0 else STOP_DONE
                end_t = now
        plan_end = inf
        busy = False
        while p_head < n_sub and vis[p_head] <= now + EPS:
            # Scheduler.enqueue
            r = p_head
            state[r] = WAITING
            wait_cached_blocks += admission(cached_tok[r], generated[r], target[r], 0, bs,
                                            st_blocks)[0] // bs
            wq[(wq_head + n_wait) % n_req] = r
            n_wait += 1
            p_head += 1
        # ------------------------------------------------ ReplicaEngine._plan
        if n_run == 0 and n_wait == 0:
            if p_head < n_sub:
                plan_end, timer_t, eid = arm(now, vis[p_head], eid)
                timer_eid = eid
            continue
        G = step
        jump = False
        if n_run == n_dec and n_dec > 0:
            # every running request decodes: jump unless a waiting one can be admitted
            jump = n_wait == 0 or n_run >= max_seqs
            budget = token_budget - n_dec
            if not jump and budget <= 0:
                jump = True
            elif not jump:
                # Scheduler.admissible(waiting[0], budget)
                r = wq[wq_head]
                need = admission(cached_tok[r], generated[r], target[r], budget, bs,
                                 st_blocks)[2]
                held_up = held_upper(s_off, n_dec, step, pf_slots, n_run, bs, st_blocks)
                if held_up + need > kv_blocks:
                    held = held_exact(dec_blocks(phase, bs, s_off, n_dec, step - 1),
                                      prefill_blocks(kv_slots, f_next, ends, bs), n_run,
                                      st_blocks)
                    jump = not (need <= kv_blocks - held)
        if jump:
            # ReplicaEngine._jump_len: Scheduler.decode_run_len, then the first pending
            while state[heap[0][2]] != DECODE or last_step[heap[0][2]] != heap[0][0]:
                heapq.heappop(heap)
            n = decode_run_cap(phase, bs, s_off, n_dec, G, heap[0][0] - G + 1, kv_blocks,
                               st_blocks)
            plan_a, plan_b = decode_plan(c_step, c_seq, c_kv, n_dec, s_off, G, c_exp, share)
            if n > 0 and p_head < n_sub and n_wait == 0 and n_run < max_seqs:
                n = min(n, steps_until(plan_a, plan_b, vis[p_head] - now))
            if n > 0:
                plan_n = n
                plan_pf = False
                plan_act = activity(n_dec, f_low, slope, anchor)
                busy = True
                plan_t0 = now
                t = now + (n * plan_a + plan_b * n * (n - 1) / 2.0)
                plan_end, timer_t, eid = arm(now, t, eid)
                timer_eid = eid
                continue
        # ------------------------------------------------ ReplicaEngine._single_step
        budget = token_budget
        tight, held = kv_room(phase, kv_slots, f_next, ends, target, computed, bs, s_off,
                              n_dec, n_run, step, pf_slots, budget, max_seqs,
                              wait_cached_blocks, kv_blocks, st_blocks)
        free = kv_blocks - held
        # Scheduler._schedule_running
        n_ch = 0
        sn_dec = 0
        kv_read = 0
        preempted = False
        n_order = 0
        if not tight:
            sn_dec = n_dec
            budget -= sn_dec
            kv_read = s_off + sn_dec * G
            f, nxt = ends[F_HEAD], f_next
        else:
            f, nxt = ends[R_HEAD], r_next
        while f >= 0:
            order[n_order] = f
            n_order += 1
            f = nxt[f]
        for j in range(n_order):
            if budget <= 0:
                break
            r = order[j]
            if state[r] != PREFILL and state[r] != DECODE:
                continue  # preempted earlier in this loop
            is_dec = state[r] == DECODE
            if is_dec:
                new_tokens, new_blocks = 1, decode_new_blocks(step_off[r], G, bs)
            else:
                new_tokens, new_blocks = prefill_chunk(computed[r], kv_slots[r], target[r],
                                                       budget, bs)
            victim_self = False
            while new_blocks > free:
                # Scheduler._preempt_last
                v = ends[R_TAIL]
                unlink(r_prev, r_next, ends, R_HEAD, v)
                n_run -= 1
                if state[v] == DECODE:
                    freed = decoder_blocks(step_off[v], step - 1, bs)
                    n_dec -= 1
                    s_off -= step_off[v]
                    phase[step_off[v] % bs] -= 1
                    generated[v] = generated_when_preempted(gen0[v], step, last_step[v], out[v])
                else:
                    freed = -(-kv_slots[v] // bs)
                    pf_slots -= kv_slots[v]
                    unlink(f_prev, f_next, ends, F_HEAD, v)
                freed += st_blocks  # its state's blocks too
                kv_slots[v] = 0
                computed[v] = 0
                target[v] = inp[v] + generated[v]
                cached_tok[v] = 0
                state[v] = WAITING
                wq_head = (wq_head - 1) % n_req
                wq[wq_head] = v
                n_wait += 1
                preempted = True
                free += freed
                if v == r:
                    victim_self = True
                    break
            if victim_self:
                break
            free -= new_blocks
            budget -= new_tokens
            if is_dec:
                sn_dec += 1
                kv_read += step_off[r] + G
            else:
                pf_slots += (computed[r] + new_tokens) - kv_slots[r]
                kv_slots[r] = computed[r] + new_tokens
                kv_read += computed[r]
                ch_rid[n_ch] = r
                ch_tok[n_ch] = new_tokens
                n_ch += 1
        if not preempted:
            # Scheduler._admit_waiting
            kv_adm = 0
            while n_wait > 0 and budget > 0 and n_run < max_seqs:
                r = wq[wq_head]
                cb, new_tokens, need = admission(cached_tok[r], generated[r], target[r], budget,
                                                 bs, st_blocks)
                if need > free:
                    break
                wq_head = (wq_head + 1) % n_req
                n_wait -= 1
                wait_cached_blocks -= cb // bs
                free -= need
                budget -= new_tokens
                computed[r] = cb
                kv_slots[r] = cb + new_tokens
                pf_slots += kv_slots[r]
                kv_adm += cb
                state[r] = PREFILL
                append(f_prev, f_next, ends, F_HEAD, r)
                if sched_s[r] != sched_s[r]:  # NaN: first admission
                    sched_s[r] = now
                append(r_prev, r_next, ends, R_HEAD, r)
                n_run += 1
                ch_rid[n_ch] = r
                ch_tok[n_ch] = new_tokens
                n_ch += 1
            kv_read += kv_adm
        prefill = 0
        for j in range(n_ch):
            prefill += ch_tok[j]
        if n_ch == 0 and sn_dec == 0:
            # nothing schedulable (cannot happen with a consistent cache); wait for arrivals
            if p_head < n_sub:
                plan_end, timer_t, eid = arm(now, vis[p_head], eid)
                timer_eid = eid
            continue
        dur = step_time(c_step, c_pf, c_seq, c_kv, prefill, sn_dec, kv_read, c_exp, share)
        plan_a = dur
        plan_b = 0.0
        plan_n = 1
        plan_pf = True
        plan_act = activity(prefill + sn_dec, f_low, slope, anchor)
        busy = True
        if sn_dec != n_dec and not ended:
            status = ERR_NOT_SCHEDULED
            end_t = now
            break
        plan_t0 = now
        t = now + dur
        plan_end, timer_t, eid = arm(now, t, eid)
        timer_eid = eid
    return first_s, fin_s, sched_s, status, ctr[1], end_t, busy_s, active_s
