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
  ``linear_attention`` layers (Qwen3-Next / Qwen3.5 / Qwen3.6 Gated DeltaNet; Qwen3-Next's
  ``full_attention_interval`` without ``layer_types`` too) keep no per-token KV but a
  fixed-size state per sequence (:func:`_gated_deltanet`; ``ModelSpec.linear_layers`` and the
  ``linear_*`` state fields). Their full-attention layers' ``q_proj`` doubles with
  ``attn_output_gate`` (a gate per query, vLLM 0.32.0 ``qwen3_next.py`` lines 315-324) and they
  carry ``q_norm`` / ``k_norm``. Other layer kinds (e.g. Mamba2 ``mamba``, whose state and
  projections differ) are refused with one line naming ``layer_types``.
- otherwise every layer is full attention with ``num_key_value_heads`` x ``head_dim``.

Every refusal names the file and the field.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

from fleetplan.errors import InputError

_KNOWN_KINDS = ("full_attention", "sliding_attention", "linear_attention")


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
    if name is None and f.raw("linear_num_value_heads")[0] is not None:
        # Qwen3-Next states the pattern only: every interval-th layer is full attention
        # (transformers' Qwen3NextConfig builds layer_types the same way)
        every = f.int_("full_attention_interval", spec="layers")
        full = layers // every
        return Counter({"full_attention": full, "linear_attention": layers - full})
    if name is None:
        return Counter({"full_attention": layers})
    if not isinstance(raw, list) or not all(isinstance(k, str) for k in raw):
        raise InputError(f"{f.path}: field layer_types: expected a list of layer kinds")
    if len(raw) != layers:
        raise InputError(f"{f.path}: field layer_types: {len(raw)} entries for the "
                         f"{layers} layers of num_hidden_layers")
    kinds = Counter(raw)
    other = sorted(set(kinds) - set(_KNOWN_KINDS))
    if other:
        raise InputError(f"{f.path}: field layer_types: {other[0]!r} layers are not modelled "
                         f"(known: {', '.join(_KNOWN_KINDS)}, the last Gated DeltaNet; "
                         "a Mamba2 state is another arithmetic)")
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
    linear_n = kinds.get("linear_attention", 0)
    gdn = (_gated_deltanet(f, hidden=hidden, layers=linear_n) if linear_n
           else AttentionLayout(0, 0, {}))
    full = layers - sliding - linear_n
    if linear_n and full < 1:
        raise InputError(f"{f.path}: field layer_types: {linear_n} linear_attention layers and "
                         "no full_attention layer: a model without a per-token KV cache is not "
                         "modelled")
    gate = f.bool_("attn_output_gate", bool(linear_n))  # Qwen3-Next's default: gated
    g_dim = f.int_("global_head_dim", default=head_dim, spec="head_dim")
    g_kv = f.int_("num_global_key_value_heads", default=kv_heads, spec="kv_heads")
    if g_kv > heads or heads % g_kv:
        raise InputError(f"{f.path}: field num_global_key_value_heads: {g_kv} must divide the "
                         f"{heads} attention heads")
    k_eq_v = f.bool_("attention_k_eq_v", False)

    def proj(kv: int, dim: int, v: bool, q_gate: bool = False) -> int:
        q_o = 3 if q_gate else 2  # q (and its gate) and o
        return hidden * heads * dim * q_o + hidden * kv * dim * (2 if v else 1)

    linear = (sliding * proj(kv_heads, head_dim, True)
              + full * proj(g_kv, g_dim, not k_eq_v, gate) + gdn.linear)
    small = gdn.small + (full * 2 * g_dim if linear_n else 0)  # q_norm, k_norm of a hybrid
    if qkv_bias:
        small += (sliding * (heads + 2 * kv_heads) * head_dim
                  + full * (heads + 2 * g_kv) * g_dim)
    fields: dict[str, Any] = dict(kv_heads=kv_heads, head_dim=head_dim, **gdn.spec_fields)
    if sliding:
        fields["sliding_layers"] = sliding
    if (g_dim, g_kv) != (head_dim, kv_heads):
        fields.update(full_head_dim=g_dim, full_kv_heads=g_kv)
    return AttentionLayout(linear=linear, small=small, spec_fields=fields)


