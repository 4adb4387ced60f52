"""Model specs from a Hugging Face ``config.json`` (a local file or a folder holding one; never a
download).

Main entry: :func:`hf_config_fields` (what :meth:`ModelSpec.from_hf_config` builds its spec
from; this module never imports the record, so the table modules stay leaves). It reads the
architecture (layers, hidden and intermediate sizes, attention and KV heads, head dim, vocab,
tied embeddings, max positions, sliding window, MoE experts / experts per token / shared
experts, DeepSeek's ``n_routed_experts`` / ``n_shared_experts`` / ``first_k_dense_replace``, the
layers that hold the experts: :func:`moe_layer_count`),
the attention layout (:mod:`fleetplan.catalog.hf_attention`: multi-head latent attention,
``layer_types`` with sliding-window layers, Gemma-4's global layers, Gated DeltaNet linear-attention
layers with their fixed-size state per sequence) and the served precision
(:mod:`fleetplan.catalog.hf_quant`: ``torch_dtype`` and ``quantization_config``) and counts the
parameters the way the checkpoint holds them: resident (every expert) and active per token
(the experts a token is routed to). Weight bytes follow per tensor: quantized linear layers at
their bit width plus group scales, attention in 16 bits where the quantization leaves it out,
the embeddings, ``lm_head`` (unless quantized too), norms and routers at 16 bits.

Architectures it does not model are refused with one line naming the file and field (e.g.
``layer_types`` with Mamba2 layers, Nemotron-H's ``hybrid_override_pattern``, NAS
``block_configs``, a ``MIXED_PRECISION`` with several formats among the MLPs).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleetplan._load import show_value
from fleetplan.catalog._arch import model_inconsistency
from fleetplan.catalog.hf_attention import attention_layout
from fleetplan.catalog.hf_quant import DTYPE_BYTES, MAX_CONFIG_BYTES, precision
from fleetplan.errors import InputError

Bounds = Callable[[str], tuple[float, float]]
"""``(lowest, highest)`` the model record accepts for a field (its own bounds, passed in)."""

# MLPs with two matrices (up, down) instead of the gated three (gate, up, down)
_UNGATED = {"gpt2", "gpt_bigcode", "opt", "gpt_neox", "falcon", "phi", "bloom", "starcoder2",
            "gptj", "mpt"}
# model types whose attention projections carry biases on q, k and v
_QKV_BIAS = {"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl"}
# tie_word_embeddings when the file does not say (transformers' per-class defaults)
_UNTIED_BY_DEFAULT = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                      "phi3", "granite", "olmo2", "starcoder2", "deepseek_v2", "deepseek_v3",
                      "llama4", "llama4_text"}
_SHARED_GATE = {"qwen2_moe", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text"}

def config_path(path: str | os.PathLike[str]) -> Path:
    """The ``config.json`` of ``path`` (a file, or a folder holding ``config.json``)."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise InputError(f"{p}: no such model config file (give a Hugging Face config.json or "
                         "the folder holding one; nothing is downloaded)")
    return p


def read_hf_config(path: str | os.PathLike[str]) -> tuple[Path, dict[str, Any]]:
    """The file and its parsed object (one-line errors naming the file)."""
    p = config_path(path)
    if p.stat().st_size > MAX_CONFIG_BYTES:
        raise InputError(f"{p}: {p.stat().st_size} bytes is too big for a model config.json "
                         f"(at most {MAX_CONFIG_BYTES})")
    from fleetplan._load import load_json  # bounded: depth, duplicate keys, regular file only

    obj = load_json(p, what="config.json", max_bytes=MAX_CONFIG_BYTES)
    if not isinstance(obj, dict):
        raise InputError(f"{p}: a config.json is a JSON object, not {type(obj).__name__}")
    return p, obj


