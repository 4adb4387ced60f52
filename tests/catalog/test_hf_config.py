"""ModelSpec.from_hf_config: real config.json files give the published parameter counts, the
served precision's weight bytes, MoE active vs resident parameters; bad files are one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetplan.catalog import ModelSpec, bundled_catalog
from fleetplan.errors import InputError

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf-configs"

# published figures (model cards / release posts, see tests/data/hf-configs/README.md), billions
PUBLISHED = {
    "Llama-3.1-8B-Instruct": (8.03, None),
    "Qwen2.5-14B-Instruct": (14.7, None),
    "Mixtral-8x7B-Instruct-v0.1": (46.7, 12.9),
    "Qwen1.5-MoE-A2.7B": (14.3, 2.7),
    "Qwen3-30B-A3B": (30.5, 3.3),
    "Qwen2.5-7B-Instruct-GPTQ-Int4": (7.61, None),
    "Meta-Llama-3.1-70B-Instruct-AWQ-INT4": (70.6, None),
    "Meta-Llama-3.1-8B-Instruct-FP8": (8.03, None),
    "Qwen3-8B-FP8": (8.2, None),
    "gemma-2-9b-it": (9.24, None),
}


@pytest.mark.parametrize("folder", sorted(PUBLISHED))
def test_parameter_counts_match_the_published_ones_within_1pct(folder: str) -> None:
    spec = ModelSpec.from_hf_config(CONFIGS / folder)
    total, active = PUBLISHED[folder]
    assert spec.model == folder
    assert spec.params_b == pytest.approx(total, rel=0.01)
    if active is None:
        assert not spec.is_moe and spec.active_b == spec.params_b
    else:
        assert spec.is_moe and spec.active_b == pytest.approx(active, rel=0.02)
        assert spec.flops_per_token == pytest.approx(2e9 * spec.active_b)


@pytest.mark.parametrize("bundled", ["gemma-2-9b-it", "DeepSeek-R1-Distill-Qwen-14B",
                                     "DeepSeek-R1-Distill-Llama-8B"])
def test_config_json_agrees_with_the_bundled_catalog_row(bundled: str) -> None:
    folder = {"DeepSeek-R1-Distill-Qwen-14B": "Qwen2.5-14B-Instruct",  # same architecture
              "DeepSeek-R1-Distill-Llama-8B": "Llama-3.1-8B-Instruct"}.get(bundled, bundled)
    spec = ModelSpec.from_hf_config(CONFIGS / folder / "config.json")
    row = bundled_catalog().model(bundled)
    assert spec.params_b == pytest.approx(row.params_b, rel=0.005)
    for f in ("layers", "hidden_size", "intermediate_size", "attention_heads", "kv_heads",
              "head_dim", "vocab_size"):
        assert getattr(spec, f) == getattr(row, f), f
    assert spec.kv_bytes_per_token() == row.kv_bytes_per_token()


def test_quantized_checkpoints_weigh_what_their_safetensors_do() -> None:
    # hub checkpoint sizes: GPTQ-Int4 7B ~5.6 GB, AWQ 70B ~39.8 GB, FP8 8B ~9.1 GB
    gptq = ModelSpec.from_hf_config(CONFIGS / "Qwen2.5-7B-Instruct-GPTQ-Int4")
    awq = ModelSpec.from_hf_config(CONFIGS / "Meta-Llama-3.1-70B-Instruct-AWQ-INT4")
    fp8 = ModelSpec.from_hf_config(CONFIGS / "Meta-Llama-3.1-8B-Instruct-FP8")
    assert (gptq.served_dtype, awq.served_dtype) == ("gptq-int4", "awq-int4")
    assert fp8.served_dtype == "compressed-tensors-w8fp"
    assert gptq.weight_bytes / 1e9 == pytest.approx(5.6, rel=0.03)
    assert awq.weight_bytes / 1e9 == pytest.approx(39.8, rel=0.03)
    assert fp8.weight_bytes / 1e9 == pytest.approx(9.1, rel=0.03)
    dense = ModelSpec.from_hf_config(CONFIGS / "Llama-3.1-8B-Instruct")
    assert dense.weight_bytes == pytest.approx(2 * dense.params_b * 1e9)


def test_an_autoround_checkpoint_weighs_as_the_gptq_one_of_the_same_bits(tmp_path: Path) -> None:
    # Intel's AutoRound writes quant_method "auto-round" (older releases "intel/auto-round")
    # with GPTQ's bits / group_size; vLLM serves it with the GPTQ kernels
    src = CONFIGS / "Qwen2.5-7B-Instruct-GPTQ-Int4"
    gptq = ModelSpec.from_hf_config(src)
    cfg = json.loads((src / "config.json").read_text())
    group = cfg["quantization_config"]["group_size"]
    for method in ("auto-round", "intel/auto-round"):
        cfg["quantization_config"] = {"quant_method": method, "bits": 4, "group_size": group,
                                      "sym": True, "data_type": "int"}
        folder = tmp_path / "Qwen2.5-7B-Instruct-int4-AutoRound"
        folder.mkdir(exist_ok=True)
        (folder / "config.json").write_text(json.dumps(cfg))
        spec = ModelSpec.from_hf_config(folder)
        assert spec.served_dtype == "autoround-int4"
        assert spec.weight_bytes == pytest.approx(gptq.weight_bytes)


def test_architecture_details_are_read() -> None:
    gemma = ModelSpec.from_hf_config(CONFIGS / "gemma-2-9b-it")
    assert gemma.tied_embeddings and gemma.sliding_window == 4096 and gemma.head_dim == 256
    assert gemma.served_dtype == "float16"  # an fp32 checkpoint is served in 16 bits
    qwen = ModelSpec.from_hf_config(CONFIGS / "Qwen2.5-14B-Instruct")
    assert qwen.sliding_window is None  # use_sliding_window: false
    assert qwen.context_length == 32768
    moe = ModelSpec.from_hf_config(CONFIGS / "Qwen1.5-MoE-A2.7B")
    assert (moe.num_experts, moe.experts_per_token) == (60, 4)
    assert moe.shared_expert_intermediate_size == 5632


def test_hf_cache_folder_names_the_model(tmp_path: Path) -> None:
    snap = tmp_path / "models--Qwen--Qwen3-8B-FP8" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text((CONFIGS / "Qwen3-8B-FP8" / "config.json").read_text())
    spec = ModelSpec.from_hf_config(snap)
    assert (spec.model, spec.hf_id) == ("Qwen3-8B-FP8", "Qwen/Qwen3-8B-FP8")
    assert ModelSpec.from_hf_config(snap, name="mine").model == "mine"


@pytest.mark.parametrize(("folder", "hub"), [
    ("Qwen--Qwen3-8B-FP8", "Qwen/Qwen3-8B-FP8"),  # the hub id, its slash as the cache writes it
    ("Qwen3-8B-FP8", "Qwen3-8B-FP8"),
    ("--Qwen3-8B-FP8", "--Qwen3-8B-FP8"),  # no organisation: not a hub id
    ("Qwen---x", "Qwen---x"),
])
def test_a_folder_named_org_dash_dash_name_gives_the_hub_id(tmp_path: Path, folder: str,
                                                            hub: str) -> None:
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "config.json").write_text(
        (CONFIGS / "Qwen3-8B-FP8" / "config.json").read_text())
    spec = ModelSpec.from_hf_config(tmp_path / folder)
    assert (spec.model, spec.hf_id) == (folder, hub)  # the short name stays the folder's


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not JSON"),
    ("[1, 2]", "a JSON object"),
    ('{"hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, '
     '"max_position_embeddings": 64}', "field num_hidden_layers is missing"),
    ('{"num_hidden_layers": -1}', "field num_hidden_layers: -1"),
    ('{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, '
     '"max_position_embeddings": 64, "kv_lora_rank": 512}', "field qk_rope_head_dim is missing"),
    ('{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, '
     '"max_position_embeddings": 64, "layer_types": ["linear_attention", "full_attention"]}',
     "field linear_num_key_heads is missing"),  # linear layers need their own sizes
    ('{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, '
     '"max_position_embeddings": 64, "layer_types": ["chunked_attention", "full_attention"]}',
     "field layer_types: 'chunked_attention' layers are not modelled"),
    ('{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, '
     '"max_position_embeddings": 64, "layer_types": ["full_attention"]}',
     "field layer_types: 1 entries for the 2 layers"),
    ('{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, '
     '"max_position_embeddings": 64, "layer_types": ["sliding_attention", "full_attention"]}',
     "field sliding_window: missing"),
    ('{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, '
     '"max_position_embeddings": 64, "quantization_config": {"quant_method": "modelopt", '
     '"quant_algo": "MIXED_PRECISION"}}', "field quantization_config.quantized_layers: missing"),
    ('{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, '
     '"max_position_embeddings": 64, "quantization_config": {"quant_method": "modelopt", '
     '"quant_algo": "MIXED_PRECISION", "quantized_layers": {"model.layers.0.mlp.up_proj": '
     '{"quant_algo": "NVFP4"}, "model.layers.1.mlp.up_proj": {"quant_algo": "FP8"}}}}',
     "quantized_layers: more than one format among the MLP layers is not modelled"),
    ('{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, '
     '"max_position_embeddings": 64, "quantization_config": {"quant_method": "modelopt", '
     '"quant_algo": "MIXED_PRECISION", "quantized_layers": {"lm_head": '
     '{"quant_algo": "INT4_AWQ"}}}}', "quant_algo 'INT4_AWQ' is not modelled"),
    ('{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, '
     '"max_position_embeddings": 64, "quantization_config": {"quant_method": "hqq"}}',
     "quant_method: 'hqq' is not modelled"),
    ('{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, '
     '"max_position_embeddings": 64, "torch_dtype": "int3"}', "field torch_dtype"),
    ('{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, '
     '"max_position_embeddings": 1}', "field max_position_embeddings: 1 must be a whole number"),
    ('{"num_hidden_layers": 2, "hidden_size": 24, "num_attention_heads": 12, "vocab_size": 10, '
     '"num_key_value_heads": 24, "max_position_embeddings": 64}',
     "field num_key_value_heads: 24 must divide the 12 attention heads"),
])
def test_bad_config_files_are_one_line_naming_file_and_field(tmp_path: Path, content: str,
                                                             message: str) -> None:
    p = tmp_path / "m" / "config.json"
    p.parent.mkdir()
    p.write_text(content)
    with pytest.raises(InputError, match=message) as exc:
        ModelSpec.from_hf_config(p)
    assert str(p) in str(exc.value) and "\n" not in str(exc.value)


def test_a_missing_path_is_refused_and_nothing_is_downloaded(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nothing is downloaded"):
        ModelSpec.from_hf_config("meta-llama/Llama-3.1-8B-Instruct")
    with pytest.raises(InputError, match="no such model config"):
        ModelSpec.from_hf_config(tmp_path)


def test_spec_round_trips_through_json() -> None:
    spec = ModelSpec.from_hf_config(CONFIGS / "Mixtral-8x7B-Instruct-v0.1")
    again = ModelSpec.model_validate(json.loads(spec.model_dump_json()))
    assert again == spec


def test_a_tiny_model_gets_a_bounded_kv_cache_prior(tmp_path: Path) -> None:
    # a 1-layer, 8-wide model leaves billions of KV tokens on an 80 GB GPU: the prior is capped
    # where the replica model's parameters are (a cache that size never binds) instead of failing
    from fleetplan.catalog import HardwareConfig
    from fleetplan.replica.priors import prior_params

    p = tmp_path / "tiny" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 8,
        "intermediate_size": 8, "num_attention_heads": 1, "num_hidden_layers": 1,
        "num_key_value_heads": 1, "vocab_size": 10, "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16", "tie_word_embeddings": False}))
    params = prior_params(ModelSpec.from_hf_config(p), HardwareConfig.parse("1xH100-PCIe"))
    assert params.kv_capacity_tokens == 10**9 // 16 * 16


def test_a_name_of_another_case_finds_its_one_model(tmp_path: Path) -> None:
    # a server's --served-model-name is often lower case; one model of that name whatever its
    # case is that model, two are neither
    from fleetplan.catalog.catalog import bundled_catalog
    from fleetplan.errors import UnknownNameError

    cat = bundled_catalog()
    assert cat.model("meta-llama-3-8b-instruct").model == "Meta-Llama-3-8B-Instruct"
    assert cat.model("gemma-2-9B-IT").model == "gemma-2-9b-it"
    for folder in ("Qwen3-8B-FP8", "qwen3-8b-fp8"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "config.json").write_text(
            (CONFIGS / "Qwen3-8B-FP8" / "config.json").read_text())
    two = cat.extend(models=[ModelSpec.from_hf_config(tmp_path / f)
                             for f in ("Qwen3-8B-FP8", "qwen3-8b-fp8")])
    assert two.model("qwen3-8b-fp8").model == "qwen3-8b-fp8"  # an exact match first
    with pytest.raises(UnknownNameError):
        two.model("QWEN3-8B-FP8")
