"""A steady-state run pauses the cycle collector (fleetplan._gc) and hands it back as it was.

A planner's notebook must not be left with garbage collection off after a solve, nor have it
switched back on when it had turned it off itself; a failing run must restore it too.
"""

from __future__ import annotations

import gc

import pytest

from fleetplan._gc import cycles_paused
from fleetplan.errors import InputError
from fleetplan.replica.params import replica_params
from fleetplan.replica.steady import steady_state

MODEL, CONFIG = "DeepSeek-R1-Distill-Qwen-14B", "1xH100-PCIe"


@pytest.fixture
def gc_state():
    was = gc.isenabled()
    yield
    gc.enable() if was else gc.disable()


@pytest.mark.parametrize("enabled", [True, False])
def test_steady_state_restores_the_collector_state(gc_state, enabled):
    gc.enable() if enabled else gc.disable()
    seen = []
    p = replica_params(MODEL, CONFIG)
    res = steady_state(p, rate=2.0, duration_s=120, warmup_s=20,
                       stop_above={"ttft_p99_ms": 1e9})
    seen.append(gc.isenabled())
    with pytest.raises(InputError):
        steady_state(p, rate=-1.0)
    seen.append(gc.isenabled())
    assert res.measured_requests > 0
    assert seen == [enabled, enabled]


def test_paused_inside_and_restored_after_an_exception(gc_state):
    gc.enable()
    with pytest.raises(RuntimeError), cycles_paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_nested_pauses_end_with_the_outer_state(gc_state):
    gc.enable()
    with cycles_paused():
        with cycles_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner one found it off and leaves it off
    assert gc.isenabled()


def test_results_equal_with_the_collector_on(gc_state):
    """Pausing the collector changes when cycles are freed, never what a run computes."""
    p = replica_params(MODEL, CONFIG)
    paused = steady_state(p, rate=12.0, duration_s=150, warmup_s=30, seed=3)
    gc.enable()
    plain = steady_state.__wrapped__(p, rate=12.0, duration_s=150, warmup_s=30, seed=3)
    assert repr(paused) == repr(plain)