class _Fields:
    """Typed reads of config fields, every failure naming file, field and value."""

    def __init__(self, path: Path, cfg: dict[str, Any], bounds: Bounds) -> None:
        self.path = path
        self.bounds = bounds
        text = cfg.get("text_config")
        # multimodal checkpoints keep the language model's figures in text_config
        self.cfg = {**cfg, **text} if isinstance(text, dict) else cfg

    def raw(self, *names: str) -> tuple[str | None, Any]:
        for n in names:
            if self.cfg.get(n) is not None:
                return n, self.cfg[n]
        return None, None

    def int_(self, *names: str, default: int | None = None, minimum: int = 1,
             spec: str | None = None) -> int:
        """A whole number >= ``minimum``, within the bounds of the model record's ``spec``
        field when given (checked before any arithmetic: a 400-digit layer count is one line,
        not an overflow later)."""
        name, v = self.raw(*names)
        if name is None:
            if default is not None:
                return default
            raise InputError(f"{self.path}: field {names[0]} is missing (a decoder-only "
                             "language model's config.json states it)")
        lo, hi = (minimum, math.inf) if spec is None else self.bounds(spec)
        lo = max(lo, minimum)
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            bound = f">= {lo:g}" if hi == math.inf else f"from {lo:g} to {hi:g}"
            raise InputError(f"{self.path}: field {name}: {show_value(v, 40)} must be a whole "
                             f"number {bound}")
        return v

    def opt_int(self, *names: str) -> int | None:
        name, _ = self.raw(*names)
        return None if name is None else self.int_(*names)

    def bool_(self, name: str, default: bool) -> bool:
        v = self.cfg.get(name)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise InputError(f"{self.path}: field {name}: {v!r} must be true or false")
        return v



def cache_repo_id(path: str) -> str | None:
    """The hub id (``org/name``, or ``name`` for a repository without an organisation) of a
    path into the Hugging Face cache, ``.../models--org--name/snapshots/<revision>/...`` (or
    ``blobs``, ``refs``), read from its innermost ``models--`` folder; None for any other
    path."""
    parts = [part for part in path.replace("\\", "/").split("/") if part]
    for here, after in reversed(list(zip(parts, parts[1:], strict=False))):
        repo = here.removeprefix("models--")
        if here.startswith("models--") and repo and after in ("snapshots", "blobs", "refs"):
            return "/".join(repo.split("--"))
    return None


def _model_name(p: Path, cfg: dict[str, Any]) -> tuple[str, str]:
    """Short name and hub id. The folder names the model (``_name_or_path`` is often the base
    model a quantized checkpoint was made from): a Hugging Face cache folder
    ``models--org--name/snapshots/<rev>`` gives ``org/name``; a file not named
    ``config.json`` gives its stem. The hub id is ``_name_or_path`` when its last part is the
    short name; else, for a folder named ``org--name`` (the hub id with its slash written as
    the cache writes it, as ``data/external/configs/`` keeps them), ``org/name``, so that a
    run naming ``org/name`` finds it; else the short name."""
    folder = p.resolve().parent
    cached = (cache_repo_id(f"{folder.parent.parent.name}/snapshots")
              if folder.parent.name == "snapshots" else None)
    if cached is not None:
        return cached.split("/")[-1], cached
    short = folder.name if p.name == "config.json" else p.stem
    hub = cfg.get("_name_or_path")
    if isinstance(hub, str) and hub.rstrip("/").split("/")[-1] == short and hub.count("/") == 1:
        return short, hub
    org, sep, name = short.partition("--")
    if sep and org and name and not name.startswith("-"):
        return short, f"{org}/{name}"
    return short, short


