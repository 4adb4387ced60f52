"""Which layers hold the experts, formats stated beside config.json, and layer kinds the model
has no terms for, read as vLLM reads them (tests/data/hf-configs, README there for provenance):

- Llama 4 puts its experts on every ``interleave_moe_layer_step``-th layer, with one shared
  expert of ``intermediate_size`` and dense layers of ``intermediate_size_mlp``; DeepSeek's
  ``moe_layer_freq`` (an int: every n-th layer after ``first_k_dense_replace``; a list: 0 or 1
  per layer) and Qwen-MoE's ``decoder_sparse_step`` / ``mlp_only_layers`` likewise;
- a ModelOpt export that keeps its format in ``hf_quant_config.json`` (no
  ``quantization_config`` in config.json) is served in that format;
- Mamba hybrids and per-layer NAS blocks are refused in one line, never counted as attention
  layers (which made Nemotron-3-Nano-30B-A3B a 102 B model)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fleetplan.catalog import ModelSpec
from fleetplan.errors import InputError

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf-configs"


def test_llama4_experts_every_other_layer_give_the_published_counts() -> None:
    """Meta's model cards: Maverick 400 B total, Scout 109 B total (with its vision encoder,
    which text_config does not describe), 17 B active each."""
    mav = ModelSpec.from_hf_config(CONFIGS / "Llama-4-Maverick-17B-128E-Instruct")
    scout = ModelSpec.from_hf_config(CONFIGS / "Llama-4-Scout-17B-16E-Instruct")
    assert mav.params_b == pytest.approx(400.0, rel=0.01)
    assert scout.params_b == pytest.approx(109.0, rel=0.02) and scout.params_b < 109.0
    for spec in (mav, scout):
        assert spec.is_moe and spec.active_b == pytest.approx(17.0, rel=0.02)
    # Maverick: 24 of 48 layers hold 128 experts; as if all did, twice the experts' weights
    cfg = json.loads((CONFIGS / "Llama-4-Maverick-17B-128E-Instruct" / "config.json").read_text())
    assert cfg["text_config"]["interleave_moe_layer_step"] == 2


def _with(tmp_path: Path, src: str, **changes: object) -> ModelSpec:
    cfg = json.loads((CONFIGS / src / "config.json").read_text())
    cfg.update(changes)
    p = tmp_path / src / "config.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(cfg))
    return ModelSpec.from_hf_config(p)


def test_moe_layer_freq_and_sparse_steps_place_the_experts(tmp_path: Path) -> None:
    """Each form moves the resident parameters by the experts of the layers it takes away."""
    base = _with(tmp_path, "DeepSeek-V2-Lite")  # 27 layers, the first dense: 26 MoE layers
    half = _with(tmp_path / "freq", "DeepSeek-V2-Lite", moe_layer_freq=2)
    listed = _with(tmp_path / "list", "DeepSeek-V2-Lite",
                   moe_layer_freq=[0] + [1, 0] * 13)
    # the experts a token does not use sit in the MoE layers alone: freq 2 after one dense
    # layer leaves layers 2, 4 ... 26 (13 of the 26) holding them
    unused = base.params_b - base.active_b
    assert half.params_b - half.active_b == pytest.approx(unused * 13 / 26, rel=1e-9)
    assert listed.params_b == pytest.approx(half.params_b, rel=1e-9)
    qwen = _with(tmp_path, "Qwen3-30B-A3B")
    sparse = _with(tmp_path / "sparse", "Qwen3-30B-A3B", decoder_sparse_step=2)
    only = _with(tmp_path / "only", "Qwen3-30B-A3B", mlp_only_layers=list(range(1, 48, 2)))
    assert sparse.params_b < 0.6 * qwen.params_b
    assert only.params_b == pytest.approx(sparse.params_b, rel=1e-9)
    mimo = ModelSpec.from_hf_config(CONFIGS / "MiMo-V2-Flash")  # list form, first layer dense
    assert mimo.params_b == pytest.approx(309.0, rel=0.01)  # Xiaomi: 309 B total


@pytest.mark.parametrize(("freq", "message"), [
    ([1, 0], r"must list 0 \(dense\) or 1 \(MoE\) for each of the 27 layers"),
    ([2] * 27, r"must list 0 \(dense\) or 1 \(MoE\)"),
])
def test_a_bad_layer_list_is_one_line(tmp_path: Path, freq: list[int], message: str) -> None:
    with pytest.raises(InputError, match=message) as exc:
        _with(tmp_path, "DeepSeek-V2-Lite", moe_layer_freq=freq)
    assert "field moe_layer_freq" in str(exc.value) and "\n" not in str(exc.value)


def test_a_modelopt_export_is_served_in_the_format_hf_quant_config_states(
        tmp_path: Path) -> None:
    """nvidia/Llama-3.1-70B-Instruct-FP8 states FP8 (and an FP8 KV cache) in
    hf_quant_config.json only; read as bf16 it weighed 141 GB, twice its checkpoint."""
    fp8 = ModelSpec.from_hf_config(CONFIGS / "Llama-3.1-70B-Instruct-FP8")
    assert "quantization_config" not in json.loads(
        (CONFIGS / "Llama-3.1-70B-Instruct-FP8" / "config.json").read_text())
    assert fp8.served_dtype == "modelopt-fp8" and fp8.auto_kv_cache_dtype == "fp8"
    assert fp8.params_b == pytest.approx(70.6, rel=0.01)
    # FP8 linear layers, 16-bit embeddings and lm_head (excluded): 68.5 + 2 x 2.1 GB
    assert fp8.weight_bytes / 1e9 == pytest.approx(72.7, rel=0.01)
    bare = tmp_path / "Llama-3.1-70B-Instruct-FP8"
    bare.mkdir()
    shutil.copy(CONFIGS / "Llama-3.1-70B-Instruct-FP8" / "config.json", bare)
    assert ModelSpec.from_hf_config(bare).weight_bytes > 1.9 * fp8.weight_bytes
    (bare / "hf_quant_config.json").write_text('{"producer": {"name": "other"}}')
    with pytest.raises(InputError, match="hf_quant_config.json: field producer.name: 'other'"):
        ModelSpec.from_hf_config(bare)


@pytest.mark.parametrize(("folder", "field"), [
    ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "hybrid_override_pattern"),
    ("Llama-3_3-Nemotron-Super-49B-v1", "block_configs"),
])
def test_mamba_hybrids_and_nas_blocks_are_refused_in_one_line(folder: str, field: str) -> None:
    with pytest.raises(InputError) as exc:
        ModelSpec.from_hf_config(CONFIGS / folder)
    line = str(exc.value)
    assert "\n" not in line and f"config.json: field {field}: " in line
    assert line.endswith("not modelled")


def test_an_moe_config_must_state_its_experts_per_token(tmp_path: Path) -> None:
    """Guessing 2 moved the active parameters by the ratio of the guess to the truth (Qwen3's
    8 of 128: a quarter of its routed reads); the spellings other exports use are read."""
    cfg = json.loads((CONFIGS / "Qwen3-30B-A3B" / "config.json").read_text())
    qwen = ModelSpec.from_hf_config(CONFIGS / "Qwen3-30B-A3B")
    k = cfg.pop("num_experts_per_tok")
    p = tmp_path / "Qwen3-30B-A3B" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="field num_experts_per_tok is missing") as exc:
        ModelSpec.from_hf_config(p)
    assert "\n" not in str(exc.value)
    p.write_text(json.dumps({**cfg, "num_experts_per_token": k}))  # Kimi's spelling
    assert ModelSpec.from_hf_config(p).active_b == qwen.active_b
    p.write_text(json.dumps({**cfg, "num_experts_per_tok": k, "enable_moe_block": True}))
    with pytest.raises(InputError, match="field enable_moe_block: True: an MoE block beside"):
        ModelSpec.from_hf_config(p)
