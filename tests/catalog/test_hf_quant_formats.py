"""Two FP8 formats of published checkpoints that other people's benchmarks serve, read as their
tools write them: Meta's FBGEMM FP8 (``fbgemm_fp8``, Llama 3.1 405B Instruct FP8) and AMD Quark
(``quark``, the ``amd/*-FP8-KV`` checkpoints AMD benchmarks its MI300X with, and Quark's MXFP4).

The architectures are the bundled copies of Meta's base configs (``data/model_configs``); the
``quantization_config`` is added the way each tool writes it (cited per test). Expected bytes
are counted here from the architecture and the format's rule, not taken from the reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleetplan.catalog import ModelSpec
from fleetplan.errors import InputError

LIBRARY = Path(__file__).resolve().parents[2] / "data" / "model_configs"


def _spec(tmp_path: Path, base: str, quant: dict[str, Any] | None) -> ModelSpec:
    cfg = json.loads((LIBRARY / base / "config.json").read_text())
    if quant is not None:
        cfg["quantization_config"] = quant
    p = tmp_path / f"{base}-{len(list(tmp_path.iterdir()))}" / "config.json"
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps(cfg))
    return ModelSpec.from_hf_config(p)


def _llama_parts(base: str) -> tuple[int, float, float, float]:
    """(layers, attention projection params per layer, MLP params per layer, embeddings +
    lm_head params) of a Llama 3.1 base config."""
    c = json.loads((LIBRARY / base / "config.json").read_text())
    h, layers = c["hidden_size"], c["num_hidden_layers"]
    kv = c["num_key_value_heads"] * (h // c["num_attention_heads"])
    attn = 2 * h * h + 2 * h * kv  # q and o, k and v
    mlp = 3 * h * c["intermediate_size"]
    return layers, attn, mlp, 2 * c["vocab_size"] * h


def test_fbgemm_fp8_keeps_attention_first_and_last_layers_in_16_bits(tmp_path: Path) -> None:
    """Llama 3.1 405B Instruct FP8 as transformers' conversion script writes it
    (``FbgemmFp8Config(modules_to_not_convert=...)``): layers 0 and 125, every layer's
    ``self_attn`` and ``lm_head`` not converted; the Llama 3 paper (section 6.2, "FP8
    quantization") states the same rule: FP8 in the feed-forward layers only, not the first
    and last layer."""
    base = "meta-llama--Meta-Llama-3.1-405B"
    layers, attn, mlp, emb = _llama_parts(base)
    skip = (["model.layers.0", f"model.layers.{layers - 1}", "lm_head"]
            + [f"model.layers.{i}.self_attn" for i in range(1, layers - 1)])
    fp8 = _spec(tmp_path, base, {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
                                 "modules_to_not_convert": skip})
    bf16 = _spec(tmp_path, base, None)
    want = layers * attn * 2 + (layers - 2) * mlp * 1 + 2 * mlp * 2 + emb * 2
    small = bf16.weight_bytes - (layers * (attn + mlp) + emb) * 2  # norms, at 16 bits
    assert fp8.weight_bytes == pytest.approx(want + small, rel=1e-6)
    assert fp8.params_b == pytest.approx(bf16.params_b) and fp8.served_dtype == "fbgemm-fp8"
    # about 60% of the 16-bit checkpoint: the attention stays 16-bit
    assert 0.55 < fp8.weight_bytes / bf16.weight_bytes < 0.65
    # the same checkpoint listing every projection by name reads the same
    named = ["lm_head"] + [f"model.layers.{i}.self_attn.{m}_proj" for i in range(layers)
                           for m in "qkvo"]
    named += [f"model.layers.{i}.mlp.{m}_proj" for i in (0, layers - 1)
              for m in ("gate", "up", "down")]
    again = _spec(tmp_path, base, {"quant_method": "fbgemm_fp8",
                                   "modules_to_not_convert": named})
    assert again.weight_bytes == pytest.approx(fp8.weight_bytes, rel=1e-9)
    # one pattern for every layer's attention
    glob = _spec(tmp_path, base, {"quant_method": "fbgemm_fp8",
                                  "modules_to_not_convert": ["model.layers.*.self_attn"]})
    assert glob.weight_bytes == pytest.approx(layers * (attn * 2 + mlp) + emb * 2 + small,
                                              rel=1e-6)
    # nothing listed: every linear layer FP8, lm_head still 16-bit (vLLM quantizes linears only)
    bare = _spec(tmp_path, base, {"quant_method": "fbgemm_fp8"})
    assert bare.weight_bytes == pytest.approx(layers * (attn + mlp) + (emb + 0) * 2 + small,
                                              rel=1e-6)


AMD_FP8 = {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False,
           "symmetric": True, "ch_axis": None, "group_size": None}


def _amd_fp8_kv() -> dict[str, Any]:
    """The shape of AMD's ``*-FP8-KV`` Quark exports as vLLM's ``QuarkConfig.from_config``
    reads them: FP8 per-tensor weights and inputs for every linear layer, ``lm_head``
    excluded, and the KV cache's FP8 carried by the ``k_proj`` / ``v_proj`` outputs."""
    fp8_io = {"weight": AMD_FP8, "input_tensors": AMD_FP8, "output_tensors": None,
              "bias": None}
    kv = {**fp8_io, "output_tensors": AMD_FP8}
    return {"quant_method": "quark", "global_quant_config": fp8_io,
            "layer_quant_config": {"*k_proj": kv, "*v_proj": kv}, "layer_type_quant_config": {},
            "exclude": ["lm_head"],
            "export": {"kv_cache_group": ["*k_proj", "*v_proj"], "pack_method": "reorder",
                       "weight_format": "real_quantized"}}


def test_quark_fp8_reads_as_the_fp8_checkpoint_it_is(tmp_path: Path) -> None:
    """AMD's Llama 3.1 70B FP8-KV in Quark's format weighs what the same FP8 checkpoint in
    ``quant_method: fp8`` weighs: 1 byte per linear weight, ``lm_head`` and embeddings 16-bit."""
    base = "meta-llama--Meta-Llama-3.1-70B"
    quark = _spec(tmp_path, base, _amd_fp8_kv())
    plain = _spec(tmp_path, base, {"quant_method": "fp8", "activation_scheme": "static"})
    layers, attn, mlp, emb = _llama_parts(base)
    assert quark.weight_bytes == pytest.approx(plain.weight_bytes, rel=1e-9)
    bf16 = _spec(tmp_path, base, None)
    small = bf16.weight_bytes - (layers * (attn + mlp) + emb) * 2
    assert quark.weight_bytes == pytest.approx(layers * (attn + mlp) + emb * 2 + small, rel=1e-6)
    assert quark.served_dtype == "quark-fp8_e4m3"


def test_quark_mxfp4_mlps_with_16_bit_attention(tmp_path: Path) -> None:
    """Quark's MXFP4 (weights ``fp4`` in groups of 32 with an ``e8m0`` scale, as Quark's
    ``OCP_MXFP4Spec`` writes it) on the MLPs only, attention excluded by pattern: 0.53125 bytes
    per MLP weight, 2 per attention weight; the same MXFP4 via a ``layer_quant_config``
    pattern on the MLPs with a 16-bit global, or the projections excluded one pattern each,
    read the same."""
    base = "meta-llama--Meta-Llama-3.1-8B"
    mx = {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0",
          "is_dynamic": False}
    by_exclude = _spec(tmp_path, base, {
        "quant_method": "quark", "global_quant_config": {"weight": mx, "input_tensors": None},
        "layer_quant_config": {}, "exclude": ["lm_head", "*self_attn*"],
        "export": {"kv_cache_group": [], "pack_method": "reorder"}})
    by_pattern = _spec(tmp_path, base, {
        "quant_method": "quark", "global_quant_config": {"weight": None},
        "layer_quant_config": {"*.mlp.*": {"weight": mx}}, "exclude": ["lm_head"],
        "export": {"kv_cache_group": [], "pack_method": "reorder"}})
    by_projection = _spec(tmp_path, base, {
        "quant_method": "quark", "global_quant_config": {"weight": mx},
        "exclude": ["lm_head", "*q_proj", "*k_proj", "*v_proj", "*o_proj"],
        "export": {"kv_cache_group": [], "pack_method": "reorder"}})
    layers, attn, mlp, emb = _llama_parts(base)
    bf16 = _spec(tmp_path, base, None)
    small = bf16.weight_bytes - (layers * (attn + mlp) + emb) * 2
    want = layers * (attn * 2 + mlp * (0.5 + 1 / 32)) + emb * 2 + small
    for spec in (by_exclude, by_pattern, by_projection):
        assert spec.weight_bytes == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize(("quant", "field"), [
    ({"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "int2"}}},
     "global_quant_config.weight.dtype"),
    ({"quant_method": "quark", "global_quant_config": {"weight": AMD_FP8}, "exclude": "lm_head"},
     "exclude"),
    ({"quant_method": "fbgemm_fp8", "modules_to_not_convert": "lm_head"},
     "modules_to_not_convert"),
])
def test_a_format_it_cannot_read_is_one_line_naming_the_field(
        tmp_path: Path, quant: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as err:
        _spec(tmp_path, "meta-llama--Meta-Llama-3.1-8B", quant)
    msg = str(err.value)
    assert "\n" not in msg and f"quantization_config.{field}" in msg and "config.json" in msg
