"""A replication run in parts, pools apart, merges into the whole run's result, byte for byte
(fleetplan.fleet.parts; issue 10: a plan's 3 replications keep both of 2 workers busy)."""

from __future__ import annotations

import dataclasses
import importlib
import json
from typing import Any

import numpy as np
import pytest
from fleet_cases import MODEL
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetplan.fleet import simulate
from fleetplan.fleet.parts import merge_parts, run_part, split_pools
from fleetplan.fleet.sim import Replication, run_replication
from fleetplan.optimize.executors import LocalExecutor
from fleetplan.scenario import Scenario, scenario_from_dict

_sim = importlib.import_module("fleetplan.fleet.simulate")  # the module, not the function

FLEET = [{"config": "1xH100-PCIe", "count": 2}, {"config": "2xRTX-4090", "count": 2},
         {"config": "1xH100-PCIe", "count": 1, "region": "FRA"}]
POOLS = ("1xH100-PCIe@EU27", "2xRTX-4090@EU27", "1xH100-PCIe@FRA")


def scenario(rates: tuple[float, float, float] = (3.0, 2.0, 1.5),
             splits: tuple[tuple[float, float, float], ...] | None = None,
             routing: str = "planned", seed: int = 5, replications: int = 1) -> Scenario:
    splits = splits or ((0.6, 0.0, 0.4), (0.3, 0.7, 0.0), (0.2, 0.5, 0.3))
    classes = []
    for i, (rate, split) in enumerate(zip(rates, splits, strict=True)):
        c: dict[str, Any] = {
            "name": f"c{i}", "rate_rps": rate, "slo": {"ttft_p99_ms": 500 * (i + 1)},
            "input_tokens": {"dist": "uniform", "low": 50, "high": 200 * (i + 1)},
            "output_tokens": {"dist": "uniform", "low": 20, "high": 150}}
        if routing == "planned":
            c["split"] = {k: v / sum(split) for k, v in zip(POOLS, split, strict=True) if v > 0}
        classes.append(c)
    return scenario_from_dict({
        "model": MODEL, "classes": classes, "fleet": FLEET, "routing": routing,
        "grid_g_per_kwh": {"EU27": 242.0, "FRA": 56.0},
        "sim": {"duration_s": 60, "warmup_s": 10, "seed": seed, "replications": replications}})


def world(sc: Scenario, k: int = 0) -> tuple[Any, Any, Any]:
    """Pools, replication ``k``'s traffic and the routing inputs, as simulate builds them."""
    assert sc.fleet is not None
    pools = _sim.build_pools(sc, sc.fleet, None)
    allowed = _sim.class_pools(sc, pools)
    windows = _sim._windows(pools, allowed)
    ss = np.random.SeedSequence(sc.sim.seed).spawn(k + 1)[k]
    traffic = _sim.build_traffic(sc, ss, windows, _sim.load_traces(sc))
    return pools, traffic, _sim._routing_inputs(sc, pools, allowed, traffic)


def assert_same(a: Replication, b: Replication) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), \
                f.name
        else:
            assert x == y, f.name


def in_parts(sc: Scenario, groups: int) -> tuple[Replication, Replication | None, list[Any]]:
    pools, traffic, inputs = world(sc)
    w, d = sc.sim.warmup_s, sc.sim.duration_s
    whole = run_replication(pools, traffic, inputs, warmup_s=w, duration_s=d)
    parts = [run_part(pools, traffic, inputs, g, warmup_s=w, duration_s=d)
             for g in split_pools(pools, traffic, inputs, groups)]
    return whole, merge_parts(pools, traffic, inputs, parts, warmup_s=w, duration_s=d), parts


