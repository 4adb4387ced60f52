"""Issue 16, part 4: nothing in the capacity cache is trusted. Entries carry their key, a format
version and a checksum; an entry that fails validation (tampered but well-formed, NaN or
negative, mis-shaped, unreadable) is recomputed and reported in one warning line, and the plan
is the one a clean cache gives ($4.00/h on the bundled example).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from fleetplan.optimize import cache as cache_mod
from fleetplan.optimize.cache import DiskCache
from fleetplan.optimize.capacity import CapacityResult, PointStats, find_capacity
from fleetplan.optimize.inputs import build_problem
from fleetplan.optimize.milp import MilpStatus, solve_problem
from fleetplan.optimize.solvers import SolverSettings

ROOT = Path(__file__).resolve().parents[2]
BAD = ROOT / "tests" / "data" / "bad" / "cache"
FAST_CAPACITY = {"duration_s": 120, "warmup_s": 30, "min_requests": 300, "seeds": 2}
EXACT = SolverSettings("cbc", time_limit_s=30, gap=0.0)


def _example_problem(cache: Path):
    from fleetplan.scenario import CapacitySettings, load_scenario

    sc = load_scenario(ROOT / "examples" / "hybrid-chat-batch.yaml")
    return build_problem(sc, settings=CapacitySettings(**FAST_CAPACITY), cache_dir=str(cache),
                         executor=None).problem


def _cost(problem) -> float:
    sol = solve_problem(problem, EXACT)
    assert sol.status is MilpStatus.optimal
    return sol.cost_per_day_usd / 24


@pytest.fixture(scope="module")
def example_cache(tmp_path_factory) -> Path:
    """A cache holding the example's entries only (the session cache also holds other tests'
    entries, which the example never reads: counting refused entries needs this one)."""
    return tmp_path_factory.mktemp("example-cache")


@pytest.fixture(scope="module")
def clean(example_cache):
    """The example's capacities and MILP cost on a clean cache (filled here, then copied)."""
    problem = _example_problem(example_cache)
    return problem.capacity, _cost(problem)


@pytest.fixture
def copy(tmp_path, example_cache, clean):
    """A private copy of the cache holding the example's entries."""
    target = tmp_path / "cache"
    shutil.copytree(example_cache, target)
    return target


def _records(root: Path, namespace: str):
    for path in sorted((root / namespace).rglob("*.json")):
        yield path, json.loads(path.read_text())


def _rewrite(path: Path, record: dict, *, fix_checksum: bool) -> None:
    if fix_checksum:  # as a forger (or buggy writer) would: the value check must catch it
        try:
            record["checksum"] = cache_mod._checksum(record)
        except ValueError:
            record["checksum"] = "0" * 64
    path.write_text(json.dumps(record))  # NaN is written as the literal NaN


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "fleetplan" and r.levelno == logging.WARNING]


def test_clean_example_costs_four_dollars(clean) -> None:
    assert clean[1] == pytest.approx(4.0, abs=1e-9)


def test_a_tampered_capacity_gives_the_clean_plan(copy, clean, caplog) -> None:
    """Well-formed edits (every capacity x5, consistent with its point) are caught by the
    checksum; the capacities are recomputed from the cached runs."""
    n = 0
    for path, rec in _records(copy, "capacity"):
        v = rec["value"]
        if v["capacity_rps"] > 0:
            v["capacity_rps"] *= 5.0
            v["at_capacity"]["rate_rps"] = v["capacity_rps"]
            _rewrite(path, rec, fix_checksum=False)
            n += 1
    assert n > 0
    caplog.set_level(logging.WARNING, logger="fleetplan")
    problem = _example_problem(copy)
    assert problem.capacity == clean[0]
    assert _cost(problem) == pytest.approx(clean[1], abs=1e-9)
    (line,) = _warnings(caplog)
    assert line.startswith(f"fleetplan: warning: capacity cache: {n} entries failed validation "
                           "and were recomputed") and "checksum" in line and "\n" not in line
    caplog.clear()
    assert _example_problem(copy).capacity == clean[0] and not _warnings(caplog)  # rewritten


@pytest.mark.parametrize("bad", [float("nan"), -1.0])
def test_nan_or_negative_capacity_is_no_false_infeasible(copy, clean, caplog, bad) -> None:
    """Even with a checksum that matches (recomputed after the edit), a NaN or negative
    capacity is refused, not read as capacity 0 (a false infeasible)."""
    for path, rec in _records(copy, "capacity"):
        rec["value"]["capacity_rps"] = bad
        _rewrite(path, rec, fix_checksum=True)
    caplog.set_level(logging.WARNING, logger="fleetplan")
    problem = _example_problem(copy)
    assert problem.capacity == clean[0]
    assert _cost(problem) == pytest.approx(clean[1], abs=1e-9)
    assert len(_warnings(caplog)) == 1