def _gated_deltanet(f: Fields, *, hidden: int, layers: int) -> AttentionLayout:
    """``layers`` Gated DeltaNet layers as vLLM 0.32.0 builds them
    (``model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py``): ``in_proj_qkvz`` (``hidden x
    (2 key_dim + 2 value_dim)``, lines 516-522 and 651-675) and ``out_proj`` (``value_dim x
    hidden``, line 581), quantized where the checkpoint says; ``in_proj_ba`` (``hidden x 2
    value heads``, never block-quantized, lines 527-533), the ``conv1d`` (``kernel x conv_dim``,
    ``conv_dim = 2 key_dim + value_dim``, lines 502-508), ``dt_bias`` and ``A_log`` (a value per
    value head) and the gated RMS norm (``value head dim``) at 16 bits. ``key_dim`` =
    ``linear_num_key_heads x linear_key_head_dim``, ``value_dim`` likewise.

    The state per sequence and layer (``MambaStateShapeCalculator.gated_delta_net_state_shape``,
    ``model_executor/layers/mamba/mamba_utils.py`` lines 280-300): the recurrent state
    ``value heads x value head dim x key head dim`` in ``mamba_ssm_dtype`` (vLLM sets
    ``mamba_ssm_cache_dtype`` from it for Qwen3.5, ``model_executor/models/config.py`` lines
    855-866; without it the model's 16 bits) and the convolution's ``(kernel - 1) x conv_dim``
    in the model's dtype (``MambaStateDtypeCalculator._mamba_state_dtype``, same file lines
    98-108, ``mamba_cache_dtype`` ``auto``)."""
    k_heads = f.int_("linear_num_key_heads", spec="kv_heads")
    v_heads = f.int_("linear_num_value_heads", spec="attention_heads")
    k_dim = f.int_("linear_key_head_dim", spec="head_dim")
    v_dim = f.int_("linear_value_head_dim", spec="head_dim")
    kernel = f.int_("linear_conv_kernel_dim", minimum=1, spec="head_dim")
    if v_heads % k_heads:
        raise InputError(f"{f.path}: field linear_num_value_heads: {v_heads} must be a multiple "
                         f"of the {k_heads} linear_num_key_heads")
    ssm_name, ssm = f.raw("mamba_ssm_dtype")
    ssm_bytes = 2.0
    if ssm_name is not None:
        ssm_bytes = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0}.get(str(ssm), 0.0)
        if not ssm_bytes:
            raise InputError(f"{f.path}: field mamba_ssm_dtype: {str(ssm)[:40]!r} is not one "
                             "of float32, float16, bfloat16")
    key_dim, value_dim = k_heads * k_dim, v_heads * v_dim
    conv_dim = 2 * key_dim + value_dim
    per_layer = hidden * (2 * key_dim + 2 * value_dim) + value_dim * hidden
    small = hidden * 2 * v_heads + kernel * conv_dim + 2 * v_heads + v_dim
    return AttentionLayout(
        linear=layers * per_layer, small=layers * small,
        spec_fields=dict(linear_layers=layers, linear_state_elements=v_heads * v_dim * k_dim,
                         linear_conv_elements=(kernel - 1) * conv_dim,
                         linear_state_bytes=ssm_bytes, linear_heads=k_heads))


def attention_layers_skipped(ignore: list[Any]) -> set[int] | None:
    """The layers whose attention a quantization's ``ignore`` list leaves in 16 bits (patterns
    ``...layers.<i>.self_attn*``); None where one ``*self_attn*`` pattern names every layer's."""
    hit: set[int] = set()
    for item in ignore:
        text = str(item)
        if "self_attn" not in text:
            continue
        m = re.search(r"layers\.(\d+)\.self_attn", text)
        if m is None:
            return None
        hit.add(int(m.group(1)))
    return hit


def attention_share_skipped(ignore: list[Any], layers: int) -> float:
    """The share of layers whose attention a quantization's ``ignore`` list leaves in 16 bits
    (:func:`attention_layers_skipped`)."""
    hit = attention_layers_skipped(ignore)
    if hit is None:
        return 1.0
    return min(1.0, len(hit) / layers) if layers else 0.0


