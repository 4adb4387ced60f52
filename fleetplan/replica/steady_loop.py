"""The loop of a compiled steady-state run (:mod:`fleetplan.replica.steady_kernel`) and the
scheduler's helpers it calls.

:func:`steady_loop` is :class:`fleetplan.replica.engine.ReplicaEngine` and
:class:`fleetplan.replica.scheduler.Scheduler` rewritten over arrays for one replica whose
arrivals are all known: request records become columns, the running batch and its prefilling
part become admission-ordered linked lists, the waiting queue a ring (preempted requests go back
to its head), the decoders' heap a list of ``(last step, seq, request)``. Each block says which
method of the Python engine it is; the arithmetic is the same, operation by operation. The
helpers are ``register_jitable``: plain Python when called from Python, compiled into the loop.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
from numba.extending import register_jitable

__all__ = ["STOP_ABOVE", "STOP_DONE", "STOP_OVERLOAD", "steady_loop"]

STOP_DONE, STOP_OVERLOAD, STOP_ABOVE = 0, 1, 2
ERR_NOT_SCHEDULED, ERR_STALLED, ERR_BAD_REQUEST = 3, 4, 5
# request states, as fleetplan.replica.records numbers them
_PENDING, _WAITING, _PREFILL, _DECODE, _DONE = 0, 1, 2, 3, 4
_EPS = 1e-12
# the figures a run may be stopped on, by code (fleetplan.replica.steady._FIGURE_OF)
FIGURE_CODES = {"ttft_p99_ms": 0, "tpot_p99_ms": 1, "e2e_p99_ms": 2}
# the ends of the two admission-ordered lists (running; running and still prefilling)
_R_HEAD, _R_TAIL, _F_HEAD, _F_TAIL = 0, 1, 2, 3


# ---------------------------------------------------------------------- helpers (Scheduler's)
@register_jitable
def _dec_blocks(phase, bs, s_off, n_dec, k):  # type: ignore[no-untyped-def]
    """Scheduler.dec_blocks: KV blocks the decoders hold after allocating for step ``k``."""
    pad = 0
    for ph in range(bs):
        cnt = phase[ph]
        if cnt:
            pad += cnt * ((-(ph + k)) % bs)
    return (s_off + n_dec * k + pad) // bs


@register_jitable
def _prefill_blocks(kv_slots, nxt, ends, bs):  # type: ignore[no-untyped-def]
    """KV blocks the prefilling requests hold (Scheduler.held_blocks' second term)."""
    held = 0
    f = ends[_F_HEAD]
    while f >= 0:
        held += -(-kv_slots[f] // bs)
        f = nxt[f]
    return held


@register_jitable
def _cached(hit, generated, target, bs):  # type: ignore[no-untyped-def]
    """Scheduler.cached: prompt tokens the prefix cache serves (whole blocks, never the last)."""
    if hit <= 0 or generated:
        return 0
    return min(hit, (target - 1) // bs * bs)


@register_jitable
def _unlink(prev, nxt, ends, head, r):  # type: ignore[no-untyped-def]
    """Take ``r`` out of the list whose ends are ``ends[head]``, ``ends[head + 1]``."""
    pr, nx = prev[r], nxt[r]
    if pr >= 0:
        nxt[pr] = nx
    else:
        ends[head] = nx
    if nx >= 0:
        prev[nx] = pr
    else:
        ends[head + 1] = pr


@register_jitable
def _append(prev, nxt, ends, head, r):  # type: ignore[no-untyped-def]
    """Put ``r`` at the end of the list whose ends are ``ends[head]``, ``ends[head + 1]``."""
    tail = ends[head + 1]
    if tail >= 0:
        nxt[tail] = r
    prev[r] = tail
    nxt[r] = -1
    ends[head + 1] = r
    if ends[head] < 0:
        ends[head] = r


@register_jitable
def _steps_until(a, b, dt):  # type: ignore[no-untyped-def]
    """ReplicaEngine._steps_until: fewest steps (>= 1) of a plan (first step ``a``, growth
    ``b`` a step) whose cumulative duration reaches ``dt``."""
    if dt <= a + _EPS:
        return 1
    if b <= 0:
        m = math.ceil(dt / a - 1e-9)
    else:
        qa, qb = b / 2.0, a - b / 2.0
        m = math.ceil((-qb + math.sqrt(qb * qb + 4 * qa * dt)) / (2 * qa) - 1e-9)
    m = max(m, 1)
    while m > 1 and (m - 1) * a + b * (m - 1) * (m - 2) / 2.0 >= dt - _EPS:
        m -= 1
    while m * a + b * m * (m - 1) / 2.0 < dt - _EPS:
        m += 1
    return m


@register_jitable
def _arm(cur, t, eid):  # type: ignore[no-untyped-def]
    """ReplicaEngine._arm at clock ``cur``: ``(plan end, the timer's firing time, its eid)``, a
    SimPy timeout firing at ``cur + max(0, t - cur)``, scheduled after event ``eid``."""
    return t, cur + max(0.0, t - cur), eid + 1


@register_jitable
def _wake(clk, i, n_req, now, eid):  # type: ignore[no-untyped-def]
    """steady_state's source, at clock ``now``, turning to request ``i``: ``(when it runs
    again, that event's eid, the last eid)``; a timeout to the request's clock when that is
    later (``now + (t - now)``), else on at once (eid -1: before any event), never after the
    last request."""
    if i >= n_req:
        return math.inf, -1, eid
    if clk[i] > now:
        return now + (clk[i] - now), eid + 1, eid + 1
    return now, -1, eid


@register_jitable
def _activity(tokens, f_low, slope, anchor):  # type: ignore[no-untyped-def]
    """fleetplan.replica.power.step_activity."""
    if tokens <= 0:
        return 0.0
    return min(1.0, max(f_low, f_low + slope * math.log(tokens / anchor)))


@register_jitable
def _finish(r, now, state, prev, nxt, ends, arr_t, out, first_s, fin_s, measured, watch_lim,
            watch_kind, watch_need, seen, ctr):  # type: ignore[no-untyped-def]
    """Scheduler.finish: ``r``'s last token is out at ``now`` (done, out of the running list,
    its finish time), then steady_state's on_finish (``ctr``: measured requests left, the watch
    entry stopped on). True when the run ends."""
    state[r] = _DONE
    _unlink(prev, nxt, ends, _R_HEAD, r)
    fin_s[r] = now
    if not measured[r]:
        return False
    ctr[0] -= 1
    for w in range(watch_kind.shape[0]):
        kind = watch_kind[w]
        if kind == 0:
            v = first_s[r] - arr_t[r]
        elif kind == 1:
            v = math.nan  # a one-token reply has no TPOT, never above a limit
            if out[r] > 1:
                v = (fin_s[r] - first_s[r]) / (out[r] - 1)
        else:
            v = fin_s[r] - arr_t[r]
        if v * 1e3 > watch_lim[w]:
            seen[w] += 1
            if seen[w] >= watch_need[w] and ctr[1] < 0:
                ctr[1] = w
    return ctr[0] == 0 or ctr[1] >= 0



# ---------------------------------------------------------------------- the run
def steady_loop(arr_t, inp, out, hit, measured, bad, overhead, limit,  # noqa: C901, PLR0912, PLR0915
                c_step, c_pf, c_seq, c_kv, bs, kv_blocks, max_seqs, token_budget,
                f_low, slope, anchor, watch_kind, watch_lim,
                watch_need):  # type: ignore[no-untyped-def]
    """One run (:func:`fleetplan.replica.steady_kernel.run_steady` documents the arguments and
    the result)."""
    n_req = arr_t.shape[0]
    nan, inf = math.nan, math.inf
    state = np.zeros(n_req, np.int64)  # _PENDING
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
    clk = np.empty(n_req)
    vis = np.zeros(n_req)  # when each submitted request reaches the scheduler
    now_l = 0.0
    for i in range(n_req):
        dt = arr_t[i] - now_l
        if dt > 0:
            now_l = now_l + dt
        clk[i] = now_l
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
    src_t, src_eid, eid = _wake(clk, 0, n_req, src_now, eid)
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
                at = clk[j] if clk[j] >= src_now - _EPS else src_now
                vis[j] = at + overhead
                n_sub = j + 1
                if not busy:
                    if plan_end > vis[j] + _EPS:
                        plan_end, timer_t, eid = _arm(src_now, vis[j], eid)
                        timer_eid = eid
                elif plan_n > 1 and n_wait == 0 and n_run < max_seqs:
                    # mid-plan: the new request may join at an earlier step boundary
                    m = _steps_until(plan_a, plan_b, vis[j] - plan_t0)
                    if m < plan_n:
                        plan_n = m
                        t = plan_t0 + (m * plan_a + plan_b * m * (m - 1) / 2.0)
                        plan_end, timer_t, eid = _arm(src_now, t, eid)
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
            src_t, src_eid, eid = _wake(clk, n_sub, n_req, src_now, eid)
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
                if state[r] != _DECODE or last_step[r] > last:
                    continue  # stale entry (preempted and re-queued)
                n_dec -= 1
                s_off -= step_off[r]
                phase[step_off[r] % bs] -= 1
                generated[r] = out[r]
                n_run -= 1
                if _finish(r, now, state, r_prev, r_next, ends, arr_t, out, first_s, fin_s,
                           measured, watch_lim, watch_kind, watch_need, seen, ctr):
                    ended = True
            for j in range(n_ch if plan_pf else 0):
                r = ch_rid[j]
                if state[r] != _PREFILL:
                    continue
                computed[r] += ch_tok[j]
                if computed[r] < target[r]:
                    continue
                # prefill complete: the next token is out, then it decodes
                pf_slots -= kv_slots[r]
                kv_slots[r] = 0
                _unlink(f_prev, f_next, ends, _F_HEAD, r)
                if generated[r] == 0:
                    first_s[r] = now
                generated[r] += 1
                if generated[r] >= out[r]:
                    n_run -= 1
                    if _finish(r, now, state, r_prev, r_next, ends, arr_t, out, first_s,
                               fin_s, measured, watch_lim, watch_kind, watch_need, seen, ctr):
                        ended = True
                    continue
                state[r] = _DECODE
                step_off[r] = target[r] - last
                gen0[r] = generated[r]
                last_step[r] = last + out[r] - generated[r]
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
        while p_head < n_sub and vis[p_head] <= now + _EPS:
            # Scheduler.enqueue
            r = p_head
            state[r] = _WAITING
            wait_cached_blocks += _cached(cached_tok[r], generated[r], target[r], bs) // bs
            wq[(wq_head + n_wait) % n_req] = r
            n_wait += 1
            p_head += 1
        # ------------------------------------------------ ReplicaEngine._plan
        if n_run == 0 and n_wait == 0:
            if p_head < n_sub:
                plan_end, timer_t, eid = _arm(now, vis[p_head], eid)
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
                cb = _cached(cached_tok[r], generated[r], target[r], bs)
                need = -(-(cb + min(target[r] - cb, budget)) // bs)
                held_up = -(-(s_off + n_dec * (step - 1) + pf_slots) // bs) + n_run
                if held_up + need > kv_blocks:
                    held = _dec_blocks(phase, bs, s_off, n_dec, step - 1) + _prefill_blocks(
                        kv_slots, f_next, ends, bs)
                    jump = not (need <= kv_blocks - held)
        if jump:
            # ReplicaEngine._jump_len: Scheduler.decode_run_len, then the first pending
            while state[heap[0][2]] != _DECODE or last_step[heap[0][2]] != heap[0][0]:
                heapq.heappop(heap)
            n = heap[0][0] - G + 1
            if (s_off + n_dec * (G + n - 1)) // bs + n_dec > kv_blocks:
                if _dec_blocks(phase, bs, s_off, n_dec, G) > kv_blocks:
                    n = 0
                else:
                    lo, hi = 0, n - 1  # largest j with the step G + j still allocatable
                    while lo < hi:
                        mid = (lo + hi + 1) // 2
                        if _dec_blocks(phase, bs, s_off, n_dec, G + mid) <= kv_blocks:
                            lo = mid
                        else:
                            hi = mid - 1
                    n = min(n, lo + 1)
            plan_a = c_step + c_seq * n_dec + c_kv * (s_off + n_dec * G)
            plan_b = c_kv * n_dec
            if n > 0 and p_head < n_sub and n_wait == 0 and n_run < max_seqs:
                n = min(n, _steps_until(plan_a, plan_b, vis[p_head] - now))
            if n > 0:
                plan_n = n
                plan_pf = False
                plan_act = _activity(n_dec, f_low, slope, anchor)
                busy = True
                plan_t0 = now
                t = now + (n * plan_a + plan_b * n * (n - 1) / 2.0)
                plan_end, timer_t, eid = _arm(now, t, eid)
                timer_eid = eid
                continue
        # ------------------------------------------------ ReplicaEngine._single_step
        # Scheduler._kv_room
        budget = token_budget
        held = -(-(s_off + n_dec * (step - 1) + pf_slots) // bs) + n_run
        tight = held + budget // bs + max_seqs + 1 + wait_cached_blocks > kv_blocks
        if tight:
            held = _dec_blocks(phase, bs, s_off, n_dec, step - 1) + _prefill_blocks(
                kv_slots, f_next, ends, bs)
            dec_demand = (_dec_blocks(phase, bs, s_off, n_dec, G)
                          - _dec_blocks(phase, bs, s_off, n_dec, G - 1))
            demand = dec_demand
            room = budget - n_dec
            f = ends[_F_HEAD]
            while f >= 0:
                new_tokens = min(target[f] - computed[f], room)
                if new_tokens <= 0:
                    break
                room -= new_tokens
                demand += -(-(computed[f] + new_tokens) // bs) - (-(-kv_slots[f] // bs))
                f = f_next[f]
            tight = demand > kv_blocks - held
            if not tight:
                held += dec_demand
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
            f, nxt = ends[_F_HEAD], f_next
        else:
            f, nxt = ends[_R_HEAD], r_next
        while f >= 0:
            order[n_order] = f
            n_order += 1
            f = nxt[f]
        for j in range(n_order):
            if budget <= 0:
                break
            r = order[j]
            if state[r] != _PREFILL and state[r] != _DECODE:
                continue  # preempted earlier in this loop
            is_dec = state[r] == _DECODE
            if is_dec:
                have = -(-(step_off[r] + G - 1) // bs)
                want = -(-(step_off[r] + G) // bs)
                new_tokens = 1
            else:
                new_tokens = min(target[r] - computed[r], budget)
                have = -(-kv_slots[r] // bs)
                want = -(-(computed[r] + new_tokens) // bs)
            victim_self = False
            while want - have > free:
                # Scheduler._preempt_last
                v = ends[_R_TAIL]
                _unlink(r_prev, r_next, ends, _R_HEAD, v)
                n_run -= 1
                if state[v] == _DECODE:
                    freed = -(-(step_off[v] + step - 1) // bs)
                    n_dec -= 1
                    s_off -= step_off[v]
                    phase[step_off[v] % bs] -= 1
                    generated[v] = gen0[v] + (step - 1 - (last_step[v] - (out[v] - gen0[v])))
                else:
                    freed = -(-kv_slots[v] // bs)
                    pf_slots -= kv_slots[v]
                    _unlink(f_prev, f_next, ends, _F_HEAD, v)
                kv_slots[v] = 0
                computed[v] = 0
                target[v] = inp[v] + generated[v]
                cached_tok[v] = 0
                state[v] = _WAITING
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
            free -= want - have
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
                cb = _cached(cached_tok[r], generated[r], target[r], bs)
                new_tokens = min(target[r] - cb, budget)
                need = -(-(cb + new_tokens) // bs)
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
                state[r] = _PREFILL
                _append(f_prev, f_next, ends, _F_HEAD, r)
                if sched_s[r] != sched_s[r]:  # NaN: first admission
                    sched_s[r] = now
                _append(r_prev, r_next, ends, _R_HEAD, r)
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
                plan_end, timer_t, eid = _arm(now, vis[p_head], eid)
                timer_eid = eid
            continue
        dur = c_step + c_pf * prefill + c_seq * sn_dec + c_kv * kv_read
        plan_a = dur
        plan_b = 0.0
        plan_n = 1
        plan_pf = True
        plan_act = _activity(prefill + sn_dec, f_low, slope, anchor)
        busy = True
        if sn_dec != n_dec and not ended:
            status = ERR_NOT_SCHEDULED
            end_t = now
            break
        plan_t0 = now
        t = now + dur
        plan_end, timer_t, eid = _arm(now, t, eid)
        timer_eid = eid
    return first_s, fin_s, sched_s, status, ctr[1], end_t, busy_s, active_s
