"""The served precision of a Hugging Face checkpoint: what its ``quantization_config`` (or a
ModelOpt export's ``hf_quant_config.json``) says about the bytes of each weight.

Main entry: :func:`precision`, called by :func:`fleetplan.catalog.hf_config.hf_config_fields`
with the file it reads. It gives a :class:`Precision`: bytes per linear weight (scales
included), the bytes of the attention projections where a format leaves (some of) them in 16
bits, whether ``lm_head`` is quantized, and the KV-cache dtype vLLM's ``auto`` takes from the
checkpoint. Formats read: ``torch_dtype`` alone, GPTQ / AWQ / AutoRound (``bits``,
``group_size``), ``fp8`` (DeepSeek's block FP8 and the per-tensor exports), ``fbgemm_fp8``
(Meta's row-wise FP8, with ``modules_to_not_convert``), ``compressed-tensors`` (its first
config group), ``bitsandbytes``, ``mxfp4`` (gpt-oss), ``modelopt`` (FP8, NVFP4, and
``MIXED_PRECISION`` with one format for the attention and one for the MLPs) and ``quark``
(AMD Quark: ``global_quant_config``, ``layer_quant_config`` patterns, ``exclude``). Anything
else is one line naming the file and field.

Named assumptions of the 4-bit float formats: NVFP4 (``modelopt`` ``quant_algo: NVFP4``) is 4
bits per weight plus one FP8 scale per 16 (0.5625 bytes; the per-tensor FP32 scale is left
out); MXFP4 (gpt-oss, Quark ``fp4`` in groups of 32) is 4 bits plus one 8-bit scale per 32
(0.53125 bytes). Bytes only: the compute term of the replica model runs every format at the
GPU's dense FP16 rate (docs/catalogs.md gives the measurements behind that).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fleetplan._load import show_value
from fleetplan.catalog.hf_attention import attention_layers_skipped, attention_share_skipped
from fleetplan.errors import InputError

__all__ = ["DTYPE_BYTES", "MAX_CONFIG_BYTES", "Precision", "precision"]

DTYPE_BYTES = {"float16": 2.0, "bfloat16": 2.0, "float32": 4.0, "half": 2.0, "float": 4.0}
MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a config.json is a few KB; refuse anything huge


class _Src(Protocol):
    """The config file being read: its path and its fields."""

    path: Path
    cfg: dict[str, Any]


@dataclass(frozen=True)
class Precision:
    """How the weights are stored as served: bytes per quantized linear weight (scales
    included), whether ``lm_head`` is quantized, a name (``bfloat16``, ``gptq-int4`` ...) and
    the bytes per attention weight where the quantization leaves (some of) the attention
    projections in 16 bits (None: as ``linear_bytes``)."""

    name: str
    linear_bytes: float
    lm_head_quantized: bool
    attn_bytes: float | None = None
    auto_kv_cache_dtype: str | None = None



NVFP4_BYTES = 0.5 + 1.0 / 16  # 4-bit weights, one FP8 scale per 16
MXFP4_BYTES = 0.5 + 1.0 / 32  # 4-bit weights, one 8-bit scale per 32
_MODELOPT = {"NVFP4": NVFP4_BYTES, "FP8": 1.0}


def _modelopt(f: _Src, q: dict[str, Any], layers: int,
              where: str | None = None) -> Precision:
    """NVIDIA ModelOpt checkpoints: one ``quant_algo`` for every linear layer but those in
    ``ignore`` (``lm_head``, and in NVIDIA's Gemma-4 NVFP4 every layer's attention).
    ``where``: the file and field ``q`` came from (default: config.json's
    ``quantization_config``)."""
    where = where or f"{f.path}: field quantization_config"
    algo = str(q.get("quant_algo", "")).upper()
    if algo == "MIXED_PRECISION":
        return _modelopt_mixed(f, q, where)
    if algo not in _MODELOPT:
        raise InputError(f"{where}.quant_algo: {show_value(q.get('quant_algo'), 40)} is not "
                         f"modelled for modelopt (known: {', '.join(_MODELOPT)}; "
                         "MIXED_PRECISION gives each module its own)")
    ignore = q.get("ignore") or q.get("exclude_modules") or []
    if not isinstance(ignore, list):
        raise InputError(f"{where}.ignore: {show_value(ignore, 40)} must be a list")
    bytes_ = _MODELOPT[algo]
    skipped = attention_share_skipped(ignore, layers)
    return Precision(f"modelopt-{algo.lower()}", bytes_,
                     not any(str(m).startswith("lm_head") for m in ignore),
                     attn_bytes=skipped * 2.0 + (1.0 - skipped) * bytes_,
                     auto_kv_cache_dtype=_modelopt_kv(q, where))


_MIXED_ALGOS = {"NVFP4": NVFP4_BYTES, "W4A16_NVFP4": NVFP4_BYTES, "W4A8_NVFP4_FP8": NVFP4_BYTES,
                "FP8": 1.0}


def _modelopt_mixed(f: _Src, q: dict[str, Any], where_q: str) -> Precision:
    """ModelOpt's ``MIXED_PRECISION``: ``quantized_layers`` gives each module its own
    ``quant_algo``. Modelled when one format covers every attention projection
    (``self_attn`` / ``linear_attn``) and one every other linear layer (MLPs, experts;
    ``lm_head`` quantized when listed), as in NVIDIA's Qwen3.6 NVFP4 checkpoints (attention FP8,
    MLPs NVFP4)."""
    where = f"{where_q}.quantized_layers"
    layers = q.get("quantized_layers")
    if not isinstance(layers, dict) or not layers:
        raise InputError(f"{where}: missing (MIXED_PRECISION states each module's format "
                         "there)")
    algos: dict[bool, set[str]] = {True: set(), False: set()}
    for module, how in layers.items():
        algo = str(how.get("quant_algo", "")).upper() if isinstance(how, dict) else ""
        if algo not in _MIXED_ALGOS:
            raise InputError(f"{where}.{show_value(module, 60)}: quant_algo "
                             f"{show_value(algo, 40)} is not modelled (known: "
                             f"{', '.join(_MIXED_ALGOS)})")
        if str(module) != "lm_head":
            algos["_attn." in str(module) or "self_attn" in str(module)].add(algo)
    rest = {_MIXED_ALGOS[a] for a in algos[False]}
    attn = {_MIXED_ALGOS[a] for a in algos[True]}
    if len(rest) > 1 or len(attn) > 1:
        raise InputError(f"{where}: more than one format among the "
                         f"{'attention projections' if len(attn) > 1 else 'MLP layers'} is not "
                         "modelled")
    linear = rest.pop() if rest else 2.0
    attn_bytes = attn.pop() if attn else 2.0
    names = sorted(algos[False] or {"16-bit"})
    return Precision(f"modelopt-{names[0].lower().removeprefix('w4a16_')}-mixed", linear,
                     "lm_head" in layers, attn_bytes=attn_bytes,
                     auto_kv_cache_dtype=_modelopt_kv(q, where_q))


def _modelopt_kv(q: dict[str, Any], where: str) -> str | None:
    """The KV-cache dtype vLLM's ``auto`` takes from a ModelOpt checkpoint:
    ``kv_cache_scheme`` (8-bit float: fp8) or ``kv_cache_quant_algo`` (``FP8``), as vLLM 0.32.0
    resolves it (``utils/torch_utils.py`` ``get_kv_cache_quant_algo_string``, lines 457-509;
    an older vLLM may keep 16 bits: state ``kv_cache_dtype`` on the server then). None: none
    stated. A 4-bit KV cache is refused."""
    kv = q.get("kv_cache_scheme") or q.get("kv_cache_quant_algo")
    if kv is None:
        return None
    if isinstance(kv, dict) and kv.get("num_bits") == 8 and kv.get("type") == "float":
        return "fp8"
    if isinstance(kv, str) and kv.upper() in ("FP8", "FP8_E4M3"):
        return "fp8"
    raise InputError(f"{where}.kv_cache_scheme: {show_value(kv, 60)}: only an FP8 KV cache "
                     "is modelled")


HF_QUANT_CONFIG = "hf_quant_config.json"


def _modelopt_side_file(f: _Src) -> tuple[Path, dict[str, Any]] | None:
    """The ``quantization`` object of the ``hf_quant_config.json`` beside a config.json that
    states no ``quantization_config``: where NVIDIA's ModelOpt exports (Llama-3.1-70B-Instruct-FP8,
    DeepSeek-V3.1-NVFP4, Qwen3-235B-A22B-NVFP4 ...) state their format, and where vLLM looks
    for it then (``get_quant_config``); None without such a file."""
    side = f.path.parent / HF_QUANT_CONFIG
    if not side.is_file():
        return None
    from fleetplan._load import load_json

    obj = load_json(side, what=HF_QUANT_CONFIG, max_bytes=MAX_CONFIG_BYTES)
    producer = obj.get("producer") if isinstance(obj, dict) else None
    q = obj.get("quantization") if isinstance(obj, dict) else None
    name = producer.get("name") if isinstance(producer, dict) else None
    if name != "modelopt" or not isinstance(q, dict):
        raise InputError(f"{side}: field producer.name: {show_value(name, 40)}: only a ModelOpt "
                         "export's quantization object is read (producer modelopt, "
                         "quantization {quant_algo ...})")
    return side, q


def _mxfp4(f: _Src, q: dict[str, Any], layers: int) -> Precision:
    """gpt-oss's MXFP4: the experts in 4 bits, what ``modules_to_not_convert`` lists (its
    attention, router, embeddings, ``lm_head``) in 16."""
    skip = q.get("modules_to_not_convert") or []
    if not isinstance(skip, list):
        raise InputError(f"{f.path}: field quantization_config.modules_to_not_convert: "
                         f"{show_value(skip, 40)} must be a list")
    skipped = attention_share_skipped(skip, layers)
    return Precision("mxfp4", MXFP4_BYTES, not any("lm_head" in str(m) for m in skip),
                     attn_bytes=skipped * 2.0 + (1.0 - skipped) * MXFP4_BYTES)


def precision(f: _Src, dtype: str, layers: int) -> Precision:
    q = f.cfg.get("quantization_config")
    base = DTYPE_BYTES[dtype]
    if q is None:
        side = _modelopt_side_file(f)
        if side is not None:
            return _modelopt(f, side[1], layers, where=f"{side[0]}: field quantization")
        return Precision(dtype, base, False)
    if not isinstance(q, dict):
        raise InputError(f"{f.path}: field quantization_config: {q!r} must be an object")
    method = str(q.get("quant_method", "")).lower()
    where = f"{f.path}: field quantization_config"
    if method in ("gptq", "awq", "marlin", "gptq_marlin", "awq_marlin", "auto-round",
                  "intel/auto-round"):
        bits = q.get("bits", q.get("w_bit"))
        group = q.get("group_size", q.get("q_group_size", 128))
        if not isinstance(bits, int) or bits not in (2, 3, 4, 8):
            raise InputError(f"{where}.bits: {bits!r} must be 2, 3, 4 or 8")
        if not isinstance(group, int) or (group < 1 and group != -1):
            raise InputError(f"{where}.group_size: {group!r} must be a whole number >= 1 or -1")
        # per group of weights (per output column): an fp16 scale and a packed zero point
        per_group = (2.0 + bits / 8.0) / group if group > 0 else 0.0
        name = "autoround" if "auto-round" in method else method.split("_")[0]
        return Precision(f"{name}-int{bits}", bits / 8.0 + per_group, False)
    if method == "fp8":
        return Precision("fp8", 1.0, False)
    if method == "fbgemm_fp8":
        return _fbgemm_fp8(f, q, layers)
    if method == "quark":
        return _quark(f, q, layers)
    if method == "modelopt":
        return _modelopt(f, q, layers)
    if method == "mxfp4":
        return _mxfp4(f, q, layers)
    if method == "compressed-tensors":
        groups = q.get("config_groups")
        if not isinstance(groups, dict) or not groups:
            raise InputError(f"{where}.config_groups: missing (compressed-tensors states its "
                             "weight scheme there)")
        first = next(iter(groups.values()))
        w = first.get("weights") if isinstance(first, dict) else None
        if not isinstance(w, dict) or not isinstance(w.get("num_bits"), int):
            raise InputError(f"{where}.config_groups: no weights.num_bits in the first group")
        bits = int(w["num_bits"])
        if isinstance(w["num_bits"], bool) or bits not in (2, 3, 4, 8, 16):
            raise InputError(f"{where}.config_groups: weights.num_bits {show_value(bits, 40)} "
                             "must be 2, 3, 4, 8 or 16")
        group = w.get("group_size")
        per_group = (2.0 / group) if isinstance(group, int) and group > 0 else 0.0
        kind = "fp" if w.get("type") == "float" else "int"
        ignore = q.get("ignore") or []
        return Precision(f"compressed-tensors-w{bits}{kind}", bits / 8.0 + per_group,
                         "lm_head" not in ignore)
    if method == "bitsandbytes":
        bits = 4 if q.get("load_in_4bit") else 8 if q.get("load_in_8bit") else None
        if bits is None:
            raise InputError(f"{where}: bitsandbytes without load_in_4bit or load_in_8bit")
        # one fp32 absmax per block of 64 weights
        return Precision(f"bitsandbytes-int{bits}", bits / 8.0 + 4.0 / 64, False)
    raise InputError(f"{where}.quant_method: {method or None!r} is not modelled (known: gptq, "
                     "awq, auto-round, fp8, fbgemm_fp8, compressed-tensors, bitsandbytes, "
                     "modelopt, mxfp4, quark)")


def _layer_indices(items: list[Any], pattern: str, layers: int) -> set[int]:
    """Indices ``i < layers`` of the entries naming ``...layers.<i><pattern>`` (``pattern`` a
    regular expression for what follows the index)."""
    hit: set[int] = set()
    for item in items:
        m = re.search(r"layers\.(\d+)" + pattern, str(item))
        if m is not None and int(m.group(1)) < layers:
            hit.add(int(m.group(1)))
    return hit


def _fbgemm_fp8(f: _Src, q: dict[str, Any], layers: int) -> Precision:
    """Meta's FBGEMM FP8 (``fbgemm_fp8``): FP8 weights with one scale per output row (the
    scales are a few bytes per row, left out). ``modules_to_not_convert`` keeps modules in 16
    bits: a whole layer (``model.layers.<i>``), its attention (``model.layers.<i>.self_attn``,
    or any projection under it) or its MLP (``model.layers.<i>.mlp...``: counted whole where
    one of its projections is listed, an over-count of the 16-bit bytes by at most two thirds
    of that MLP). Meta's Llama 3.1 405B FP8 keeps its first and last layers, every attention
    and ``lm_head`` in 16 bits (transformers' conversion script for it, ``FbgemmFp8Config``).
    ``lm_head`` is never quantized: vLLM's FBGEMM method takes linear layers only."""
    where = f"{f.path}: field quantization_config.modules_to_not_convert"
    skip = q.get("modules_to_not_convert") or []
    if not isinstance(skip, list):
        raise InputError(f"{where}: {show_value(skip, 40)} must be a list")
    whole = _layer_indices(skip, r"$", layers)
    mlp = _layer_indices(skip, r"\.mlp", layers) | whole
    named = attention_layers_skipped(skip)  # None: one pattern for every layer's attention
    attn = set(range(layers)) if named is None else {i for i in named if i < layers} | whole
    a_share = len(attn) / layers if layers else 0.0
    m_share = len(mlp) / layers if layers else 0.0
    return Precision("fbgemm-fp8", 1.0 + m_share, False, attn_bytes=1.0 + a_share)


# Quark's weight dtypes -> bytes per weight (before scales)
_QUARK_DTYPES = {"fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "int8": 1.0, "uint8": 1.0, "int4": 0.5,
                 "uint4": 0.5, "fp4": 0.5, "fp6_e2m3": 0.75, "fp6_e3m2": 0.75,
                 "bfloat16": 2.0, "float16": 2.0}
# representative module names: an attention projection and an MLP (or expert) projection
_QUARK_ATTN = ("model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.o_proj")
_QUARK_MLP = ("model.layers.1.mlp.down_proj", "model.layers.1.mlp.experts.0.down_proj",
              "model.layers.1.block_sparse_moe.experts.0.w2",
              "model.layers.1.feed_forward.down_proj")


def _quark_format(weight: Any, where: str) -> tuple[str, float]:
    """``(dtype, bytes per weight)`` of one Quark ``weight`` spec (a dict, or a list whose last
    entry is the stored format, as in Quark's two-level FP8 + INT4 and NVFP4 specs); None: 16
    bits. A group scale is one byte per group for the MX formats (``scale_format`` ``e8m0``),
    two otherwise."""
    if weight is None:
        return "16-bit", 2.0
    w = weight[-1] if isinstance(weight, list) and weight else weight
    if not isinstance(w, dict):
        raise InputError(f"{where}.weight: {show_value(weight, 60)} must be an object")
    dtype = w.get("dtype")
    if dtype not in _QUARK_DTYPES:
        raise InputError(f"{where}.weight.dtype: {show_value(dtype, 40)} is not modelled "
                         f"(known: {', '.join(_QUARK_DTYPES)})")
    group = w.get("group_size")
    scale = 0.0
    if w.get("qscheme") == "per_group" and isinstance(group, int) and group > 0:
        scale = (1.0 if w.get("scale_format") == "e8m0" else 2.0) / group
    return str(dtype), _QUARK_DTYPES[str(dtype)] + scale


def _quark(f: _Src, q: dict[str, Any], layers: int) -> Precision:
    """AMD Quark (``quark``), as vLLM's ``QuarkConfig`` reads it: a module takes the first
    ``layer_quant_config`` entry whose name pattern matches it, else ``global_quant_config``;
    ``exclude`` keeps modules in 16 bits (``lm_head``; attention per layer or all of it).
    The MLPs' format (or the experts') sets ``linear_bytes``, the attention projections'
    ``attn_bytes``. The KV cache's FP8 (``export.kv_cache_group``) is not read: vLLM takes it
    where the server states ``--kv-cache-dtype fp8``, as AMD's own commands do."""
    where = f"{f.path}: field quantization_config"
    glob = q.get("global_quant_config") or {}
    per_layer = q.get("layer_quant_config") or {}
    exclude = q.get("exclude") or []
    if not isinstance(glob, dict) or not isinstance(per_layer, dict):
        raise InputError(f"{where}.global_quant_config: must be an object, as "
                         "layer_quant_config")
    if not isinstance(exclude, list):
        raise InputError(f"{where}.exclude: {show_value(exclude, 40)} must be a list")

    def format_of(names: tuple[str, ...]) -> tuple[str, float]:
        at, cfg = f"{where}.global_quant_config", glob
        for pattern, entry in per_layer.items():
            if any(fnmatch.fnmatchcase(n, str(pattern)) for n in names):
                at, cfg = f"{where}.layer_quant_config.{show_value(pattern, 40)}", entry
                break
        if not isinstance(cfg, dict):
            raise InputError(f"{at}: {show_value(cfg, 40)} must be an object")
        return _quark_format(cfg.get("weight"), at)

    (dtype, linear), (_, attn) = format_of(_QUARK_MLP), format_of(_QUARK_ATTN)
    skipped = attention_share_skipped(exclude, layers)
    if any(fnmatch.fnmatchcase(_QUARK_ATTN[0], str(m)) for m in exclude):
        skipped = 1.0
    return Precision(f"quark-{dtype}", linear, False,
                     attn_bytes=skipped * 2.0 + (1.0 - skipped) * attn)
