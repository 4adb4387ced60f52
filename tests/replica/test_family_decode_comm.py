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
from fleetplan.replica.families import FamilyFit, family_fits, gpu_family, moe_layer_family
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


def _with_table(monkeypatch: pytest.MonkeyPatch, fits: dict[str, FamilyFit]) -> None:
    """The product reads this family table instead of the bundled one."""
    monkeypatch.setattr(params_mod, "family_efficiency",
                        lambda gpu, path=None: fits.get(gpu_family(gpu)))
    monkeypatch.setattr(params_mod, "moe_layer_family",
                        lambda gpu, table=None: moe_layer_family(gpu, fits))


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
    _with_table(monkeypatch, {})
    dense_path = replica_params(MODEL, "2xH100-SXM")
    moe_path = replica_params(spec.model, "2xH100-SXM", catalog=cat)
    fit = FamilyFit("nvidia-datacenter-nvlink", {**PARTS, "moe_layer_s": 150e-6}, 20,
                    ("runs",), ("H100-SXM",), moe_only=True)
    _with_table(monkeypatch, {fit.family: fit})
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


GPT_OSS = (Path(__file__).resolve().parents[2] / "data" / "external" / "configs"
           / "openai--gpt-oss-20b")


@pytest.mark.parametrize(("config", "family"), [
    # the study's H100 PCIe: calibrated on dense models only; its family (data-centre, PCIe)
    # has no runs, so it takes its NVLink sibling's time: the same chip, the same MoE kernels
    ("2xH100-PCIe", "nvidia-datacenter-nvlink"),
    # the study's RTX 4090, calibrated on dense models: its own family's time
    ("8xRTX-4090", "nvidia-geforce"),
    # a data-centre PCIe GPU never measured anywhere (L40S): the sibling's time
    ("4xL40S", "nvidia-datacenter-nvlink"),
])
def test_an_moe_model_on_a_gpu_no_moe_model_taught_takes_a_familys_time_per_moe_layer(
        monkeypatch: pytest.MonkeyPatch, config: str, family: str) -> None:
    # the spec path's dense step knows nothing of an MoE layer's router, permutation and small
    # grouped GEMMs (gpt-oss-20b on 1 x H100 PCIe was predicted 2 x too fast at one request in
    # flight): where its GPU's family, or that family's sibling, learned that time on others'
    # runs, an MoE model's step takes it; a dense model's parameters do not move
    spec = ModelSpec.from_hf_config(MIXTRAL)
    cat = bundled_catalog().extend(models=[spec])
    _with_table(monkeypatch, {})
    dense_path = replica_params(MODEL, config)
    moe_path = replica_params(spec.model, config, catalog=cat)
    ratios_path = replica_params(spec.model, config, catalog=cat, efficiency="ratios")
    fits = {f: FamilyFit(f, {**PARTS, "moe_layer_s": us * 1e-6}, 20, ("runs",), ("G",),
                         moe_only=f != "nvidia-geforce")
            for f, us in (("nvidia-datacenter-nvlink", 150), ("nvidia-geforce", 40))}
    _with_table(monkeypatch, fits)
    assert replica_params(MODEL, config) == dense_path
    got = replica_params(spec.model, config, catalog=cat)
    us = 150 if family == "nvidia-datacenter-nvlink" else 40
    assert got.c_step == pytest.approx(moe_path.c_step + 32 * us * 1e-6, rel=1e-12)
    assert (got.c_seq, got.c_prefill_tok, got.c_experts) == (
        moe_path.c_seq, moe_path.c_prefill_tok, moe_path.c_experts)
    assert f"time per mixture-of-experts layer ({us} us) of {family} GPUs" in got.source
    gpu = bundled_catalog().gpu(HardwareConfig.split(config)[1])
    assert ("the same MoE kernels" in got.source) is (gpu_family(gpu) != family)
    # an efficiency path asked for by name is that path alone
    assert replica_params(spec.model, config, catalog=cat, efficiency="ratios") == ratios_path


def test_the_time_per_moe_layer_is_the_familys_own_else_its_siblings() -> None:
    cat = bundled_catalog()
    pcie, sxm, ada = cat.gpu("H100-PCIe"), cat.gpu("H100-SXM"), cat.gpu("RTX-4090")

    def fit(family: str, us: float) -> FamilyFit:
        return FamilyFit(family, {**PARTS, "moe_layer_s": us * 1e-6}, 9, ("d",), ("G",))

    nvlink, own = fit("nvidia-datacenter-nvlink", 120), fit("nvidia-datacenter-pcie", 80)
    assert moe_layer_family(pcie, {nvlink.family: nvlink}) is nvlink
    assert moe_layer_family(pcie, {nvlink.family: nvlink, own.family: own}) is own
    assert moe_layer_family(sxm, {own.family: own}) is None  # no sibling that way round
    assert moe_layer_family(ada, {nvlink.family: nvlink}) is None
    # a family fitted without an MoE run has no such time: the sibling's counts
    assert moe_layer_family(pcie, {nvlink.family: nvlink,
                                   own.family: fit(own.family, 0)}) is nvlink


def test_gpt_oss_on_the_studys_h100_takes_the_nvlink_familys_bundled_time() -> None:
    # the bundled verdict: the NVLink family kept for its time per MoE layer; the H100 PCIe's
    # calibrated ratios keep the dense step, and gpt-oss-20b's 24 MoE layers add that time
    spec = ModelSpec.from_hf_config(GPT_OSS)
    cat = bundled_catalog().extend(models=[spec])
    fam = family_fits()["nvidia-datacenter-nvlink"]
    got = replica_params(spec.model, "1xH100-PCIe", catalog=cat)
    plain = replica_params(spec.model, "1xH100-PCIe", catalog=cat, efficiency="ratios")
    assert got.c_step == pytest.approx(plain.c_step + 24 * fam.parts["moe_layer_s"], rel=1e-9)
    assert "taken for this nvidia-datacenter-pcie GPU" in got.source
