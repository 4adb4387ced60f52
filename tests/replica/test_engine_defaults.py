"""vLLM engine defaults by version (vLLM's own rules) and the prior that follows a named version."""

from __future__ import annotations

import re

import pytest

from fleetplan.catalog import HardwareConfig, bundled_catalog
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


# Values read by hand in the released PyPI sdists (docs/engine-defaults.md lists their sha256):
# (version, gpu, GiB) -> (batched tokens, seqs, gpu_memory_utilization, block, graph max)
@pytest.mark.parametrize(("version", "gpu", "vram", "expected"), [
    # 0.9.0 arg_utils.py:1495 `>= 70 * GiB_bytes and "a100" not in device_name`
    ("0.9.0", "H100-PCIe", 79.6, (8192, 1024, 0.9, 16, 512)),
    ("0.9.0", "A100-80GB", 80, (2048, 256, 0.9, 16, 512)),
    ("0.9.2", "H100-SXM", 79.6, (8192, 1024, 0.9, 16, 512)),      # 0.9.2 arg_utils.py:1629
    # 0.10.1 arg_utils.py:1638; config/cache.py:43 0.9; platforms/cuda.py:137-138 block 16
    ("0.10.1", "H100-PCIe", 79.6, (8192, 1024, 0.9, 16, 512)),
    ("0.10.1", "RTX-4090", 24, (2048, 256, 0.9, 16, 512)),
    ("0.10.2", "L40S", 48, (2048, 256, 0.9, 16, 512)),            # 0.10.2 arg_utils.py:1669
    ("0.11.0", "H100-PCIe", 79.6, (8192, 1024, 0.9, 16, 512)),    # 0.11.0 arg_utils.py:1605
    ("0.11.2", "H200", 141, (8192, 1024, 0.9, 16, 512)),          # 0.11.2 arg_utils.py:1892
    ("0.14.1", "A100-80GB", 80, (2048, 256, 0.9, 16, 512)),       # 0.14.1 arg_utils.py:1846
    ("0.19.1", "H100-PCIe", 79.6, (8192, 1024, 0.9, 16, 512)),    # 0.19.1 config/cache.py:41
    ("0.20.0", "H100-PCIe", 79.6, (8192, 1024, 0.92, 16, 512)),   # 0.20.0 config/cache.py:66
    ("0.27.1", "B200", 180, (8192, 1024, 0.92, 16, 512)),         # no 160 GiB tier yet
    # 0.28.0 arg_utils.py:2582 (>= 160 GiB), config/vllm.py:1938 (1024 on capability 10.x)
    ("0.28.0", "B200", 180, (16384, 1024, 0.92, 16, 1024)),
    ("0.28.0", "H200", 141, (8192, 1024, 0.92, 16, 512)),
    ("0.31.0", "H100-PCIe", 79.6, (8192, 1024, 0.92, 16, 512)),   # 0.31.0 arg_utils.py:2868
    ("0.32.0", "B200", 180, (16384, 1024, 0.92, 16, 1024)),       # 0.32.0 config/vllm.py:2358
])
def test_released_defaults_between_0_9_and_0_32(version, gpu, vram, expected) -> None:
    d = engine_defaults(version, gpu, vram)
    assert (d.max_num_batched_tokens, d.max_num_seqs, d.gpu_memory_utilization, d.block_size,
            d.cuda_graph_max_batch) == expected
    assert d.engine == "V1" and d.chunked_prefill and d.prefix_caching
    assert d.scheduler_budget(8192) == (expected[0], True)


@pytest.mark.parametrize(("before", "after", "gpu", "vram", "field", "old", "new"), [
    # A100 excluded by name: 0.8.5.post1 arg_utils.py:1596 vs 0.9.0 arg_utils.py:1495
    ("0.8.5.post1", "0.9.0", "A100-80GB", 80, "max_num_batched_tokens", 8192, 2048),
    ("0.8.5.post1", "0.9.0", "A100-80GB", 80, "max_num_seqs", 1024, 256),
    # memory share: 0.19.1 config/cache.py:41 0.9 vs 0.20.0 config/cache.py:66 0.92
    ("0.19.1", "0.20.0", "H100-PCIe", 79.6, "gpu_memory_utilization", 0.9, 0.92),
    # >= 160 GiB tier: absent in 0.27.1, 0.28.0 arg_utils.py:2582-2591
    ("0.27.1", "0.28.0", "B200", 180, "max_num_batched_tokens", 8192, 16384),
    # compute capability 10.x graph cap: 0.27.1 512, 0.28.0 config/vllm.py:1937-1939 1024
    ("0.27.1", "0.28.0", "B200", 180, "cuda_graph_max_batch", 512, 1024),
])
def test_each_change_point_between_the_last_release_before_and_the_first_after(
        before, after, gpu, vram, field, old, new) -> None:
    assert getattr(engine_defaults(before, gpu, vram), field) == old
    assert getattr(engine_defaults(after, gpu, vram), field) == new