@pytest.mark.parametrize("routing", ["planned", "round-robin"])
@pytest.mark.parametrize("groups", [2, 3])
def test_parts_merge_into_the_whole_replication(routing: str, groups: int) -> None:
    whole, merged, _parts = in_parts(scenario(routing=routing), groups)
    assert whole.stop_reason == "drained" and whole.ttft_s.size > 300
    assert merged is not None
    assert_same(whole, merged)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rates=st.tuples(*[st.floats(0.2, 6.0)] * 3),
       splits=st.tuples(*[st.tuples(*[st.sampled_from([0.0, 0.2, 0.5, 1.0])] * 3)] * 3)
       .filter(lambda s: all(sum(x) > 0 for x in s)),
       seed=st.integers(0, 1000))
def test_any_split_merges_exactly_or_not_at_all(rates: Any, splits: Any, seed: int) -> None:
    whole, merged, parts = in_parts(scenario(rates, splits, seed=seed), 2)
    if merged is not None:
        assert_same(whole, merged)
    else:  # refused only when a part stopped otherwise than drained past the window's end
        assert any(not p.mergeable for p in parts)
        assert all(p.mergeable == (p.stopped_at_s >= 60 and p.stop_reason == "drained")
                   for p in parts)


def test_split_pools_holds_each_pool_once_heaviest_group_first() -> None:
    sc = scenario(splits=((1.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.5, 0.5, 0.0)))
    pools, traffic, inputs = world(sc)
    groups = split_pools(pools, traffic, inputs, 4)
    # two pools carry requests: two groups; the idle FRA pool joins the first (heaviest)
    assert groups == [(0, 2), (1,)]
    assert split_pools(pools, traffic, inputs, 1) == [(0, 1, 2)]


def test_a_router_that_reads_the_fleet_is_not_merged() -> None:
    sc = scenario(routing="least-outstanding")
    pools, traffic, inputs = world(sc)
    parts = [run_part(pools, traffic, inputs, g, warmup_s=10, duration_s=60)
             for g in ((0,), (1, 2))]
    with pytest.raises(ValueError, match="not pools_apart"):
        merge_parts(pools, traffic, inputs, parts, warmup_s=10, duration_s=60)


class _Spy:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import fleetplan.fleet.parts as parts

        self.results: list[Replication | None] = []
        real = parts.merge_parts

        def spy(*a: Any, **k: Any) -> Replication | None:
            got = real(*a, **k)
            self.results.append(got)
            return got

        monkeypatch.setattr(parts, "merge_parts", spy)


@pytest.mark.parametrize(("rates", "merged"), [((3.0, 2.0, 1.5), True),
                                                ((3.0, 300.0, 1.5), False)])
def test_simulate_on_two_workers_gives_the_serial_bytes(
        monkeypatch: pytest.MonkeyPatch, rates: tuple[float, float, float],
        merged: bool) -> None:
    """3 replications on 2 workers: two run whole, the third in two parts; an overloaded fleet
    (300 req/s, 70% on the RTX pool: the backlog cap stops the run) cannot be merged and runs
    that replication whole again."""
    sc = scenario(rates, replications=3)
    serial = simulate(sc)
    spy = _Spy(monkeypatch)
    parallel = simulate(sc, executor=LocalExecutor(2))
    assert json.dumps(parallel.to_dict(), sort_keys=True) == json.dumps(serial.to_dict(),
                                                                        sort_keys=True)
    assert len(spy.results) == 1 and (spy.results[0] is not None) is merged
    assert serial.overloaded is not merged


def test_a_router_that_reads_the_fleet_runs_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    sc = scenario(routing="least-outstanding", replications=3)
    spy = _Spy(monkeypatch)
    got = simulate(sc, executor=LocalExecutor(2))
    assert spy.results == []
    assert json.dumps(got.to_dict(), sort_keys=True) == json.dumps(simulate(sc).to_dict(),
                                                                   sort_keys=True)


def test_a_fleet_whose_load_sits_in_one_pool_is_not_split(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sc = scenario(splits=((1.0, 0.0, 0.0),) * 3, replications=3)
    spy = _Spy(monkeypatch)
    got = simulate(sc, executor=LocalExecutor(2))
    assert spy.results == []
    assert json.dumps(got.to_dict(), sort_keys=True) == json.dumps(simulate(sc).to_dict(),
                                                                   sort_keys=True)
