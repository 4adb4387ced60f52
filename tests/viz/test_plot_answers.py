"""The plots answer their question (issue 14): the frontier names its class and its fleets and
keeps its cost axis from zero, a plan's latency plot names fleet and cost on a readable axis,
the scaling diagonal is straight, counts have whole-number ticks, SLOs are drawn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.lines import Line2D

from fleetplan.viz import (
    plot_class_latency,
    plot_fleet_composition,
    plot_frontier,
    plot_hourly_plan,
    plot_latency_vs_rate,
    plot_scaling,
)

PLAN = {  # the shape of `fleetplan solve --format json`
    "fleet": [{"pool": "1xH100-PCIe@EU27/150ms", "config": "1xH100-PCIe", "region": "EU27",
               "tier_ttft_p99_ms": 150.0, "count": 1},
              {"pool": "1xH100-PCIe@EU27/2000ms", "config": "1xH100-PCIe", "region": "EU27",
               "tier_ttft_p99_ms": 2000.0, "count": 3}],
    "cost_per_hour_usd": 8.0, "g_co2_per_mtok": 6.67,
    "classes": [
        {"name": "chat", "ttft_p99_ms": 100.9, "ttft_p99_ci_ms": [84.1, 117.7],
         "slo_ttft_p99_ms": 150.0, "met": True},
        {"name": "batch", "ttft_p99_ms": 1126.2, "ttft_p99_ci_ms": [907.9, 1344.4],
         "slo_ttft_p99_ms": 2000.0, "met": True},
    ],
}


def _texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_frontier_over_an_slo_names_the_class_labels_fleets_and_starts_cost_at_zero() -> None:
    df = pd.DataFrame({
        "slo_ttft_p99_ms": [75.0, 150.0, 300.0], "slo_class": ["chat"] * 3,
        "cost_per_hour_usd": [4.5, 4.25, 4.0], "pareto": [True, True, True],
        "label": ["3x1xH100-PCIe", "2x1xH100-PCIe + 1x2xRTX-4090", "2x1xH100-PCIe"]})
    ax = plot_frontier(df, x="slo_ttft_p99_ms")
    assert ax.get_xlabel() == "P99 TTFT objective of class chat (ms)"
    assert set(_texts(ax)) == set(df["label"])
    lo, hi = ax.get_ylim()
    assert lo == 0 and hi >= 4.5  # 4.0 vs 4.5 is 11%, not the full height of the plot
    assert _texts(plot_frontier(df, x="slo_ttft_p99_ms", annotate=False)) == []


def test_a_plans_latency_plot_names_fleet_and_cost_on_a_log_axis() -> None:
    ax = plot_class_latency(PLAN)
    assert ax.get_yscale() == "log"  # 100 ms beside 2000 ms
    title = ax.get_title()
    assert "fleet 4x1xH100-PCIe: $8.00/h" in title and "6.7 g CO2e/Mtok (in+out)" in title
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert labels and all("^" not in s and "10^" not in s for s in labels)
    # the SLO of every class is drawn and said
    assert {"SLO 150 ms", "SLO 2000 ms"} <= set(_texts(ax))


def test_fleet_composition_labels_pools_and_counts_in_whole_numbers() -> None:
    ax = plot_fleet_composition(PLAN)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["1xH100-PCIe@EU27/150ms", "1xH100-PCIe@EU27/2000ms"]
    ax.figure.canvas.draw()
    assert all(float(t).is_integer() for t in ax.get_xticks())


def test_hourly_plan_counts_in_whole_numbers() -> None:
    hours = [{"hour": h, "rate_rps": 1.0 + h, "fleet": [{"config": "1xH100-PCIe", "count": 1,
                                                        "region": "EU27"}]} for h in range(4)]
    ax = plot_hourly_plan(hours)
    ax.figure.canvas.draw()
    assert all(float(t).is_integer() for t in ax.get_yticks())


def test_scaling_diagonal_is_straight_on_log_axes() -> None:
    rates = [1.0, 4.0, 16.0, 64.0]
    df = pd.DataFrame({"config": ["1xH100-PCIe"] * 4, "request_rate": rates,
                       "request_throughput": [1.0, 3.9, 12.0, 14.0]})
    ax = plot_scaling(df)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    diag = next(line for line in ax.get_lines() if line.get_label() == "achieved = target")
    ax.figure.canvas.draw()
    pts = ax.transData.transform(np.column_stack(diag.get_data()))
    slopes = np.diff(pts[:, 1]) / np.diff(pts[:, 0])
    assert np.allclose(slopes, slopes[0], rtol=1e-6)  # one straight line on screen


def test_latency_vs_rate_draws_the_slo_when_given() -> None:
    df = pd.DataFrame({"config": ["1xH100-PCIe"] * 3, "request_rate": [1.0, 4.0, 16.0],
                       "ttft_p99_ms": [60.0, 90.0, 400.0]})
    ax = plot_latency_vs_rate(df, slo_ms=150.0)
    slo = [line for line in ax.get_lines() if line.get_label() == "SLO 150 ms"]
    assert len(slo) == 1 and isinstance(slo[0], Line2D)
    assert set(slo[0].get_ydata()) == {150.0}
    assert not [line for line in plot_latency_vs_rate(df).get_lines()
                if str(line.get_label()).startswith("SLO")]


@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_figure_bytes_are_deterministic_and_salted(fmt: str) -> None:
    from fleetplan.viz.style import figure_bytes, offscreen_axes

    def draw():
        return plot_class_latency(PLAN, ax=offscreen_axes())

    assert figure_bytes(draw(), fmt) == figure_bytes(draw(), fmt)
    if fmt == "svg":
        a = figure_bytes(draw(), fmt, salt="a").decode()
        b = figure_bytes(draw(), fmt, salt="b").decode()
        assert a != b and "<dc:date>" not in a


def test_solve_plot_of_a_plan_names_fleet_and_cost(tmp_path) -> None:
    """What ``fleetplan solve --plot`` draws: ``Plan.plot()`` (latency, the default)."""
    from fleetplan.cli._plot import save_result_plot
    from fleetplan.optimize.plan import ClassResult, FleetEntry, Plan, PlanStatus, SolverReport

    h100 = FleetEntry("1xH100-PCIe", 2, "EU27", 150.0)
    plan = Plan(PlanStatus.optimal, (h100,), 4.0, 0.159, 6.7,
                (ClassResult("chat", 4.0, 150.0, 100.9, True, {h100.pool: 1.0},
                             ttft_p99_ci_ms=(84.1, 117.7)),
                 ClassResult("batch", 6.0, 2000.0, 432.6, True, {h100.pool: 1.0})),
                SolverReport("CBC", "optimal", None, 0.01, 1, 10.0), True)
    ax = plan.plot()
    assert "fleet 2x1xH100-PCIe: $4.00/h" in ax.get_title()
    assert ax.get_yscale() == "log"
    svg = tmp_path / "p.svg"
    save_result_plot(plan, svg)
    assert "fleet 2x1xH100-PCIe: $4.00/h" in svg.read_text(encoding="utf-8")


def test_frontier_result_plot_over_slo_names_every_class_and_fleets() -> None:
    """What ``fleetplan frontier --sweep slo --plot`` draws: ``Frontier.plot()``."""
    from fleetplan.optimize.frontier import Frontier, FrontierPoint, Sweep
    from fleetplan.optimize.plan import ClassResult, FleetEntry, Plan, PlanStatus, SolverReport

    def plan(scale: float, fleet: tuple[FleetEntry, ...], cost: float) -> Plan:
        return Plan(PlanStatus.optimal, fleet, cost, 0.1, 10.0,
                    (ClassResult("chat", 4.0, 150.0 * scale, 100.0, True, {}),
                     ClassResult("batch", 6.0, 2000.0 * scale, 900.0, True, {})),
                    SolverReport("CBC", "optimal", None, 0.01, 1, 10.0), True)

    fr = Frontier(Sweep.slo, "SLO scale", "x", (
        FrontierPoint(0.5, plan(0.5, (FleetEntry("1xH100-PCIe", 3, "EU27"),), 6.0), True),
        FrontierPoint(1.0, plan(1.0, (FleetEntry("1xH100-PCIe", 2, "EU27"),), 4.0), True)))
    ax = fr.plot()
    # every class's SLO is scaled: the axis is the scale, with each class's SLO at 1x
    assert ax.get_xlabel() == ("SLO scale (x every class's P99 TTFT SLO; 1x: chat 150 ms, "
                               "batch 2000 ms)")
    assert list(ax.get_lines()[0].get_xdata()) == [0.5, 1.0]
    assert set(_texts(ax)) == {"3x1xH100-PCIe", "2x1xH100-PCIe"}
    assert ax.get_ylim()[0] == 0