@pytest.mark.parametrize(("before", "after", "cited"), [
    ("0.9.2", "0.10.0", "vLLM 0.10.0"),    # cuda_graph_sizes default [512] -> [min(2 x seqs, 512)]
    ("0.10.2", "0.11.0", "vLLM 0.11.0"),   # V0 engine removed
    ("0.11.0", "0.11.1", "vLLM 0.11.1"),   # graphs step 16 from 256, VLLM_USE_V1 gone
    ("0.11.2", "0.12.0", "vLLM 0.12.0"),   # chunked prefill / prefix caching by model support
])
def test_rule_only_change_points_keep_the_values_and_cite_the_new_release(
        before, after, cited) -> None:
    old, new = engine_defaults(before, "H100-PCIe", 79.6), engine_defaults(after, "H100-PCIe", 79.6)
    assert (old.max_num_batched_tokens, old.max_num_seqs, old.cuda_graph_max_batch) == (
        new.max_num_batched_tokens, new.max_num_seqs, new.cuda_graph_max_batch) == (8192, 1024, 512)
    assert new.source.startswith(cited) and not old.source.startswith(cited)


def test_every_row_from_0_9_cites_a_released_file_and_lines() -> None:
    for v in ("0.9.1", "0.10.1", "0.11.0", "0.11.1", "0.13.0", "0.20.2", "0.29.0"):
        d = engine_defaults(v, "H100-PCIe", 79.6)
        assert "unreleased" not in d.source and "not checked" not in d.source
        assert re.search(r"vLLM 0\.\d+\.\d+ vllm/engine/arg_utils\.py:\d+-\d+", d.source)


def test_v0_chunks_prefill_only_for_long_context_models() -> None:
    d = engine_defaults("0.6.3")
    assert (d.engine, d.chunked_prefill, d.prefix_caching) == ("V0", False, False)
    assert d.scheduler_budget(8192) == (8192, False)     # max(max_model_len, 2048)
    assert d.scheduler_budget(1024) == (2048, False)
    assert d.scheduler_budget(131072) == (512, True)     # > 32K: chunked, 512 tokens


def test_unknown_versions_are_refused() -> None:
    with pytest.raises(InputError, match="no engine defaults before"):
        engine_defaults("0.4.3")
    with pytest.raises(InputError, match="MAJOR.MINOR"):
        engine_defaults("latest")


def test_the_default_prior_follows_vllm_085s_device_memory_rule() -> None:
    # the study's version: 8192 / 1024 at >= 70 GiB (arg_utils.py 1596-1602), 2048 / 256 below
    spec = bundled_catalog().model("Meta-Llama-3-8B-Instruct")
    h100 = prior_params(spec, HardwareConfig.parse("1xH100-PCIe"))
    rtx = prior_params(spec, HardwareConfig.parse("1xRTX-4090"))
    assert (h100.max_num_batched_tokens, h100.max_num_seqs) == (8192, 1024)
    assert (rtx.max_num_batched_tokens, rtx.max_num_seqs) == (2048, 256)
    named = prior_params(spec, HardwareConfig.parse("1xH100-PCIe"), engine_version="0.8.5")
    assert named.model_dump(exclude={"source"}) == h100.model_dump(exclude={"source"})


def test_a_named_version_changes_only_the_engine_limits_of_the_prior() -> None:
    spec = bundled_catalog().model("Meta-Llama-3-8B-Instruct")
    hw = HardwareConfig.parse("1xH100-PCIe")
    study = prior_params(spec, hw)
    v063 = prior_params(spec, hw, engine_version="0.6.3")
    # 0.6.3 (V0): no device rule, whole prompts a step: max(max_model_len 8192, 2048)
    assert (v063.max_num_batched_tokens, v063.max_num_seqs) == (8192, 256)
    assert v063.c_step == study.c_step and v063.c_seq == study.c_seq
    assert v063.kv_capacity_tokens > study.kv_capacity_tokens  # 256 sequences' logits, not 1024
    assert "vLLM 0.6.3" in v063.source and "vLLM" not in study.source


def test_calibration_replays_a_server_at_its_recorded_versions_limits() -> None:
    from fleetplan.replica.calibration_file import load_calibration_file

    cal = load_calibration_file()  # the bundled fit: all runs record vLLM 0.8.5
    h100 = next(e for e in cal.configs if e.key[1] == "1xH100-PCIe")
    rtx = next(e for e in cal.configs if e.key[1] == "1xRTX-4090")
    assert (h100.params.max_num_batched_tokens, h100.params.max_num_seqs) == (8192, 1024)
    assert (rtx.params.max_num_batched_tokens, rtx.params.max_num_seqs) == (2048, 256)


def test_a_run_of_an_unknown_version_keeps_the_assumption_and_says_so(cli) -> None:
    spec = bundled_catalog().model("Meta-Llama-3-8B-Instruct")
    hw = HardwareConfig.parse("1xH100-PCIe")
    p = prior_params(spec, hw, engine_version="0.4.2")
    assert p.max_num_batched_tokens == 2048 and "no engine defaults known" in p.source
    res = cli("predict", "-m", "gemma-2-9b-it", "-c", "1xL40S", "-r", "1", "--engine-version",
              "0.4.2")
    assert res.exit_code == 2 and "no engine defaults before" in res.stderr
