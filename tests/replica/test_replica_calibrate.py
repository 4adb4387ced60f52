"""Calibration recovers parameters from runs the model generated; inconsistent runs are flagged."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from fleetplan.catalog import HardwareConfig, bundled_catalog
from fleetplan.errors import ModelError
from fleetplan.profiles.store import load_profiles
from fleetplan.replica.calibrate import FIT_SEEDS, fit_config
from fleetplan.replica.priors import prior_params
from fleetplan.replica.runs import (
    MeasuredRun,
    bunched_itl,
    collapsed_delivery,
    flag_runs,
    predict_run,
    runs_from_frame,
)

MODEL, CONFIG = "DeepSeek-R1-Distill-Qwen-1.5B", "1xH100-PCIe"


def _synthetic_runs(truth) -> list[MeasuredRun]:
    runs = []
    for i, rate in enumerate((1.0, 4.0, 16.0, 32.0)):
        run = MeasuredRun(run_id=f"syn{i}", model=MODEL, config=CONFIG, gpu="H100-PCIe",
                          gpu_count=1, request_rate=rate, num_prompts=80, burstiness=1.0,
                          total_input_tokens=80 * 208, total_output_tokens=80 * 150,
                          series_max_rate=32.0)
        meas = predict_run(truth, run, seeds=FIT_SEEDS)
        runs.append(MeasuredRun(**{**run.__dict__, "measured": meas}))
    return runs


def test_calibration_recovers_known_parameters() -> None:
    prior = prior_params(bundled_catalog().model(MODEL), HardwareConfig.parse(CONFIG))
    truth = prior.with_(c_step=prior.c_step * 1.4, overhead_s=0.008,
                        c_prefill_tok=prior.c_prefill_tok * 0.8, calibrated=True)
    fit = fit_config(_synthetic_runs(truth), prior=prior, max_nfev=60)
    got = fit.params
    assert math.isclose(got.c_step, truth.c_step, rel_tol=0.05)
    assert math.isclose(got.overhead_s, truth.overhead_s, rel_tol=0.15)
    # the runs are reproduced (the prior penalty alone keeps the loss above zero)
    for r in fit.runs:
        assert all(abs(e) < 10 for m, e in r.error_pct.items() if m.startswith(("tt", "tp"))), r
    assert got.calibrated and all(not r.flagged for r in fit.runs)


def test_a_median_only_fit_is_not_moved_by_a_host_s_stalls_in_the_ttft_tails() -> None:
    """A host that stalls some first tokens (the live CPU server: runs of consecutive requests
    0.1-2 s late at any rate) leaves the engine's TTFT median but multiplies the mean, p90 and
    p99; fitted to every figure, the overhead chases the stalls; fitted to the medians alone
    (``ttft_median_only``), it is the engine's."""
    prior = prior_params(bundled_catalog().model(MODEL), HardwareConfig.parse(CONFIG))
    truth = prior.with_(c_step=prior.c_step * 1.4, overhead_s=0.008,
                        c_prefill_tok=prior.c_prefill_tok * 0.8, calibrated=True)
    stalled = [MeasuredRun(**{**r.__dict__, "measured": {
        **r.measured, **{m: r.measured[m] * f for m, f in
                         (("ttft_mean_ms", 3.0), ("ttft_p90_ms", 6.0), ("ttft_p99_ms", 10.0))}}})
        for r in _synthetic_runs(truth)]
    chased = fit_config(stalled, prior=prior, max_nfev=60)
    median = fit_config(stalled, prior=prior, max_nfev=60, ttft_median_only=True)
    assert median.ttft_median_only and not chased.ttft_median_only
    # (the medians alone trade a little overhead for prefill cost: 6.9 ms here, truth 8)
    assert math.isclose(median.params.overhead_s, truth.overhead_s, rel_tol=0.25)
    assert chased.params.overhead_s > 3 * truth.overhead_s  # 64 ms
    for r in median.runs:  # the medians and the token times are the engine's
        assert abs(r.error_pct["ttft_p50_ms"]) < 10 and abs(r.error_pct["tpot_p50_ms"]) < 10, r


def _frame(ttft_by_rate: dict[float, float]) -> pd.DataFrame:
    return pd.DataFrame([{"run_id": f"r{rate:g}", "model": "m", "config": "1xRTX-4090",
                          "request_rate": rate, "ttft_p50_ms": v}
                         for rate, v in ttft_by_rate.items()])


def test_ttft_falling_as_load_rises_is_flagged_with_the_reason() -> None:
    flags = flag_runs(_frame({1.0: 1200.0, 4.0: 220.0, 16.0: 200.0, 32.0: 1600.0}))
    assert set(flags) == {"r1"}
    assert "1 req/s" in flags["r1"] and "work-conserving" in flags["r1"]


