"""The notebook-facing API: top-level names, result frames, HTML views, plots, --plot files."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest
from hypothesis import given
from hypothesis import strategies as st

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
    assert isinstance(burst, fleetplan.ReplayResult)
    frame = burst.to_frame()
    assert set(frame["metric"]) >= {"ttft_p99_ms", "request_throughput"}
    assert burst["request_throughput"] <= 4.0 * 1.3  # never far above the offered burst rate
    html = burst._repr_html_()
    assert "1xH100-PCIe" in html and "burst" in html and "<table" in html
    steady = fleetplan.predict_steady(MODEL, "1xH100-PCIe", rate=2, duration_s=120,
                                      warmup_s=20)
    assert isinstance(steady, fleetplan.SteadyResult)
    assert steady.status is fleetplan.SteadyStatus.STABLE
    assert steady.stable and steady.ttft_p99_ms >= steady.ttft_p50_ms


def test_the_old_steady_flag_still_answers_the_same_with_a_warning() -> None:
    # extend, never break: predict(..., steady=True) returns what predict_steady does, once
    # more this release, and says what to call instead
    kw = {"rate": 2.0, "duration_s": 60, "warmup_s": 10, "seed": 3}
    with pytest.warns(DeprecationWarning, match="predict_steady"):
        old = fleetplan.predict(MODEL, "1xH100-PCIe", steady=True, **kw)
    assert old == fleetplan.predict_steady(MODEL, "1xH100-PCIe", **kw)
    with pytest.raises(TypeError, match="predict_steady"):  # a burst has no duration
        fleetplan.predict(MODEL, "1xH100-PCIe", rate=2.0, duration_s=60)


@pytest.mark.parametrize(("fields", "message"), [
    ({"burstiness": 0.0}, "burstiness 0.0 must be > 0"),
    ({"steady": True, "seeds": 2}, "seeds applies to a burst replay, not to steady"),
    ({"steady": True, "warm_prefix_cache": True}, "(use prefix_cache_hit 1)"),
    ({"prefix_cache_hit": 0.5}, "prefix_cache_hit applies to steady"),
    ({"steady": True, "prefix_cache_hit": 1.5}, "prefix_cache_hit(=1.5) must be a number"),
    ({"num_prompts": 100_001}, "at most 100,000 requests in a burst"),
    ({"seeds": 0}, "seeds 0 must be a whole number 1 to 100"),
    ({"arrival_seed": 2**32}, "arrival_seed 4294967296 must be a whole number 0 to"),
    ({"engine_version": "0.0.1"}, "0.0.1"),
])
def test_a_notebook_gets_the_clis_checks_in_its_own_names(fields, message) -> None:
    with pytest.raises(fleetplan.InputError) as info:
        fleetplan.PredictRequest(config="1xH100-PCIe", rate=4.0, **fields)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert "--" not in str(info.value).split(":")[0]  # the field, not a flag


_BURST_ONLY = {"num_prompts": 50, "seeds": 2, "arrival_seed": 42, "max_concurrency": 8,
               "warm_prefix_cache": True}


@given(st.sets(st.sampled_from(sorted(_BURST_ONLY)), min_size=1))
def test_a_burst_takes_its_options_and_sustained_load_refuses_each(chosen) -> None:
    given_options = {k: _BURST_ONLY[k] for k in chosen}
    burst = fleetplan.PredictRequest(config="1xH100-PCIe", rate=4.0, **given_options)
    assert all(getattr(burst, k) == v for k, v in given_options.items())
    with pytest.raises(fleetplan.InputError, match="applies to a burst replay") as info:
        fleetplan.PredictRequest(config="1xH100-PCIe", rate=4.0, steady=True, **given_options)
    assert str(info.value).split(" ")[0] in chosen  # names one of the options given


def test_run_prediction_is_what_the_cli_prints(cli) -> None:
    import json

    args = ("-m", MODEL, "-c", "2xRTX-4090", "-r", "4", "--num-prompts", "40", "--seeds", "1")
    res = cli("predict", *args, "--format", "json")
    assert res.exit_code == 0, res.stderr
    pred = fleetplan.run_prediction(fleetplan.PredictRequest(
        model=MODEL, config="2xRTX-4090", rate=4.0, num_prompts=40, seeds=1))
    assert json.loads(json.dumps(pred.to_dict())) == json.loads(res.stdout)
    assert isinstance(pred.result, fleetplan.ReplayResult) and pred.result.num_prompts == 40


def test_a_request_without_a_model_names_both_ways_to_give_one() -> None:
    req = fleetplan.PredictRequest(config="1xH100-PCIe", rate=4.0)
    with pytest.raises(fleetplan.InputError, match="model or model_config is required"):
        fleetplan.run_prediction(req)


def test_the_other_commands_requests_check_when_built(tmp_path: Path) -> None:
    from fleetplan.bench.sweep import SweepRequest, prepare_sweep

    with pytest.raises(fleetplan.InputError, match="host_time_us and fit_host_time"):
        fleetplan.CalibrateRequest(host_time_us=50.0, fit_host_time=True)
    with pytest.raises(fleetplan.InputError, match="max_nfev 4 must be from 5 to 1000"):
        fleetplan.CalibrateRequest(max_nfev=4)
    with pytest.raises(fleetplan.InputError, match="fit_seeds sets the seeds of cv's refits"):
        fleetplan.ValidateRequest(fit_seeds=(2, 3))
    with pytest.raises(fleetplan.InputError, match="give both input_len and output_len"):
        prepare_sweep(SweepRequest(
            endpoint="http://127.0.0.1:9", model="m", input_len="128"))
    with pytest.raises(fleetplan.InputError, match="^seed: "):
        prepare_sweep(SweepRequest(
            endpoint="http://127.0.0.1:9", model="m", seed=-1))
    sweep = prepare_sweep(SweepRequest(
        endpoint="http://127.0.0.1:9", model="m", rates=(8.0, 2.0), num_prompts=5))
    assert sweep.rates == (8.0, 2.0) and len(sweep.requests) == 5  # nothing sent yet


def test_the_two_per_class_records_have_distinct_public_names() -> None:
    import fleetplan.fleet
    import fleetplan.optimize

    assert fleetplan.SimulatedClass is not fleetplan.PlannedClass
    assert fleetplan.PlannedClass is fleetplan.optimize.ClassResult
    assert fleetplan.fleet.ClassResult is fleetplan.SimulatedClass  # the old name, kept
    assert "split" in fleetplan.PlannedClass.__dataclass_fields__
    assert "ttft_p99_ci_method" in fleetplan.SimulatedClass.__dataclass_fields__


def test_the_public_names_are_one_table_and_each_is_in_the_api_reference() -> None:
    assert set(fleetplan.__all__) == set(fleetplan._LAZY) | {"__version__"}
    for name in ("PlanStatus", "SteadyResult", "ReplayResult", "InputError", "PredictRequest"):
        assert name in fleetplan.__all__
    assert issubclass(fleetplan.InputError, fleetplan.FleetplanError)
    page = (Path(__file__).resolve().parents[1] / "docs" / "api-reference.md").read_text()
    for name in fleetplan.__all__:
        if name != "__version__":
            assert f"### `{name}`" in page, name


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


def test_the_profile_table_selects_and_prices_as_asked() -> None:
    base = fleetplan.run_economics_table(fleetplan.EconomicsRequest(model=MODEL, gpu="H100 PCIe"))
    assert len(base) and set(base["model"]) == {MODEL} and set(base["gpu"]) == {"H100-PCIe"}
    dear = fleetplan.run_economics_table(fleetplan.EconomicsRequest(
        model=MODEL, gpu="H100 PCIe", prices={"H100-PCIe": 4.0}))
    assert set(dear["price_usd_per_gpu_hour"]) == {4.0}
    # a run's cost is its GPU-hours at the price: price x GPUs x duration / 3600
    want = 4.0 * dear["gpu_count"] * dear["duration_s"] / 3600
    assert (abs(dear["cost_per_run_usd"] - want) <= 1e-9 * want).all()
