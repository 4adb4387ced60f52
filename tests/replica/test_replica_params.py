"""Parameters: calibrated pairs, spec-based priors for unmeasured pairs, names, KV capacity."""

from __future__ import annotations

import pytest

from fleetplan.catalog import HardwareConfig, bundled_catalog
from fleetplan.errors import ModelError, UnknownNameError
from fleetplan.replica import replica_params
from fleetplan.replica.priors import kv_capacity_tokens, prior_params


def test_measured_pair_is_calibrated_and_unmeasured_pair_is_not() -> None:
    p = replica_params("DeepSeek-R1-Distill-Qwen-14B", "1xH100-PCIe")
    assert p.calibrated and "calibrated" in p.source
    q = replica_params("DeepSeek-R1-Distill-Qwen-14B", "2xH100-PCIe")
    assert not q.calibrated and "2xH100-PCIe configuration" in q.source
    t = replica_params("DeepSeek-R1-Distill-Qwen-1.5B", "6xRTX-4090")  # 12 heads, 2 KV heads
    assert not t.calibrated and "RTX-4090 configuration(s) of other GPU counts" in t.source
    r = replica_params("DeepSeek-R1-Distill-Qwen-14B", "1xH100-SXM")
    assert not r.calibrated and "pooled" in r.source and "without flagged runs" in r.source


def test_an_unmeasured_pair_takes_its_gpu_types_better_spec_path(tmp_path, monkeypatch) -> None:
    import json
    import shutil

    from fleetplan.catalog._tables import data_dir
    from fleetplan.replica.params import spec_path

    # the bundled table, per server kind: the path no worse held out on every
    # leave-one-model-out metric of that kind's runs; ratios for a GPU type it never measured
    paths = json.loads((data_dir() / "spec_errors.json").read_text())["paths"]
    assert [spec_path("RTX-4090"), spec_path("RTX-4090", 4), spec_path("H100-PCIe"),
            spec_path("L4"), spec_path("L4", 2)] == [
        paths["RTX-4090, one GPU"], paths["RTX-4090, tensor-parallel"],
        paths["H100-PCIe, one GPU"], "ratios", "ratios"]
    tp_path = paths["RTX-4090, tensor-parallel"]
    auto = replica_params("DeepSeek-R1-Distill-Llama-8B", "4xRTX-4090")
    ratios = replica_params("DeepSeek-R1-Distill-Llama-8B", "4xRTX-4090", efficiency="ratios")
    forced = replica_params("DeepSeek-R1-Distill-Llama-8B", "4xRTX-4090", efficiency="transfer")
    assert "transfer efficiencies of RTX-4090" in forced.source
    assert "efficiency ratios" in ratios.source and "transfer" not in ratios.source
    assert (auto.c_step, auto.c_prefill_tok) == (
        (forced if tp_path == "transfer" else ratios).c_step,
        (forced if tp_path == "transfer" else ratios).c_prefill_tok)
    assert forced.c_step != ratios.c_step
    # the choice is the data folder's: a copy that says ratios everywhere gives the ratio path
    folder = tmp_path / "data"
    shutil.copytree(data_dir(), folder)
    table = json.loads((folder / "spec_errors.json").read_text())
    table["paths"] = {g: "ratios" for g in table["paths"]}
    (folder / "spec_errors.json").write_text(json.dumps(table))
    monkeypatch.setenv("FLEETPLAN_DATA_DIR", str(folder))
    again = replica_params("DeepSeek-R1-Distill-Llama-8B", "4xRTX-4090")
    assert again.c_step == ratios.c_step and "transfer" not in again.source
    # a table keyed by GPU type (written before server kinds) still names the path of both kinds
    table["paths"] = {"RTX-4090": "transfer"}
    (folder / "spec_errors.json").write_text(json.dumps(table))
    assert spec_path("RTX-4090", 4) == spec_path("RTX-4090") == "transfer"
    assert replica_params("DeepSeek-R1-Distill-Llama-8B", "4xRTX-4090").c_step == forced.c_step
    with pytest.raises(Exception, match="efficiency 'best'"):
        replica_params("DeepSeek-R1-Distill-Llama-8B", "4xRTX-4090", efficiency="best")


def test_unknown_names_say_what_is_valid() -> None:
    with pytest.raises(UnknownNameError, match="did you mean DeepSeek-R1-Distill-Qwen-14B"):
        replica_params("DeepSeek-R1-Distill-Qwen-14", "1xH100-PCIe")
    with pytest.raises(UnknownNameError, match="GPU"):
        replica_params("DeepSeek-R1-Distill-Qwen-14B", "1xH900")


def test_a_model_that_does_not_fit_is_refused() -> None:
    with pytest.raises(ModelError, match="does not fit"):
        replica_params("DeepSeek-R1-Distill-Llama-70B", "1xRTX-4090")


def test_a_tensor_parallel_split_vllm_refuses_is_refused() -> None:
    # vLLM 0.8.5 refuses to start these servers: 40 attention heads over 3 GPUs; 8 KV heads
    # over 5 (neither divides the other); 12 heads of the 1.5B model over 8
    for model, config, what in (("DeepSeek-R1-Distill-Qwen-14B", "3xRTX-4090", "40 attention"),
                                ("DeepSeek-R1-Distill-Qwen-14B", "5xH100-PCIe", "8 KV heads"),
                                ("DeepSeek-R1-Distill-Qwen-1.5B", "8xRTX-4090", "12 attention")):
        with pytest.raises(ModelError, match=f"cannot run on {config}: vLLM .*{what}"):
            replica_params(model, config)
    # KV heads fewer than the group are replicated when they divide it: 2 KV heads over 4 GPUs
    spec = bundled_catalog().model("DeepSeek-R1-Distill-Qwen-1.5B")
    assert (spec.attention_heads, spec.kv_heads) == (12, 2)
    assert not replica_params("DeepSeek-R1-Distill-Qwen-1.5B", "4xRTX-4090").calibrated


def test_70b_fp16_on_two_h100_leaves_almost_no_kv_cache() -> None:
    big = kv_capacity_tokens(bundled_catalog().model("DeepSeek-R1-Distill-Llama-70B"),
                             HardwareConfig.parse("2xH100-PCIe"))
    small = kv_capacity_tokens(bundled_catalog().model("DeepSeek-R1-Distill-Qwen-14B"),
                               HardwareConfig.parse("1xH100-PCIe"))
    assert big < 50_000 < 200_000 < small  # one burst of 200 requests needs ~80k tokens


def test_priors_follow_the_hardware() -> None:
    spec = bundled_catalog().model("DeepSeek-R1-Distill-Qwen-7B")
    h100 = prior_params(spec, HardwareConfig.parse("1xH100-PCIe"))
    rtx = prior_params(spec, HardwareConfig.parse("1xRTX-4090"))
    assert h100.c_step < rtx.c_step  # twice the memory bandwidth
    assert h100.kv_capacity_tokens > rtx.kv_capacity_tokens  # 80 GB vs 24 GB
    assert not h100.calibrated


def test_params_are_strict() -> None:
    p = replica_params("DeepSeek-R1-Distill-Qwen-14B", "1xH100-PCIe")
    with pytest.raises(ValueError):
        p.with_(c_step=-1.0)
    with pytest.raises(ValueError):
        p.with_(unknown_field=1)
