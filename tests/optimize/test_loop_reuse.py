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
    answers = iter([sol])  # then every probe's MILP answers the same cost
    monkeypatch.setattr(loop_mod, "solve_problem", lambda p, s: next(answers, same_cost))
    calls: list = []
    out = loop_mod.closed_loop(problem, SETTINGS, _passing(calls), max_rounds=4, max_trims=1)
    assert calls == [sol]
    assert out.verified and out.solution is sol
    assert "saved nothing" in out.history[-1]


def test_hours_simulated_before_are_not_simulated_again(monkeypatch) -> None:
    """verify_plan with a memo: equal hours of a plan are simulated once, and a later round's
    hours that were simulated before are not simulated again; each hour keeps its number."""
    from pathlib import Path

    from fleetplan.optimize import verify as verify_mod
    from fleetplan.optimize.executors import SerialExecutor
    from fleetplan.scenario import load_scenario

    root = Path(__file__).resolve().parents[2]
    sc = load_scenario(root / "examples" / "hybrid-chat-batch.yaml")
    rates = (4.0, 4.0, 8.0, 4.0)  # hours 0, 1 and 3 are the same hour
    problem = synth_problem([("chat", rates, 150.0, 1.0), ("batch", (6.0,) * 4, 2000.0, 1.5)])
    sol = solve_problem(problem, SETTINGS)
    calls = []

    def fake(item, executor=None):
        calls.append(item[0])
        return HourCheck(item[0], (), False, 1.0, 1.0)

    monkeypatch.setattr(verify_mod, "run_verification", fake)
    memo: dict = {}
    first = verify_mod.verify_plan(sc, problem, sol, SerialExecutor(), memo)
    assert [c.hour for c in first] == [0, 1, 2, 3]
    assert sorted(calls) == [0, 2]  # hours 1 and 3 are hour 0 again
    again = verify_mod.verify_plan(sc, problem, sol, SerialExecutor(), memo)
    assert again == first and sorted(calls) == [0, 2]
