"""vLLM V1's scheduling rules over one replica's KV cache, written once for the SimPy scheduler
(:mod:`fleetplan.replica.scheduler`) and the compiled steady-state loop
(:mod:`fleetplan.replica.steady_loop`).

Each function is one rule of what a step admits, prefills or decodes, over plain integers (and
the decoders' count per phase, a list or an array): what the prefix cache serves a waiting
request, the first chunk and blocks of an admission, the blocks a running request's next token or
chunk takes, the decoders' blocks at a step, whether a step can run short of blocks, how many
decode-only steps the cache allows, a preempted decoder's tokens. ``state`` is the KV blocks
every running sequence holds besides its tokens' (``ReplicaParams.seq_state_blocks``: the
fixed-size state of linear-attention layers, taken at admission, freed at preemption or
completion; 0 for a model without). The two callers keep only the
walk over their own containers (a deque of records and dicts there, a ring and linked lists of
request indices here), so the rules cannot drift apart.

Plain Python with no imports, so the engine needs no Numba; :mod:`fleetplan.replica.steady_arrays`
registers these functions for the compiled loop (``register_jitable``), and the loop's cache
folder is keyed on this file too (:data:`fleetplan.replica.steady_kernel.LOOP_SOURCES`).
"""

from __future__ import annotations

from collections.abc import Sequence


def admission(hit: int, generated: int, target: int, budget: int, bs: int,
              state: int) -> tuple[int, int, int]:
    """A waiting request's admission with ``budget`` tokens left (``hit`` of its ``target``
    prompt tokens found in the prefix cache): ``(prompt tokens the cache serves, prompt tokens
    its first chunk computes, KV blocks it needs)``, the cached prefix's blocks and its
    ``state`` blocks included. With
    ``budget`` 0, the first is what it will take from the cache (its queue's share).

    The cache serves whole blocks (vLLM caches full blocks only; a hit that ends inside a block
    is served up to the block before), never the last token (vLLM recomputes it to get its
    logits), nothing to a preempted request that already generated (its prefix was freed)."""
    # the cache rule and the chunk in one call: this runs at every step boundary with a queue
    cached = 0 if hit <= 0 or generated else min(hit // bs, (target - 1) // bs) * bs
    new_tokens = min(target - cached, budget)
    return cached, new_tokens, -(-(cached + new_tokens) // bs) + state


def prefill_chunk(computed: int, kv_slots: int, target: int, budget: int,
                  bs: int) -> tuple[int, int]:
    """A running prefill's next chunk with ``budget`` tokens left: ``(tokens it computes, new
    KV blocks it takes)`` (chunked prefill: as much of the rest of the prompt as fits)."""
    new_tokens = min(target - computed, budget)
    return new_tokens, -(-(computed + new_tokens) // bs) - (-(-kv_slots // bs))


def decode_new_blocks(step_off: int, k: int, bs: int) -> int:
    """New KV blocks a decoder (context ``step_off + k`` at global step ``k``) takes for step
    ``k``: 1 when its context crosses into a new block, else 0."""
    return -(-(step_off + k) // bs) - (-(-(step_off + k - 1) // bs))


def decoder_blocks(step_off: int, k: int, bs: int) -> int:
    """KV blocks one decoder holds after allocating for global step ``k``."""
    return -(-(step_off + k) // bs)


def dec_blocks(phase: Sequence[int], bs: int, s_off: int, n_dec: int, k: int) -> int:
    """KV blocks all ``n_dec`` decoders hold after allocating for global step ``k``: the sum of
    ceil((off + k) / bs), in O(block size) from the sum of their offsets (``s_off``) and their
    count per offset modulo the block size (``phase``)."""
    pad = 0
    for ph, cnt in enumerate(phase):
        if cnt:
            pad += cnt * ((-(ph + k)) % bs)
    return (s_off + n_dec * k + pad) // bs


def held_upper(s_off: int, n_dec: int, step: int, pf_slots: int, n_run: int, bs: int,
               state: int) -> int:
    """An upper bound of the KV blocks held before step ``step`` allocates (the exact count is
    O(running)): the held tokens' blocks plus one partial block and the state per running
    request."""
    return -(-(s_off + n_dec * (step - 1) + pf_slots) // bs) + n_run * (1 + state)


def held_exact(dec_held: int, pf_held: int, n_run: int, state: int) -> int:
    """The KV blocks held: the decoders' (``dec_blocks``) and the prefilling requests' token
    blocks, and every running request's state."""
    return dec_held + pf_held + n_run * state


def may_run_short(held_up: int, budget: int, bs: int, max_seqs: int, wait_cached_blocks: int,
                  kv_blocks: int, state: int) -> bool:
    """Whether a step could run short of KV blocks, judged from :func:`held_upper`: the most a
    step can take (its token budget, a partial block per sequence, the waiting requests' cached
    prefixes, the states of the sequences it may admit) does not surely fit. False lets a step
    skip the exact count and preemptions."""
    return (held_up + budget // bs + max_seqs * (1 + state) + 1 + wait_cached_blocks
            > kv_blocks)


def decode_run_cap(phase: Sequence[int], bs: int, s_off: int, n_dec: int, step: int, n: int,
                   kv_blocks: int, state: int) -> int:
    """Of ``n`` decode-only steps from global step ``step``, how many the KV cache allows
    (0: the first needs a preemption). Every running request decodes: the blocks left to
    their tokens are those of the cache less their ``n_dec`` states."""
    kv_blocks -= n_dec * state
    if (s_off + n_dec * (step + n - 1)) // bs + n_dec <= kv_blocks:
        return n  # even the last step's upper bound fits
    if dec_blocks(phase, bs, s_off, n_dec, step) > kv_blocks:
        return 0
    lo, hi = 0, n - 1  # largest j with the step step + j still allocatable
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if dec_blocks(phase, bs, s_off, n_dec, step + mid) <= kv_blocks:
            lo = mid
        else:
            hi = mid - 1
    return min(n, lo + 1)


def decode_start(target: int, step: int, out: int, generated: int) -> tuple[int, int]:
    """A request whose prefill (``target`` tokens) completed at global step ``step``, with
    ``generated`` of its ``out`` tokens out, decodes from the next step: ``(step_off, last
    step)``, its context being ``step_off + k`` at step ``k`` and its last token due at the
    last step."""
    return target - step, step + out - generated


def generated_when_preempted(gen0: int, step: int, last_step: int, out: int) -> int:
    """Tokens a decoder preempted before global step ``step`` has generated: ``gen0`` when it
    started decoding, one more per step since (it was to emit its last at ``last_step``)."""
    return gen0 + (step - 1 - (last_step - (out - gen0)))
