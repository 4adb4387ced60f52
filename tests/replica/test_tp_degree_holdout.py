"""An unmeasured tensor-parallel degree is predicted from the others (compute + memory +
communication fitted across a GPU type's TP degrees, fleetplan.replica.priors' transfer model),
closer than the efficiency-ratio tables of the other GPU counts."""

from __future__ import annotations

import pytest

from fleetplan.catalog import bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.replica.calibration_file import load_calibration_file
from fleetplan.replica.params import learned_efficiency
from fleetplan.replica.priors import prior_params
from fleetplan.replica.transfer import fit_transfer_efficiency, transfer_prior

CAL = load_calibration_file()


def _rel(pred: float, fitted: float) -> float:
    return abs(pred / fitted - 1.0)


@pytest.mark.xfail(strict=True, reason=(
    "issue 42: since the tensor-parallel RTX 4090 fits are engine-first over the host-memory "
    "all-reduce path, the transfer efficiencies predict a held-out TP degree's prefill cost "
    "27-115 % off (median 45 %; the ratio tables 13-59 %, median 41 %): the path's bytes grow "
    "as 2 (tp - 1), the fitted prefill costs much less (docs/replica-model.md)"))
@pytest.mark.parametrize("held", [2, 4, 8])
def test_held_out_rtx_4090_tp_degree(held: int) -> None:
    rest = [e for e in CAL.configs if not (e.gpu == "RTX-4090" and e.gpu_count == held)]
    held_out = [e for e in CAL.configs if e.gpu == "RTX-4090" and e.gpu_count == held]
    assert held_out
    eff_tp = fit_transfer_efficiency(rest, "RTX-4090")
    assert eff_tp is not None
    for e in held_out:
        spec, hw = bundled_catalog().model(e.model), HardwareConfig.parse(e.config)
        ratios, _how = learned_efficiency(rest, hw.gpu, hw.gpu_count)
        by_ratio = prior_params(spec, hw, efficiency=ratios)
        by_tp = transfer_prior(spec, hw, eff_tp)
        # the per-token cost (compute + all-reduce bytes over PCIe) transfers across degrees
        assert _rel(by_tp.c_prefill_tok, e.params.c_prefill_tok) < 0.15
        assert (_rel(by_tp.c_prefill_tok, e.params.c_prefill_tok)
                < _rel(by_ratio.c_prefill_tok, e.params.c_prefill_tok))
        if held > 2:  # extrapolating the degree: the per-step all-reduce latency carries over
            assert (_rel(by_tp.c_step, e.params.c_step)
                    < _rel(by_ratio.c_step, e.params.c_step))
