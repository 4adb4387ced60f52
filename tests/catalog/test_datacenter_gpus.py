"""Issue 41 item 2: AMD Instinct and more data-centre NVIDIA GPUs are plain catalog rows.

The expected figures are worked out here from the vendors' own peak-rate arithmetic (compute
units x FLOPs per clock x clock, halving the "with sparsity" figure), not read back from the
CSV. Each AMD row is predicted on the spec path (uncalibrated, with its band) for a model that
fits, and a model that cannot fit is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetplan.catalog import bundled_catalog

CAT = bundled_catalog()
AMD = ["MI300X", "MI325X", "MI355X"]
NEW = [*AMD, "B200", "A100-40GB", "H100-NVL"]

# Llama-3.1-405B's architecture (its published config.json): ~405 B parameters, 810 GB in
# BF16, more than any one GPU of the catalog holds.
LLAMA_405B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 16384,
    "intermediate_size": 53248, "num_hidden_layers": 126, "num_attention_heads": 128,
    "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


def test_new_rows_load_with_their_datasheet_figures() -> None:
    gpus = CAT.gpus()
    assert set(NEW) <= set(gpus)
    # CDNA 3: 304 CUs x 2,048 dense FP16 FLOPs per clock x 2.1 GHz peak engine clock
    assert gpus["MI300X"].fp16_tflops_dense == pytest.approx(304 * 2048 * 2.1e9 / 1e12, abs=0.1)
    assert gpus["MI325X"].fp16_tflops_dense == gpus["MI300X"].fp16_tflops_dense
    # CDNA 4: 256 CUs x 4,096 dense FP16 FLOPs per clock x 2.4 GHz
    assert gpus["MI355X"].fp16_tflops_dense == pytest.approx(256 * 4096 * 2.4e9 / 1e12, abs=0.1)
    assert gpus["B200"].fp16_tflops_dense == 4500 / 2  # 4.5 PFLOPS is the sparsity figure
    assert gpus["H100-NVL"].fp16_tflops_dense == 1671 / 2
    assert gpus["A100-40GB"].fp16_tflops_dense == gpus["A100-80GB"].fp16_tflops_dense == 312
    assert [gpus[g].vram_gb for g in AMD] == [192, 256, 288]
    assert [gpus[g].tdp_w for g in AMD] == [750, 1000, 1400]
    assert gpus["MI300X"].interconnect_gb_s == 7 * 128  # seven Infinity Fabric links
    for g in NEW:
        spec = gpus[g]
        assert "estimate" in spec.idle_w_source and "estimate" in spec.embodied_source
        assert "datasheet" in spec.spec_source or "specifications" in spec.spec_source
        assert "http" in spec.spec_source and spec.idle_w < spec.tdp_w
    for g in AMD:
        assert "Infinity Fabric" in gpus[g].interconnect


@pytest.mark.parametrize(("raw", "canon"), [
    ("AMD Instinct MI300X", "MI300X"), ("AMD-Instinct-MI325X", "MI325X"),
    ("amd instinct mi355x", "MI355X"), ("Instinct MI300X", "MI300X"),
    ("NVIDIA A100-SXM4-40GB", "A100-40GB"), ("NVIDIA H100 NVL", "H100-NVL"),
    ("NVIDIA-B200", "B200")])
def test_vendor_spellings_normalize(raw: str, canon: str) -> None:
    assert CAT.normalize_gpu(raw) == canon


@pytest.mark.parametrize("gpu", AMD)
def test_spec_path_predicts_an_amd_gpu_uncalibrated_with_a_band(cli, gpu: str) -> None:
    res = cli("predict", "--model", "Meta-Llama-3-8B-Instruct", "--config", f"1x{gpu}",
              "--rate", "2", "--num-prompts", "40", "--seeds", "1", "--format", "json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert (out["config"], out["calibrated"]) == (f"1x{gpu}", False)
    assert f"none measured on {gpu}" in out["band_basis"]
    for m in ("request_throughput", "ttft_p99_ms", "tpot_p50_ms"):
        lo, hi = out[f"{m}_band"]
        assert 0 < lo < hi


@pytest.mark.parametrize("gpu", AMD)
def test_a_model_larger_than_the_gpu_is_refused_in_one_line(cli, gpu: str,
                                                            tmp_path: Path) -> None:
    folder = tmp_path / "Llama-3.1-405B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA_405B))
    res = cli("predict", "--model-config", str(folder), "--config", f"1x{gpu}", "--rate", "1",
              "--num-prompts", "20", "--seeds", "1")
    assert res.exit_code == 2
    line = res.stderr.strip()
    assert "\n" not in line and f"does not fit on 1x{gpu}" in line
