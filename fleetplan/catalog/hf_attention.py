"""The attention layout of a Hugging Face ``config.json``: which layers keep a per-token KV cache,
how big it is, and how many parameters the attention projections hold.

Main entry: :func:`attention_layout` (used by :mod:`fleetplan.catalog.hf_config`). Three
layouts are read:

- **Multi-head latent attention** (MLA: DeepSeek-V2/V2-Lite/V3/R1, Kimi-K2-like configs with
  ``kv_lora_rank``). Projections: ``q_proj`` (``hidden x heads x (qk_nope + qk_rope)``) or, when
  ``q_lora_rank`` is set, ``q_a_proj`` (``hidden x q_lora_rank``) and ``q_b_proj``
  (``q_lora_rank x heads x (qk_nope + qk_rope)``); ``kv_a_proj_with_mqa`` (``hidden x
  (kv_lora_rank + qk_rope)``); ``kv_b_proj`` (``kv_lora_rank x heads x (qk_nope + v_head)``);
  ``o_proj`` (``heads x v_head x hidden``); RMS norms of the two latents. The KV cache holds one
  latent of ``kv_lora_rank + qk_rope_head_dim`` elements per token and layer, shared by all
  heads (``ModelSpec.kv_lora_rank`` / ``qk_rope_head_dim``).
- **Hybrid layers** (``layer_types``, top level or in ``text_config``): ``full_attention``
  and ``sliding_attention`` layers (gpt-oss, Gemma-3/4) with the window of ``sliding_window``;
  the count of sliding layers is ``ModelSpec.sliding_layers``. Gemma-4's global layers have
  their own head size and KV heads (``global_head_dim``, ``num_global_key_value_heads``:
  ``ModelSpec.full_head_dim`` / ``full_kv_heads``) and, with ``attention_k_eq_v``, no
  ``v_proj`` (vLLM still keeps a V slot in the cache: ``gemma4.py``, K loaded into both).
  ``linear_attention`` layers (Qwen3-Next / Qwen3.5 / Qwen3.6 Gated DeltaNet: a fixed-size state
  per sequence, no per-token KV) are refused with one line naming ``layer_types``.
- otherwise every layer is full attention with ``num_key_value_heads`` x ``head_dim``.

Every refusal names the file and the field.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

from fleetplan.errors import InputError

_KNOWN_KINDS = ("full_attention", "sliding_attention")


class Fields(Protocol):
    """What :func:`attention_layout` reads a config through (``hf_config._Fields``)."""

    path: Any
    cfg: dict[str, Any]

    def raw(self, *names: str) -> tuple[str | None, Any]: ...

    def int_(self, *names: str, default: int | None = None, minimum: int = 1,
             spec: str | None = None) -> int: ...

    def bool_(self, name: str, default: bool) -> bool: ...


@dataclass(frozen=True)
class AttentionLayout:
    """The attention of one model: its projections' parameters over all layers
    (``linear``: the matrices, quantized where the checkpoint says so; ``small``: biases and
    norms, 16 bits) and the :class:`~fleetplan.catalog.models.ModelSpec` fields that describe
    its KV cache (``spec_fields``)."""

    linear: int
    small: int
    spec_fields: dict[str, Any]


def _mla(f: Fields, *, layers: int, hidden: int, heads: int, bias: bool) -> AttentionLayout:
    rank = f.int_("kv_lora_rank", spec="kv_lora_rank")
    rope = f.int_("qk_rope_head_dim", spec="qk_rope_head_dim")
    nope = f.int_("qk_nope_head_dim", spec="head_dim")
    v_dim = f.int_("v_head_dim", default=nope, spec="head_dim")
    q_rank = None if f.raw("q_lora_rank")[0] is None else f.int_("q_lora_rank",
                                                                  spec="hidden_size")
    kinds = f.cfg.get("layer_types")
    if isinstance(kinds, list) and set(map(str, kinds)) - {"full_attention"}:
        raise InputError(f"{f.path}: field layer_types: windowed or linear layers beside "
                         "multi-head latent attention (kv_lora_rank) are not modelled")
    q_dim = heads * (nope + rope)
    q = hidden * q_dim if q_rank is None else hidden * q_rank + q_rank * q_dim
    per_layer = (q + hidden * (rank + rope) + rank * heads * (nope + v_dim)
                 + heads * v_dim * hidden)
    norms = rank + (q_rank or 0)  # kv_a_layernorm (and q_a_layernorm)
    biases = (q_dim + rank + rope) if bias else 0
    return AttentionLayout(
        linear=layers * per_layer, small=layers * (norms + biases),
        spec_fields=dict(kv_lora_rank=rank, qk_rope_head_dim=rope, kv_heads=heads,
                         head_dim=nope + rope))


def _kinds(f: Fields, layers: int) -> Counter[str]:
    name, raw = f.raw("layer_types")
    if name is None:
        return Counter({"full_attention": layers})
    if not isinstance(raw, list) or not all(isinstance(k, str) for k in raw):
        raise InputError(f"{f.path}: field layer_types: expected a list of layer kinds")
    if len(raw) != layers:
        raise InputError(f"{f.path}: field layer_types: {len(raw)} entries for the "
                         f"{layers} layers of num_hidden_layers")
    kinds = Counter(raw)
    if kinds.get("linear_attention"):
        raise InputError(f"{f.path}: field layer_types: {kinds['linear_attention']} "
                         f"linear_attention layers of {layers} (Gated DeltaNet: a fixed-size "
                         "state per sequence) are not modelled")
    other = sorted(set(kinds) - set(_KNOWN_KINDS))
    if other:
        raise InputError(f"{f.path}: field layer_types: {other[0]!r} layers are not modelled "
                         f"(known: {', '.join(_KNOWN_KINDS)})")
    return kinds


def attention_layout(f: Fields, *, layers: int, hidden: int, heads: int, kv_heads: int,
                     head_dim: int, window: int | None, qkv_bias: bool) -> AttentionLayout:
    """The :class:`AttentionLayout` of the config read by ``f`` (``window``: its sliding
    window, None when it has none or it covers the whole context; ``qkv_bias``: whether q, k
    and v carry biases)."""
    if f.raw("kv_lora_rank")[0] is not None:
        return _mla(f, layers=layers, hidden=hidden, heads=heads, bias=qkv_bias)
    kinds = _kinds(f, layers)
    sliding = kinds.get("sliding_attention", 0)
    if sliding and f.raw("sliding_window")[0] is None:
        raise InputError(f"{f.path}: field sliding_window: missing, yet layer_types lists "
                         f"{sliding} sliding_attention layers")
    if window is None:  # a window as long as the context slides nothing
        sliding = 0
    full = layers - sliding
    g_dim = f.int_("global_head_dim", default=head_dim, spec="head_dim")
    g_kv = f.int_("num_global_key_value_heads", default=kv_heads, spec="kv_heads")
    if g_kv > heads or heads % g_kv:
        raise InputError(f"{f.path}: field num_global_key_value_heads: {g_kv} must divide the "
                         f"{heads} attention heads")
    k_eq_v = f.bool_("attention_k_eq_v", False)

    def proj(kv: int, dim: int, v: bool) -> int:
        return hidden * heads * dim * 2 + hidden * kv * dim * (2 if v else 1)

    linear = sliding * proj(kv_heads, head_dim, True) + full * proj(g_kv, g_dim, not k_eq_v)
    small = 0
    if qkv_bias:
        small = (sliding * (heads + 2 * kv_heads) * head_dim
                 + full * (heads + 2 * g_kv) * g_dim)
    fields: dict[str, Any] = dict(kv_heads=kv_heads, head_dim=head_dim)
    if sliding:
        fields["sliding_layers"] = sliding
    if (g_dim, g_kv) != (head_dim, kv_heads):
        fields.update(full_head_dim=g_dim, full_kv_heads=g_kv)
    return AttentionLayout(linear=linear, small=small, spec_fields=fields)


def attention_share_skipped(ignore: list[Any], layers: int) -> float:
    """The share of layers whose attention a quantization's ``ignore`` list leaves in 16 bits
    (patterns ``...layers.<i>.self_attn*``, or one ``*self_attn*`` for all)."""
    hit: set[int] = set()
    for item in ignore:
        text = str(item)
        if "self_attn" not in text:
            continue
        m = re.search(r"layers\.(\d+)\.self_attn", text)
        if m is None:
            return 1.0
        hit.add(int(m.group(1)))
    return min(1.0, len(hit) / layers) if layers else 0.0


