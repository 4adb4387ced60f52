"""The closed loop simulates each distinct plan once (issue 10, part 5): a round whose MILP
returns a plan already simulated reuses its checks, which are the same (same seeds)."""

from __future__ import annotations

from optimize_helpers import H100, synth_problem

from fleetplan.optimize import loop as loop_mod
from fleetplan.optimize.milp import solve_problem
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.optimize.verify import ClassCheck, HourCheck

SETTINGS = SolverSettings("cbc", time_limit_s=30, gap=0.0)


def test_a_plan_seen_before_is_not_simulated_again(monkeypatch) -> None:
    problem = synth_problem([("chat", 8.0, 300.0, 1.0)])
    sol = solve_problem(problem, SETTINGS)
    assert sol.has_plan
    monkeypatch.setattr(loop_mod, "solve_problem", lambda p, s: sol)  # the same plan each round
    calls = []

    def failing(s, executor):
        calls.append(s)
        return [HourCheck(0, (ClassCheck("chat", 900.0, None, None, False),), False, 1.0, 1.0)]

    out = loop_mod.closed_loop(problem, SETTINGS, failing, max_rounds=4)
    assert len(calls) == 1  # rounds 2-4 found the plan of round 1
    assert out.rounds == 4 and not out.verified
    assert [c.met for c in out.checks[0].classes] == [False]


def test_different_plans_are_each_simulated() -> None:
    problem = synth_problem([("chat", 8.0, 300.0, 1.0)])
    calls = []

    def failing(s, executor):
        calls.append(loop_mod._plan_key(s))
        return [HourCheck(0, (ClassCheck("chat", 900.0, None, None, False),), False, 1.0, 1.0)]

    out = loop_mod.closed_loop(problem, SETTINGS, failing, max_rounds=3)
    assert out.rounds == 3 and not out.verified
    assert len(calls) == len(set(calls)) == 3  # each round derated: a new plan each time


def _passing(calls):
    def verify(s, executor):
        calls.append(s)
        return [HourCheck(0, (ClassCheck("chat", 100.0, None, None, True),), False, 1.0, 1.0)]

    return verify


def test_a_trim_that_saves_nothing_is_not_simulated(monkeypatch) -> None:
    """Once a plan passed, a trial with one replica fewer whose MILP costs as much is rejected
    ("saved nothing") without a simulation, which could not change that."""
    from dataclasses import replace

    problem = synth_problem([("chat", 12.0, 300.0, 1.0)], pools=(H100,))
    sol = solve_problem(problem, SETTINGS)
    assert max(sol.counts.values()) >= 2  # a pool the loop may try to trim
    same_cost = replace(sol, base_counts={"another plan": 0})  # not the plan simulated before
    answers = iter([sol, same_cost])
    monkeypatch.setattr(loop_mod, "solve_problem", lambda p, s: next(answers))
    calls: list = []
    out = loop_mod.closed_loop(problem, SETTINGS, _passing(calls), max_rounds=4, max_trims=1)
    assert calls == [sol]
    assert out.verified and out.solution is sol
    assert "saved nothing" in out.history[-1]
