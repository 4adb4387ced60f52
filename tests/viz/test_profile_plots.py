"""The scaling figure and latency vs rate: drawn from the store, checked for content."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection

import fleetplan
from fleetplan.errors import InputError, UnknownNameError
from fleetplan.viz import OKABE_ITO, plot_latency_vs_rate, plot_scaling

M14 = "DeepSeek-R1-Distill-Qwen-14B"


@pytest.fixture(scope="module")
def store():
    return fleetplan.load_profiles()


def test_scaling_one_line_per_config_plus_the_diagonal(store) -> None:
    ax = plot_scaling(store, model=M14)
    configs = store.configs(M14)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [*configs, "achieved = target"]
    assert len(ax.get_lines()) == len(configs) + 1
    assert "req/s" in ax.get_xlabel() and "req/s" in ax.get_ylabel()
    assert "target" in ax.get_xlabel() and "completed" in ax.get_ylabel()
    assert "200 requests" in ax.get_title() and M14 in ax.get_title()
    assert all(line.get_color() in OKABE_ITO for line in ax.get_lines())


def test_scaling_lines_are_the_mean_of_repeated_runs(store) -> None:
    ax = plot_scaling(store, model=M14)
    h100 = next(line for line in ax.get_lines() if line.get_label() == "1xH100-PCIe")
    runs = store.select(model=M14, config="1xH100-PCIe").frame
    expect = runs.groupby("request_rate")["request_throughput"].mean()
    assert list(h100.get_xdata()) == list(expect.index)
    np.testing.assert_allclose(h100.get_ydata(), expect.values)
    # the study's headline: "16 req/s" completed about 7.2 req/s
    assert math.isclose(float(expect.loc[16.0]), 7.2, abs_tol=0.05)
    # the H100 has repeated runs: each is drawn as a point beside the mean line
    assert len(ax.collections) == 1 and len(ax.collections[0].get_offsets()) == len(runs)


def test_scaling_diagonal_is_achieved_equals_target(store) -> None:
    ax = plot_scaling(store, model=M14)
    diag = next(line for line in ax.get_lines() if line.get_label() == "achieved = target")
    np.testing.assert_allclose(diag.get_xdata(), diag.get_ydata())


def test_scaling_needs_a_model_when_several_are_present(store) -> None:
    with pytest.raises(InputError, match=r"pick one \(model=, or --model\).*Qwen-14B"):
        plot_scaling(store)
    with pytest.raises(UnknownNameError, match="did you mean DeepSeek-R1-Distill-Qwen-14B"):
        plot_scaling(store, model="DeepSeek-R1-Distill-Qwen-14")


def test_scaling_accepts_records_and_names_missing_columns() -> None:
    recs = [{"config": "1xA", "request_rate": r, "request_throughput": r * 0.9}
            for r in (1.0, 2.0)]
    ax = plot_scaling(recs)
    assert len(ax.get_lines()) == 2
    with pytest.raises(InputError, match="missing column.*request_throughput"):
        plot_scaling([{"config": "1xA", "request_rate": 1.0}])


def _prediction(configs: list[str], calibrated: bool = True) -> pd.DataFrame:
    rows = []
    for c in configs:
        for r in (1.0, 4.0, 16.0, 32.0):
            rows.append({"config": c, "request_rate": r, "ttft_p99_ms": 50 * r,
                         "ttft_p99_ms_lo": 40 * r, "ttft_p99_ms_hi": 60 * r,
                         "calibrated": calibrated})
    return pd.DataFrame(rows)


def test_latency_measured_points_only(store) -> None:
    ax = plot_latency_vs_rate(store, model=M14)
    configs = store.configs(M14)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == \
        [f"{c} measured" for c in configs]
    assert len(ax.collections) == len(configs) and not ax.get_lines()
    assert ax.get_ylabel() == "P99 TTFT (ms)" and ax.get_yscale() == "log"


def test_latency_model_curve_and_band(store) -> None:
    pred = _prediction(["1xH100-PCIe", "2xRTX-4090"])
    ax = plot_latency_vs_rate(store, pred, model=M14, metric="ttft_p99_ms")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "1xH100-PCIe model" in labels and "2xRTX-4090 model" in labels
    assert "model band (spread over seeds)" in labels
    assert len(ax.get_lines()) == 2
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 3  # two bands and the legend's proxy
    verts = bands[0].get_paths()[0].vertices
    assert verts[:, 1].min() == pytest.approx(40.0) and verts[:, 1].max() == pytest.approx(1920.0)


def test_latency_spec_based_curve_is_dashed_and_says_so(store) -> None:
    pred = _prediction(["1xH100-PCIe"], calibrated=False)
    ax = plot_latency_vs_rate(store, pred, model=M14)
    (line,) = ax.get_lines()
    assert line.get_linestyle() == "--" and "spec-based" in line.get_label()


def test_latency_other_metric_labels_its_unit(store) -> None:
    ax = plot_latency_vs_rate(store, model=M14, metric="tpot_p50_ms", logy=False)
    assert ax.get_ylabel() == "P50 TPOT (ms)" and ax.get_yscale() == "linear"
    with pytest.raises(InputError, match="missing column.*nope_ms"):
        plot_latency_vs_rate(store, model=M14, metric="nope_ms")
