"""Error bands of spec-path predictions and the solver's safety factor, from the held-out table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.errors import DataError, InputError
from fleetplan.validate.bands import (
    ErrorQuantiles,
    error_band,
    error_table,
    prediction_bands,
    safety_factor,
)


def _table(tmp_path: Path, rows: dict) -> Path:
    p = tmp_path / "errors.json"
    p.write_text(json.dumps({"source": "test table", "folds": rows}))
    return p


ROWS = {"leave-one-model-out": {
    "H100-PCIe": {"ttft_p99_ms": {"p10": -0.2, "p50": 0.0, "p90": 0.25, "n": 40},
                  "request_throughput": {"p10": -0.1, "p50": 0.0, "p90": 0.05, "n": 40}},
    "all": {"ttft_p99_ms": {"p10": -0.5, "p50": 0.0, "p90": 0.5, "n": 80}}},
    "leave-one-gpu-out": {"all": {"ttft_p99_ms": {"p10": -0.6, "p50": 0.1, "p90": 1.0,
                                                  "n": 80}}}}


def test_band_inverts_the_signed_errors(tmp_path: Path) -> None:
    t = error_table(_table(tmp_path, ROWS))
    b = error_band("H100-PCIe", "ttft_p99_ms", 100.0, table=t)
    # measured = predicted / (1 + e): an over-prediction (e > 0) means a lower measured value
    assert (b.lo, b.hi) == (pytest.approx(80.0), pytest.approx(125.0))
    assert "40 held-out H100-PCIe runs" in b.basis


def test_an_unmeasured_gpu_gets_the_leave_one_gpu_out_rows(tmp_path: Path) -> None:
    t = error_table(_table(tmp_path, ROWS))
    b = error_band("L4", "ttft_p99_ms", 100.0, table=t)
    assert (b.lo, b.hi) == (pytest.approx(50.0), pytest.approx(250.0))
    assert "leave-one-gpu-out" in b.basis and "none measured on L4" in b.basis


def test_an_moe_models_band_comes_from_other_peoples_runs_on_any_gpu(tmp_path: Path) -> None:
    # the store's folds hold out dense models only (the study's): an MoE model's prediction on
    # a GPU type the store measured is bounded by other people's runs, MoE models among them,
    # of that GPU type where there are enough, else of all theirs
    ext = {"external": {
        "H200": {"ttft_p99_ms": {"p10": -0.3, "p50": 0.0, "p90": 0.4, "n": 9}},
        "all": {"ttft_p99_ms": {"p10": -0.6, "p50": 0.0, "p90": 0.6, "n": 200}}}}
    t = error_table(_table(tmp_path, {**ROWS, **ext}))
    dense = error_band("H100-PCIe", "ttft_p99_ms", 100.0, table=t)
    moe = error_band("H100-PCIe", "ttft_p99_ms", 100.0, table=t, moe=True)
    assert (dense.lo, dense.hi) == (pytest.approx(80.0), pytest.approx(125.0))
    assert (moe.lo, moe.hi) == (pytest.approx(100 / 1.6), pytest.approx(250.0))
    assert "200 runs others measured" in moe.basis
    assert "H100-PCIe runs are of dense models only" in moe.basis
    own = error_band("H200", "ttft_p99_ms", 100.0, table=t, moe=True)
    assert (own.lo, own.hi) == (pytest.approx(100 / 1.4), pytest.approx(100 / 0.7))
    assert own.basis == "errors of 9 runs others measured on H200 (ttft_p99_ms; data/external)"
    assert safety_factor("H100-PCIe", "ttft_p99_ms", confidence=0.9, table=t, moe=True) \
        == pytest.approx(1 / 0.4)
    # without other people's runs the store's row is all there is
    bare = error_table(_table(tmp_path, ROWS))
    assert error_band("H100-PCIe", "ttft_p99_ms", 100.0, table=bare, moe=True) == dense


GPT_OSS = (Path(__file__).resolve().parents[2] / "data" / "external" / "configs"
           / "openai--gpt-oss-20b")


LLAMA = Path(__file__).resolve().parents[1] / "data" / "hf-configs" / "Llama-3.1-8B-Instruct"


def _predicted(cli, model_config: Path, config: str, num_prompts: int) -> dict:
    """``fleetplan predict --format json`` of a config.json's model at 2 req/s, one seed."""
    res = cli("predict", "--model-config", str(model_config), "--config", config, "--rate", "2",
              "--num-prompts", str(num_prompts), "--seeds", "1", "--format", "json")
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def test_an_moe_model_on_the_studys_h100_is_banded_by_other_peoples_runs(cli) -> None:
    def band(model_config: Path) -> dict:
        return _predicted(cli, model_config, "1xH100-PCIe", 40)

    moe = band(GPT_OSS)
    assert moe["calibrated"] is False
    assert "runs others measured on their own GPUs" in moe["band_basis"]
    assert "H100-PCIe runs are of dense models only" in moe["band_basis"]
    dense = band(LLAMA)  # a dense model, never measured
    assert dense["calibrated"] is False
    assert "held-out H100-PCIe runs" in dense["band_basis"]
    assert "others measured" not in dense["band_basis"]


