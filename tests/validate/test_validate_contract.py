"""`fleetplan validate`: the JSON contract, calibrated-only-from-the-store, baseline, CV shape."""

from __future__ import annotations

import json
import math
from pathlib import Path

from fleetplan.profiles.store import load_profiles
from fleetplan.replica.calibration_file import load_calibration_file
from fleetplan.replica.runs import VALIDATED_METRICS
from fleetplan.validate.baseline import interpolate
from fleetplan.validate.core import load_runs, noise_floor
from fleetplan.validate.cv import leave_one_config_out, leave_one_rate_out

RUN_KEYS = ["model", "config", "gpu", "gpu_count", "request_rate", "calibrated", "flagged",
            "flag_reason", "metrics"]


def test_validate_json_contract_on_result_files(cli, measured_dir: Path) -> None:
    files = sorted(measured_dir.glob("vllm_200prompts16qps_DeepSeek-R1-Distill-Qwen-14B_*H100*"))
    res = cli("validate", *map(str, files), "--format", "json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert list(out) == ["runs", "summary", "noise_floor"]
    assert len(out["runs"]) == 2  # the file holds two repeated runs
    for run in out["runs"]:
        assert list(run) == RUN_KEYS
        assert run["calibrated"] is True and run["flagged"] is False
        assert set(run["metrics"]) == set(VALIDATED_METRICS)
        for row in run["metrics"].values():
            assert list(row) == ["measured", "predicted", "error_pct"]
            assert math.isclose(row["error_pct"],
                                100 * (row["predicted"] - row["measured"]) / row["measured"])
    for m in VALIDATED_METRICS:
        assert list(out["summary"][m]) == ["median_abs_error_pct", "n"]
        assert out["summary"][m]["n"] == 2
    assert out["noise_floor"]["settings_with_repeats"] == 1


def test_flagged_runs_are_reported_and_left_out_of_the_summary(cli, measured_dir: Path) -> None:
    f = measured_dir / ("vllm_200prompts1qps_DeepSeek-R1-Distill-Qwen-14B_sharegpt_"
                     "8xNVIDIA-GeForce-RTX-4090.json")
    out = json.loads(cli("validate", str(f), "--format", "json").stdout)
    (run,) = out["runs"]
    assert run["flagged"] is True and "work-conserving" in run["flag_reason"]
    assert out["summary"]["ttft_p50_ms"]["n"] == 0


def test_unknown_file_is_a_one_line_error(cli, tmp_path: Path) -> None:
    res = cli("validate", str(tmp_path / "nope.json"))
    assert res.exit_code == 2 and res.stderr.count("\n") == 1


def test_geometric_interpolation_baseline() -> None:
    table = {1.0: {"x": 10.0}, 16.0: {"x": 160.0}}
    assert math.isclose(interpolate(table, 4.0, "x"), 40.0)
    assert interpolate(table, 32.0, "x") is None  # not interior


def test_noise_floor_of_the_bundled_store() -> None:
    nf = noise_floor(load_runs(load_profiles()))
    assert nf.settings_with_repeats >= 8
    assert nf.metrics["ttft_p50_ms"].median_abs_diff_pct < 5


def test_cross_validation_shapes_on_one_configuration() -> None:
    runs = [r for r in load_runs(load_profiles())
            if r.key == ("DeepSeek-R1-Distill-Qwen-1.5B", "1xH100-PCIe")]
    loro = leave_one_rate_out(runs, jobs=1, max_nfev=8, seeds=(0,))
    out = loro.to_dict()
    assert sorted(r["request_rate"] for r in out["runs"]) == [4.0, 16.0]
    row = out["runs"][0]["metrics"]["ttft_p50_ms"]
    assert list(row) == ["measured", "predicted", "error_pct", "baseline_predicted",
                         "baseline_error_pct"]
    assert list(out["summary"]["ttft_p50_ms"]) == [
        "median_abs_error_pct", "n", "target_pct", "baseline_median_abs_error_pct", "baseline_n"]
    assert out["summary"]["ttft_p50_ms"]["baseline_n"] == 2
    assert "H100-PCIe" in out["by_gpu"]
    loco = leave_one_config_out(runs, load_calibration_file().configs, seeds=(0,)).to_dict()
    assert list(loco) == ["runs", "summary", "by_gpu", "not_covered", "by_kind",
                         "error_quantiles_by_kind"]
    assert list(loco["error_quantiles_by_kind"]["H100-PCIe, one GPU"]["ttft_p99_ms"]) == [
        "p10", "p50", "p90", "n"]
    assert list(loco["by_kind"]) == ["H100-PCIe, one GPU"]  # the one configuration's kind
    assert loco["runs"] and all(r["calibrated"] is False for r in loco["runs"])
    assert list(loco["summary"]["ttft_p50_ms"]) == ["median_abs_error_pct", "n", "target_pct"]
