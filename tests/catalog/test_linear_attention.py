"""Gated DeltaNet linear-attention layers (Qwen3.5 / Qwen3.6), read from their config.json:
the parameters of their projections, the per-token KV of the full-attention layers only, and
the fixed-size state every sequence holds, as KV blocks on a GPU. Every expected value is worked
out by hand from the files' fields (vLLM 0.32.0's shapes, cited in
fleetplan/catalog/hf_attention.py) and checked against the hand counts of
data/external/README.md (26.9 B for Qwen3.6-27B; 34.6 B resident / 3.4 B active for the
35B-A3B)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fleetplan.catalog import ModelSpec
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import InputError, ModelError
from fleetplan.replica.priors import (
    check_tensor_parallel,
    kv_bytes_per_token_per_gpu,
    prior_params,
    seq_state_blocks,
)

EXTERNAL = Path(__file__).resolve().parents[2] / "data" / "external" / "configs"
Q27 = EXTERNAL / "nvidia--Qwen3.6-27B-NVFP4"
Q35 = EXTERNAL / "nvidia--Qwen3.6-35B-A3B-NVFP4"
GIB = 2**30


def _gdn(hidden: int, k_heads: int, v_heads: int, dim: int, kernel: int) -> tuple[int, int]:
    """One Gated DeltaNet layer by hand: (quantized projections, 16-bit small weights)."""
    key, value = k_heads * dim, v_heads * dim
    proj = hidden * (2 * key + 2 * value) + value * hidden  # in_proj_qkvz, out_proj
    small = hidden * 2 * v_heads + kernel * (2 * key + value) + 2 * v_heads + dim
    return proj, small  # in_proj_ba, conv1d, A_log + dt_bias, gated norm


def _gated_full(hidden: int, heads: int, kv: int, dim: int) -> int:
    """One full-attention layer with attn_output_gate: q and its gate, k, v, o."""
    return hidden * heads * dim * 3 + hidden * kv * dim * 2


def test_qwen36_27b_counts_its_parameters_and_bytes_by_hand() -> None:
    spec = ModelSpec.from_hf_config(Q27)
    hidden, vocab, inter = 5120, 248320, 17408
    gdn, gdn_small = _gdn(hidden, 16, 48, 128, 4)
    attn = 48 * gdn + 16 * _gated_full(hidden, 24, 4, 256)
    mlp = 64 * 3 * hidden * inter
    small = 48 * gdn_small + 16 * 2 * 256 + 64 * 2 * hidden + hidden  # + q/k norms, norms
    embed = head = vocab * hidden  # untied
    total = attn + mlp + small + embed + head
    assert total == 26_895_998_464
    assert spec.params_b * 1e9 == pytest.approx(total, rel=1e-12)
    assert spec.params_b == pytest.approx(26.9, abs=0.05)  # data/external/README.md
    assert spec.active_b == spec.params_b  # dense
    # MIXED_PRECISION: every attention projection FP8 (1 byte), MLPs and lm_head NVFP4
    nvfp4 = 0.5 + 1 / 16
    assert spec.weight_bytes == pytest.approx(
        attn * 1.0 + (mlp + head) * nvfp4 + (embed + small) * 2.0, rel=1e-12)
    assert spec.linear_layers == 48
    # the FP8 kv_cache_scheme, 16 full-attention layers of 4 KV heads x 256: 32 KiB a token
    assert spec.auto_kv_cache_dtype == "fp8"
    assert kv_bytes_per_token_per_gpu(spec, 1) == 16 * 2 * 4 * 256 * 1.0 == 32768


def test_qwen36_35b_a3b_counts_resident_and_active_parameters_by_hand() -> None:
    spec = ModelSpec.from_hf_config(Q35)
    hidden, vocab, layers = 2048, 248320, 40
    gdn, gdn_small = _gdn(hidden, 16, 32, 128, 4)
    attn = 30 * gdn + 10 * _gated_full(hidden, 16, 2, 256)
    expert = 3 * hidden * 512
    shared = expert + hidden  # the shared expert and its sigmoid gate
    router = 256 * hidden
    small = 30 * gdn_small + 10 * 2 * 256 + layers * (2 * hidden + router) + hidden
    common = attn + layers * shared + small + 2 * vocab * hidden
    resident, active = common + layers * 256 * expert, common + layers * 8 * expert
    assert spec.params_b * 1e9 == pytest.approx(resident, rel=1e-12)
    assert spec.active_b * 1e9 == pytest.approx(active, rel=1e-12)
    # data/external/README.md's hand figures leave norms and routers out: within 0.3%
    assert spec.params_b == pytest.approx(34.6, rel=0.003)
    assert spec.active_b == pytest.approx(3.4, rel=0.02)
    # no kv_cache_scheme: 16 bits, 10 full layers of 2 KV heads x 256
    assert kv_bytes_per_token_per_gpu(spec, 1) == 10 * 2 * 2 * 256 * 2.0 == 20480


def test_the_state_per_sequence_is_the_recurrent_and_convolution_states_by_hand() -> None:
    # 27B: 48 value heads x 128 x 128 in float32 (mamba_ssm_dtype) + (4 - 1) x conv channels
    # (2 x 16 x 128 + 48 x 128 = 10,240) in bfloat16, per layer, 48 layers
    per_layer = 48 * 128 * 128 * 4 + 3 * 10240 * 2
    assert per_layer == 3_207_168
    spec = ModelSpec.from_hf_config(Q27)
    assert spec.state_bytes_per_sequence() == 48 * per_layer == 153_944_064
    assert spec.state_bytes_per_sequence(tp=2) == 48 * per_layer / 2  # heads split over TP
    # 35B-A3B: 32 value heads, conv channels 2 x 2048 + 4096 = 8192, 30 layers
    q35 = ModelSpec.from_hf_config(Q35)
    assert q35.state_bytes_per_sequence() == 30 * (32 * 128 * 128 * 4 + 3 * 8192 * 2)


def test_qwen36_27b_on_one_h100_sxm_kv_capacity_and_state_blocks_by_hand() -> None:
    """vLLM 0.8.5's defaults at >= 70 GiB (1024 sequences, 8192 batched tokens, 16-token
    blocks, 0.9 of memory), the study's engine; the arithmetic of docs/replica-model.md."""
    spec = ModelSpec.from_hf_config(Q27)
    hw = HardwareConfig.parse("1xH100-SXM")
    p = prior_params(spec, hw)
    weights = 20_150_565_888  # the hand count's bytes above
    assert spec.weight_bytes == pytest.approx(weights, rel=1e-12)
    act = 8192 * (4 * 5120 + 2 * 17408) * 2 + 1024 * 248320 * 4
    free = 80 * GIB * 0.9 - weights - act - 0.6 * GIB
    tokens = int(free // 32768) // 16 * 16
    assert tokens == 1_666_000
    assert p.kv_capacity_tokens == tokens
    # the state: 153,944,064 bytes over 16 tokens x 32,768 bytes a block, rounded up
    assert p.seq_state_blocks == math.ceil(153_944_064 / (16 * 32768)) == 294
    assert seq_state_blocks(spec, hw, 16) == 294
    # the longest sequence leaves room for its own state
    assert p.max_model_len == min(262144, tokens - 294 * 16)
    # a 16-bit KV cache doubles a block's bytes: half the blocks per state
    assert seq_state_blocks(spec, hw, 16, kv_dtype_bytes=2.0) == math.ceil(
        153_944_064 / (16 * 65536)) == 147


def test_a_model_without_linear_layers_holds_no_state() -> None:
    from fleetplan.catalog import bundled_catalog

    spec = bundled_catalog().model("DeepSeek-R1-Distill-Qwen-14B")
    assert spec.state_bytes_per_sequence() == 0
    assert prior_params(spec, HardwareConfig.parse("1xH100-PCIe")).seq_state_blocks == 0


def test_tensor_parallel_must_split_the_linear_heads() -> None:
    spec = ModelSpec.from_hf_config(Q35)  # 16 attention heads, 16 linear key heads
    check_tensor_parallel(spec, HardwareConfig.parse("4xRTX-4090"))
    odd = spec.model_copy(update={"linear_heads": 6})
    with pytest.raises(ModelError, match="6 linear-attention key heads"):
        check_tensor_parallel(odd, HardwareConfig.parse("4xRTX-4090"))


def test_qwen3_next_without_layer_types_reads_every_fourth_layer_as_full(tmp_path) -> None:
    cfg = json.loads((Q27 / "config.json").read_text())["text_config"]
    del cfg["layer_types"]
    cfg["model_type"] = "qwen3_next"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    spec = ModelSpec.from_hf_config(tmp_path)
    assert spec.linear_layers == 48  # 64 layers, full_attention_interval 4


def test_linear_layers_without_a_full_attention_layer_are_refused(tmp_path) -> None:
    cfg = json.loads((Q27 / "config.json").read_text())
    cfg["text_config"]["layer_types"] = ["linear_attention"] * 64
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError, match=r"field layer_types: 64 linear_attention layers and "
                                         r"no full_attention layer"):
        ModelSpec.from_hf_config(tmp_path)