def test_prediction_bands_cover_the_banded_metrics_only(tmp_path: Path) -> None:
    t = error_table(_table(tmp_path, ROWS))
    out = prediction_bands("H100-PCIe", {"ttft_p99_ms": 100.0, "request_throughput": 10.0,
                                         "duration_s": 50.0}, table=t)
    assert set(out) == {"ttft_p99_ms_band", "request_throughput_band", "band_basis"}
    assert out["request_throughput_band"] == [pytest.approx(10 / 1.05, abs=1e-4),
                                              pytest.approx(10 / 0.9, abs=1e-4)]


def test_the_band_of_a_pipeline_parallel_server_says_no_such_run_is_behind_it(
        tmp_path: Path) -> None:
    """No pipeline-parallel run has been predicted and judged: the band of such a server is
    a tensor-parallel one's, and its basis says so; a plain server's does not."""
    t = error_table(_table(tmp_path, ROWS))
    piped = prediction_bands("H100-PCIe", {"ttft_p99_ms": 100.0}, table=t,
                             config="8xH100-PCIe+tp4pp2")
    assert piped["band_basis"].endswith("no pipeline-parallel run is among them: the band of "
                                        "8xH100-PCIe+tp4pp2 is a tensor-parallel server's")
    for config in ("4xH100-PCIe", "4xH100-PCIe+tp1dp4", None):
        plain = prediction_bands("H100-PCIe", {"ttft_p99_ms": 100.0}, table=t, config=config)
        assert "pipeline" not in plain["band_basis"] and plain["ttft_p99_ms_band"] == piped[
            "ttft_p99_ms_band"]


def test_safety_factor_derates_and_never_loosens(tmp_path: Path) -> None:
    t = error_table(_table(tmp_path, ROWS))
    thr = safety_factor("H100-PCIe", "request_throughput", confidence=0.9, table=t)
    assert thr == pytest.approx(1 / 1.05)  # capacity x this: 90% of runs measured at least that
    lat = safety_factor("H100-PCIe", "ttft_p99_ms", confidence=0.9, table=t)
    assert lat == pytest.approx(1 / 0.8)
    assert safety_factor("H100-PCIe", "ttft_p99_ms", confidence=0.5, table=t) == 1.0
    assert safety_factor("L4", "ttft_p99_ms", confidence=0.9, table=t) > lat
    with pytest.raises(InputError, match="confidence"):
        safety_factor("H100-PCIe", "ttft_p99_ms", confidence=1.0, table=t)


def test_the_bundled_table_covers_the_study_gpus_and_is_checked(tmp_path: Path) -> None:
    t = error_table()
    for fold in ("leave-one-model-out", "leave-one-config-out", "leave-one-gpu-out"):
        for gpu in ("H100-PCIe", "RTX-4090", "all"):
            q, _ = t.quantiles(gpu, "ttft_p99_ms", fold)
            assert q.n > 0 and q.p10 <= q.p50 <= q.p90
    bad = dict(ROWS)
    bad["leave-one-model-out"] = {"all": {"ttft_p99_ms": {"p10": 0.5, "p50": 0.0, "p90": 0.1,
                                                          "n": 3}}}
    with pytest.raises(DataError, match="ordered"):
        error_table(_table(tmp_path, bad))


def test_quantiles_of_signed_errors_are_numpys_linear_ones() -> None:
    # seven held-out runs, two of them 10x under-predicted
    q = ErrorQuantiles.of([-0.93, -0.92, -0.90, -0.61, -0.49, -0.35, 2.13])
    assert (q.p10, q.p50, q.p90, q.n) == (-0.924, -0.61, 0.642, 7)
    with pytest.raises(DataError):
        ErrorQuantiles.of([])


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.floats(-0.95, 3.0), min_size=1, max_size=30),
       st.floats(0.01, 0.99), st.floats(0.01, 0.99))
def test_a_latency_factor_never_loosens_and_grows_with_confidence(errs, p1, p2) -> None:
    q = ErrorQuantiles.of(errs)
    lo, hi = sorted((p1, p2))
    assert 1.0 <= q.latency_factor(lo) <= q.latency_factor(hi)
    # at the 10th percentile's confidence and beyond, 90% of the runs measured within it
    assert q.latency_factor(0.9) == pytest.approx(max(1.0, 1.0 / (1.0 + q.p10)))


R1 = (Path(__file__).resolve().parents[2] / "data" / "external" / "configs"
      / "deepseek-ai--DeepSeek-R1")


def test_a_latent_attention_model_is_banded_by_such_models_runs(cli) -> None:
    # DeepSeek-R1 on 8 x H200: its bands come from the DeepSeek-R1 runs of data/external
    # (1.4-7 x fewer requests a second than the spec path), not from the other models' runs
    r1 = _predicted(cli, R1, "8xH200", 24)
    assert "runs others measured of latent-attention models" in r1["band_basis"]
    gpt = _predicted(cli, GPT_OSS, "8xH200", 24)  # an MoE model without latent attention
    assert "latent-attention" not in gpt["band_basis"]
    # the measured throughput of those runs was at most the prediction: the band sits below it
    pred = r1["metrics"]["request_throughput"]["mean"]
    lo, hi = r1["request_throughput_band"]
    assert hi <= pred * 1.0001 and lo < 0.7 * pred
