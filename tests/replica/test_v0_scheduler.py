"""vLLM V0's default scheduler (``ReplicaParams.chunked_prefill`` False): steps of whole prompts
first, decode steps only when no waiting prompt fits. The engine against a hand-worked burst and
against a deliberately naive step-by-step V0 scheduler written here (vLLM 0.5.4
``vllm/core/scheduler.py`` ``_schedule_default``), request by request and gap by gap."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from fleetplan.catalog import HardwareConfig, bundled_catalog
from fleetplan.errors import ModelError
from fleetplan.replica.priors import prior_params
from fleetplan.replica.protocol import simulate_requests

BASE = prior_params(bundled_catalog().model("DeepSeek-R1-Distill-Qwen-14B"),
                    HardwareConfig.parse("1xH100-PCIe"))


def _toy(**changes: object):
    fields = dict(c_step=0.01, c_prefill_tok=0.001, c_seq=0.002, c_kv_tok=0.0, overhead_s=0.0,
                  c_deliver=0.0, block_size=16, kv_capacity_tokens=16_000, max_num_seqs=8,
                  max_num_batched_tokens=100, max_model_len=600, chunked_prefill=False)
    fields.update(changes)
    return BASE.with_(**fields)


def _gaps(engine) -> list[float]:
    """Every token gap the engine recorded, expanded and sorted."""
    out = [g for g in engine.stats.itl_single]
    for a, b, n, w in engine.stats.itl_segments:
        out += [a + b * k for k in range(int(n))] * int(w)
    return sorted(out)


def test_a_burst_by_hand_prompts_first_then_decodes() -> None:
    # A (60 in, 3 out), B (30, 2), C (50, 2) at t=0, budget 100 tokens:
    # step 1 prompts A+B (90 tokens; C's 50 do not fit the 10 left): 0.01 + 0.090 = 0.100
    # step 2 prompt C alone (a waiting prompt fits, so no decode): 0.01 + 0.050 -> 0.160
    # step 3 decodes A, B, C: 0.01 + 3 x 0.002 = 0.016 -> 0.176 (B and C finish)
    # step 4 decodes A: 0.012 -> 0.188
    reqs, engine = simulate_requests(_toy(), np.zeros(3), np.array([60, 30, 50]),
                                     np.array([3, 2, 2]))
    assert [r.first_token_s for r in reqs] == pytest.approx([0.100, 0.100, 0.160], abs=1e-12)
    assert [r.finish_s for r in reqs] == pytest.approx([0.188, 0.176, 0.176], abs=1e-12)
    # A waited out C's prompt step: its gap 0.100 -> 0.176; B's the same; C's 0.160 -> 0.176
    assert _gaps(engine) == pytest.approx([0.012, 0.016, 0.076, 0.076], abs=1e-12)
    assert engine.stats.steps == 4


def test_the_same_burst_with_chunked_prefill_mixes_chunks_and_decodes() -> None:
    # V1's policy on the same burst: step 1 takes A, B and 10 tokens of C (0.110), step 2
    # decodes A and B and finishes C's prompt (0.01 + 0.040 + 0.004 -> 0.164)
    reqs, _ = simulate_requests(_toy(chunked_prefill=True), np.zeros(3),
                                np.array([60, 30, 50]), np.array([3, 2, 2]))
    assert [r.first_token_s for r in reqs] == pytest.approx([0.110, 0.110, 0.164], abs=1e-12)


def test_a_prompt_longer_than_the_budget_is_refused_without_chunking() -> None:
    with pytest.raises(ModelError, match="exceeds max_num_batched_tokens 100"):
        simulate_requests(_toy(), np.zeros(1), np.array([101]), np.array([2]))


def _reference_v0(p, arrivals, ins, outs):
    """Per request: the times each of its tokens came out, and its preemptions."""
    bs, blocks = p.block_size, p.kv_capacity_tokens // p.block_size
    watermark = int(0.01 * blocks)
    n = len(arrivals)
    vis = [a + p.overhead_s for a in arrivals]
    st = [{"target": int(ins[i]), "ctx": 0, "gen": 0, "times": [], "pre": 0} for i in range(n)]
    order = sorted(range(n), key=lambda i: (vis[i], i))
    nxt, done, t = 0, 0, 0.0
    waiting: deque[int] = deque()
    running: list[int] = []
    while done < n:
        while nxt < n and vis[order[nxt]] <= t + 1e-12:
            waiting.append(order[nxt])
            nxt += 1
        if not running and not waiting:
            t = vis[order[nxt]]
            continue
        free = blocks - sum(-(-st[i]["ctx"] // bs) for i in running)
        prompts: list[int] = []
        budget = p.max_num_batched_tokens
        while waiting and len(running) < p.max_num_seqs:
            i = waiting[0]
            need_tokens = st[i]["target"]
            need = -(-need_tokens // bs)
            if (prompts and need_tokens > budget) or free - need < watermark:
                break
            waiting.popleft()
            free -= need
            budget -= need_tokens
            running.append(i)
            prompts.append(i)
        if prompts:
            t += p.step_s(sum(st[i]["target"] for i in prompts), 0, 0)
            stepped = prompts
            for i in prompts:
                st[i]["ctx"] = st[i]["target"]
        else:  # decode every running request, preempting the newest on a KV shortage
            for i in list(running):
                if i not in running:
                    continue
                while -(-(st[i]["ctx"] + 1) // bs) - -(-st[i]["ctx"] // bs) > free:
                    v = running.pop()
                    free += -(-st[v]["ctx"] // bs)
                    st[v]["ctx"] = 0
                    st[v]["target"] = int(ins[v]) + st[v]["gen"]
                    st[v]["pre"] += 1
                    waiting.appendleft(v)
                    if v == i:
                        break
                if i not in running:
                    break
                free -= -(-(st[i]["ctx"] + 1) // bs) - -(-st[i]["ctx"] // bs)
            kv = sum(st[i]["ctx"] + 1 for i in running)
            t += p.step_s(0, len(running), kv)
            stepped = list(running)
            for i in stepped:
                st[i]["ctx"] += 1
        for i in stepped:
            s = st[i]
            s["gen"] += 1
            s["times"].append(t)
            if s["gen"] >= outs[i]:
                running.remove(i)
                s["ctx"] = 0
                done += 1
    return st


@pytest.mark.parametrize("case", range(10))
def test_engine_matches_a_step_by_step_v0_reference(case: int) -> None:
    rng = np.random.default_rng(2000 + case)
    params = _toy(kv_capacity_tokens=int(rng.choice([900, 2000, 100_000])),
                  max_num_seqs=int(rng.choice([4, 16, 256])),
                  max_num_batched_tokens=int(rng.choice([300, 512, 2048])),
                  c_kv_tok=1e-6, c_step=0.004, c_prefill_tok=1e-4, c_seq=5e-4,
                  overhead_s=float(rng.choice([0.0, 0.005])))
    n = 50
    arr = np.sort(rng.uniform(0, n / float(rng.choice([2, 10, 50])), n))
    arr[0] = 0.0
    ins, outs = rng.integers(1, 300, n), rng.integers(1, 200, n)
    reqs, engine = simulate_requests(params, arr, ins, outs)
    ref = _reference_v0(params, list(arr), ins, outs)
    got = np.array([[r.first_token_s, r.finish_s, r.preemptions] for r in reqs])
    # a prompt step completes every prompt it takes: only decoders are ever preempted, after
    # their first token
    want = np.array([[s["times"][0], s["times"][-1], s["pre"]] for s in ref])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    if not any(s["pre"] for s in ref):  # every gap, where no request was recomputed
        gaps = sorted(b - a for s in ref
                      for a, b in zip(s["times"], s["times"][1:], strict=False))
        np.testing.assert_allclose(_gaps(engine), gaps, rtol=0, atol=1e-9)
    assert engine.stats.finished == n


def test_the_reference_cases_include_preemptions() -> None:
    # the comparison above covers recomputed requests only if some case preempts
    rng = np.random.default_rng(7)
    params = _toy(kv_capacity_tokens=900, max_num_batched_tokens=512, max_num_seqs=256)
    ins, outs = rng.integers(50, 300, 40), rng.integers(100, 200, 40)
    reqs, engine = simulate_requests(params, np.zeros(40), ins, outs)
    ref = _reference_v0(params, [0.0] * 40, ins, outs)
    assert engine.stats.preemptions == sum(s["pre"] for s in ref) > 0
    np.testing.assert_allclose([r.finish_s for r in reqs], [s["times"][-1] for s in ref],
                               rtol=0, atol=1e-9)