def test_a_server_with_a_16_bit_kv_cache_holds_the_state_in_fewer_blocks() -> None:
    """The 27B's checkpoint states an FP8 cache; ``kv_cache_dtype=bfloat16`` doubles a block's
    bytes, so the same 153,944,064-byte state takes ceil(153,944,064 / (16 x 65,536)) = 147
    blocks instead of 294."""
    from fleetplan.catalog import Catalog
    from fleetplan.replica.server_params import apply_stated

    spec = ModelSpec.from_hf_config(Q27)
    cat = Catalog(models=[spec])
    p = prior_params(spec, HardwareConfig.parse("1xH100-SXM"))
    assert apply_stated(p, {"kv_cache_dtype": "bfloat16"}, catalog=cat).seq_state_blocks == 147


DERIVED = {  # folder -> (NVIDIA's checkpoint of the same base, served dtype the name states)
    "Qwen--Qwen3.6-27B": (Q27, "bfloat16"),
    "Qwen--Qwen3.6-27B-FP8": (Q27, "fp8"),
    "Lorbus--Qwen3.6-27B-int4-AutoRound": (Q27, "autoround-int4"),
    "Avesed--Qwen3.6-27B-INT8-W8A8": (Q27, "compressed-tensors-w8int"),
    "QuantTrio--Qwen3.6-27B-AWQ": (Q27, "awq-int4"),
    "Qwen--Qwen3.6-35B-A3B-FP8": (Q35, "fp8"),
    "cyankiwi--Qwen3.6-35B-A3B-AWQ-4bit": (Q35, "awq-int4"),
    "QuantTrio--Qwen3.6-35B-A3B-AWQ": (Q35, "awq-int4"),
    "Intel--Qwen3.6-35B-A3B-int4-AutoRound": (Q35, "autoround-int4"),
}


