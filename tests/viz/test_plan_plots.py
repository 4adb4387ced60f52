"""Fleet composition, class latency vs SLO, the frontier and the hourly plan: content checks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.patches import Rectangle

from fleetplan.errors import InputError
from fleetplan.viz import (
    hours_frame,
    pareto_mask,
    plot_class_latency,
    plot_fleet_composition,
    plot_frontier,
    plot_hourly_plan,
)
from fleetplan.viz.style import MET_COLOR, MISSED_COLOR

SIM = {  # the shape of `fleetplan simulate --format json` (issue 4's binding names)
    "classes": [
        {"name": "chat", "ttft_p99_ms": 80.0, "ttft_p99_ci_ms": [70.0, 92.0],
         "slo_ttft_p99_ms": 100.0, "slo_met": True},
        {"name": "batch", "ttft_p99_ms": 620.0, "ttft_p99_ci_ms": [540.0, 700.0],
         "slo_ttft_p99_ms": 500.0, "slo_met": False},
    ],
    "pools": [
        {"config": "2xRTX-4090", "count": 4, "region": "EU27", "utilization": 0.83},
        {"config": "1xH100-PCIe", "count": 2, "region": "EU27", "utilization": 0.61},
    ],
}


class _Result:
    """A result object as the library returns them: to_dict() gives the JSON contract."""

    def __init__(self, d: dict) -> None:
        self._d = d

    def to_dict(self) -> dict:
        return self._d


def _bars(ax) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle)]


def test_fleet_composition_bars_and_labels() -> None:
    ax = plot_fleet_composition(_Result(SIM))
    bars = _bars(ax)
    assert [b.get_width() for b in bars] == [2, 4]  # sorted by configuration
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1xH100-PCIe @ EU27",
                                                           "2xRTX-4090 @ EU27"]
    assert ax.get_xlabel() == "replicas"
    assert ax.get_title() == "Fleet: 6 replicas, 10 GPUs"
    notes = [t.get_text() for t in ax.texts]
    assert "4 replicas, 8 GPUs, 83% busy" in notes


def test_fleet_composition_singular() -> None:
    ax = plot_fleet_composition([{"config": "1xH100-PCIe", "count": 1}])
    assert [t.get_text() for t in ax.texts] == ["1 replica, 1 GPU"]
    assert ax.get_title() == "Fleet: 1 replica, 1 GPU"


def test_fleet_composition_in_gpus_from_a_plan_fleet() -> None:
    plan = {"status": "optimal", "fleet": [{"config": "4xRTX-4090", "count": 3,
                                            "region": "EU27"}]}
    ax = plot_fleet_composition(plan, unit="gpus")
    assert [b.get_width() for b in _bars(ax)] == [12] and ax.get_xlabel() == "GPUs"
    with pytest.raises(InputError, match="unit"):
        plot_fleet_composition(plan, unit="racks")
    with pytest.raises(InputError, match="expected one of pools, fleet"):
        plot_fleet_composition({"classes": []})


def test_class_latency_bars_slo_and_interval() -> None:
    ax = plot_class_latency(SIM)
    bars = _bars(ax)[:2]
    assert [b.get_height() for b in bars] == [80.0, 620.0]
    assert bars[0].get_facecolor()[:3] == pytest.approx(_rgb(MET_COLOR))
    assert bars[1].get_facecolor()[:3] == pytest.approx(_rgb(MISSED_COLOR))
    assert bars[1].get_hatch() == "//" and not bars[0].get_hatch()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["chat", "batch"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["met", "missed", "SLO"]
    segs = [seg for c in ax.collections if hasattr(c, "get_segments")
            for seg in c.get_segments() if seg[0][1] == seg[1][1]]
    assert {seg[0][1] for seg in segs} >= {100.0, 500.0}
    assert "ms" in ax.get_ylabel() and "TTFT" in ax.get_ylabel()
    assert {t.get_text() for t in ax.texts} == {"SLO 100 ms", "SLO 500 ms"}
    assert ax.get_yscale() == "linear"  # 80..620 ms: no need for a log axis


def test_class_latency_from_a_frame_with_split_interval_and_wide_range() -> None:
    import pandas as pd

    frame = pd.DataFrame([  # the shape of SimulationResult.to_frame()
        {"name": "chat", "ttft_p99_ms": 40.0, "ttft_p99_ci_lo_ms": 35.0,
         "ttft_p99_ci_hi_ms": 46.0, "slo_ttft_p99_ms": 50.0, "slo_met": True},
        {"name": "batch", "ttft_p99_ms": 3000.0, "ttft_p99_ci_lo_ms": None,
         "ttft_p99_ci_hi_ms": None, "slo_ttft_p99_ms": 5000.0, "slo_met": True},
    ])
    ax = plot_class_latency(frame)
    assert ax.get_yscale() == "log"  # 40 ms beside 5 s
    from matplotlib.container import ErrorbarContainer

    (bars,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]  # one interval
    _, caps, _ = bars.lines
    assert sorted(float(c.get_ydata()[0]) for c in caps) == [35.0, 46.0]


def test_class_latency_uses_met_from_a_plan_and_compares_without_it() -> None:
    plan = {"classes": [{"name": "a", "ttft_p99_ms": 90.0, "slo_ttft_p99_ms": 100.0,
                         "met": False}]}
    (bar,) = _bars(plot_class_latency(plan))[:1]
    assert bar.get_facecolor()[:3] == pytest.approx(_rgb(MISSED_COLOR))  # the plan says missed
    bare = [{"name": "a", "ttft_p99_ms": 90.0, "slo_ttft_p99_ms": 100.0}]
    (bar,) = _bars(plot_class_latency(bare))[:1]
    assert bar.get_facecolor()[:3] == pytest.approx(_rgb(MET_COLOR))


def _rgb(hex_color: str) -> tuple[float, float, float]:
    h = hex_color.lstrip("#")
    return tuple(int(h[i:i + 2], 16) / 255 for i in (0, 2, 4))  # type: ignore[return-value]


POINTS = [
    {"g_co2_per_mtok": 50.0, "cost_per_hour_usd": 10.0, "status": "optimal"},
    {"g_co2_per_mtok": 40.0, "cost_per_hour_usd": 12.0, "status": "optimal"},
    {"g_co2_per_mtok": 35.0, "cost_per_hour_usd": 16.0, "status": "optimal"},
    {"g_co2_per_mtok": 30.0, "cost_per_hour_usd": 15.0, "status": "optimal"},
    {"g_co2_per_mtok": None, "cost_per_hour_usd": None, "status": "infeasible"},
]


def test_frontier_highlights_pareto_points_and_counts_infeasible() -> None:
    ax = plot_frontier(POINTS)
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == [30.0, 40.0, 50.0]
    assert list(line.get_ydata()) == [15.0, 12.0, 10.0]
    (dominated,) = ax.collections
    assert dominated.get_offsets().tolist() == [[35.0, 16.0]]
    assert ax.get_xlabel() == "carbon (g CO2e per 1M tokens)"
    assert ax.get_ylabel() == "cost (USD per hour)"
    assert "(not shown: 1 infeasible point)" in ax.get_title()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["Pareto-optimal plans",
                                                                   "dominated plans"]


def test_frontier_other_sweeps_and_errors() -> None:
    pts = [{"slo_ttft_p99_ms": s, "cost_per_hour_usd": 100 / s} for s in (50.0, 100.0, 200.0)]
    ax = plot_frontier(pts)
    assert ax.get_xlabel() == "P99 TTFT objective (ms)" and len(ax.collections) == 0
    with pytest.raises(InputError, match="no x column"):
        plot_frontier([{"cost_per_hour_usd": 1.0}])
    with pytest.raises(InputError, match="no feasible point"):
        plot_frontier([{"g_co2_per_mtok": None, "cost_per_hour_usd": None,
                        "status": "infeasible"}])


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=30))
def test_pareto_mask_law(pts: list[tuple[int, int]]) -> None:
    x = np.array([p[0] for p in pts], dtype=float)
    y = np.array([p[1] for p in pts], dtype=float)
    keep = pareto_mask(x, y)
    assert keep.any()
    for i in range(len(x)):
        dominated_by_kept = ((x[keep] <= x[i]) & (y[keep] <= y[i])
                             & ((x[keep] < x[i]) | (y[keep] < y[i]))).any()
        assert keep[i] != dominated_by_kept  # kept iff nothing kept dominates it


HOURS = [
    {"hour": h, "rate_rps": 10.0 + h,
     "fleet": [{"config": "1xH100-PCIe", "count": 2, "region": "EU27"},
               {"config": "2xRTX-4090", "count": 1 + h % 3, "region": "EU27"}],
     "on_demand": [{"config": "2xRTX-4090", "count": 1, "region": "EU27"}] if h >= 12 else []}
    for h in range(24)
]


def test_hourly_plan_stacks_replicas_and_shows_the_rate() -> None:
    ax = plot_hourly_plan({"status": "optimal", "hours": HOURS})
    bars = _bars(ax)
    assert len(bars) == 24 * 3  # H100 base, 4090 base, 4090 on demand
    tops = {}
    for b in bars:
        x = round(b.get_x() + b.get_width() / 2)
        tops[x] = max(tops.get(x, 0), b.get_y() + b.get_height())
    assert tops[0] == 3 and tops[13] == 2 + 2 + 1
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "1xH100-PCIe", "2xRTX-4090", "2xRTX-4090 on demand", "offered rate"]
    assert ax.get_xlabel() == "hour of day" and ax.get_ylabel() == "replicas"
    (twin,) = [a for a in ax.figure.axes if a is not ax]
    assert twin.get_ylabel() == "request rate (req/s)"
    assert list(twin.get_lines()[0].get_ydata()) == [10.0 + h for h in range(24)]


def test_hours_frame_and_a_plan_without_hours() -> None:
    df = hours_frame(HOURS)
    assert set(df["kind"]) == {"base", "on_demand"}
    assert int(df[df["hour"] == 12]["count"].sum()) == 2 + 1 + 1
    with pytest.raises(InputError, match="no hours"):
        plot_hourly_plan({"status": "optimal", "fleet": []})


def test_class_latency_draws_the_model_error_band_beside_the_interval() -> None:
    classes = [dict(c) for c in SIM["classes"]]
    classes[0]["ttft_p99_band_ms"] = [60.0, 240.0]  # reaches above chat's 100 ms SLO
    ax = plot_class_latency(classes)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "met", "missed", "SLO", "model error band (80%)"]
    vertical = sorted((float(s[0][1]), float(s[1][1])) for c in ax.collections
                      if hasattr(c, "get_segments") for s in c.get_segments()
                      if s[0][0] == s[1][0])
    assert (60.0, 240.0) in vertical and (70.0, 92.0) in vertical  # band and CI, both drawn
    assert ax.get_ylim()[1] >= 240.0  # the band's top is on the axis
    # without a band nothing is added: the legend stays as it was
    plain = plot_class_latency(SIM)
    assert "model error band (80%)" not in [t.get_text() for t in plain.get_legend().get_texts()]


def test_fleet_title_counts_spot_replicas_and_spares() -> None:
    fleet = [{"pool": "1xH100-PCIe@EU27/150ms", "config": "1xH100-PCIe", "count": 2},
             {"pool": "1xRTX-4090@EU27~spot/2s", "config": "1xRTX-4090", "count": 6,
              "market": "spot", "spare": 2}]
    ax = plot_fleet_composition(fleet)
    assert ax.get_title() == "Fleet: 8 replicas (6 spot, 2 spares), 8 GPUs"
    assert plot_fleet_composition(fleet[:1]).get_title() == "Fleet: 2 replicas, 2 GPUs"


def test_hourly_plan_title_says_when_spot_replicas_are_in_the_bars() -> None:
    hours = [{"hour": h, "rate_rps": 5.0, "fleet": [
        {"config": "1xRTX-4090", "region": "EU27", "count": 2},
        {"config": "1xRTX-4090", "region": "EU27", "count": 1 + h, "market": "spot"}]}
        for h in range(3)]
    ax = plot_hourly_plan({"hours": hours})
    assert ax.get_title() == ("Hourly plan: replicas per configuration (spot included: up to 3 "
                              "an hour)")
    assert list(hours_frame(hours)["market"]) == ["on-demand", "spot"] * 3
    assert plot_hourly_plan({"hours": HOURS}).get_title() == \
        "Hourly plan: replicas per configuration"


def _drawn_cost(ax, x: float) -> float:
    """The cost the frontier's line shows at ``x``, strictly between two of its points."""
    v = ax.get_lines()[0].get_path().vertices
    (y,) = {float(b[1]) for a, b in zip(v[:-1], v[1:], strict=True)
            if a[1] == b[1] and a[0] < x < b[0]}
    return y


def test_the_frontier_line_never_shows_a_cost_no_verified_plan_has_in_between() -> None:
    """Between two points the line shows the cost of the plan that serves the values in
    between: a plan verified at a carbon cap serves every looser cap (to its right); one
    verified at a confidence serves every lower confidence (to its left). A line stepping the
    other way would say, e.g., that confidence 0.8 costs what the plan for 0.66 costs."""
    carbon = plot_frontier([{"g_co2_per_mtok": g, "cost_per_hour_usd": c, "pareto": True}
                            for g, c in ((2.0, 5.0), (4.0, 3.0), (8.0, 1.5))])
    assert _drawn_cost(carbon, 3.0) == 5.0 and _drawn_cost(carbon, 6.0) == 3.0
    conf = plot_frontier([{"confidence": p, "cost_per_hour_usd": c, "pareto": True}
                          for p, c in ((0.66, 1.375), (0.83, 2.125), (0.99, 7.5))],
                         x="confidence")
    assert _drawn_cost(conf, 0.8) == 2.125 and _drawn_cost(conf, 0.9) == 7.5
