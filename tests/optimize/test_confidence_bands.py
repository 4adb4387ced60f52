"""``solve --confidence`` margins of uncalibrated (spec-based) configurations come from the spec
path's held-out errors (``data/spec_errors.json``); calibrated ones keep docs/validation.md's
tables; the plan notes name the table of each margin.

A GPU absent from data/gpus.csv is described by one row of a user gpus.csv (as in
tests/test_any_model_any_gpu.py); it has no measured run, so its margin is the
leave-one-gpu-out one of all GPU types.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fleetplan.optimize import solve
from fleetplan.optimize.confidence import (
    MODEL_ERROR_BY_KIND_PCT,
    MODEL_ERROR_QUANTILES_BY_KIND,
    margins,
)
from fleetplan.scenario import Scenario, scenario_from_dict

ROOT = Path(__file__).resolve().parents[2]
L4_CATALOG = ROOT / "tests" / "data" / "catalog-l4"  # one user GPU row and its price


def _row(fold: str, gpu: str) -> dict:
    table = json.loads((ROOT / "data" / "spec_errors.json").read_text())
    return table["folds"][fold][gpu]["ttft_p99_ms"]


Z = {0.9: 1.2815515655446004, 0.95: 1.6448536269514722}  # standard normal quantiles


def _factor(p10: float, p50: float, p90: float, confidence: float) -> float:
    """docs/reliability.md's margin: ln(1 + e) split normal through the 10/50/90th percentiles
    of the signed errors, ``f = exp(z_P sigma - bias)`` with ``sigma`` the side from the 10th
    to the 50th (where the real P99 is the longer), at least 1."""
    sigma = (math.log1p(p50) - math.log1p(p10)) / Z[0.9]
    return max(1.0, math.exp(Z[confidence] * sigma - math.log1p(p50)))


@pytest.fixture
def l4_scenario() -> Scenario:
    return scenario_from_dict({
        "model": "DeepSeek-R1-Distill-Qwen-1.5B", "catalog": str(L4_CATALOG),
        "classes": [{"name": "chat", "rate_rps": 2, "slo": {"ttft_p99_ms": 3000},
                     "input_tokens": {"dist": "fixed", "value": 300},
                     "output_tokens": {"dist": "fixed", "value": 50}}],
        "candidates": ["1xL4"],
        "sim": {"duration_s": 60, "warmup_s": 10, "seed": 3, "replications": 1}})


def test_a_user_gpu_takes_the_margin_of_other_peoples_runs(l4_scenario: Scenario) -> None:
    m = margins(l4_scenario, ["1xL4", "1xH100-PCIe"], 0.95)
    l4 = m.configs["1xL4"]
    # nobody's runs here are on an L4: the errors of every run others measured on their own
    # GPUs (the external fold, judged leave-one-dataset-out in docs/validation.md)
    row = _row("external", "all")
    # measured = predicted / (1 + e): at 95% the latency is taken as bad as the log-normal
    # through the table's 10/50/90th percentiles allows
    assert not l4.calibrated
    assert l4.factor == pytest.approx(_factor(row["p10"], row["p50"], row["p90"], 0.95))
    assert "data/spec_errors.json" in l4.source and "data/external" in l4.source
    assert "none measured on L4" in l4.source
    assert l4.median_abs_error_pct == row["median_abs_pct"]
    # a calibrated configuration keeps docs/validation.md's leave-one-rate-out errors, its
    # server kind's (one H100)
    h100 = m.configs["1xH100-PCIe"]
    assert h100.calibrated
    one = MODEL_ERROR_QUANTILES_BY_KIND["H100-PCIe, one GPU"]
    assert h100.factor == pytest.approx(_factor(one.p10, one.p50, one.p90, 0.95))
    assert h100.bias == pytest.approx(math.log1p(one.p50))
    assert h100.median_abs_error_pct == MODEL_ERROR_BY_KIND_PCT["H100-PCIe, one GPU"][0]
    assert h100.source.startswith("docs/validation.md")


def test_an_uncalibrated_config_of_a_measured_gpu_takes_its_gpu_row() -> None:
    sc = scenario_from_dict({"model": "DeepSeek-R1-Distill-Qwen-1.5B",
                             "classes": [{"name": "a", "rate_rps": 1,
                                          "slo": {"ttft_p99_ms": 1000}}]})
    m = margins(sc, ["4xRTX-4090"], 0.9)
    e = m.configs["4xRTX-4090"]
    row = _row("leave-one-config-out", "RTX-4090")  # the model is measured on other configs
    assert not e.calibrated and "leave-one-config-out" in e.source and "RTX-4090" in e.source
    assert e.factor == pytest.approx(_factor(row["p10"], row["p50"], row["p90"], 0.9))
    # a prediction right at the SLO meets it less than half the time where the spec path
    # underpredicts in the median (p50 < 0), more than half where it overpredicts
    assert row["p50"] != 0
    p = m.met_probability(1000.0, 1000.0, ["4xRTX-4090"])
    assert p is not None and (p < 0.5) == (row["p50"] < 0)
    # at the SLO the side of the split normal is the one the median error falls away from
    lo, mid, hi = (math.log1p(row[k]) for k in ("p10", "p50", "p90"))
    side = (mid - lo if mid >= 0 else hi - mid) / Z[0.9]
    assert p == pytest.approx(0.5 * math.erfc(-math.log1p(row["p50"]) / side / math.sqrt(2)))


def test_a_plan_on_a_user_gpu_names_the_table_of_its_margin(l4_scenario: Scenario,
                                                            tmp_path: Path) -> None:
    plan = solve(l4_scenario, executor="serial", cache_dir=str(tmp_path / "cache"),
                 confidence=0.95).to_dict(timing=False)
    assert plan["verified"]
    (c,) = plan["classes"]
    row = _row("external", "all")
    f = _factor(row["p10"], row["p50"], row["p90"], 0.95)
    assert c["margin_ms"] == pytest.approx(3000 * (1 - 1 / f), abs=0.1)
    assert c["ttft_p99_ms"] <= 3000 / f
    (note,) = [n for n in plan["notes"] if n.startswith("confidence 0.95")]
    assert "1xL4" in note and "data/spec_errors.json" in note and "data/external" in note
