"""Catalogs: every figure present with a source; names normalize; the store's models are known."""

from __future__ import annotations

import pytest

from fleetplan.catalog import HardwareConfig, bundled_catalog
from fleetplan.errors import InputError, UnknownNameError
from fleetplan.profiles.store import load_profiles

CAT = bundled_catalog()
GPUS = ["RTX-4090", "H100-PCIe", "H100-SXM", "A100-80GB", "L40S", "RTX-5090", "H200"]


def test_gpu_catalog_has_the_required_gpus_and_datasheet_tdps() -> None:
    gpus = CAT.gpus()
    assert set(GPUS) <= set(gpus)
    assert gpus["H100-PCIe"].tdp_w == 350 and gpus["H100-SXM"].tdp_w == 700
    assert gpus["RTX-4090"].tdp_w == 450 and gpus["RTX-4090"].vram_gb == 24
    for g in gpus.values():
        assert g.spec_source and g.spec_date
        assert "estimate" in g.embodied_source and "estimate" in g.idle_w_source
        assert g.idle_w < g.tdp_w


@pytest.mark.parametrize(("raw", "canon"), [("NVIDIA-GeForce-RTX-4090", "RTX-4090"),
                                             ("NVIDIA-H100-PCIe", "H100-PCIe"),
                                             ("nvidia h100 pcie", "H100-PCIe"),
                                             ("h200", "H200")])
def test_gpu_names_normalize(raw: str, canon: str) -> None:
    assert CAT.normalize_gpu(raw) == canon


def test_configuration_names() -> None:
    c = HardwareConfig.parse("2xNVIDIA-GeForce-RTX-4090")
    assert c.name == "2xRTX-4090" and c.tp_size == 2 and c.spec.vram_gb == 24
    with pytest.raises(UnknownNameError, match="did you mean RTX-4090"):
        HardwareConfig.parse("2xRTX4091")
    with pytest.raises(InputError, match="<count>x<GPU>"):
        HardwareConfig.parse("RTX-4090")


def test_study_prices_and_hyperscaler_prices_are_dated() -> None:
    assert CAT.price("H100-SXM").price_usd_per_gpu_hour == 2.50
    assert CAT.price("H100-PCIe").price_usd_per_gpu_hour == 2.00
    assert CAT.price("RTX-4090").price_usd_per_gpu_hour == 0.25
    assert CAT.price("H100-SXM", "hyperscaler").price_usd_per_gpu_hour == 12.29
    assert 8 <= CAT.price("H100-PCIe", "hyperscaler").price_usd_per_gpu_hour <= 10
    assert all(p.price_date and p.source for p in CAT.prices())
    with pytest.raises(InputError, match="no hyperscaler price for GPU RTX-4090"):
        CAT.price("RTX-4090", "hyperscaler")


def test_grid_intensity() -> None:
    eu = CAT.grid_intensity("EU27")
    assert eu.g_co2_per_kwh == 242 and str(eu.year) == "2023"
    assert CAT.grid_intensity("FRA").g_co2_per_kwh < CAT.grid_intensity("POL").g_co2_per_kwh
    assert CAT.grid_intensity("EU27", {"EU27": 100}).g_co2_per_kwh == 100


def test_every_model_in_the_store_has_a_spec() -> None:
    models = CAT.models()
    for name in load_profiles().models():
        spec = models[name]
        assert spec.kv_heads <= spec.attention_heads and spec.layers > 0
    qwen14 = CAT.model("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B")
    assert qwen14.kv_bytes_per_token() == 2 * 48 * 8 * 128 * 2
    assert 29e9 < qwen14.weight_bytes < 30e9