def refuse_unmodelled_blocks(f: _Fields, mtype: str) -> None:
    """One line for the layer kinds the replica model has no terms for: Mamba / state-space
    layers (Nemotron-H's ``hybrid_override_pattern``, Jamba's and Granite-4's
    ``layers_block_type``, Mamba models) and a different block per layer (the Nemotron NAS
    models' ``block_configs``). Counted as attention layers, their parameters came out 2-3x too
    many (Nemotron-3-Nano-30B-A3B: 102 B; Llama-3.3-Nemotron-Super-49B: 88 B)."""
    for key, what in (("hybrid_override_pattern",
                       "Mamba2 layers beside attention (Nemotron-H) are not modelled"),
                      ("layers_block_type", "Mamba layers beside attention are not modelled"),
                      ("block_configs", "a different block per layer (Nemotron NAS) is not "
                       "modelled")):
        if f.cfg.get(key) is not None:
            raise InputError(f"{f.path}: field {key}: {show_value(f.cfg[key], 40)}: {what}")
    if "mamba" in mtype or mtype in ("nemotron_h", "falcon_h1"):
        raise InputError(f"{f.path}: field model_type: {mtype!r}: Mamba (state-space) layers "
                         "are not modelled")


def moe_layer_count(f: _Fields, layers: int) -> int:
    """How many of ``layers`` hold the routed experts, by the rules vLLM builds them with:

    - DeepSeek-V2/V3 and their kin: ``first_k_dense_replace`` dense layers, then every
      ``moe_layer_freq``-th layer (``layer_idx >= first_k_dense_replace and layer_idx %
      moe_layer_freq == 0``, ``deepseek_v2.py``); a list ``moe_layer_freq`` states 0 or 1 per
      layer (MiMo-V2, MiniMax-M3);
    - Llama 4: every ``interleave_moe_layer_step``-th layer (``(layer_idx + 1) % step == 0``,
      ``llama4.py``);
    - Qwen2/3-MoE: every ``decoder_sparse_step``-th layer (``(layer_idx + 1) % step == 0``)
      but those in ``mlp_only_layers`` (``qwen3_moe.py``)."""
    _name, freq = f.raw("moe_layer_freq")
    if isinstance(freq, list):
        if len(freq) != layers or any(v not in (0, 1) or isinstance(v, bool) for v in freq):
            raise InputError(f"{f.path}: field moe_layer_freq: {show_value(freq, 40)} must "
                             f"list 0 (dense) or 1 (MoE) for each of the {layers} layers")
        return sum(freq)
    first = f.int_("first_k_dense_replace", default=0, minimum=0, spec="layers")
    every = f.int_("moe_layer_freq", default=1)
    step = f.int_("interleave_moe_layer_step", "decoder_sparse_step", default=1)
    _name, only = f.raw("mlp_only_layers")
    dense = set(only) if isinstance(only, list) else set()
    moe = sum(1 for i in range(layers) if i >= first and i % every == 0
              and (i + 1) % step == 0 and i not in dense)
    if moe == 0:
        raise InputError(f"{f.path}: field first_k_dense_replace: {first}: no layer of the "
                         f"{layers} holds the experts")
    return moe


