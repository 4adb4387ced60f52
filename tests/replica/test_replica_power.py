"""Power that follows the work: between idle and TDP, anchored to the cited measurements."""

from __future__ import annotations

import math

import pytest

from fleetplan.catalog import bundled_catalog
from fleetplan.replica.params import replica_params
from fleetplan.replica.power import (
    ANCHOR_HIGH,
    ANCHOR_IDLE_W,
    ANCHOR_LOW,
    ANCHOR_TDP_W,
    StepPower,
    energy_j,
    fit_activity_scale,
    step_activity,
)
from fleetplan.replica.steady import steady_state


def _watts(tokens: int) -> float:
    return ANCHOR_IDLE_W + (ANCHOR_TDP_W - ANCHOR_IDLE_W) * step_activity(tokens)


def test_the_step_shape_passes_through_the_ml_energy_anchors_and_stops_at_tdp() -> None:
    assert _watts(ANCHOR_LOW[0]) == pytest.approx(ANCHOR_LOW[1])
    assert _watts(ANCHOR_HIGH[0]) == pytest.approx(ANCHOR_HIGH[1])
    assert step_activity(0) == 0.0 and step_activity(2048) == 1.0
    acts = [step_activity(t) for t in (1, 4, 16, 64, 256, 1024)]
    assert all(a < b or b == 1.0 for a, b in zip(acts, acts[1:], strict=False))


def test_energy_per_token_falls_as_load_rises_and_tdp_is_the_upper_bound() -> None:
    p = replica_params("DeepSeek-R1-Distill-Qwen-1.5B", "1xH100-PCIe")
    gpu = bundled_catalog().gpu("H100-PCIe")
    power = StepPower(gpu.idle_w, gpu.tdp_w)
    per_token = []
    for rate in (2.0, 20.0):
        res = steady_state(p, rate=rate, duration_s=90, warmup_s=15)
        watts = power.mean_watts(res.simulated_s, res.power_activity * res.simulated_s)
        assert gpu.idle_w < watts < gpu.tdp_w
        per_token.append(watts / res.output_tokens_per_s)
    assert per_token[0] > 2 * per_token[1]


def test_nvml_energy_fits_the_scale_of_the_dynamic_part() -> None:
    power = StepPower(50.0, 350.0)
    truth = StepPower(50.0, 350.0, scale=0.8)
    runs = [(w, a, energy_j(truth, 2, w, a)) for w, a in ((100.0, 40.0), (60.0, 50.0))]
    assert math.isclose(fit_activity_scale(power, 2, runs) or 0.0, 0.8, rel_tol=1e-9)
    assert fit_activity_scale(power, 2, [(10.0, 0.0, 1000.0)]) is None
