"""A saved `fleetplan validate --format json` result reads back into the typed records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetplan.errors import DataError
from fleetplan.validate.markdown import validation_markdown
from fleetplan.validate.records import BaselineMetricRow, ValidationResult


def test_saved_json_reads_back_and_renders_the_same_markdown(cli, measured_dir: Path) -> None:
    files = sorted(measured_dir.glob("vllm_200prompts16qps_DeepSeek-R1-Distill-Qwen-14B_*H100*"))
    saved = cli("validate", *map(str, files), "--format", "json").stdout
    md = cli("validate", *map(str, files), "--format", "markdown").stdout
    result = ValidationResult.from_dict(json.loads(saved))
    assert json.loads(json.dumps(result.to_dict())) == json.loads(saved)
    assert result.runs[0].metrics["ttft_p50_ms"].measured > 0
    cmd = "fleetplan validate " + " ".join(map(str, files)) + " --format markdown"
    assert validation_markdown(result, command=cmd) + "\n" == md


def test_baseline_rows_keep_their_baseline() -> None:
    row = {"measured": 10.0, "predicted": 11.0, "error_pct": 10.0, "baseline_predicted": 9.0,
           "baseline_error_pct": -10.0}
    run = {"model": "m", "config": "1xH100-PCIe", "gpu": "H100-PCIe", "gpu_count": 1,
           "request_rate": 4.0, "calibrated": True, "flagged": False, "flag_reason": None,
           "metrics": {"ttft_p50_ms": row}}
    cv = {"runs": [run], "summary": {}, "by_gpu": {}}
    obj = {"runs": [], "summary": {}, "noise_floor": {"settings_with_repeats": 0, "metrics": {}},
           "cv": {"leave_one_rate_out": cv, "leave_one_config_out": {**cv, "not_covered": []}}}
    res = ValidationResult.from_dict(obj)
    assert res.cv is not None
    got = res.cv.leave_one_rate_out.runs[0].metrics["ttft_p50_ms"]
    assert isinstance(got, BaselineMetricRow) and got.baseline_error_pct == -10.0
    # saved before the fit seeds were recorded: written back with the default seeds that made it
    assert res.to_dict() == {**obj, "cv": {**obj["cv"], "fit_seeds": [0, 1]}}


def test_a_result_without_runs_is_a_clear_error() -> None:
    with pytest.raises(DataError, match="missing field 'runs'"):
        ValidationResult.from_dict({"summary": {}}, "saved.json")


def test_a_median_error_that_rounds_onto_its_target_shows_which_side_it_is_on() -> None:
    from fleetplan.replica.runs import VALIDATED_METRICS
    from fleetplan.validate.markdown import _cv_rows
    from fleetplan.validate.records import BaselineCvMetricSummary

    def row(err: float) -> list[str]:
        summary = {m: BaselineCvMetricSummary(err, 17, 5.0, 11.1, 17) for m in VALIDATED_METRICS}
        return _cv_rows(summary, True)[VALIDATED_METRICS.index("tpot_p50_ms")]

    # 5.01 % against a 5 % target: "5.0 ... no" would read as a contradiction
    assert row(5.011)[2:5] == ["5.01", "11.1", "no"]
    assert row(4.96)[2:5] == ["4.96", "11.1", "yes"]
    assert row(5.0)[2:5] == ["5.0", "11.1", "yes"]
    assert row(4.2)[2:5] == ["4.2", "11.1", "yes"]