def test_a_mis_shaped_entry_is_recomputed_without_a_traceback(copy, clean, caplog) -> None:
    paths = sorted((copy / "capacity").rglob("*.json"))
    for path in paths:
        path.write_bytes((BAD / "value-not-a-record.json").read_bytes()
                         .replace(b"KEY", path.stem.encode()))
    caplog.set_level(logging.WARNING, logger="fleetplan")
    assert _example_problem(copy).capacity == clean[0]
    (line,) = _warnings(caplog)
    assert f"capacity cache: {len(paths)} entries failed validation" in line


@pytest.mark.parametrize("name", sorted(p.name for p in BAD.glob("*.json")))
def test_every_corpus_entry_is_a_miss_with_a_reason(tmp_path, name) -> None:
    """Each broken entry of the corpus, in place of a valid one: no value, no exception, one
    rejection with its reason; the next put rewrites it and it reads back."""
    cache = DiskCache(tmp_path)
    inputs = {"job": name}
    good = find_capacity(_job(), cache=DiskCache(None), point_fn=_curve).to_dict()
    cache.put("capacity", inputs, good)
    (path,) = (tmp_path / "capacity").rglob("*.json")
    path.write_bytes((BAD / name).read_bytes().replace(b"KEY", path.stem.encode()))
    fresh = DiskCache(tmp_path)
    assert fresh.get("capacity", inputs, CapacityResult.from_dict) is None
    ((where, why),) = fresh.rejected
    assert where == str(path) and why
    fresh.put("capacity", inputs, good)
    assert DiskCache(tmp_path).get("capacity", inputs, CapacityResult.from_dict) == good


def test_a_fifo_or_a_folder_in_place_of_an_entry_is_refused_without_reading(copy, clean,
                                                                             caplog) -> None:
    paths = sorted((copy / "capacity").rglob("*.json"))
    assert len(paths) >= 2
    paths[0].unlink()
    os.mkfifo(paths[0])  # reading it would block for ever
    paths[1].unlink()
    paths[1].mkdir()
    caplog.set_level(logging.WARNING, logger="fleetplan")
    assert _example_problem(copy).capacity == clean[0]
    (line,) = _warnings(caplog)
    assert "not a regular file" in line


# ---------------------------------------------------------------------------- points
def _curve(job, rate: float) -> PointStats:
    ttft = 30.0 / (1.0 - rate / 8.0) if rate < 8.0 else 1e6
    return PointStats(rate, ttft, 20.0, ttft * 10, rate < 8.0, min(1.0, rate / 8.0),
                      min(rate, 8.0))


def _job():
    from test_capacity_optimize import job

    return job(100.0)


@pytest.mark.parametrize("edit", [
    {"ttft_p99_ms": -5.0}, {"ttft_p99_ms": float("nan")}, {"utilization": 7.0},
    {"stable": "yes"}, {"rate_rps": 0.0}, {"extra": 1.0}])
def test_a_bad_point_is_simulated_again(tmp_path, edit) -> None:
    """A simulated point with a negative or NaN P99, a busy share above 1, a non-boolean
    ``stable``, a zero rate or an unknown field (checksum recomputed) is never read back."""
    first = find_capacity(_job(), cache=DiskCache(tmp_path), point_fn=_curve)
    for path in (tmp_path / "capacity").rglob("*.json"):
        path.unlink()  # the search must read its points again
    points = list(_records(tmp_path, "point"))
    for path, rec in points:
        rec["value"].update(edit)
        _rewrite(path, rec, fix_checksum=True)
    calls: list[float] = []

    def counting(job, rate):
        calls.append(rate)
        return _curve(job, rate)

    cache = DiskCache(tmp_path)
    again = find_capacity(_job(), cache=cache, point_fn=counting)
    assert again == first
    assert len(calls) == len(points) and len(cache.rejected) == len(points)
    strict = all(v == v for v in edit.values())  # NaN cannot be written as strict JSON
    assert all(("invalid value" if strict else "not JSON") in why for _p, why in cache.rejected)


def test_entries_carry_key_format_and_checksum(tmp_path) -> None:
    res = find_capacity(_job(), cache=DiskCache(tmp_path), point_fn=_curve)
    ((path, rec),) = _records(tmp_path, "capacity")
    assert rec["format"] == cache_mod.FORMAT and rec["key"] == path.stem
    assert rec["namespace"] == "capacity" and rec["checksum"] == cache_mod._checksum(rec)
    assert CapacityResult.from_dict(rec["value"]) == res


def test_a_nan_value_is_not_written(tmp_path) -> None:
    c = DiskCache(tmp_path)
    c.put("point", {"a": 1}, {"x": float("nan")})
    assert not list(tmp_path.rglob("*.json"))
    assert DiskCache(tmp_path).get("point", {"a": 1}) is None
