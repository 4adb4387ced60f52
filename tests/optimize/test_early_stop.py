"""A capacity-search run stops once its P99 must end above the SLO's limit (issue 10, part 5:
a cold start in fewer simulated seconds): the verdict is the whole run's, the capacities are
those of whole runs, and what a stopped run proved fails only stricter SLOs."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.errors import InputError
from fleetplan.optimize import capacity as capacity_mod
from fleetplan.optimize.cache import DiskCache
from fleetplan.optimize.capacity import (
    CapacityJob,
    CapacitySettings,
    RunBound,
    find_capacities,
    simulate_seed,
)
from fleetplan.replica.params import replica_params
from fleetplan.replica.steady import SteadyStatus, steady_state
from fleetplan.workload.lengths import LengthModel, protocol_length_model

MODEL = "DeepSeek-R1-Distill-Qwen-14B"
H100 = replica_params(MODEL, "1xH100-PCIe")
SHORT = CapacitySettings(duration_s=60, warmup_s=10, min_requests=100, seeds=2)
LONG_PROMPTS = LengthModel.model_validate({
    "input": {"dist": "lognormal", "mean": 1500, "cv": 0.8, "max": 6000},
    "output": {"dist": "lognormal", "mean": 200, "cv": 0.8, "max": 1500}})


@settings(max_examples=12, deadline=None)
@given(rate=st.sampled_from([2.0, 6.0, 12.0]), share=st.floats(0.3, 1.5),
       name=st.sampled_from(["ttft_p99_ms", "tpot_p99_ms", "e2e_p99_ms"]))
def test_a_stopped_run_is_above_its_limit_and_any_other_is_the_whole_run(rate, share, name):
    whole = steady_state(H100, rate=rate, duration_s=40, warmup_s=5, seed=3)
    limit = share * getattr(whole, name)
    got = steady_state(H100, rate=rate, duration_s=40, warmup_s=5, seed=3,
                       stop_above={name: limit})
    if got.status is SteadyStatus.ABOVE:
        assert got.stopped_on == name
        assert getattr(whole, name) > limit  # the whole run's P99 is above it too
        assert got.simulated_s <= whole.simulated_s
    else:
        assert got == whole


def test_a_run_well_above_its_limit_stops_early():
    whole = steady_state(H100, rate=8.0, duration_s=300, warmup_s=60, seed=0)
    got = steady_state(H100, rate=8.0, duration_s=300, warmup_s=60, seed=0,
                       stop_above={"ttft_p99_ms": 0.5 * whole.ttft_p99_ms})
    assert got.status is SteadyStatus.ABOVE and not got.stable
    assert got.simulated_s < 0.5 * whole.simulated_s
    assert "ttft_p99_ms" in got.reason


def test_stop_limits_are_checked():
    with pytest.raises(InputError, match="stop_above"):
        steady_state(H100, rate=1.0, duration_s=30, warmup_s=5, stop_above={"ttft_p50": 1.0})
    with pytest.raises(InputError, match="stop_above.ttft_p99_ms"):
        steady_state(H100, rate=1.0, duration_s=30, warmup_s=5, stop_above={"ttft_p99_ms": -1})


def _jobs(config: str, slos: tuple[float, ...], lengths: LengthModel) -> list[CapacityJob]:
    params = replica_params(MODEL, config)
    return [CapacityJob(MODEL, config, params, lengths, 1.0, s, None, None, SHORT, None)
            for s in slos]


@pytest.mark.parametrize(("config", "slos", "lengths"), [
    ("1xH100-PCIe", (120.0, 300.0, 1000.0), protocol_length_model()),
    ("2xRTX-4090", (300.0, 1000.0, 5000.0), LONG_PROMPTS)])
def test_early_stops_give_the_capacities_of_whole_runs(config, slos, lengths, monkeypatch):
    seconds: list[float] = []  # request-seconds simulated: what a run costs
    real = steady_state

    def counted(*a, **k):
        r = real(*a, **k)
        seconds.append(r.simulated_s * k["rate"])
        return r

    monkeypatch.setattr("fleetplan.replica.steady.steady_state", counted)
    # a seed function of one's own runs every run whole
    whole = find_capacities(_jobs(config, slos, lengths), cache=DiskCache(None),
                            seed_fn=lambda j, r, i: simulate_seed(j, r, i))
    whole_s = sum(seconds)
    seconds.clear()
    early = find_capacities(_jobs(config, slos, lengths), cache=DiskCache(None))
    assert [json.dumps(r.to_dict(), sort_keys=True) for r in early] == \
        [json.dumps(r.to_dict(), sort_keys=True) for r in whole]
    assert sum(seconds) < whole_s


def test_a_bound_fails_stricter_slos_only():
    b = RunBound.of("ttft_p99_ms", 200.0)
    assert b.fails({"ttft_p99_ms": 150.0}) and b.fails({"ttft_p99_ms": 200.0})
    assert not b.fails({"ttft_p99_ms": 250.0}) and not b.fails({"tpot_p99_ms": 10.0})
    both = b.merged(RunBound.of("ttft_p99_ms", 260.0)).merged(RunBound.of("e2e_p99_ms", 9e3))
    assert both == RunBound(260.0, None, 9e3)
    assert RunBound.checked(both.to_dict()) == both


@pytest.mark.parametrize("bad", [
    {"ttft_p99_ms": None, "tpot_p99_ms": None, "e2e_p99_ms": None},
    {"ttft_p99_ms": -5.0, "tpot_p99_ms": None, "e2e_p99_ms": None},
    {"ttft_p99_ms": math.nan, "tpot_p99_ms": None, "e2e_p99_ms": None},
    {"ttft_p99_ms": 1.0}, "200"])
def test_a_damaged_bound_is_refused(bad):
    with pytest.raises(ValueError):
        RunBound.checked(bad)


def test_a_cached_bound_saves_the_run_and_a_tampered_one_is_recomputed(tmp_path, monkeypatch):
    # an SLO whose search has a run stopped early (with the host's lag a run just above a
    # tight SLO's capacity fails by the lag, which the engine's early stop does not see)
    jobs = _jobs("1xH100-PCIe", (300.0,), protocol_length_model())
    first = find_capacities(jobs, cache=DiskCache(tmp_path))
    bounds = sorted((tmp_path / "bound").rglob("*.json"))
    assert bounds  # the search stopped failing runs early and kept what they proved
    runs: list[float] = []
    real = capacity_mod.run_seed

    def counted(job, rate, i, stop_above=None):
        runs.append(rate)
        return real(job, rate, i, stop_above=stop_above)

    monkeypatch.setattr(capacity_mod, "run_seed", counted)
    # the same search on its cache: the points and bounds answer every judgement
    pts = capacity_mod._Points(jobs[0], DiskCache(tmp_path), None, simulate_seed)
    grid = capacity_mod._Grid(jobs[0].settings)
    k = grid.index(first[0].capacity_rps)
    assert pts.judge(jobs[0], grid.rate(k))[0]
    assert not pts.judge(jobs[0], grid.rate(k + 1))[0]
    assert runs == []
    # a bound entry edited to claim more than its run proved is refused and the run redone
    for f in bounds:
        rec = json.loads(f.read_text())
        rec["value"]["ttft_p99_ms"] = 1e9
        f.write_text(json.dumps(rec))
    cache = DiskCache(tmp_path)
    pts = capacity_mod._Points(jobs[0], cache, None, simulate_seed)
    assert not pts.judge(jobs[0], grid.rate(k + 1))[0]
    assert runs and any("checksum" in why for _p, why in cache.rejected)
