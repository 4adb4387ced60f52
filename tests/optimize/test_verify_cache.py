"""Simulated plans' checks are cached on disk (issue 10, part 5: a warm solve in seconds): a
solve run again on the same scenario replays its rounds from the cache with the same answer,
and anything the fleet simulator reads that changed makes a new key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetplan._progress import NoProgress
from fleetplan.optimize import solve
from fleetplan.optimize import verify as verify_mod
from fleetplan.optimize.cache import DiskCache
from fleetplan.optimize.verify import ClassCheck, HourCheck, PoolCheck, check_key
from fleetplan.scenario import Scenario, load_scenario

ROOT = Path(__file__).resolve().parents[2]


def _answer(plan) -> str:
    """The plan's JSON without the solver's wall time (the one figure that is a clock's)."""
    d = plan.to_dict()
    d["solver"].pop("seconds")
    return json.dumps(d, sort_keys=True)


def _scenario() -> Scenario:
    sc = load_scenario(ROOT / "examples" / "hybrid-chat-batch.yaml")
    return sc.with_updates(sim={"duration_s": 120, "warmup_s": 20, "seed": 5, "replications": 3})


def test_a_solve_run_again_replays_its_checks_from_the_cache(tmp_path, monkeypatch) -> None:
    sc = _scenario()
    cache = tmp_path / "cache"
    first = solve(sc, executor="serial", cache_dir=str(cache))
    assert first.verified
    stored = list((cache / "verification").rglob("*.json"))
    assert len(stored) >= first.solver.rounds >= 1  # one entry per distinct plan simulated

    def no_simulation(*_a, **_k):
        raise AssertionError("a cached plan was simulated again")

    monkeypatch.setattr(verify_mod, "run_verification", no_simulation)
    again = solve(sc, executor="serial", cache_dir=str(cache))
    assert _answer(again) == _answer(first)
    # another seed is another simulation: not read from the cache
    other = sc.with_updates(sim={**sc.sim.model_dump(), "seed": 6})
    with pytest.raises(AssertionError, match="simulated again"):
        solve(other, executor="serial", cache_dir=str(cache))


def test_without_a_cache_folder_nothing_is_written(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path / "default"))
    monkeypatch.setattr(verify_mod, "check_key", lambda _sc: pytest.fail("a key was built"))
    plan = solve(_scenario(), executor="serial", cache_dir=False)
    assert plan.status.value in {"optimal", "feasible"}
    assert not (tmp_path / "default").exists()


def _hour_scenario(sc: Scenario) -> Scenario:
    return sc.with_updates(fleet=[{"config": "1xH100-PCIe", "count": 1}])


def test_the_key_follows_what_the_simulator_reads(tmp_path) -> None:
    sc = _hour_scenario(_scenario())
    base = check_key(sc)
    assert check_key(sc) == base
    dearer = sc.with_updates(prices_usd_per_gpu_hour={"H100-PCIe": 9.0})
    cleaner = sc.with_updates(grid_g_per_kwh={"EU27": 1.0})
    for changed in (dearer, cleaner, sc.with_updates(sim={**sc.sim.model_dump(), "seed": 1})):
        assert DiskCache(None).get("verification", check_key(changed)) is None
        assert check_key(changed) != base
    # a trace file is keyed by its content, not its name
    trace = tmp_path / "trace.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     + "".join(f"2024-05-10 00:00:{s:02d}.000,{100 + s},{20 + s}\n"
                               for s in range(40)))
    cls = {"name": "t", "trace": {"file": str(trace)}, "slo": {"ttft_p99_ms": 1000}}
    traced = sc.with_updates(classes=[cls])
    k1 = check_key(traced)
    trace.write_text(trace.read_text().replace(",100,", ",900,"))
    assert check_key(traced) != k1


def test_a_damaged_check_is_refused() -> None:
    good = HourCheck(0, (ClassCheck("chat", 120.0, None, 900.0, True, (110.0, 130.0)),),
                     False, 512.0, 1e6, {"1xH100-PCIe@EU27": 0.4},
                     (PoolCheck("1xH100-PCIe@EU27/150ms", False,
                                (ClassCheck("chat", 118.0, None, 880.0, True),)),))
    assert HourCheck.checked(good.to_dict()) == good
    for field, bad in (("g_co2_per_hour", -1.0), ("overloaded", "no"), ("hour", 1.5),
                       ("utilization", {"p": 1.5}), ("classes", [{"name": "chat"}]),
                       ("pools", [{"pool": "p", "overloaded": False,
                                   "classes": [{"name": "chat"}]}]),
                       ("pools", [{"pool": "p"}])):
        with pytest.raises(ValueError, match=field.split("_")[0] if field not in
                           ("classes", "pools") else "class check|pool check"):
            HourCheck.checked({**good.to_dict(), field: bad})
    d = good.to_dict()
    d["classes"][0]["ttft_p99_ms"] = float("nan")
    with pytest.raises(ValueError, match="ttft_p99_ms"):
        HourCheck.checked(d)


def test_a_tampered_check_is_simulated_again_and_reported(tmp_path) -> None:
    sc = _scenario()
    cache = tmp_path / "cache"
    first = solve(sc, executor="serial", cache_dir=str(cache))
    for f in (cache / "verification").rglob("*.json"):
        rec = json.loads(f.read_text())
        rec["value"]["classes"][0]["met"] = not rec["value"]["classes"][0]["met"]  # a lie
        f.write_text(json.dumps(rec))

    class Notes(NoProgress):  # steps reported nowhere, warnings kept
        def __init__(self) -> None:
            self.lines: list[str] = []

        def note(self, line: str) -> None:
            self.lines.append(line)

    seen = Notes()
    again = solve(sc, executor="serial", cache_dir=str(cache), progress=seen)
    assert _answer(again) == _answer(first)  # the lie was not believed
    warned = [ln for ln in seen.lines if "plan-check cache" in ln]
    assert len(warned) == 1 and "checksum" in warned[0] and warned[0].startswith("fleetplan:")
