"""The capacity search (with a synthetic P99 curve) and its on-disk cache."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.optimize.cache import DiskCache, default_cache_dir, input_hash
from fleetplan.optimize.capacity import (
    CapacityJob,
    CapacitySettings,
    PointStats,
    find_capacity,
)
from fleetplan.workload.lengths import protocol_length_model

SETTINGS = CapacitySettings(slo_margin=0.05, refine_steps=4)


def curve(job: CapacityJob, rate: float) -> PointStats:
    """P99 TTFT of a queue-like replica: 30 ms unloaded, unbounded at 8 req/s, a little noise
    that is a fixed function of the rate (common random numbers)."""
    if rate >= 8.0:
        return PointStats(rate, 1e6, 20.0, 1e6, False, 1.0, 8.0)
    wiggle = 1.0 + 0.02 * ((int(rate * 1000) * 7919) % 13 - 6) / 6
    ttft = 30.0 / (1.0 - rate / 8.0) * wiggle
    return PointStats(rate, ttft, 20.0, ttft * 10, True, min(1.0, 0.5 + rate / 16), rate)


def job(slo: float, **kw) -> CapacityJob:
    return CapacityJob("m", "1xH100-PCIe", {"c_step": 0.01}, protocol_length_model(), 1.0, slo,
                       None, None, kw.pop("settings", SETTINGS), None)


def test_capacity_is_the_highest_passing_rate():
    res = find_capacity(job(100.0), cache=DiskCache(None), point_fn=curve)
    assert res.at_capacity is not None and res.at_capacity.ttft_p99_ms <= 95.0
    # the true crossing of 30/(1-r/8) = 95 is r = 5.47; bisection gets within a few percent
    assert 5.0 < res.capacity_rps <= 5.6
    assert res.below_capacity is not None and res.below_capacity.rate_rps < res.capacity_rps


def test_out_of_reach_slo_gives_zero_and_keeps_the_best_probe():
    res = find_capacity(job(20.0), cache=DiskCache(None), point_fn=curve)
    assert res.capacity_rps == 0.0 and res.at_capacity is None
    assert res.probe.rate_rps == pytest.approx(SETTINGS.min_rps, rel=0.01)
    assert res.probe.ttft_p99_ms > 20.0


@settings(max_examples=40, deadline=None)
@given(st.floats(31.0, 3000.0), st.floats(1.0, 4.0))
def test_a_looser_slo_never_lowers_capacity(slo, f):
    cache = DiskCache(None)
    tight = find_capacity(job(slo), cache=cache, point_fn=curve).capacity_rps
    loose = find_capacity(job(slo * f), cache=cache, point_fn=curve).capacity_rps
    assert loose >= tight


def test_points_and_results_are_cached_on_disk(tmp_path):
    calls = []

    def counting(j, r):
        calls.append(r)
        return curve(j, r)

    first = find_capacity(job(100.0), cache=DiskCache(tmp_path), point_fn=counting)
    n = len(calls)
    assert n == first.evaluations > 0
    again = find_capacity(job(100.0), cache=DiskCache(tmp_path), point_fn=counting)
    assert len(calls) == n and again == first
    # another SLO reuses the ladder's simulated points: only new rates are simulated
    find_capacity(job(200.0), cache=DiskCache(tmp_path), point_fn=counting)
    assert 0 < len(calls) - n < n
    files = list(tmp_path.rglob("*.json"))
    assert {f.parent.parent.name for f in files} == {"capacity", "point"}
    record = json.loads(files[0].read_text())
    assert record["key"] == files[0].stem and "inputs" in record


def test_cache_key_covers_every_input():
    base = job(100.0)
    keys = {input_hash(base.key())}
    for changed in (job(101.0), job(100.0, settings=CapacitySettings(seeds=3)),
                    CapacityJob("m", "1xH100-PCIe", {"c_step": 0.011}, protocol_length_model(),
                                1.0, 100.0, None, None, SETTINGS),
                    CapacityJob("m", "1xH100-PCIe", {"c_step": 0.01}, protocol_length_model(),
                                2.0, 100.0, None, None, SETTINGS)):
        keys.add(input_hash(changed.key()))
    assert len(keys) == 5


def test_a_corrupt_entry_is_recomputed(tmp_path):
    c = DiskCache(tmp_path)
    c.put("point", {"a": 1}, {"x": 1})
    (path,) = tmp_path.rglob("*.json")
    path.write_text("{not json")
    assert DiskCache(tmp_path).get("point", {"a": 1}) is None


def test_cache_folder_from_environment_and_nothing_written_at_import(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("FLEETPLAN_CACHE_DIR")
    assert default_cache_dir().parts[-2:] == (".cache", "fleetplan")
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", "import fleetplan.optimize, fleetplan.cli.app"],
                   check=True, env=env)
    assert list(home.iterdir()) == []


def test_prefix_cache_hit_is_part_of_every_cache_key_and_reaches_the_point_runs():
    fresh = job(100.0)
    cached = CapacityJob("m", "1xH100-PCIe", {"c_step": 0.01}, protocol_length_model(), 1.0,
                         100.0, None, None, SETTINGS, None, prefix_cache_hit=1.0)
    assert input_hash(fresh.key()) != input_hash(cached.key())
    assert input_hash(fresh.point_key(2.0)) != input_hash(cached.point_key(2.0))
    seen = set()

    def faster_when_cached(j: CapacityJob, rate: float) -> PointStats:
        seen.add(j.prefix_cache_hit)
        p = curve(j, rate)
        f = 0.5 if j.prefix_cache_hit else 1.0
        return PointStats(rate, p.ttft_p99_ms * f, p.tpot_p99_ms, p.e2e_p99_ms, p.stable,
                          p.utilization, p.throughput_rps)

    cache = DiskCache(None)  # shared: a stale hit across hit rates would give equal capacities
    a = find_capacity(fresh, cache=cache, point_fn=faster_when_cached).capacity_rps
    b = find_capacity(cached, cache=cache, point_fn=faster_when_cached).capacity_rps
    assert seen == {0.0, 1.0} and b > a
