"""What a capacity search may skip without changing a capacity (issue 10, part 5: a cold start
in fewer simulated seconds): the point below capacity when no power model reads it, and the
seeds after one that already failed a neighbouring rate."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from fleetplan.optimize import capacity as capacity_mod
from fleetplan.optimize.cache import DiskCache
from fleetplan.optimize.capacity import CapacityJob, CapacitySettings, find_capacities
from fleetplan.optimize.inputs import build_problem
from fleetplan.replica.params import replica_params
from fleetplan.scenario import Scenario
from fleetplan.workload.lengths import protocol_length_model

MODEL = "DeepSeek-R1-Distill-Qwen-14B"
SHORT = CapacitySettings(duration_s=60, warmup_s=10, min_requests=100, seeds=3)


def _job(config: str, slo: float, **kw) -> CapacityJob:
    return CapacityJob(MODEL, config, replica_params(MODEL, config), protocol_length_model(),
                       1.0, slo, None, None, SHORT, None, **kw)


def _counting(monkeypatch) -> list[tuple[float, int]]:
    runs: list[tuple[float, int]] = []
    real = capacity_mod.run_seed

    def counted(job, rate, i, stop_above=None):
        runs.append((rate, i))
        return real(job, rate, i, stop_above=stop_above)

    monkeypatch.setattr(capacity_mod, "run_seed", counted)
    return runs


# 130 ms on the H100 reaches its capacity from above (no lower rate passes on the way, so the
# chord's point is two runs of its own); 1000 ms on the RTX pair walks up to it (a lower rate
# passed, and that is the point below capacity with or without the chord)
@pytest.mark.parametrize(("config", "slo", "from_above"), [("1xH100-PCIe", 130.0, True),
                                                           ("2xRTX-4090", 1000.0, False)])
def test_the_point_below_capacity_is_run_only_for_a_chord(config, slo, from_above, monkeypatch):
    runs = _counting(monkeypatch)
    with_chord = find_capacities([_job(config, slo)], cache=DiskCache(None))[0]
    n_chord = len(runs)
    runs.clear()
    without = find_capacities([_job(config, slo, chord=False)], cache=DiskCache(None))[0]
    # the same capacity and point at capacity, whichever the flag
    assert without.capacity_rps == with_chord.capacity_rps > 0
    assert without.at_capacity == with_chord.at_capacity
    assert with_chord.below_capacity is not None
    assert with_chord.below_capacity.rate_rps < with_chord.capacity_rps
    if from_above:  # not run for a result that does not need it
        assert without.below_capacity is None
        assert with_chord.below_capacity.rate_rps not in {r for r, _i in runs}
        assert len(runs) < n_chord
    else:  # the passing rate the search saw anyway, as with the chord
        assert without.below_capacity == with_chord.below_capacity
        assert len(runs) == n_chord
    assert _job(config, slo).key() != _job(config, slo, chord=False).key()


def _scenario(power: str) -> Scenario:
    return Scenario.model_validate({
        "model": MODEL, "power": {"model": power}, "candidates": ["1xH100-PCIe"],
        "capacity": SHORT.model_dump(),
        "classes": [{"name": "chat", "rate_rps": 4.0, "slo": {"ttft_p99_ms": 300}}]})


def test_only_the_tdp_power_model_asks_for_the_chord(monkeypatch):
    asked: list[bool] = []
    real = capacity_mod.find_capacities

    def spy(jobs, **kw):
        asked.extend(j.chord for j in jobs)
        return real(jobs, **kw)

    monkeypatch.setattr(capacity_mod, "find_capacities", spy)
    tdp = build_problem(_scenario("tdp"), cache_dir=False)
    activity = build_problem(_scenario("activity"), cache_dir=False)
    assert asked == [True, False]
    (res_tdp,) = tdp.results.values()
    (res_act,) = activity.results.values()
    assert res_tdp.capacity_rps == res_act.capacity_rps > 0
    assert res_tdp.below_capacity is not None


# SLOs whose searches meet a failing seed after a passing one (so the order can save runs)
@pytest.mark.parametrize(("config", "slos"), [("1xH100-PCIe", (140.0, 300.0)),
                                               ("2xRTX-4090", (1000.0, 2000.0))])
def test_the_seed_that_failed_last_goes_first_and_no_verdict_changes(config, slos, monkeypatch):
    jobs = [_job(config, s) for s in slos]
    runs = _counting(monkeypatch)
    ordered = find_capacities(jobs, cache=DiskCache(None))
    n_ordered = len(runs)
    runs.clear()
    monkeypatch.setattr(capacity_mod._Points, "_seed_order",
                        lambda self, seeds: list(range(seeds)))
    by_index = find_capacities([replace(j) for j in jobs], cache=DiskCache(None))
    # the same results byte for byte (the capacities and the points at, below and probing
    # capacity); only the runs it took differ (``evaluations`` counts the rates simulated here)
    def same(r):
        d = r.to_dict()
        d.pop("evaluations")
        return json.dumps(d, sort_keys=True)

    assert [same(r) for r in ordered] == [same(r) for r in by_index]
    assert n_ordered < len(runs)  # deterministic: the same seeds and rates every time
