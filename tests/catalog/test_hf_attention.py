"""What people run, read from their config.json: multi-head latent attention (DeepSeek),
hybrid sliding/full layers (gpt-oss, Gemma-4), the 4-bit float quantizations (MXFP4, NVFP4).
Expected values are worked out by hand from the files' fields and checked against the
published parameter counts (sources in tests/data/hf-configs/README.md and
data/external/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetplan.catalog import ModelSpec, bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import ModelError
from fleetplan.replica.priors import check_tensor_parallel, kv_bytes_per_token_per_gpu

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "data" / "hf-configs"
EXTERNAL = ROOT / "data" / "external" / "configs"


def _v2_lite_params() -> tuple[int, int]:
    """DeepSeek-V2-Lite by hand: (resident, active) parameters, norms and router included."""
    hidden, heads, layers, vocab = 2048, 16, 27, 102400
    attn = (hidden * heads * (128 + 64)  # q_proj (no q_lora_rank)
            + hidden * (512 + 64)  # kv_a_proj_with_mqa
            + 512 * heads * (128 + 128)  # kv_b_proj: k_nope and v per head
            + heads * 128 * hidden)  # o_proj
    expert = 3 * hidden * 1408
    dense = 3 * hidden * 10944
    shared = 3 * hidden * 2 * 1408
    router = 64 * hidden
    norms = layers * (2 * hidden + 512) + hidden
    common = layers * attn + dense + 26 * (shared + router) + norms + 2 * vocab * hidden
    return common + 26 * 64 * expert, common + 26 * 6 * expert


def test_deepseek_v2_lite_counts_its_published_parameters() -> None:
    spec = ModelSpec.from_hf_config(CONFIGS / "DeepSeek-V2-Lite")
    resident, active = _v2_lite_params()
    assert spec.params_b * 1e9 == pytest.approx(resident, rel=1e-9)
    assert spec.active_b * 1e9 == pytest.approx(active, rel=1e-9)
    # published: 15.7 B total, 2.4 B activated (a figure that leaves out the input embedding,
    # a lookup; "2.4" to two figures is 2.35-2.45)
    assert spec.params_b == pytest.approx(15.7, rel=0.01)
    assert 2.35 <= spec.active_b - 102400 * 2048 / 1e9 <= 2.46
    assert spec.is_moe and (spec.num_experts, spec.experts_per_token) == (64, 6)
    assert spec.is_mla and (spec.kv_lora_rank, spec.qk_rope_head_dim) == (512, 64)


def test_deepseek_v3_counts_671b_resident_and_37b_active() -> None:
    spec = ModelSpec.from_hf_config(CONFIGS / "DeepSeek-V3")
    assert spec.params_b == pytest.approx(671, rel=0.01)
    assert spec.active_b == pytest.approx(37, rel=0.02)
    assert spec.served_dtype == "fp8"  # 1 byte per linear weight
    assert spec.weight_bytes / 1e9 == pytest.approx(spec.params_b, rel=0.01)


def test_kimi_k2_counts_one_trillion_resident_and_32b_active() -> None:
    spec = ModelSpec.from_hf_config(CONFIGS / "Kimi-K2-Instruct")
    assert spec.params_b == pytest.approx(1000, rel=0.03)  # "1 T" to one figure: 1,026 B
    assert spec.active_b == pytest.approx(32, rel=0.03)
    assert spec.kv_bytes_per_token() == 61 * (512 + 64) * 2  # same latent as DeepSeek-V3


@pytest.mark.parametrize("tp", [1, 2])
def test_the_mla_latent_is_the_kv_cache_and_is_not_split_over_tensor_parallel(tp: int) -> None:
    spec = ModelSpec.from_hf_config(CONFIGS / "DeepSeek-V2-Lite")
    per_token = 27 * (512 + 64) * 2  # 27 layers x one latent of 576 bf16 elements
    assert spec.kv_bytes_per_token() == per_token
    assert kv_bytes_per_token_per_gpu(spec, tp) == per_token  # replicated, not divided
    assert kv_bytes_per_token_per_gpu(spec, tp, kv_dtype_bytes=1.0) == per_token / 2


def test_mla_splits_only_its_attention_heads_over_tensor_parallel() -> None:
    spec = ModelSpec.from_hf_config(CONFIGS / "DeepSeek-V2-Lite")
    cat = bundled_catalog()
    check_tensor_parallel(spec, HardwareConfig.parse("8xH100-SXM", cat))  # 16 heads / 8
    with pytest.raises(ModelError, match="16 attention heads divisible by the tensor-parallel "
                                         "size 3"):
        check_tensor_parallel(spec, HardwareConfig.parse("3xH100-SXM", cat))


def test_gpt_oss_sliding_layers_hold_at_most_the_window() -> None:
    spec = ModelSpec.from_hf_config(EXTERNAL / "openai--gpt-oss-20b")
    assert (spec.sliding_layers, spec.sliding_window) == (12, 128)
    layer = 2 * 8 * 64  # K and V of 8 KV heads of 64
    all_full = 24 * layer * 2  # bytes per token if every layer were full attention
    # per token in the cache pool: sliding layers charged at every token (no per-sequence cap)
    assert spec.kv_bytes_per_token() == all_full
    # a 4,096-token sequence: 12 full layers keep every token, 12 sliding ones 128 of them
    assert spec.kv_bytes_per_sequence(4096) == (12 * layer * 4096 + 12 * layer * 128) * 2
    assert spec.kv_bytes_per_sequence(4096) < all_full * 4096
    assert spec.kv_bytes_per_sequence(100) == all_full * 100  # within the window: all of it
    assert kv_bytes_per_token_per_gpu(spec, 2) == all_full / 2  # 8 KV heads split over 2
    # OpenAI's model card: 21 B total, 3.6 B active (without the input embedding)
    assert spec.params_b == pytest.approx(21, rel=0.01)
    assert spec.active_b - 201088 * 2880 / 1e9 == pytest.approx(3.6, rel=0.01)
    assert spec.served_dtype == "mxfp4"


def test_gpt_oss_mxfp4_experts_weigh_half_a_byte_and_its_attention_two() -> None:
    spec = ModelSpec.from_hf_config(EXTERNAL / "openai--gpt-oss-20b")
    experts = 24 * 32 * 3 * 2880 * 2880
    attn = 24 * (2880 * 64 * 64 * 2 + 2880 * 8 * 64 * 2)
    rest = spec.params_b * 1e9 - experts - attn  # embeddings, lm_head, norms, biases, routers
    assert spec.weight_bytes == pytest.approx(experts * (0.5 + 1 / 32) + attn * 2 + rest * 2,
                                              rel=1e-9)


def test_gemma4_global_layers_use_their_own_heads_and_its_kv_is_below_the_uniform_reading(
) -> None:
    spec = ModelSpec.from_hf_config(EXTERNAL / "nvidia--Gemma-4-31B-IT-NVFP4")
    assert (spec.sliding_layers, spec.sliding_window) == (50, 1024)
    assert (spec.full_kv_heads, spec.full_head_dim) == (4, 512)
    sliding, full = 2 * 16 * 256, 2 * 4 * 512  # K and V per layer (vLLM keeps V though K = V)
    assert spec.kv_bytes_per_token() == (50 * sliding + 10 * full) * 2
    assert spec.kv_bytes_per_token() < 60 * sliding * 2  # every layer read as a sliding one
    # its kv_cache_scheme (8-bit float): vLLM's "auto" serves an FP8 cache, 1 byte an element
    assert spec.auto_kv_cache_dtype == "fp8"
    assert kv_bytes_per_token_per_gpu(spec, 1) == 50 * sliding + 10 * full
    assert kv_bytes_per_token_per_gpu(spec, 2, kv_dtype_bytes=2.0) == (
        50 * sliding + 10 * full)  # 16 and 4 KV heads halved over 2, at 2 bytes
    assert spec.params_b == pytest.approx(30.7, rel=0.01)  # hand count, data/external/README
    assert spec.served_dtype == "modelopt-nvfp4"
    # every layer's attention is in the ignore list: 16 bits; the MLPs NVFP4 (0.5625 B)
    mlp = 60 * 3 * 5376 * 21504
    assert spec.weight_bytes < (spec.params_b * 1e9 - mlp) * 2 + mlp * 0.5625 * 1.0001
    assert spec.weight_bytes > (spec.params_b * 1e9 - mlp) * 2 * 0.999


def test_a_mamba2_layer_kind_is_refused_in_one_line_naming_layer_types(tmp_path) -> None:
    """Gated DeltaNet layers are modelled; a Mamba2 layer (another state, other projections)
    is still refused, in one line naming the file and layer_types."""
    import json

    from fleetplan.errors import InputError

    cfg = json.loads((EXTERNAL / "nvidia--Qwen3.6-27B-NVFP4" / "config.json").read_text())
    kinds = cfg["text_config"]["layer_types"]
    cfg["text_config"]["layer_types"] = ["mamba" if k == "linear_attention" else k
                                         for k in kinds]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError, match=r"config.json: field layer_types: 'mamba' layers are "
                                         r"not modelled") as err:
        ModelSpec.from_hf_config(tmp_path)
    assert "\n" not in str(err.value)


def test_bundled_models_keep_their_kv_size() -> None:
    # no new field set: 2 x layers x kv_heads x head_dim x 2 bytes, as before
    for name, spec in bundled_catalog().models().items():
        assert spec.kv_bytes_per_token() == 2 * spec.layers * spec.kv_heads * spec.head_dim * 2, (
            name)


@pytest.mark.parametrize(("extra", "words"), [
    ({"kv_lora_rank": 512}, "both kv_lora_rank and qk_rope_head_dim"),
    ({"sliding_layers": 3}, "without a sliding_window"),
    ({"sliding_layers": 500, "sliding_window": 4096}, "more than the 48 layers"),
    ({"full_kv_heads": 7}, "full_kv_heads: 7 must divide the 40 attention heads"),
])
def test_a_models_row_with_an_inconsistent_attention_layout_is_refused(
        extra: dict[str, int], words: str) -> None:
    from pydantic import ValidationError

    row = bundled_catalog().model("DeepSeek-R1-Distill-Qwen-14B").model_dump()
    with pytest.raises(ValidationError, match=words):
        ModelSpec(**{**row, **extra})
