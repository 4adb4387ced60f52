"""Choosing the host time per streamed output from a store's runs (replica/host_time.py)."""

from __future__ import annotations

import pytest

from fleetplan.catalog import HardwareConfig, bundled_catalog
from fleetplan.errors import InputError
from fleetplan.replica.calibrate import FIT_SEEDS
from fleetplan.replica.host_time import check_grid, choose_host_time
from fleetplan.replica.priors import prior_params
from fleetplan.replica.runs import MeasuredRun, predict_run

SERVERS = (("DeepSeek-R1-Distill-Qwen-1.5B", "1xH100-PCIe"),
           ("DeepSeek-R1-Distill-Qwen-7B", "1xH100-PCIe"))


def _runs(model: str, config: str, host_time_s: float) -> list[MeasuredRun]:
    """Runs the model itself produced on a host of that time per streamed output."""
    hw = HardwareConfig.parse(config)
    truth = prior_params(bundled_catalog().model(model), hw).with_(c_deliver=host_time_s)
    runs = []
    for i, rate in enumerate((1.0, 4.0, 16.0, 32.0)):
        run = MeasuredRun(run_id=f"{model}-{i}", model=model, config=config, gpu=hw.gpu,
                          gpu_count=1, request_rate=rate, num_prompts=80, burstiness=1.0,
                          total_input_tokens=80 * 208, total_output_tokens=80 * 150,
                          series_max_rate=32.0)
        runs.append(MeasuredRun(**{**run.__dict__,
                                   "measured": predict_run(truth, run, seeds=FIT_SEEDS)}))
    return runs


@pytest.mark.parametrize("host_time_s", [0.0, 300e-6])
def test_the_host_time_the_runs_were_made_with_is_the_one_chosen(host_time_s) -> None:
    groups = [_runs(m, c, host_time_s) for m, c in SERVERS]
    choice = choose_host_time(groups, grid=(300e-6, 0.0, 60e-6), max_nfev=12, jobs=1)
    assert choice.host_time_s == host_time_s and choice.configs == 2 and choice.identified
    assert [p.host_time_s for p in choice.points] == [0.0, 60e-6, 300e-6]  # sorted
    best = min(p.summed_loss for p in choice.points)
    assert [p.summed_loss for p in choice.points if p.host_time_s == host_time_s] == [best]
    # the calibration is the fits at the chosen value: each carries it
    assert [f.params.c_deliver for f in choice.fits] == [host_time_s] * 2
    assert all(f"host time {host_time_s * 1e6:g} us chosen" in f.params.source
               for f in choice.fits)  # the file's entries say where the figure came from
    assert "2 configuration(s)" in choice.summary() and "cannot separate" not in choice.summary()


@pytest.mark.parametrize("grid", [(), (-1e-6,), (float("nan"),), (0.5,)])
def test_a_grid_outside_the_host_times_accepted_is_refused(grid) -> None:
    with pytest.raises(InputError, match="host time grid"):
        check_grid(grid)
