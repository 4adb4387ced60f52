"""A deliberately naive step-by-step vLLM V1 scheduler, the oracle for the fast engine."""

from __future__ import annotations

import math
from collections import deque


def reference_run(params, arrivals, ins, outs, cached=None):
    """Return per-request (first_token_s, finish_s, preemptions) by simulating every step."""
    bs, blocks = params.block_size, params.kv_capacity_tokens // params.block_size
    state = params.seq_state_blocks  # every running request's fixed-size state, in blocks
    n = len(arrivals)
    vis = [a + params.overhead_s for a in arrivals]
    st = [{"target": ins[i], "computed": 0, "gen": 0, "slots": 0, "first": math.nan,
           "fin": math.nan, "pre": 0, "cached": (cached[i] if cached is not None else 0)}
          for i in range(n)]
    order = sorted(range(n), key=lambda i: (vis[i], i))
    nxt = 0
    waiting: deque[int] = deque()
    running: list[int] = []
    t = 0.0
    done = 0
    while done < n:
        while nxt < n and vis[order[nxt]] <= t + 1e-12:
            waiting.append(order[nxt])
            nxt += 1
        if not running and not waiting:
            t = vis[order[nxt]]
            continue
        held = sum(-(-st[i]["slots"] // bs) + state for i in running)
        free = blocks - held
        budget = params.max_num_batched_tokens
        sched = []
        preempted = False
        idx = 0
        while idx < len(running) and budget > 0:
            i = running[idx]
            s = st[i]
            new = 1 if s["computed"] >= s["target"] else min(s["target"] - s["computed"], budget)
            want = -(-(s["computed"] + new) // bs)
            have = -(-s["slots"] // bs)
            self_out = False
            while want - have > free:
                v = running.pop()
                sv = st[v]
                free += -(-sv["slots"] // bs) + state
                sv["slots"] = 0
                sv["computed"] = 0
                sv["target"] = ins[v] + sv["gen"]
                sv["cached"] = 0
                sv["pre"] += 1
                waiting.appendleft(v)
                preempted = True
                if v == i:
                    self_out = True
                    break
            if self_out:
                break
            free -= want - have
            s["slots"] = s["computed"] + new
            budget -= new
            sched.append((i, new))
            idx += 1
        if not preempted:
            while waiting and budget > 0 and len(running) < params.max_num_seqs:
                i = waiting[0]
                s = st[i]
                c = 0
                if s["cached"] and s["gen"] == 0:
                    c = min(s["cached"], (s["target"] - 1) // bs * bs)
                new = min(s["target"] - c, budget)
                need = -(-(c + new) // bs) + state
                if need > free:
                    break
                waiting.popleft()
                free -= need
                budget -= new
                s["computed"] = c
                s["slots"] = c + new
                running.append(i)
                sched.append((i, new))
        pf = sum(new for i, new in sched if st[i]["computed"] < st[i]["target"])
        dec = [i for i, new in sched if st[i]["computed"] >= st[i]["target"]]
        kv = sum(st[i]["computed"] + (1 if i in dec else 0) for i, _ in sched)
        dur = params.step_s(pf, len(dec), kv)
        t += dur
        for i, new in sched:
            s = st[i]
            s["computed"] += new
            if s["computed"] >= s["target"]:
                if s["gen"] == 0:
                    s["first"] = t
                s["gen"] += 1
                if s["gen"] >= outs[i]:
                    s["fin"] = t
                    s["slots"] = 0
                    running.remove(i)
                    done += 1
    return [(s["first"], s["fin"], s["pre"]) for s in st]
