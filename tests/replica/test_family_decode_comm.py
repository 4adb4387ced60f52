"""A GPU family's fit and the decode steps (issue 41): a decoded token all-reduces the same
bytes as a prefilled one, so the family's efficiency for those bytes (``comm_tok``) applies to
``c_seq`` as to ``c_prefill_tok``. Before, ``c_seq`` kept the pooled ratio, and a fit could slow
a tensor-parallel server's decode only by slowing its prefills (the NVLink fit's ``comm_tok``
sat at its bound)."""

from __future__ import annotations

import pytest

import fleetplan.replica.params as params_mod
from fleetplan.catalog.catalog import bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.replica.calibration_file import load_calibration_file
from fleetplan.replica.families import FamilyFit, gpu_family
from fleetplan.replica.params import learned_efficiency, replica_params
from fleetplan.replica.priors import ideal_coefficients, ideal_parts

MODEL = "Meta-Llama-3-8B-Instruct"
PARTS = {"weights_bw": 1.5, "comm_step": 2.0, "host_s": 0.002, "compute": 1.2,
         "comm_tok": 3.0}


@pytest.mark.parametrize("config", ["1xH100-SXM", "4xH100-SXM"])
def test_a_decoded_tokens_all_reduce_bytes_take_the_familys_efficiency(
        monkeypatch: pytest.MonkeyPatch, config: str) -> None:
    fit = FamilyFit("nvidia-datacenter-nvlink", PARTS, 12, ("runs",), ("H100-SXM",))
    monkeypatch.setattr(params_mod, "family_efficiency",
                        lambda gpu, path=None: fit if gpu_family(gpu) == fit.family else None)
    got = replica_params(MODEL, config)
    # c_seq: the ideal per-sequence cost x the pooled efficiency ratio, but its all-reduce
    # bytes at the family's 3.0 (one GPU has none: nothing changes there)
    cat = bundled_catalog()
    hw = HardwareConfig.parse(config, cat)
    ideal = ideal_coefficients(cat.model(MODEL), hw)
    comm = ideal_parts(cat.model(MODEL), hw)["comm_tok"]
    assert (comm > 0) == (config != "1xH100-SXM")
    ratios, _how = learned_efficiency(load_calibration_file().configs, "H100-SXM", 1)
    assert ratios is not None
    r = ratios["c_seq"]
    assert got.c_seq == pytest.approx(ideal["c_seq"] * r + (3.0 - r) * comm, rel=1e-9)
    # 4 x H100 SXM: Llama-3-8B's 64 all-reduces of 8192 bytes a token, 2 x 3 / 4 of them over
    # the GPU row's 900 GB/s: 1.75 us a token, 3.0 x that in the decode step as in prefill
    if comm:
        assert comm == pytest.approx(64 * 8192 * 1.5 / 900e9, rel=1e-12)
        assert got.c_prefill_tok == pytest.approx(ideal_parts(cat.model(MODEL), hw)["tok"] * 1.2
                                                  + 3.0 * comm, rel=1e-9)


def test_a_calibrated_gpu_types_transfer_path_keeps_its_c_seq() -> None:
    # the RTX 4090's transfer efficiencies (its calibrated servers'; the default spec path of
    # its one-GPU servers): an uncalibrated pair's c_seq stays ideal x the ratios learned on
    # the same GPU and count
    cat = bundled_catalog()
    hw = HardwareConfig.parse("4xRTX-4090", cat)
    model = "Meta-Llama-3-8B-Instruct"
    got = replica_params(model, "4xRTX-4090", efficiency="transfer")
    assert "transfer efficiencies of RTX-4090" in got.source
    ratios, _how = learned_efficiency(load_calibration_file().configs, "RTX-4090", 4)
    assert ratios is not None
    want = ideal_coefficients(cat.model(model), hw)["c_seq"] * ratios["c_seq"]
    assert got.c_seq == pytest.approx(want, rel=1e-9)
