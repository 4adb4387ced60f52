"""The replica model's 80% error band around a plan's simulated P99 TTFT (issue 39): from the
spec path's held-out table for an uncalibrated configuration, from the server kind's held-out
errors for a calibrated one, the widest over a class's pools; recorded in the plan and read back.

Expected figures come from data/spec_errors.json and the validation page's signed-error table,
read here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.optimize.model_band import class_band, pool_band, with_model_bands
from fleetplan.optimize.plan import ClassResult, FleetEntry, Plan, PlanStatus, SolverReport
from fleetplan.report import plan_from_dict

ROOT = Path(__file__).resolve().parents[2]
MEASURED = "AceMath-7B-Instruct"  # calibrated on 1xH100-PCIe only
SOLVER = SolverReport("CBC", "optimal", None, 0.01, 1, 10.0)


def spec(fold: str, gpu: str) -> tuple[float, float]:
    row = json.loads((ROOT / "data" / "spec_errors.json").read_text(encoding="utf-8"))[
        "folds"][fold][gpu]["ttft_p99_ms"]
    return row["p10"], row["p90"]


def kind(name: str) -> tuple[float, float]:
    text = (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
    m = re.search(rf"^\| {re.escape(name)} \| (\S+) \| (\S+) \| (\S+) \| \d+ \|$", text, re.M)
    assert m, name
    return float(m.group(1)) / 100, float(m.group(3)) / 100


def test_an_uncalibrated_configuration_takes_the_spec_paths_table() -> None:
    b = pool_band(MEASURED, "1xRTX-4090")  # the model was measured elsewhere: held-out config
    p10, p90 = spec("leave-one-config-out", "RTX-4090")
    assert not b.calibrated
    assert (b.lo, b.hi) == pytest.approx((1 / (1 + p90), 1 / (1 + p10)))
    assert "data/spec_errors.json" in b.basis and "leave-one-config-out" in b.basis


def test_a_calibrated_configuration_takes_its_server_kinds_held_out_errors() -> None:
    b = pool_band(MEASURED, "1xH100-PCIe")
    p10, p90 = kind("H100-PCIe, one GPU")
    assert b.calibrated
    assert (b.lo, b.hi) == pytest.approx((1 / (1 + p90), 1 / (1 + p10)), abs=1e-4)
    assert "H100-PCIe, one GPU" in b.basis and "docs/" not in b.basis


@settings(max_examples=20, deadline=None)
@given(st.floats(min_value=1.0, max_value=1e5), st.floats(min_value=1.1, max_value=50.0))
def test_the_class_band_scales_with_the_p99_and_is_the_widest_of_its_pools(
        p99: float, k: float) -> None:
    both = ["1xH100-PCIe", "1xRTX-4090"]
    band, basis, calibrated = class_band(MEASURED, p99, both)
    wide = pool_band(MEASURED, "1xRTX-4090")  # the spec path's band is the wider here
    assert wide.hi / wide.lo > pool_band(MEASURED, "1xH100-PCIe").width
    assert band == pytest.approx((p99 * wide.lo, p99 * wide.hi), abs=1e-3)
    assert calibrated is False and basis is not None and "1xRTX-4090" in basis
    scaled, _, _ = class_band(MEASURED, p99 * k, both)
    assert scaled is not None and band is not None
    assert scaled == pytest.approx((band[0] * k, band[1] * k), rel=1e-6, abs=1e-3 * (k + 1))
    only, _, cal = class_band(MEASURED, p99, ["1xH100-PCIe"])
    assert cal is True and only is not None and only[1] - only[0] < band[1] - band[0]


def test_no_p99_no_band_and_no_pool_nothing_known() -> None:
    assert class_band(MEASURED, None, ["1xH100-PCIe"]) == (None, None, True)
    assert class_band(MEASURED, 100.0, []) == (None, None, None)


def test_a_plan_records_its_bands_and_the_report_reads_them_back() -> None:
    h100 = FleetEntry("1xH100-PCIe", 2, "EU27", 150.0)
    spot = FleetEntry("1xRTX-4090", 3, "EU27", 2000.0, spare=1, market="spot")
    plan = Plan(PlanStatus.optimal, (h100, spot), 3.0, 0.1, 10.0,
                (ClassResult("chat", 4.0, 150.0, 100.0, True, {h100.pool: 1.0}),
                 ClassResult("batch", 2.0, 2000.0, 900.0, True,
                             {h100.pool: 0.5, spot.pool: 0.5})), SOLVER, True)
    out = with_model_bands(MEASURED, plan)
    assert [e.calibrated for e in out.fleet] == [True, False]
    assert [c.calibrated for c in out.classes] == [True, False]
    assert out.fleet == plan.fleet  # the flag is no part of a pool's identity
    d = out.to_dict(timing=False)
    assert d["fleet"][1]["calibrated"] is False and "calibrated" not in h100.scenario_pool()
    doc = plan_from_dict(json.loads(json.dumps(d)), "plan.json")
    assert [c.ttft_p99_band_ms for c in doc.classes] == [c.ttft_p99_band_ms
                                                         for c in out.classes]
    assert [c.band_basis for c in doc.classes] == [c.band_basis for c in out.classes]
    assert [e.calibrated for e in doc.fleet] == [True, False] and doc.fleet[1].spare == 1
    infeasible = Plan(PlanStatus.infeasible, (), None, None, None,
                      (ClassResult("chat", 4.0, 10.0, None, False, {}),), SOLVER, False)
    assert with_model_bands(MEASURED, infeasible) is infeasible