def test_a_concurrency_sweep_is_ordered_by_its_cap_on_requests_in_flight() -> None:
    # every run of a concurrency sweep is sent at inf req/s: its load is the client's cap
    def sweep(ttft_by_cap: dict[int, float]) -> pd.DataFrame:
        return pd.DataFrame([{"run_id": f"c{c}", "model": "m", "config": "1xH100-PCIe",
                              "request_rate": math.inf, "max_concurrency": c,
                              "ttft_p50_ms": t} for c, t in ttft_by_cap.items()])

    flags = flag_runs(sweep({1: 900.0, 4: 120.0, 16: 150.0, 64: 600.0}))
    assert set(flags) == {"c1"}
    assert "900 ms at 1 in flight is 7.5x the 120 ms at 4 in flight" in flags["c1"]
    assert flag_runs(sweep({1: 60.0, 4: 70.0, 16: 150.0, 64: 600.0})) == {}


def test_consistent_series_is_not_flagged() -> None:
    assert flag_runs(_frame({1.0: 20.0, 4.0: 21.0, 16.0: 24.0, 32.0: 40.0})) == {}


def test_bundled_store_flags_the_tensor_parallel_4090_low_rate_runs_only() -> None:
    runs = runs_from_frame(load_profiles().frame)
    flagged = {(r.config, r.request_rate) for r in runs if r.flagged}
    assert ("2xRTX-4090", 1.0) in flagged and ("8xRTX-4090", 1.0) in flagged
    assert not any(cfg.startswith("1x") for cfg, _ in flagged)
    assert all(r.flag_reason for r in runs if r.flagged)


def test_tails_that_fall_as_load_rises_are_flagged_even_when_the_median_does_not() -> None:
    frame = pd.DataFrame([
        {"run_id": f"r{rate:g}", "model": "m", "config": "8xRTX-4090", "request_rate": rate,
         "ttft_p50_ms": p50, "ttft_p90_ms": p90, "ttft_p99_ms": p99}
        for rate, p50, p90, p99 in ((4.0, 93.0, 215.0, 753.0), (16.0, 145.0, 221.0, 266.0),
                                    (32.0, 6493.0, 11708.0, 12212.0))])
    flags = flag_runs(frame)
    assert set(flags) == {"r4"}
    assert flags["r4"].startswith("TTFT p99 753 ms at 4 req/s")


def test_an_itl_median_far_below_the_time_per_token_is_not_believed() -> None:
    # a server or client that delivers several tokens per event: most gaps ~0, TPOT intact
    assert bunched_itl(0.006, 1.90) is not None and "bunches" in bunched_itl(0.006, 1.90)
    assert bunched_itl(1.0, 1.90) is None  # an ITL median half the TPOT is ordinary (GPU: 0.52)
    assert bunched_itl(math.nan, 1.90) is None and bunched_itl(0.006, math.nan) is None
    store = load_profiles().frame
    base = store.iloc[[0, 1]].copy()
    base["run_id"] = ["ok", "bunched"]
    base.loc[base.index[1], "itl_p50_ms"] = 0.01 * float(base.iloc[1]["tpot_p50_ms"])
    ok, bad = runs_from_frame(base)
    assert "itl_p50_ms" in ok.measured and ok.excluded == ()
    assert "itl_p50_ms" not in bad.measured and not bad.flagged  # only that metric goes
    assert [m for m, _ in bad.excluded] == ["itl_p50_ms"] and "tpot_p50_ms" in bad.measured


def test_no_bundled_gpu_run_has_its_itl_median_left_out() -> None:
    assert all(r.excluded == () for r in runs_from_frame(load_profiles().frame))