def hf_config_fields(path: str | os.PathLike[str], *, bounds: Bounds,
                     name: str | None = None) -> tuple[Path, dict[str, Any]]:
    """The file and the model-record fields of a Hugging Face ``config.json``
    (:meth:`~fleetplan.catalog.models.ModelSpec.from_hf_config` builds the spec from them).

    ``bounds``: the record's bound of a field, checked here before any arithmetic. ``name``
    overrides the short name (default: the folder's name, see :func:`_model_name`). Parameters
    are counted from the architecture, so they can be checked against the published figure of
    the model card.
    """
    p, cfg = read_hf_config(path)
    f = _Fields(p, cfg, bounds)
    mtype = str(f.cfg.get("model_type", "")).lower()
    archs = f.cfg.get("architectures") or []
    arch = str(archs[0]) if isinstance(archs, list) and archs else mtype or "unknown"
    refuse_unmodelled_blocks(f, mtype)
    layers = f.int_("num_hidden_layers", "n_layer", "num_layers", spec="layers")
    hidden = f.int_("hidden_size", "n_embd", "d_model", spec="hidden_size")
    heads = f.int_("num_attention_heads", "n_head", spec="attention_heads")
    kv_heads = f.int_("num_key_value_heads", "num_kv_heads", default=(
        1 if f.cfg.get("multi_query") else heads), spec="kv_heads")
    # the architecture rules of ModelSpec, named by this file's fields, before any arithmetic
    for field, why in model_inconsistency(heads, kv_heads, hidden, 0, 0):
        key = {"kv_heads": "num_key_value_heads", "hidden_size": "hidden_size"}[field]
        raise InputError(f"{p}: field {key}: {why}")
    head_dim = f.int_("head_dim", default=hidden // heads, spec="head_dim")
    inter = f.int_("intermediate_size", "ffn_hidden_size", "n_inner", default=4 * hidden,
                   spec="intermediate_size")
    llama4 = mtype.startswith("llama4")
    if llama4:  # Llama 4: experts of intermediate_size, dense layers of intermediate_size_mlp
        expert_inter, inter = inter, f.int_("intermediate_size_mlp", default=inter,
                                            spec="intermediate_size")
    vocab = f.int_("vocab_size", spec="vocab_size")
    ctx = f.int_("max_position_embeddings", "n_positions", "seq_length", "max_seq_len",
                 spec="context_length")  # a prompt token and a reply token at least
    tied = f.bool_("tie_word_embeddings", default=mtype not in _UNTIED_BY_DEFAULT)
    window = (None if f.raw("sliding_window")[0] is None
              else f.int_("sliding_window", spec="sliding_window"))
    if window is not None and (not f.bool_("use_sliding_window", True) or window >= ctx):
        window = None
    experts = f.int_("num_local_experts", "num_experts", "n_routed_experts", default=0,
                     minimum=0, spec="num_experts")
    if experts == 1:
        experts = 0
    if experts and f.cfg.get("enable_moe_block") is not None:
        raise InputError(f"{p}: field enable_moe_block: {f.cfg['enable_moe_block']!r}: an MoE "
                         "block beside each layer's dense MLP (Gemma-4 MoE) is not modelled")
    # an MoE model's experts per token are stated (no default: a guess moves the active
    # parameters, hence every step's reads, by the ratio of the guess to the truth)
    per_tok = (f.int_("num_experts_per_tok", "moe_topk", "num_experts_per_token",
                      minimum=0, spec="experts_per_token") if experts else 0)
    moe_inter = (expert_inter if llama4 else
                 f.int_("moe_intermediate_size", default=inter, spec="moe_intermediate_size"))
    shared_inter = f.int_("shared_expert_intermediate_size", "shared_intermediate_size",
                          "share_expert_dim", default=0, minimum=0,
                          spec="shared_expert_intermediate_size")
    n_shared = f.int_("n_shared_experts", "num_shared_experts", default=1 if llama4 else 0,
                      minimum=0, spec="num_experts")
    if n_shared and not shared_inter:
        shared_inter = n_shared * moe_inter
    moe_layers = moe_layer_count(f, layers) if experts else 0
    if experts and not 1 <= per_tok <= experts:
        moe = dict(model_inconsistency(heads, kv_heads, hidden, experts, per_tok))
        raise InputError(f"{p}: field num_experts_per_tok: {moe['experts_per_token']}")

    raw_dtype = str(f.cfg.get("torch_dtype") or f.cfg.get("dtype") or "bfloat16")
    dtype = raw_dtype.removeprefix("torch.")
    if dtype not in DTYPE_BYTES:
        raise InputError(f"{p}: field torch_dtype: {raw_dtype!r} is not one of "
                         f"{', '.join(sorted(DTYPE_BYTES))}")
    if dtype in ("float32", "float"):
        dtype = "float16"  # vLLM's dtype "auto" serves fp32 checkpoints in 16 bits
    mats = 2 if mtype in _UNGATED else 3
    q_bias = mtype in _QKV_BIAS or f.bool_("attention_bias", False)
    layout = attention_layout(f, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                              head_dim=head_dim, window=window, qkv_bias=q_bias)
    prec = precision(f, dtype, layers)
    attn_all = layout.linear
    norms = 2 * hidden + (2 * head_dim if mtype in ("qwen3", "qwen3_moe") else 0)
    dense_mlp = mats * hidden * inter
    expert = mats * hidden * moe_inter
    # a shared expert's sigmoid gate (hidden x 1) in Qwen2-MoE and the Qwen3-Next family
    shared = mats * hidden * shared_inter + (hidden if shared_inter and mtype in _SHARED_GATE
                                             else 0)
    dense_layers = layers - moe_layers
    router = hidden * experts
    linear_resident = (attn_all + dense_layers * dense_mlp
                       + moe_layers * (experts * expert + shared))
    linear_active = (attn_all + dense_layers * dense_mlp
                     + moe_layers * (per_tok * expert + shared))
    small = layers * norms + layout.small + moe_layers * router + hidden  # final norm
    embed = vocab * hidden
    head = 0 if tied else vocab * hidden
    resident = linear_resident + small + embed + head
    active = linear_active + small + embed + head
    head_bytes = prec.linear_bytes if prec.lm_head_quantized else 2.0
    linear_bytes = linear_resident * prec.linear_bytes
    if prec.attn_bytes is not None:  # attention (partly) left in 16 bits
        linear_bytes = (attn_all * prec.attn_bytes
                        + (linear_resident - attn_all) * prec.linear_bytes)
    weight_bytes = linear_bytes + (small + embed) * 2.0 + head * head_bytes

    short, hub = _model_name(p, cfg)
    return p, dict(
        model=name or short, hf_id=hub, architecture=arch.removesuffix("ForCausalLM"),
        params_b=resident / 1e9, layers=layers, hidden_size=hidden, intermediate_size=inter,
        attention_heads=heads, vocab_size=vocab, **layout.spec_fields,
        context_length=ctx, served_dtype=prec.name,
        weight_bytes_per_param=weight_bytes / resident,
        source=f"Hugging Face config.json {p}",
        tied_embeddings=tied, sliding_window=window, num_experts=experts,
        auto_kv_cache_dtype=prec.auto_kv_cache_dtype,
        experts_per_token=per_tok if experts else 0,
        shared_expert_intermediate_size=shared_inter,
        moe_intermediate_size=moe_inter if experts else None,
        active_params_b=active / 1e9,
    )


# ModelSpec's fields as a config.json names them (for the one-line refusal of a derived value)
_KEYS = {"params_b": "the parameter count (from the sizes)", "layers": "num_hidden_layers",
         "hidden_size": "hidden_size", "intermediate_size": "intermediate_size",
         "attention_heads": "num_attention_heads", "kv_heads": "num_key_value_heads",
         "head_dim": "head_dim", "vocab_size": "vocab_size",
         "context_length": "max_position_embeddings",
         "weight_bytes_per_param": "the bytes per parameter (quantization_config)",
         "active_params_b": "the active parameter count (from the sizes)",
         "sliding_layers": "layer_types", "full_kv_heads": "num_global_key_value_heads",
         "full_head_dim": "global_head_dim", "linear_layers": "layer_types",
         "linear_state_elements": "linear_num_value_heads",
         "linear_conv_elements": "linear_conv_kernel_dim",
         "linear_heads": "linear_num_key_heads"}


def refusal(p: Path, fields: dict[str, Any], errors: list[Any]) -> str:
    """The one line for a derived value the model record's bounds refuse (``errors``: the
    pydantic errors), naming the file and the config.json field it comes from."""
    err = errors[0]
    name = str(err["loc"][0]) if err["loc"] else ""
    shown = (f" {show_value(fields[name], 40)}" if name in fields else "")
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{p}: field {_KEYS.get(name, name or 'config')}:{shown}: {msg}"
