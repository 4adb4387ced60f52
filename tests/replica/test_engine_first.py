"""Issue 42: the tensor-parallel RTX 4090 servers fitted to what their engines do, their
first-token delays fitted after as a term of their own, and what that gives at a rate the
study held back."""

from __future__ import annotations

import dataclasses

import pytest

from fleetplan.catalog.catalog import bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.profiles.store import load_profiles
from fleetplan.replica.calibrate import fit_weights, predict_on_server
from fleetplan.replica.calibration_file import load_calibration_file
from fleetplan.replica.measured_run import MeasuredRun
from fleetplan.replica.priors import engine_first, ideal_parts
from fleetplan.replica.stream_delay import fit_stream_delay
from fleetplan.validate.core import load_runs


@pytest.mark.parametrize(("config", "first"), [
    ("2xRTX-4090", True), ("8xRTX-4090", True),  # GeForce: no peer-to-peer
    ("1xRTX-4090", False), ("2xH100-PCIe", False),
    ("4xRTX-4090+tp4+PCIe-4.0-x16-noP2P", True),  # a stated link through host memory
    ("4xRTX-4090+tp4+PCIe-4.0-x16", False),  # a stated link with peer-to-peer: NCCL's ring
])
def test_which_servers_are_fitted_engine_first(config: str, first: bool) -> None:
    assert engine_first(HardwareConfig.parse(config, bundled_catalog())) is first


def test_a_geforce_servers_all_reduces_go_through_host_memory_by_default() -> None:
    cat = bundled_catalog()
    spec = cat.model("DeepSeek-R1-Distill-Qwen-7B")  # 28 layers, hidden size 3584
    got = ideal_parts(spec, HardwareConfig.parse("4xRTX-4090", cat))
    # 56 all-reduces a step, 2 x 3 hops of 10 us each and 2 x 3 messages of 7168 bytes a token
    # at the GPU row's 32 GB/s
    assert got["comm_step"] == pytest.approx(56 * 6 * 10e-6, rel=1e-12)
    assert got["comm_tok"] == pytest.approx(56 * 3584 * 2 * 6 / 32e9, rel=1e-12)


def _run(**kw: object) -> MeasuredRun:
    base = {"run_id": "x", "model": "m", "config": "2xRTX-4090", "gpu": "RTX-4090",
            "gpu_count": 2, "request_rate": 1.0, "num_prompts": 200, "burstiness": 1.0,
            "total_input_tokens": 1, "total_output_tokens": 1, "series_max_rate": 32.0}
    return MeasuredRun(**{**base, **kw})  # type: ignore[arg-type]


def test_a_flagged_run_gives_an_engine_first_fit_its_engine_figures_only() -> None:
    gaps = {"request_throughput": 3.8, "ttft_p50_ms": 382.0, "tpot_p50_ms": 12.1,
            "itl_p50_ms": 11.1}
    flagged = _run(measured=gaps, flagged=True)
    bunched = _run(measured={**gaps, "tpot_p50_ms": 8.6, "itl_p50_ms": 20.0}, flagged=True)
    assert set(fit_weights(flagged, True)) == {"request_throughput", "tpot_p50_ms",
                                                "itl_p50_ms"}
    assert set(fit_weights(bunched, True)) == {"request_throughput"}  # its tokens came late
    assert fit_weights(flagged, False) == {}  # other servers: a flagged run is left out
    assert "ttft_p99_ms" in fit_weights(_run(measured=gaps), True)


def test_the_delay_fit_recovers_a_known_delay() -> None:
    """Runs replayed with a known stream delay are fitted back to it, the engine held fixed."""
    runs = [r for r in load_runs(load_profiles())
            if r.key == ("DeepSeek-R1-Distill-Qwen-7B", "1xRTX-4090") and not r.flagged]
    entry = load_calibration_file().entry("DeepSeek-R1-Distill-Qwen-7B", "1xRTX-4090")
    assert entry is not None and len(runs) >= 3
    cat = bundled_catalog()
    truth = entry.params.with_(first_token_delay_s=0.15, first_token_delay_sigma=0.6)

    def predict(p, r):
        return predict_on_server(p, r, seeds=(0,), catalog=cat)

    fake = [dataclasses.replace(r, measured={**r.measured, **{
        m: v for m, v in predict(truth, r).items() if m.startswith("ttft")}}) for r in runs]
    got = fit_stream_delay(entry.params, fake, predict, max_nfev=60)
    assert got.median_s == pytest.approx(0.15, rel=0.15)
    assert got.sigma == pytest.approx(0.6, abs=0.15)
    assert got.loss < got.loss_without
    # and runs that show no delay get none
    none = fit_stream_delay(entry.params, runs, predict, max_nfev=20)
    assert none.median_s < 0.02


def test_the_held_back_8_rps_run_the_issue_quotes() -> None:
    """The study kept its 8 req/s runs back; issue 42 quotes one: 7B on 4 x RTX 4090 measured
    6.31 req/s and TPOT p50 17.6 ms. Its 16 req/s run's tokens and pins replayed at 8 req/s on
    the committed calibration land within the issue's 5 % (throughput) and 6 % (TPOT); the fits
    before put them at 5.15 req/s (-18 %) and 22.7 ms (+29 %)."""
    run16 = next(r for r in load_runs(load_profiles())
                 if r.key == ("DeepSeek-R1-Distill-Qwen-7B", "4xRTX-4090")
                 and r.request_rate == 16)
    entry = load_calibration_file().entry("DeepSeek-R1-Distill-Qwen-7B", "4xRTX-4090")
    assert entry is not None
    got = predict_on_server(entry.params, dataclasses.replace(run16, request_rate=8.0),
                            seeds=(0, 1, 2), catalog=bundled_catalog())
    assert got["request_throughput"] == pytest.approx(6.31, rel=0.05)
    assert got["tpot_p50_ms"] == pytest.approx(17.6, rel=0.06)
