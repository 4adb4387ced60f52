"""The KV cache people configure (issue 41, item 2): vLLM's ``--kv-cache-dtype`` on a stated
server or a scenario candidate's ``server:`` record, and the KV cache of a multi-head latent
attention model worked by hand from vLLM's memory arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetplan.catalog import ModelSpec, bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import InputError
from fleetplan.profiles.server import ServerDescription, parse_engine_args
from fleetplan.replica.params import replica_params
from fleetplan.replica.priors import kv_capacity_tokens
from fleetplan.replica.server_params import apply_server, apply_stated
from fleetplan.scenario import scenario_from_dict

GIB = 1024**3
V2_LITE = Path(__file__).resolve().parents[1] / "data" / "hf-configs" / "DeepSeek-V2-Lite"


def test_deepseek_v2_lite_kv_capacity_on_one_h100_by_hand() -> None:
    """vLLM's memory arithmetic on 80 GiB x 0.9, the priors' defaults (2,048 batched tokens,
    256 sequences, 0.6 GiB outside torch): the weights are the 15,706,484,224 parameters of
    the hand count in tests/catalog/test_hf_attention.py at 2 bytes; activations
    2,048 x (4 x 2,048 + 2 x 10,944) x 2 bytes + 256 x 102,400 logits x 4 bytes; each token
    27 layers x 576 latent elements x 2 bytes = 31,104 bytes."""
    spec = ModelSpec.from_hf_config(V2_LITE)
    free = (80 * GIB * 0.9 - 15_706_484_224 * 2 - (2048 * (4 * 2048 + 2 * 10944) * 2
                                                 + 256 * 102400 * 4) - 0.6 * GIB)
    assert free == pytest.approx(45_024_132_505.6)
    tokens = int(free // 31104) // 16 * 16
    assert tokens == 1_447_520
    hw = HardwareConfig.parse("1xH100-SXM", bundled_catalog())
    assert kv_capacity_tokens(spec, hw) == tokens
    # an FP8 cache: 15,552 bytes a token
    assert kv_capacity_tokens(spec, hw, kv_dtype_bytes=1.0) == int(free // 15552) // 16 * 16


@pytest.mark.parametrize(("model", "config"), [
    ("DeepSeek-R1-Distill-Qwen-14B", "1xH100-PCIe"), ("DeepSeek-R1-Distill-Llama-70B",
                                                      "4xA100-80GB"),
    ("DeepSeek-R1-Distill-Qwen-1.5B", "1xL40S")])
def test_an_fp8_cache_holds_twice_the_tokens_up_to_one_block(model: str, config: str) -> None:
    """floor(2F/p) is 2 floor(F/p) or one more, so in whole blocks of 16 the FP8 cache is
    exactly twice the 16-bit one or one block more."""
    cat = bundled_catalog()
    spec, hw = cat.model(model), HardwareConfig.parse(config, cat)
    base = kv_capacity_tokens(spec, hw)
    assert kv_capacity_tokens(spec, hw, kv_dtype_bytes=1.0) - 2 * base in (0, 16)


def test_a_stated_fp8_cache_doubles_the_kv_and_halves_the_attention_read() -> None:
    params = replica_params("DeepSeek-R1-Distill-Qwen-14B", "1xH100-PCIe")
    fp8 = apply_stated(params, {"kv_cache_dtype": "fp8"})
    assert fp8.c_kv_tok == params.c_kv_tok / 2
    # the capacity moves by the memory arithmetic's ratio (2, or 2 + one block's worth)
    assert fp8.kv_capacity_tokens - 2 * params.kv_capacity_tokens in range(-16, 48)
    for name in ("c_step", "c_prefill_tok", "c_seq", "overhead_s", "max_num_seqs"):
        assert getattr(fp8, name) == getattr(params, name), name
    assert "kv_cache_dtype=fp8" in fp8.source
    same = apply_stated(params, {"kv_cache_dtype": "auto"})  # the model's 16 bits
    assert (same.kv_capacity_tokens, same.c_kv_tok) == (params.kv_capacity_tokens,
                                                        params.c_kv_tok)


def test_an_unknown_kv_cache_dtype_is_one_line_naming_it_and_the_accepted_ones() -> None:
    with pytest.raises(InputError) as exc:
        parse_engine_args(["kv_cache_dtype=fp4"])
    msg = str(exc.value)
    assert "\n" not in msg and "'fp4'" in msg and "auto" in msg and "fp8_e5m2" in msg
    with pytest.raises(InputError, match="kv_cache_dtype=3: must be one of auto"):
        ServerDescription(engine_args={"kv_cache_dtype": 3})
    assert parse_engine_args(["kv-cache-dtype=FP8_E4M3"]) == {"kv_cache_dtype": "fp8_e4m3"}


def test_a_scenario_candidate_states_its_kv_cache_dtype() -> None:
    from fleetplan.optimize.inputs import candidate_params

    base = {"model": "DeepSeek-R1-Distill-Qwen-14B",
            "classes": [{"name": "chat", "rate_rps": 1, "slo": {"ttft_p99_ms": 1500}}]}
    sc = scenario_from_dict({**base, "candidates": [
        {"config": "1xH100-PCIe", "server": {"kv_cache_dtype": "fp8"}}]})
    plain = candidate_params(scenario_from_dict({**base, "candidates": [
        {"config": "1xH100-PCIe"}]}), "1xH100-PCIe", 0)
    mine = candidate_params(sc, "1xH100-PCIe", 0)
    assert mine.c_kv_tok == plain.c_kv_tok / 2
    assert mine.kv_capacity_tokens > 1.9 * plain.kv_capacity_tokens
    with pytest.raises(InputError) as exc:
        scenario_from_dict({**base, "candidates": [
            {"config": "1xH100-PCIe", "server": {"kv_cache_dtype": "int4"}}]})
    assert "kv_cache_dtype" in str(exc.value) and "must be one of auto" in str(exc.value)


def test_a_server_stating_fp8_kv_on_an_mla_model_is_sized_from_the_latent() -> None:
    from fleetplan.replica.priors import prior_params

    spec = ModelSpec.from_hf_config(V2_LITE)
    cat = bundled_catalog().extend(models=[spec])
    hw = HardwareConfig.parse("2xH100-SXM", cat)
    params = prior_params(spec, hw)
    fp8 = apply_server(params, ServerDescription(engine_args={"kv_cache_dtype": "fp8"}),
                       catalog=cat)
    assert fp8.c_kv_tok == params.c_kv_tok / 2
    assert fp8.kv_capacity_tokens - 2 * params.kv_capacity_tokens in range(-16, 48)


def test_predict_takes_a_deepseek_v2_lite_config(cli) -> None:
    res = cli("predict", "--model-config", str(V2_LITE), "--config", "1xH100-SXM", "--rate", "2",
              "--num-prompts", "20", "--seeds", "1", "--format", "json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["model"] == "DeepSeek-V2-Lite" and out["calibrated"] is False
    assert out["metrics"]["tpot_p50_ms"]["mean"] > 0


def test_auto_is_the_checkpoints_own_kv_dtype_and_a_stated_16_bits_doubles_its_read() -> None:
    """NVIDIA's Gemma-4 NVFP4 states an FP8 kv_cache_scheme: vLLM's auto serves FP8, so its
    prior is sized at 1 byte, and a server started with bfloat16 holds half the tokens and
    reads twice the bytes."""
    from fleetplan.replica.priors import prior_params

    spec = ModelSpec.from_hf_config(Path(__file__).resolve().parents[2] / "data" / "external"
                                    / "configs" / "nvidia--Gemma-4-31B-IT-NVFP4")
    cat = bundled_catalog().extend(models=[spec])
    hw = HardwareConfig.parse("1xH100-SXM", cat)
    assert kv_capacity_tokens(spec, hw) == kv_capacity_tokens(spec, hw, kv_dtype_bytes=1.0)
    params = prior_params(spec, hw)
    bf16 = apply_server(params, ServerDescription(engine_args={"kv_cache_dtype": "bfloat16"}),
                        catalog=cat)
    assert bf16.c_kv_tok == params.c_kv_tok * 2
    assert 2 * bf16.kv_capacity_tokens - params.kv_capacity_tokens in range(-32, 33)
    same = apply_server(params, ServerDescription(engine_args={"kv_cache_dtype": "fp8"}),
                        catalog=cat)
    assert (same.c_kv_tok, same.kv_capacity_tokens) == (params.c_kv_tok,
                                                        params.kv_capacity_tokens)


def test_the_longest_sequence_follows_a_cache_that_holds_more_or_less() -> None:
    """A prior's max_model_len is the smaller of the context and the cache: a cache that holds
    more tokens lets a longer sequence in (DeepSeek-R1-Distill-Llama-70B on 2 x H100 PCIe: a
    ~30k-token cache below its 131k context), one that holds fewer caps it."""
    from fleetplan.replica.priors import prior_params

    cat = bundled_catalog()
    spec = cat.model("DeepSeek-R1-Distill-Llama-70B")
    params = prior_params(spec, HardwareConfig.parse("2xH100-PCIe", cat))
    assert params.max_model_len == params.kv_capacity_tokens < spec.context_length
    fp8 = apply_stated(params, {"kv_cache_dtype": "fp8"})
    assert fp8.max_model_len == fp8.kv_capacity_tokens > params.kv_capacity_tokens
    small = apply_stated(params, {"gpu_memory_utilization": 0.88})
    assert small.max_model_len == small.kv_capacity_tokens < params.kv_capacity_tokens
    stated = apply_stated(params, {"kv_cache_dtype": "fp8", "max_model_len": 8192})
    assert stated.max_model_len == 8192


def test_predict_takes_a_kv_cache_dtype_and_refuses_an_unknown_one(cli) -> None:
    args = ("predict", "--model", "DeepSeek-R1-Distill-Qwen-14B", "--config", "1xL40S",
            "--rate", "2", "--num-prompts", "20", "--seeds", "1", "--format", "json")
    res = cli(*args, "--engine-arg", "kv_cache_dtype=fp8")
    assert res.exit_code == 0, res.stderr
    assert "kv_cache_dtype=fp8" in json.loads(res.stdout)["params_source"]
    bad = cli(*args, "--engine-arg", "kv_cache_dtype=fp4")
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1
    assert "kv_cache_dtype 'fp4' must be one of auto" in bad.stderr
