"""More GPU types people serve on are plain catalog rows (issue 41): NVIDIA's L40, A10 and
A100 80GB PCIe from their datasheets, and the GeForce RTX 3090 whose runs (the 4 x RTX 3090 rig)
the GeForce family is fitted on. Expected figures are the datasheets' "with sparsity" tensor
rates halved, worked out here, not read back from the CSV; the names nvidia-smi writes find
them; a model is predicted on each, uncalibrated and with its band."""

from __future__ import annotations

import pytest

from fleetplan.catalog import bundled_catalog
from fleetplan.replica.families import gpu_family

CAT = bundled_catalog()
ADDED = ["L40", "A10", "A100-PCIe"]


def test_datasheet_figures() -> None:
    g = CAT.gpus()
    assert g["L40"].fp16_tflops_dense == pytest.approx(362.1 / 2)
    assert g["A10"].fp16_tflops_dense == 250 / 2 and g["A10"].vram_gb == 24
    assert g["A100-PCIe"].fp16_tflops_dense == 624 / 2
    assert (g["A100-PCIe"].mem_bandwidth_gb_s, g["A100-PCIe"].tdp_w) == (1935, 300)
    assert [g[x].tdp_w for x in ADDED] == [300, 150, 300]
    for x in ADDED:
        assert "http" in g[x].spec_source and "datasheet" in g[x].spec_source
        assert "estimate" in g[x].idle_w_source and g[x].idle_w < g[x].tdp_w
        assert gpu_family(g[x]) == "nvidia-datacenter-pcie"
    assert gpu_family(g["RTX-3090"]) == "nvidia-geforce" and g["RTX-3090"].vram_gb == 24


@pytest.mark.parametrize(("raw", "canon"), [
    ("NVIDIA-L40", "L40"), ("NVIDIA A10", "A10"),
    ("NVIDIA A100 80GB PCIe", "A100-PCIe"), ("NVIDIA A100-PCIE-80GB", "A100-PCIe"),
    ("NVIDIA A100-SXM4-80GB", "A100-80GB"), ("NVIDIA GeForce RTX 3090", "RTX-3090"),
    ("NVIDIA L40S", "L40S")])
def test_the_names_nvidia_smi_writes_find_them(raw: str, canon: str) -> None:
    assert CAT.normalize_gpu(raw) == canon


@pytest.mark.parametrize("config", ["1xA10", "1xL40", "2xA100-PCIe", "2xRTX-3090"])
def test_a_model_is_predicted_on_each_uncalibrated_with_a_band(cli, config: str) -> None:
    import json

    res = cli("predict", "--model", "DeepSeek-R1-Distill-Qwen-7B", "--config", config,
              "--rate", "1", "--num-prompts", "20", "--seeds", "1", "--format", "json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["calibrated"] is False and out["request_throughput_band"]
    lo, hi = out["request_throughput_band"]
    assert lo < out["metrics"]["request_throughput"]["mean"] < hi