def test_the_derived_qwen36_checkpoints_keep_nvidias_architecture_with_their_own_weights() -> None:
    # data/external/README.md: each derived file is NVIDIA's config.json of the same base with
    # only its quantization_config replaced
    for folder, (src, dtype) in DERIVED.items():
        mine = json.loads((EXTERNAL / folder / "config.json").read_text())
        theirs = json.loads((src / "config.json").read_text())
        mine.pop("quantization_config", None)
        theirs.pop("quantization_config")
        assert mine == theirs, folder
        spec, base = ModelSpec.from_hf_config(EXTERNAL / folder), ModelSpec.from_hf_config(src)
        assert (spec.params_b, spec.active_b) == (base.params_b, base.active_b), folder
        assert spec.served_dtype == dtype, folder
    # the bytes follow one accounting: BF16 - FP8 = the linear layers' parameters (2 -> 1
    # byte); a 4-bit group-128 file stores them at 0.5 + 2.5 / 128 bytes, the rest as in BF16
    for bf16, fp8, awq, autoround in (
            ("Qwen--Qwen3.6-27B", "Qwen--Qwen3.6-27B-FP8", "QuantTrio--Qwen3.6-27B-AWQ",
             "Lorbus--Qwen3.6-27B-int4-AutoRound"),
            (None, "Qwen--Qwen3.6-35B-A3B-FP8", "QuantTrio--Qwen3.6-35B-A3B-AWQ",
             "Intel--Qwen3.6-35B-A3B-int4-AutoRound")):
        b = {n: ModelSpec.from_hf_config(EXTERNAL / n).weight_bytes for n in (fp8, awq, autoround)}
        whole = (ModelSpec.from_hf_config(EXTERNAL / bf16).weight_bytes if bf16 else
                 2 * ModelSpec.from_hf_config(EXTERNAL / fp8).params_b * 1e9)
        linear = whole - b[fp8]
        assert b[awq] == pytest.approx(whole - linear * (2 - (0.5 + 2.5 / 128)), rel=1e-9)
        assert b[autoround] == pytest.approx(b[awq], rel=1e-9)
