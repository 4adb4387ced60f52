"""A GPU family's fit and the decode steps (issue 41): a decoded token all-reduces the same
bytes as a prefilled one, so the family's efficiency for those bytes (``comm_tok``) applies to
``c_seq`` as to ``c_prefill_tok``. Before, ``c_seq`` kept the pooled ratio, and a fit could slow
a tensor-parallel server's decode only by slowing its prefills (the NVLink fit's ``comm_tok``
sat at its bound)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fleetplan.replica.params as params_mod
from fleetplan.catalog.catalog import bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.catalog.models import ModelSpec
from fleetplan.replica.calibration_file import load_calibration_file
from fleetplan.replica.families import FamilyFit, family_fits, gpu_family
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


MIXTRAL = Path(__file__).resolve().parents[1] / "data" / "hf-configs" / "Mixtral-8x7B-Instruct-v0.1"


def _with_family(monkeypatch: pytest.MonkeyPatch, **extra: float) -> None:
    fit = FamilyFit("amd-instinct", {**PARTS, **extra}, 12, ("runs",), ("MI300X",))
    monkeypatch.setattr(params_mod, "family_efficiency",
                        lambda gpu, path=None: fit if gpu_family(gpu) == fit.family else None)


def test_a_familys_host_time_per_sequence_joins_every_decoders_cost(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # AMD's MI300X tables (vLLM 0.6.6-0.10.0, TP 8): the step grows by ~60 us per sequence
    # more than the spec path's decode cost, on the 70B and the 405B alike; the family's
    # seq_host_s carries it into c_seq, and nothing else moves
    _with_family(monkeypatch)
    without = replica_params(MODEL, "8xMI300X")
    _with_family(monkeypatch, seq_host_s=60e-6)
    got = replica_params(MODEL, "8xMI300X")
    assert got.c_seq == pytest.approx(without.c_seq + 60e-6, rel=1e-12)
    assert (got.c_step, got.c_prefill_tok, got.c_kv_tok) == (
        without.c_step, without.c_prefill_tok, without.c_kv_tok)
    # a family's time per MoE layer leaves a dense model alone
    _with_family(monkeypatch, moe_layer_s=100e-6)
    assert replica_params(MODEL, "8xMI300X").c_step == without.c_step


def test_a_familys_time_per_moe_layer_joins_an_moe_models_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Mixtral-8x7B: 32 layers, each a mixture of 8 experts; 100 us a layer is 3.2 ms a step
    spec = ModelSpec.from_hf_config(MIXTRAL)
    assert spec.is_moe and spec.layers == 32
    cat = bundled_catalog().extend(models=[spec])
    _with_family(monkeypatch)
    without = replica_params(spec.model, "2xMI300X", catalog=cat)
    _with_family(monkeypatch, moe_layer_s=100e-6)
    got = replica_params(spec.model, "2xMI300X", catalog=cat)
    assert got.c_step == pytest.approx(without.c_step + 32 * 100e-6, rel=1e-12)
    assert (got.c_seq, got.c_prefill_tok, got.c_experts) == (
        without.c_seq, without.c_prefill_tok, without.c_experts)


def test_a_family_table_written_before_the_new_parts_reads_them_as_none(
        tmp_path: Path) -> None:
    old = tmp_path / "fam.json"
    old.write_text(json.dumps({"families": {"amd-instinct": {
        "parts": PARTS, "n_runs": 12, "datasets": ["runs"], "gpus": ["MI300X"]}}}))
    parts = family_fits(old)["amd-instinct"].parts
    assert parts["seq_host_s"] == 0.0 and parts["moe_layer_s"] == 0.0
    assert parts["comm_tok"] == 3.0


def test_a_family_kept_for_its_moe_layers_alone_leaves_the_spec_path_but_there(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a family whose dense parts did not hold up held out, but whose time per MoE layer did:
    # a dense model keeps the spec path exactly; an MoE model's step takes that time on top
    spec = ModelSpec.from_hf_config(MIXTRAL)
    cat = bundled_catalog().extend(models=[spec])
    monkeypatch.setattr(params_mod, "family_efficiency", lambda gpu, path=None: None)
    dense_path = replica_params(MODEL, "2xH100-SXM")
    moe_path = replica_params(spec.model, "2xH100-SXM", catalog=cat)
    fit = FamilyFit("nvidia-datacenter-nvlink", {**PARTS, "moe_layer_s": 150e-6}, 20,
                    ("runs",), ("H100-SXM",), moe_only=True)
    monkeypatch.setattr(params_mod, "family_efficiency",
                        lambda gpu, path=None: fit if gpu_family(gpu) == fit.family else None)
    assert replica_params(MODEL, "2xH100-SXM") == dense_path
    got = replica_params(spec.model, "2xH100-SXM", catalog=cat)
    assert got.c_step == pytest.approx(moe_path.c_step + 32 * 150e-6, rel=1e-12)
    assert (got.c_seq, got.c_prefill_tok, got.c_kv_tok, got.c_experts) == (
        moe_path.c_seq, moe_path.c_prefill_tok, moe_path.c_kv_tok, moe_path.c_experts)
    assert "time per mixture-of-experts layer (150 us) of nvidia-datacenter-nvlink" in got.source


def test_a_family_tables_moe_only_mark_is_read_and_checked(tmp_path: Path) -> None:
    from fleetplan.errors import DataError

    entry = {"parts": PARTS, "n_runs": 12, "datasets": ["runs"], "gpus": ["H100-SXM"]}
    for name, extra, want in (("kept.json", {"moe_only": True}, True),
                              ("whole.json", {}, False)):
        (tmp_path / name).write_text(json.dumps({"families": {"x": {**entry, **extra}}}))
        assert family_fits(tmp_path / name)["x"].moe_only is want
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"families": {"x": {**entry, "moe_only": "yes"}}}))
    with pytest.raises(DataError, match="moe_only true or false"):
        family_fits(bad)
