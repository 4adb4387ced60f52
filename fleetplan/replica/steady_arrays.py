"""The array form of a compiled steady-state run: its codes and the engine's and scheduler's
operations that :func:`fleetplan.replica.steady_loop.steady_loop` calls.

Request records become columns indexed by request, the running batch and its prefilling part
admission-ordered linked lists (:func:`unlink`, :func:`append`), and each helper is one method
(or part of one) of :class:`fleetplan.replica.scheduler.Scheduler` or
:class:`fleetplan.replica.engine.ReplicaEngine`, named in its docstring, with the same
arithmetic operation by operation. The helpers are ``register_jitable``: plain Python when
called from Python, compiled into the loop. The scheduling rules and step arithmetic the engine
uses too are not copied here: :mod:`fleetplan.replica.schedule_policy` and
:mod:`fleetplan.replica.step_math` are registered as they are. Numba's cache does not see edits
to these files, so :mod:`fleetplan.replica.steady_kernel` keys its cache folder on them all.
"""

from __future__ import annotations

import math

import numpy as np
from numba.extending import register_jitable

from fleetplan.replica import schedule_policy as _policy
from fleetplan.replica.step_math import EPS as EPS  # the loop reads it here
from fleetplan.replica.step_math import decode_plan as _decode_plan
from fleetplan.replica.step_math import expert_time as _expert_time
from fleetplan.replica.step_math import step_time as _step_time
from fleetplan.replica.step_math import steps_until as _steps_until

STOP_DONE, STOP_OVERLOAD, STOP_ABOVE = 0, 1, 2
ERR_NOT_SCHEDULED, ERR_STALLED, ERR_BAD_REQUEST = 3, 4, 5
# request states, as fleetplan.replica.records numbers them
PENDING, WAITING, PREFILL, DECODE, DONE = 0, 1, 2, 3, 4
# the figures a run may be stopped on, by code (fleetplan.replica.steady._FIGURE_OF)
FIGURE_CODES = {"ttft_p99_ms": 0, "tpot_p99_ms": 1, "e2e_p99_ms": 2}
# the ends of the two admission-ordered lists (running; running and still prefilling)
R_HEAD, R_TAIL, F_HEAD, F_TAIL = 0, 1, 2, 3


@register_jitable
def prefill_blocks(kv_slots, nxt, ends, bs):  # type: ignore[no-untyped-def]
    """KV blocks the prefilling requests hold (Scheduler.held_blocks' second term)."""
    held = 0
    f = ends[F_HEAD]
    while f >= 0:
        held += -(-kv_slots[f] // bs)
        f = nxt[f]
    return held


@register_jitable
def unlink(prev, nxt, ends, head, r):  # type: ignore[no-untyped-def]
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
def append(prev, nxt, ends, head, r):  # type: ignore[no-untyped-def]
    """Put ``r`` at the end of the list whose ends are ``ends[head]``, ``ends[head + 1]``."""
    tail = ends[head + 1]
    if tail >= 0:
        nxt[tail] = r
    prev[r] = tail
    nxt[r] = -1
    ends[head + 1] = r
    if ends[head] < 0:
        ends[head] = r


# the shared step arithmetic and scheduling rules, compiled into the loop
steps_until = register_jitable(_steps_until)
# registered before the two that call it, so that their compiled forms call its compiled one
expert_time = register_jitable(_expert_time)
step_time = register_jitable(_step_time)
decode_plan = register_jitable(_decode_plan)
decode_start = register_jitable(_policy.decode_start)
admission = register_jitable(_policy.admission)
prefill_chunk = register_jitable(_policy.prefill_chunk)
decode_new_blocks = register_jitable(_policy.decode_new_blocks)
decoder_blocks = register_jitable(_policy.decoder_blocks)
dec_blocks = register_jitable(_policy.dec_blocks)
held_upper = register_jitable(_policy.held_upper)
held_exact = register_jitable(_policy.held_exact)
may_run_short = register_jitable(_policy.may_run_short)
decode_run_cap = register_jitable(_policy.decode_run_cap)
generated_when_preempted = register_jitable(_policy.generated_when_preempted)


@register_jitable
def arm(cur, t, eid):  # type: ignore[no-untyped-def]
    """ReplicaEngine._arm at clock ``cur``: ``(plan end, the timer's firing time, its eid)``, a
    SimPy timeout firing at ``cur + max(0, t - cur)``, scheduled after event ``eid``."""
    return t, cur + max(0.0, t - cur), eid + 1


@register_jitable
def wake(clk, i, n_req, now, eid):  # type: ignore[no-untyped-def]
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
def activity(tokens, f_low, slope, anchor):  # type: ignore[no-untyped-def]
    """fleetplan.replica.power.step_activity."""
    if tokens <= 0:
        return 0.0
    return min(1.0, max(f_low, f_low + slope * math.log(tokens / anchor)))


@register_jitable
def finish(r, now, state, prev, nxt, ends, arr_t, out, first_s, fin_s, measured, watch_lim,
            watch_kind, watch_need, seen, ctr):  # type: ignore[no-untyped-def]
    """Scheduler.finish: ``r``'s last token is out at ``now`` (done, out of the running list,
    its finish time), then steady_state's on_finish (``ctr``: measured requests left, the watch
    entry stopped on). True when the run ends."""
    state[r] = DONE
    unlink(prev, nxt, ends, R_HEAD, r)
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


@register_jitable
def source_clock(arr_t):  # type: ignore[no-untyped-def]
    """steady_state's source clock per request: a timeout of ``t - now`` from its last
    arrival lands on ``now + (t - now)``."""
    clk = np.empty(arr_t.shape[0])
    now_l = 0.0
    for i in range(arr_t.shape[0]):
        dt = arr_t[i] - now_l
        if dt > 0:
            now_l = now_l + dt
        clk[i] = now_l
    return clk


@register_jitable
def kv_room(phase, kv_slots, f_next, ends, target, computed, bs, s_off, n_dec,
            n_run, step, pf_slots, budget, max_seqs, wait_cached_blocks,
            kv_blocks, state):  # type: ignore[no-untyped-def]
    """Scheduler._kv_room at step ``step``: ``(tight, held)``, whether the step may run out of
    KV blocks and the blocks held, after the decoders' allocation of this step when not tight,
    before it when tight."""
    G = step
    held = held_upper(s_off, n_dec, step, pf_slots, n_run, bs, state)
    tight = may_run_short(held, budget, bs, max_seqs, wait_cached_blocks, kv_blocks, state)
    if tight:
        held = held_exact(dec_blocks(phase, bs, s_off, n_dec, step - 1),
                          prefill_blocks(kv_slots, f_next, ends, bs), n_run, state)
        dec_demand = (dec_blocks(phase, bs, s_off, n_dec, G)
                      - dec_blocks(phase, bs, s_off, n_dec, G - 1))
        demand = dec_demand
        room = budget - n_dec
        f = ends[F_HEAD]
        while f >= 0:
            new_tokens, new_blocks = prefill_chunk(computed[f], kv_slots[f], target[f], room, bs)
            if new_tokens <= 0:
                break
            room -= new_tokens
            demand += new_blocks
            f = f_next[f]
        tight = demand > kv_blocks - held
        if not tight:
            held += dec_demand
    return tight, held
