"""Bands judged on other people's runs (issue 41, item 4): per dataset, the 80% band read from
the *other* datasets' errors, and how many of this dataset's measured values it holds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetplan.validate.bands import EXTERNAL_FOLD, ErrorTable, error_table
from fleetplan.validate.external_bands import (
    MIN_GPU_RUNS,
    ExternalOutcome,
    dataset_rows,
    external_fold,
    external_markdown,
    widening,
)


def _runs(source: str, gpu: str, errors: list[float], label: str = "throughput"
          ) -> list[ExternalOutcome]:
    return [ExternalOutcome(source, gpu, None, {label: e}) for e in errors]


def test_a_dataset_is_judged_by_the_band_of_the_others() -> None:
    a = _runs("a", "X", [0.05, 0.5, 0.85, 1.5])
    b = _runs("b", "Y", [i / 10 for i in range(10)])
    refused = [ExternalOutcome("a", "X", "not modelled")]
    rows = {r.source: r for r in dataset_rows(a + b + refused)}
    assert (rows["a"].runs, rows["a"].predicted) == (5, 4)
    # b's errors 0.0 .. 0.9: 10th / 90th percentiles 0.09 / 0.81 (linear between order
    # statistics); of a's, only 0.5 lies between them
    ra = rows["a"].metrics["throughput"]
    assert (ra.n, ra.inside) == (4, 1)
    assert ra.width == pytest.approx(1.81 / 1.09)
    assert ra.median_abs == pytest.approx((0.5 + 0.85) / 2)
    # a's errors: 10th percentile 0.05 + 0.3 x 0.45 = 0.185, 90th 0.85 + 0.7 x 0.65 = 1.305;
    # b's 0.2 .. 0.9 lie between: 8 of 10
    rb = rows["b"].metrics["throughput"]
    assert (rb.n, rb.inside) == (10, 8)
    assert rb.width == pytest.approx(2.305 / 1.185)
    md = "\n".join(external_markdown(list(rows.values()), command="cmd"))
    assert "| `a` | 4 / 5 | 68% (n=4) | 1/4 (x1.66) |" in md
    assert "throughput 9/14 (64%)" in md


def test_one_dataset_alone_has_no_held_out_band() -> None:
    (row,) = dataset_rows(_runs("a", "X", [0.1, 0.2, 0.3]))
    assert row.metrics["throughput"].inside is None


_ERR = st.floats(-0.9, 5.0).map(lambda x: round(x, 3))  # errors as tables store them


@given(st.lists(_ERR, min_size=2, max_size=40), st.lists(_ERR, min_size=1, max_size=40))
def test_coverage_is_the_share_of_errors_between_the_others_percentiles(
        others: list[float], mine: list[float]) -> None:
    # a measured value is inside [pred / (1 + e90), pred / (1 + e10)] exactly when its own error
    # lies between e10 and e90: counting either way gives the same number
    import numpy as np

    rows = {r.source: r for r in dataset_rows(_runs("m", "X", mine) + _runs("o", "Y", others))}
    lo, hi = np.quantile(others, (0.1, 0.9))
    pred = 100.0
    inside = sum(pred / (1 + hi) <= pred / (1 + e) <= pred / (1 + lo) for e in mine)
    assert rows["m"].metrics["throughput"].inside == inside


def test_the_fold_has_a_gpu_row_only_with_enough_runs() -> None:
    many = _runs("a", "A100-80GB", [0.1] * MIN_GPU_RUNS)
    few = _runs("b", "RTX-3090", [0.3] * (MIN_GPU_RUNS - 1))
    fold = external_fold(many + few)
    assert set(fold) == {"all", "A100-80GB"}
    assert fold["A100-80GB"]["request_throughput"]["n"] == MIN_GPU_RUNS
    assert fold["all"]["output_throughput"]["n"] == 2 * MIN_GPU_RUNS - 1
    assert fold["all"]["request_throughput"]["p50"] == pytest.approx(0.1)


def test_a_gpu_never_measured_here_takes_the_external_band() -> None:
    base = error_table()
    ext = {"all": {"ttft_p50_ms": base.folds["leave-one-gpu-out"]["all"]["ttft_p50_ms"]}}
    quant = type(base.folds["leave-one-gpu-out"]["all"]["ttft_p50_ms"])
    own = quant(-0.2, 0.0, 0.3, 12)
    ext["A100-80GB"] = {"ttft_p50_ms": own}
    table = ErrorTable({**base.folds, EXTERNAL_FOLD: ext}, base.source, base.path)
    q, basis = table.quantiles("A100-80GB", "ttft_p50_ms", "leave-one-model-out")
    assert q == own and "12 runs others measured on A100-80GB" in basis
    q, basis = table.quantiles("L4", "ttft_p50_ms", "leave-one-model-out")
    assert q == ext["all"]["ttft_p50_ms"] and "data/external" in basis
    # a GPU type the store measured keeps its own held-out errors
    q, _ = table.quantiles("H100-PCIe", "ttft_p50_ms", "leave-one-model-out")
    assert q == base.folds["leave-one-model-out"]["H100-PCIe"]["ttft_p50_ms"]
    assert ExternalOutcome.from_dict({"source": "s", "config": "8xH100-SXM+tp4pp2",
                                      "refused": None, "errors": {}}).gpu == "H100-SXM"


def test_widening_is_the_least_factor_whose_held_out_bands_hold_80pct() -> None:
    # three datasets with their own biases: a's errors 0 .. +0.2, b's -0.15 .. +0.05, c's
    # -0.3 .. -0.1. Read from the other two's 10-90% spread alone (a: -0.255 .. +0.005, b:
    # -0.255 .. +0.155, c: -0.105 .. +0.155; linear between order statistics), the bands hold
    # 1, 5 and 1 of five values: 7 of 15
    a = _runs("a", "X", [0.0, 0.05, 0.1, 0.15, 0.2])
    b = _runs("b", "Y", [-0.15, -0.1, -0.05, 0.0, 0.05])
    c = _runs("c", "Z", [-0.3, -0.25, -0.2, -0.15, -0.1])
    plain = dataset_rows(a + b + c)
    assert [r.metrics["throughput"].inside for r in plain] == [1, 5, 1]
    k = widening(a + b + c)["throughput"]
    assert k > 1.0
    rows = dataset_rows(a + b + c, {"throughput": k})
    assert sum(r.metrics["throughput"].inside for r in rows) >= 12  # of 15 held-out values
    # one step less does not
    rows = dataset_rows(a + b + c, {"throughput": round(k - 0.05, 2)})
    assert sum(r.metrics["throughput"].inside for r in rows) < 12
    # the fold records the widened band: wider than the pooled 10-90% spread (-0.23 .. +0.13)
    fold = external_fold(a + b + c, {"throughput": k})["all"]["request_throughput"]
    assert fold["widened"] == k
    assert fold["p90"] - fold["p10"] > 0.36


def test_a_metric_of_two_datasets_has_no_external_band() -> None:
    """Each of two datasets would be judged by the other's errors alone: one stack's bias, not
    a spread. The metric stays out of the fold (GPU types keep the store's own held-out
    table) and the per-dataset table shows no band for it."""
    def runs(source: str, gpu: str, errors: list[float], p99: bool) -> list[ExternalOutcome]:
        return [ExternalOutcome(source, gpu, None, {"throughput": e, **({"TTFT p99": e}
                                                                          if p99 else {})})
                for e in errors]

    outcomes = (runs("a", "X", [0.0, 0.05, 0.1, 0.15, 0.2], True)
                + runs("b", "Y", [-0.15, -0.1, -0.05, 0.0, 0.05], True)
                + runs("c", "Z", [0.1, 0.2, 0.3], False))  # no TTFT p99 measured
    widen = widening(outcomes)
    assert "throughput" in widen and "TTFT p99" not in widen
    fold = external_fold(outcomes, widen)["all"]
    assert "request_throughput" in fold and "ttft_p99_ms" not in fold
    rows = dataset_rows(outcomes, widen)
    assert all(r.metrics["TTFT p99"].inside is None for r in rows if "TTFT p99" in r.metrics)
    assert all(r.metrics["throughput"].inside is not None for r in rows)



def _kind(source: str, gpu: str, errors: list[float], mla: bool) -> list[ExternalOutcome]:
    return [ExternalOutcome(source, gpu, None, {"throughput": e}, mla) for e in errors]


def test_latent_attention_models_are_banded_by_their_own_kind() -> None:
    # other models within +-10%, DeepSeek-style ones 1.5-3 x too fast: a band pooled over both
    # would be too wide for the one kind and too narrow for the other
    dense = (_kind("a", "X", [-0.1, -0.05, 0.0, 0.05, 0.1], False)
             + _kind("b", "Y", [-0.08, 0.0, 0.08], False))
    mla = _kind("c", "X", [0.5, 1.0, 1.5, 2.0], True) + _kind("d", "Y", [0.6, 1.2, 1.8], True)
    fold = external_fold(dense + mla)
    assert set(fold) == {"all", "mla"}  # no GPU type has MIN_GPU_RUNS runs
    assert fold["all"]["request_throughput"]["n"] == 8
    assert fold["mla"]["request_throughput"]["n"] == 7
    assert fold["all"]["request_throughput"]["p90"] < 0.1 < 0.5 < fold["mla"][
        "request_throughput"]["p10"]
    # held out, each run is judged by the other datasets' runs of its kind: d's errors against
    # c's 10th and 90th percentiles (0.65 / 1.85), a's against b's (-0.064 / 0.064)
    rows = {r.source: r.metrics["throughput"] for r in dataset_rows(dense + mla)}
    assert rows["d"].inside == 2 and rows["a"].inside == 3
    assert rows["d"].width == pytest.approx(2.85 / 1.65)
    # each kind widened by its own factor: d's band x2 about its middle in ln(1 + e)
    wide = {r.source: r.metrics["throughput"]
            for r in dataset_rows(dense + mla, {"throughput": 1.0}, {"throughput": 2.0})}
    assert wide["d"].width == pytest.approx((2.85 / 1.65) ** 2) and wide["a"].inside == 3
    # a dataset whose kind no other dataset measured is judged by the others of every kind
    lone = _kind("e", "Z", [0.3], True)
    rows = {r.source: r.metrics["throughput"] for r in dataset_rows(dense + lone)}
    assert rows["e"].inside == 0 and rows["e"].width is not None


def test_a_latent_attention_prediction_reads_its_own_row_and_says_so() -> None:
    base = error_table()
    quant = type(base.folds["leave-one-gpu-out"]["all"]["ttft_p50_ms"])
    ext = {"all": {"ttft_p50_ms": quant(-0.1, 0.0, 0.1, 40)},
           "mla": {"ttft_p50_ms": quant(-0.9, -0.6, 0.2, 24)}}
    table = ErrorTable({**base.folds, EXTERNAL_FOLD: ext}, base.source, base.path)
    for gpu in ("H200", "H100-PCIe"):  # never measured here, and the store's own GPU type
        q, basis = table.quantiles(gpu, "ttft_p50_ms", "leave-one-model-out", moe=True,
                                   mla=True)
        assert q == ext["mla"]["ttft_p50_ms"]
        assert "24 runs others measured of latent-attention models" in basis
    # another model on the same GPU types reads the other rows, as before
    q, _ = table.quantiles("H200", "ttft_p50_ms", "leave-one-model-out", moe=True)
    assert q == ext["all"]["ttft_p50_ms"]
    q, _ = table.quantiles("H100-PCIe", "ttft_p50_ms", "leave-one-model-out")
    assert q == base.folds["leave-one-model-out"]["H100-PCIe"]["ttft_p50_ms"]
    # a fold without the row (written before the kinds were split): as an MoE model
    old = ErrorTable({**base.folds, EXTERNAL_FOLD: {"all": ext["all"]}}, base.source,
                     base.path)
    q, _ = old.quantiles("H200", "ttft_p50_ms", "leave-one-model-out", moe=True, mla=True)
    assert q == ext["all"]["ttft_p50_ms"]


def test_a_prediction_of_almost_nothing_keeps_the_band_finite() -> None:
    # a TTFT predicted at 50 ms where 80 s were measured (a server that queued for its
    # prefill): an error of -0.9994, which a row rounded to 4 digits would store as -1
    errs = [-0.99999, -0.9994, -0.9, -0.5, 0.2]
    fold = external_fold(_kind("a", "X", errs, True) + _kind("b", "Y", errs, True),
                         None, {"throughput": 1.5})
    q = fold["mla"]["request_throughput"]
    assert q["p10"] == -0.9999
    base = error_table()
    quant = type(base.folds["leave-one-gpu-out"]["all"]["ttft_p50_ms"])
    row = quant(q["p10"], q["p50"], q["p90"], q["n"])
    table = ErrorTable({**base.folds, EXTERNAL_FOLD: {"mla": {"request_throughput": row}}},
                       base.source, base.path)
    band = table.lookup("H200", "request_throughput", "leave-one-model-out", mla=True).band(1.0)
    assert band.hi == pytest.approx(1e4) and band.lo > 0
