"""vLLM engine defaults by version (vLLM's own rules) and the prior that follows a named version."""

from __future__ import annotations

import pytest

from fleetplan.catalog import HardwareConfig, get_model
from fleetplan.errors import InputError
from fleetplan.replica.engine_defaults import engine_defaults
from fleetplan.replica.priors import prior_params


@pytest.mark.parametrize(("version", "gpu", "vram", "tokens", "seqs"), [
    ("0.8.5", "RTX-4090", 24, 2048, 256),      # V1, OpenAI server, < 70 GiB
    ("0.8.5", "H100-PCIe", 80, 8192, 1024),    # 0.8.5 arg_utils.py:1596: device memory >= 70 GiB
    ("0.8.5", "A100-80GB", 80, 8192, 1024),    # 0.8.5: memory only, no A100 exclusion yet
    ("0.8.5", "L40S", 48, 2048, 256),
    ("0.10.1", "A100-80GB", 80, 2048, 256),    # >= 0.9: by memory, A100 excluded
    ("0.10.1", "H200", 141, 8192, 1024),
    ("0.9.2", "MI300X", 192, 8192, 1024),      # a >= 70 GiB device that is not an H100
    ("0.32.0", "H100-PCIe", 80, 8192, 1024),   # 0.32.0 arg_utils.py:2933
    ("0.32.0", "A100-80GB", 80, 2048, 256),
    ("0.32.0", "B200", 180, 16384, 1024),      # 0.32.0 arg_utils.py:2923: >= 160 GiB
])
def test_batch_defaults_follow_usage_context_and_device(version, gpu, vram, tokens, seqs) -> None:
    d = engine_defaults(version, gpu, vram)
    assert (d.max_num_batched_tokens, d.max_num_seqs) == (tokens, seqs)
    assert d.chunked_prefill and d.prefix_caching and d.engine == "V1"


def test_the_study_version_gives_80_gb_gpus_the_large_budget_and_24_gb_ones_the_small() -> None:
    """vLLM 0.8.5 _set_default_args_v1 decides by device memory, not by name: the study's
    H100 PCIe (80 GB) servers ran with 8192 / 1024, its RTX 4090s (24 GB) with 2048 / 256."""
    for name in ("H100-PCIe", "some-80GB-card"):
        big = engine_defaults("0.8.5", name, 80)
        assert (big.max_num_batched_tokens, big.max_num_seqs) == (8192, 1024)
        assert "arg_utils.py:1596" in big.source
    small = engine_defaults("0.8.5", "RTX-4090", 24)
    assert (small.max_num_batched_tokens, small.max_num_seqs) == (2048, 256)
    assert small.scheduler_budget(8192) == (2048, True)   # V1 always chunks with its budget


def test_memory_share_and_graph_sizes_by_version() -> None:
    assert engine_defaults("0.6.3").gpu_memory_utilization == 0.9
    assert engine_defaults("0.8.5").gpu_memory_utilization == 0.9
    assert engine_defaults("0.32.0").gpu_memory_utilization == 0.92  # config/cache.py:102
    assert engine_defaults("0.6.3").cuda_graph_max_batch == 256     # up to max_num_seqs
    assert engine_defaults("0.8.5", "H100-PCIe", 80).cuda_graph_max_batch == 512
    assert {engine_defaults(v).block_size for v in ("0.6.3", "0.8.5", "0.32.0")} == {16}


def test_v0_chunks_prefill_only_for_long_context_models() -> None:
    d = engine_defaults("0.6.3")
    assert (d.engine, d.chunked_prefill, d.prefix_caching) == ("V0", False, False)
    assert d.scheduler_budget(8192) == (8192, False)     # max(max_model_len, 2048)
    assert d.scheduler_budget(1024) == (2048, False)
    assert d.scheduler_budget(131072) == (512, True)     # > 32K: chunked, 512 tokens


def test_unknown_versions_are_refused() -> None:
    with pytest.raises(InputError, match="no engine defaults before"):
        engine_defaults("0.5.4")
    with pytest.raises(InputError, match="MAJOR.MINOR"):
        engine_defaults("latest")


def test_a_named_version_changes_only_the_engine_limits_of_the_prior() -> None:
    spec, hw = get_model("Meta-Llama-3-8B-Instruct"), HardwareConfig.parse("1xH100-PCIe")
    study = prior_params(spec, hw)
    v085 = prior_params(spec, hw, engine_version="0.8.5")
    assert (study.max_num_batched_tokens, study.max_num_seqs) == (2048, 256)
    assert (v085.max_num_batched_tokens, v085.max_num_seqs) == (8192, 1024)
    assert v085.c_step == study.c_step and v085.c_seq == study.c_seq
    assert v085.kv_capacity_tokens < study.kv_capacity_tokens  # bigger activation reserve
    assert "vLLM 0.8.5" in v085.source


def test_a_run_of_an_unknown_version_keeps_the_assumption_and_says_so(cli) -> None:
    spec, hw = get_model("Meta-Llama-3-8B-Instruct"), HardwareConfig.parse("1xH100-PCIe")
    p = prior_params(spec, hw, engine_version="0.4.2")
    assert p.max_num_batched_tokens == 2048 and "no engine defaults known" in p.source
    res = cli("predict", "-m", "gemma-2-9b-it", "-c", "1xL40S", "-r", "1", "--engine-version",
              "0.4.2")
    assert res.exit_code == 2 and "no engine defaults before" in res.stderr
