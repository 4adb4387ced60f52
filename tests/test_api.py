"""The notebook-facing API: top-level names, result frames, HTML views, plots, --plot files."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import fleetplan  # noqa: E402

MODEL = "DeepSeek-R1-Distill-Qwen-14B"


def _scenario() -> fleetplan.Scenario:
    return fleetplan.scenario_from_dict({
        "model": MODEL,
        "classes": [{"name": "chat", "rate_rps": 2, "slo": {"ttft_p99_ms": 400}},
                    {"name": "batch", "rate_rps": 1, "slo": {"ttft_p99_ms": 3000}}],
        "fleet": [{"config": "1xH100-PCIe", "count": 1, "region": "EU27"},
                  {"config": "2xRTX-4090", "count": 1, "region": "EU27"}],
        "routing": "least-outstanding",
        "sim": {"duration_s": 120, "warmup_s": 20, "seed": 3, "replications": 2},
    }, source="test")


def test_public_names() -> None:
    for name in ["load_profiles", "predict", "replay", "steady_state", "replica_params",
                 "Scenario", "load_scenario", "simulate", "solve", "frontier", "read_trace",
                 "fit_trace", "FleetplanError"]:
        assert hasattr(fleetplan, name), name
        assert name in fleetplan.__all__


def test_predict_burst_and_steady() -> None:
    burst = fleetplan.predict(MODEL, "1xH100-PCIe", rate=4, seeds=(0, 1))
    frame = burst.to_frame()
    assert set(frame["metric"]) >= {"ttft_p99_ms", "request_throughput"}
    assert burst["request_throughput"] <= 4.0 * 1.3  # never far above the offered burst rate
    html = burst._repr_html_()
    assert "1xH100-PCIe" in html and "burst" in html and "<table" in html
    steady = fleetplan.predict(MODEL, "1xH100-PCIe", rate=2, steady=True, duration_s=120,
                               warmup_s=20)
    assert steady.stable and steady.ttft_p99_ms >= steady.ttft_p50_ms


def test_simulation_result_frame_html_and_plots() -> None:
    res = fleetplan.simulate(_scenario())
    frame = res.to_frame()
    assert list(frame["name"]) == ["chat", "batch"]
    assert {"ttft_p99_ms", "slo_ttft_p99_ms", "ttft_p99_ci_lo_ms"} <= set(frame.columns)
    assert MODEL in res._repr_html_() and "<table" in res._repr_html_()
    ax = res.plot()
    assert ax.get_ylabel().endswith("(ms)") and len(ax.patches) >= 2
    ax = res.plot(kind="fleet")
    assert ax.get_xlabel() or ax.get_ylabel()


def test_cli_plot_files(cli, tmp_path: Path) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text(_scenario().model_dump_json(exclude_unset=True))
    png = tmp_path / "sim.png"
    res = cli("simulate", str(scenario), "--quiet", "--plot", str(png), "--format", "json")
    assert res.exit_code == 0, res.stderr
    assert png.read_bytes()[:4] == b"\x89PNG"
    svg = tmp_path / "sim.svg"
    res = cli("simulate", str(scenario), "--quiet", "--plot", str(svg), "--plot-kind", "fleet")
    assert res.exit_code == 0, res.stderr
    assert "<svg" in svg.read_text()
    bad = cli("simulate", str(scenario), "--quiet", "--plot", str(png), "--plot-kind", "pie")
    assert bad.exit_code == 2 and "plot kind 'pie'" in bad.stderr