def test_calibrate_names_the_itl_median_it_left_out(tmp_path, cli) -> None:
    import json

    from fleetplan.profiles.store import ProfileStore

    frame = load_profiles().frame
    runs = frame[(frame["model"] == MODEL) & (frame["config"] == CONFIG)].copy()
    i = runs.index[runs["request_rate"] == 4.0][0]
    runs.loc[i, "itl_p50_ms"] = 0.005 * float(runs.loc[i, "tpot_p50_ms"])
    store = ProfileStore(runs).save(tmp_path / "store.csv")
    args = ("calibrate", "--store", str(store), "--max-nfev", "5", "--jobs", "1", "--quiet",
            "--out", str(tmp_path / "cal.json"))
    res = cli(*args, "--format", "json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert [(e["request_rate"], e["metric"]) for e in out["excluded"]] == [(4.0, "itl_p50_ms")]
    assert "bunches" in out["excluded"][0]["reason"] and out["flagged"] == []
    table = cli(*args)
    assert table.exit_code == 0 and "left out:" in table.stdout and "4 req/s itl_p50_ms" in (
        " ".join(table.stdout.split()))


def test_a_run_whose_replies_were_read_whole_keeps_only_its_throughput() -> None:
    # loaded 2-core CPU server (docs/live-validation.md): most replies reached the client in one
    # read, so TPOT p50 and ITL p50 were both ~0.004 ms (the ITL rule cannot see it) against
    # ~2 ms in the configuration's other runs, and TTFT was the read of the last token
    assert collapsed_delivery(0.004, 2.08) is not None and "whole" in collapsed_delivery(
        0.004, 2.08)
    assert collapsed_delivery(0.3, 2.08) is None  # a third of the quartile: ordinary (GPU: 0.25)
    assert collapsed_delivery(math.nan, 2.08) is None
    # every run of a session collapsed (no reference left): 10,000 tokens/s for one stream is
    # read whole whatever the others say (the GPU store's fastest TPOT p50 is 4.07 ms)
    assert "0.1 ms" in (collapsed_delivery(0.004, 0.004) or "")
    assert collapsed_delivery(0.004, math.nan) is not None
    assert collapsed_delivery(0.2, 0.2) is None
    rows = [{"run_id": f"r{rate:g}", "model": MODEL, "config": CONFIG, "gpu": "H100-PCIe",
             "gpu_count": 1, "request_rate": rate, "num_prompts": 100, "burstiness": 1.0,
             "total_input_tokens": 6400, "total_output_tokens": 6400, "source_file": "x",
             "source_line": i, "request_throughput": rate * 0.98, "output_throughput": rate * 63,
             "ttft_mean_ms": ttft, "ttft_p50_ms": ttft, "ttft_p90_ms": 2 * ttft,
             "ttft_p99_ms": 3 * ttft, "tpot_p50_ms": tpot, "itl_p50_ms": tpot * 0.9}
            for i, (rate, ttft, tpot) in enumerate(((24.0, 30.0, 3.9), (12.0, 25.0, 2.6),
                                                    (6.0, 24.0, 2.3), (3.0, 520.0, 0.004)))]
    runs = {r.request_rate: r for r in runs_from_frame(pd.DataFrame(rows))}
    whole = runs[3.0]
    assert sorted(m for m, _ in whole.excluded) == sorted(
        ["ttft_mean_ms", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms",
         "itl_p50_ms"])
    assert set(whole.measured) == {"request_throughput", "output_throughput"}
    # its 520 ms TTFT (the last token's read) does not flag it as a TTFT falling with load
    assert not whole.flagged and not any(r.flagged or r.excluded for r in runs.values()
                                         if r is not whole)


def test_a_fit_that_misses_its_own_runs_is_refused_naming_the_figure() -> None:
    prior = prior_params(bundled_catalog().model(MODEL), HardwareConfig.parse(CONFIG))
    runs = _synthetic_runs(prior.with_(calibrated=True))
    # throughput three times what the runs' own send times allow: no parameters reproduce it
    bad = [MeasuredRun(**{**r.__dict__, "measured": {
        **r.measured, "request_throughput": 3 * r.measured["request_throughput"]}})
        for r in runs]
    with pytest.raises(ModelError, match=rf"{MODEL} on {CONFIG} refused: .*request_throughput "
                                         r"at 0\.3\d*x the measured value \(median over the 4 "
                                         r"runs it was fitted to"):
        fit_config(bad, prior=prior, max_nfev=8)
    # one run (a sweep whose other runs were left out): one run, and still one line
    with pytest.raises(ModelError, match=r"median over the 1 run it was fitted to; .*measure "
                                         r"again on a quiet machine$"):
        fit_config(bad[:1], prior=prior, max_nfev=8)
    # runs with no believable latency figure at all leave nothing to fit the step time to
    untimed = [MeasuredRun(**{**r.__dict__, "measured": {
        "request_throughput": r.measured["request_throughput"]}}) for r in runs]
    # (a loaded host delivers a CPU server's replies whole: the refusal says what to do, and
    # the live measure-next test measures again on it)
    with pytest.raises(ModelError, match="refused: none of its 4 usable runs .*measure again "
                                         "on a quiet machine, with nothing buffering"):
        fit_config(untimed, prior=prior, max_nfev=8)


def test_lengths_that_cannot_add_up_say_why() -> None:
    """'cannot spread 14 tokens over 5 requests within bounds' named no bound: the refusal says
    which (the length model's shortest reply, or the requests' caps) and what it adds up to."""
    import numpy as np

    from fleetplan.errors import InputError
    from fleetplan.replica.protocol import match_total

    with pytest.raises(InputError, match=r"^cannot spread 14 tokens over 5 requests: each takes "
                                         r"at least 4, the length model's shortest \(20 in all\)$"):
        match_total(np.ones(5, dtype=np.int64), 14, 4, 100)
    with pytest.raises(InputError, match=r"hold 50 in all$"):
        match_total(np.ones(5, dtype=np.int64), 60, 1, 10)
    assert match_total(np.array([1, 2, 3]), 12, 1, 10).sum() == 12
