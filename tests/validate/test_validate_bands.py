"""`validate --format json` gives every uncalibrated metric its 80% band (issue 41, item 4):
``band_80pct: [lo, hi]`` per metric row and ``band_coverage`` (how many measured values the
bands held), so a planner sees on their own runs whether the bands are honest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetplan.validate.bands import error_table
from fleetplan.validate.records import MetricRow, RunRecord, ValidationResult, band_coverage

STUDY_4QPS = "vllm_200prompts4qps_DeepSeek-R1-Distill-Qwen-14B_sharegpt_1xNVIDIA-H100-PCIe.json"


def test_an_uncalibrated_run_carries_bands_from_the_error_table(cli, foreign_run) -> None:
    # 1xL40S is not calibrated: its prediction is the spec path. The L40S was never measured
    # here, and others' runs hold no L40S either: its bands are read from the errors of every
    # run others measured on their own GPUs (the error table's external fold, judged
    # leave-one-dataset-out in docs/validation.md), TTFT p99 included
    out = json.loads(cli("validate", str(foreign_run()), "--gpu", "L40S",
                         "--gpu-count", "1", "--format", "json").stdout)
    run = out["runs"][0]
    assert run["calibrated"] is False
    table = error_table()
    external = table.folds["external"]["all"]
    assert "L40S" not in table.folds["external"]
    for metric, q in (("request_throughput", external["request_throughput"]),
                      ("ttft_p50_ms", external["ttft_p50_ms"]),
                      ("tpot_p50_ms", external["tpot_p50_ms"]),
                      ("ttft_p99_ms", external["ttft_p99_ms"]),
                      # others' runs rarely record the TTFT mean or p90: the nearest
                      # metric's held-out errors bound them (the p50's, the p99's)
                      ("ttft_mean_ms", external["ttft_p50_ms"]),
                      ("ttft_p90_ms", external["ttft_p99_ms"])):
        row = run["metrics"][metric]
        # the band is where the measured value lay for 80% of held-out runs: the prediction
        # divided by (1 + the 90th and 10th percentile errors)
        assert row["band_80pct"] == pytest.approx(
            [row["predicted"] / (1 + q.p90), row["predicted"] / (1 + q.p10)], rel=1e-3)
    assert all("band_80pct" in row for row in run["metrics"].values())  # every metric
    cover = out["band_coverage"]
    for metric in ("request_throughput", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms"):
        lo, hi = run["metrics"][metric]["band_80pct"]
        measured = run["metrics"][metric]["measured"]
        assert cover[metric]["n"] == 1
        assert cover[metric]["inside"] == int(lo <= measured <= hi)
        assert cover[metric]["median_width"] == pytest.approx(hi / lo, rel=1e-3)
    assert ValidationResult.from_dict(out).to_dict() == out


def test_a_calibrated_run_has_no_band(cli, measured_dir: Path) -> None:
    out = json.loads(cli("validate", str(measured_dir / STUDY_4QPS), "--format",
                         "json").stdout)
    assert out["runs"][0]["calibrated"] is True
    assert all("band_80pct" not in row for row in out["runs"][0]["metrics"].values())
    assert "band_coverage" not in out


def _run(flagged: bool, **rows: MetricRow) -> RunRecord:
    return RunRecord(model="m", config="1xL40S", gpu="L40S", gpu_count=1, request_rate=1.0,
                     calibrated=False, flagged=flagged, flag_reason=None, metrics=dict(rows))


def test_coverage_counts_the_measured_values_inside_over_unflagged_runs() -> None:
    inside = MetricRow(10.0, 12.0, 20.0, (8.0, 16.0))
    edge = MetricRow(16.0, 12.0, -25.0, (8.0, 16.0))  # on the upper edge: inside
    outside = MetricRow(20.0, 12.0, -40.0, (6.0, 18.0))
    runs = [_run(False, ttft_p50_ms=inside), _run(False, ttft_p50_ms=edge),
            _run(False, ttft_p50_ms=outside), _run(True, ttft_p50_ms=outside),
            _run(False, ttft_p50_ms=MetricRow(None, 12.0, None, (8.0, 16.0))),
            _run(False, ttft_p50_ms=MetricRow(10.0, 12.0, 20.0))]
    cov = band_coverage(runs)["ttft_p50_ms"]
    assert (cov.inside, cov.n) == (2, 3)
    assert cov.median_width == pytest.approx(2.0)  # widths 2, 2, 3
