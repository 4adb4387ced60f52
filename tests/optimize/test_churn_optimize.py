"""Plans for churn and for the model's own error: spares as a decision, margins at a confidence.

The spare rule is checked against its definition (binomial tail), the MILP against the rule (no
more and no fewer spares than the working replicas need), and the laws with hypothesis on tiny
problems: more churn never makes a plan cheaper, a higher confidence never does either.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from optimize_helpers import H100, R2, R4, synth_capacity, synth_problem

from fleetplan.optimize.confidence import (
    MODEL_ERROR_BY_KIND_PCT,
    MODEL_ERROR_PCT,
    MODEL_ERROR_QUANTILES_BY_KIND,
    kind_quantiles,
    latency_factor,
    model_error,
)
from fleetplan.optimize.milp import build_model, solve_problem
from fleetplan.optimize.problem import PlanProblem
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.scenario.reliability import spares_needed, unavailability

ROOT = Path(__file__).resolve().parents[2]
EXACT = SolverSettings("cbc", time_limit_s=30, gap=0.0)
law = settings(max_examples=8, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.too_slow])


def _tail(n: int, u: float, k: int) -> float:
    return sum(math.comb(n, j) * u ** j * (1 - u) ** (n - j) for j in range(k + 1, n + 1))


def test_unavailability_is_the_alternating_renewal_share() -> None:
    # 0.05 failures per hour, 10 minutes down: up 20 h on average, down 1/6 h
    assert unavailability(0.05, 600) == pytest.approx((1 / 6) / (20 + 1 / 6))
    assert unavailability(0.0, 600) == 0.0


@pytest.mark.parametrize("u", [0.00826, 0.05, 0.2])
def test_spares_are_the_fewest_with_the_tail_within_the_quantile(u: float) -> None:
    for n in range(1, 25):
        k = spares_needed(n, u, 0.01)
        assert _tail(n + k, u, k) <= 0.01
        assert k == 0 or _tail(n + k - 1, u, k - 1) > 0.01


def test_a_pool_often_down_gets_every_spare_its_quantile_needs() -> None:
    # 100 working replicas down 40% of the time need well over 64 spares (u*n/(1-u) ~ 67
    # before the 1% tail): the count is the fewest that holds the tail, never a silent cap
    k = spares_needed(100, 0.4, 0.01)
    assert k > 64
    assert _tail(100 + k, 0.4, k) <= 0.01 < _tail(100 + k - 1, 0.4, k - 1)


def _with_churn(problem: PlanProblem, u: float) -> PlanProblem:
    return problem.replace(pools=tuple(replace(p, unavailability=u) if p.gpu == "RTX-4090"
                                       else p for p in problem.pools))


def test_the_milp_keeps_exactly_the_spares_its_working_replicas_need() -> None:
    problem = _with_churn(synth_problem([("batch", 12.0, 2000.0, 1.0)], pools=(R2,)), 0.05)
    sol = solve_problem(problem, EXACT)
    assert sol.has_plan
    (pool, hour), total = next(iter(sol.counts.items()))
    spare = sol.spares[(pool, hour)]
    working = total - spare
    assert working * synth_capacity("2xRTX-4090", 1.0, 2000.0) >= 12.0 - 1e-9
    assert spare == spares_needed(working, 0.05, 0.01) > 0


def test_no_churn_builds_the_same_milp_as_before() -> None:
    problem = synth_problem([("chat", 3.0, 150.0, 1.0), ("batch", 8.0, 2000.0, 1.0)])
    zero = _with_churn(problem, 0.0)

    def lp(p: PlanProblem, tmp: Path) -> str:
        build_model(p).prob.writeLP(str(tmp))
        return tmp.read_text()

    import tempfile

    with tempfile.TemporaryDirectory() as d:
        assert lp(problem, Path(d) / "a.lp") == lp(zero, Path(d) / "b.lp")


def _cost(problem: PlanProblem) -> float | None:
    sol = solve_problem(problem, EXACT)
    return sol.cost_per_day_usd if sol.has_plan else None


classes = st.lists(st.tuples(st.floats(0.5, 20.0), st.sampled_from([300.0, 800.0, 2000.0])),
                   min_size=1, max_size=2)


@law
@given(classes, st.floats(0.0, 0.3), st.floats(0.0, 0.3),
       st.sampled_from([(H100, R2), (R2, R4), (R2,)]))
def test_more_churn_never_makes_a_plan_cheaper(cls, u1, u2, pools) -> None:
    lo, hi = sorted((u1, u2))
    problem = synth_problem([(f"c{i}", r, slo, 1.0) for i, (r, slo) in enumerate(cls)],
                            pools=pools)
    a, b = _cost(_with_churn(problem, lo)), _cost(_with_churn(problem, hi))
    if b is not None:
        assert a is not None and a <= b + 1e-6


def _confident(cls, pools, p: float) -> PlanProblem:
    """The problem at confidence ``p``: each configuration's capacity measured at the SLO
    divided by its latency factor (the measured error of its GPU type)."""
    named = [(f"c{i}", r, slo, 1.0) for i, (r, slo) in enumerate(cls)]
    problem = synth_problem(named, pools=pools)
    f = {pl.config: latency_factor(p, MODEL_ERROR_PCT[pl.gpu][0]) for pl in pools}
    cap = {(n, c, t): synth_capacity(c, 1.0, t.ttft_p99_ms / f[c])
           for (n, c, t) in problem.capacity}
    return problem.replace(capacity=cap)


@law
@given(classes, st.floats(0.5, 0.995), st.floats(0.5, 0.995),
       st.sampled_from([(H100, R2), (H100, R2, R4), (R4,)]))
def test_higher_confidence_never_makes_a_plan_cheaper(cls, p1, p2, pools) -> None:
    lo, hi = sorted((p1, p2))
    a, b = _cost(_confident(cls, pools, lo)), _cost(_confident(cls, pools, hi))
    if b is not None:
        assert a is not None and a <= b + 1e-6


def test_latency_factor_grows_with_confidence_and_error() -> None:
    assert latency_factor(0.5, 30.0) == 1.0  # the median: no margin
    assert 1.0 < latency_factor(0.9, 4.0) < latency_factor(0.95, 4.0) < latency_factor(0.95, 30)


def _doc_rows(text: str, section: str, gpu: str) -> str:
    part = text.split(section, 1)[1].split(f"**{gpu}**", 1)[1]
    row = re.search(r"\| `ttft_p99_ms` \|([^\n]*)", part)
    assert row is not None
    return row.group(1)


def test_model_errors_are_the_validation_tables() -> None:
    """The margins' error figures are docs/validation.md's (regenerated by validate --cv)."""
    text = (ROOT / "docs" / "validation.md").read_text()
    loro = "## Leave-one-rate-out"
    for gpu, (pct, n) in MODEL_ERROR_PCT.items():
        cells = [c.strip() for c in _doc_rows(text, loro, gpu).split("|")]
        # rate-out rows: target, model, baseline, ..., n
        assert float(cells[1]) == pct and int(cells[-2]) == n, (gpu, cells)


def _kind_cells(text: str, kind: str) -> list[str]:
    part = text.split("### Per server kind", 1)[1].split("###", 1)[0]
    row = re.search(rf"\| {re.escape(kind)} \|([^\n]*)", part)
    assert row is not None, kind
    return [c.strip() for c in row.group(1).split("|")]


def test_server_kind_errors_are_the_validation_tables() -> None:
    """The per-kind figures are docs/validation.md's "Per server kind" table (ttft_p99_ms, n)."""
    text = (ROOT / "docs" / "validation.md").read_text()
    header = text.split("### Per server kind", 1)[1].split("| --- |", 1)[0]
    cols = [c.strip() for c in header.strip().splitlines()[-1].strip("|").split("|")]
    p99 = cols.index("`ttft_p99_ms`") - 1  # the cells after the kind's own
    for kind, (pct, n) in MODEL_ERROR_BY_KIND_PCT.items():
        cells = _kind_cells(text, kind)
        assert float(cells[p99]) == pct and int(cells[-2]) == n, (kind, cells)


def test_signed_kind_errors_are_the_validation_tables() -> None:
    """The quantiles the margins are read from are docs/validation.md's signed table."""
    text = (ROOT / "docs" / "validation.md").read_text()
    part = text.split("Signed `ttft_p99_ms` error per server kind", 1)[1].split("###", 1)[0]
    assert len(MODEL_ERROR_QUANTILES_BY_KIND) == len(re.findall(r"^\| [^-|][^|]*, ", part,
                                                                re.M))
    for kind, q in MODEL_ERROR_QUANTILES_BY_KIND.items():
        row = re.search(rf"\| {re.escape(kind)} \|([^\n]*)", part)
        assert row is not None, kind
        p10, p50, p90, n = (c.strip() for c in row.group(1).strip(" |").split("|"))
        assert (float(p10), float(p50), float(p90), int(n)) == (
            round(100 * q.p10, 2), round(100 * q.p50, 2), round(100 * q.p90, 2), q.n), kind
        assert q.n == MODEL_ERROR_BY_KIND_PCT[kind][1]


def test_a_kind_whose_tails_come_out_short_gets_a_margin_even_at_the_median() -> None:
    """Tensor-parallel RTX 4090 P99s are predicted too short (negative median error): the
    margin follows the signed errors, not a symmetric band around the prediction."""
    got = kind_quantiles("RTX-4090", 2)
    assert got is not None
    q, src = got
    assert q.p50 < -0.5 and "RTX-4090, tensor-parallel" in src
    assert q.latency_factor(0.5) == pytest.approx(1 / (1 + q.p50))
    assert q.latency_factor(0.5) > 2.0
    # 95 %: as bad as the 10th percentile of the held-out errors (no extrapolation past it)
    assert q.latency_factor(0.95) == pytest.approx(1 / (1 + q.p10))
    # a symmetric log-normal with the same median |error| would allow far less at 95 %
    assert q.latency_factor(0.95) > 2 * latency_factor(0.95, MODEL_ERROR_BY_KIND_PCT[
        "RTX-4090, tensor-parallel"][0])


def test_a_tensor_parallel_server_takes_its_kinds_larger_margin(monkeypatch) -> None:
    one, src1 = model_error("RTX-4090", 1)
    tp, src = model_error("RTX-4090", 4)
    assert (one, tp) == (MODEL_ERROR_BY_KIND_PCT["RTX-4090, one GPU"][0],
                         MODEL_ERROR_BY_KIND_PCT["RTX-4090, tensor-parallel"][0])
    assert "RTX-4090, tensor-parallel" in src and "RTX-4090, one GPU" in src1
    assert latency_factor(0.9, tp) > latency_factor(0.9, MODEL_ERROR_PCT["RTX-4090"][0]) \
        > latency_factor(0.9, one)
    # a kind with too few held-out runs falls back to its GPU type's figure
    import fleetplan.optimize.confidence as confidence

    monkeypatch.setitem(confidence.MODEL_ERROR_BY_KIND_PCT, "RTX-4090, tensor-parallel",
                        (90.0, confidence.MIN_KIND_RUNS - 1))
    assert model_error("RTX-4090", 2)[0] == MODEL_ERROR_PCT["RTX-4090"][0]
    few = replace(MODEL_ERROR_QUANTILES_BY_KIND["RTX-4090, tensor-parallel"],
                  n=confidence.MIN_KIND_RUNS - 1)
    monkeypatch.setitem(confidence.MODEL_ERROR_QUANTILES_BY_KIND, "RTX-4090, tensor-parallel",
                        few)
    assert kind_quantiles("RTX-4090", 2) is None
    assert model_error("L4", 2)[0] == confidence.UNMEASURED_ERROR_PCT  # no figure at all


def test_a_churn_check_judges_each_pool_at_the_worse_of_churn_on_and_spares_down() -> None:
    """With churn spares each round simulates the plan twice (failures on; every spare down):
    a class, and each pool's own share of it (what the closed loop blames a pool on), meets
    its SLO only if it does in both, and a pool is overloaded if it is in either."""
    from fleetplan.optimize.solve import _worse
    from fleetplan.optimize.verify import ClassCheck, HourCheck, PoolCheck

    def check(p99_a: float, p99_b: float, over_b: bool) -> HourCheck:
        return HourCheck(0, (ClassCheck("chat", max(p99_a, p99_b), None, None,
                                        max(p99_a, p99_b) <= 100),), False, 1.0, 1.0, {},
                         (PoolCheck("A", False, (ClassCheck("chat", p99_a, None, None,
                                                            p99_a <= 100),)),
                          PoolCheck("B", over_b, (ClassCheck("chat", p99_b, None, None,
                                                             p99_b <= 100 and not over_b),))))

    both = _worse(check(60.0, 90.0, False), check(120.0, 80.0, True))
    a, b = both.pools
    assert [c.met for c in both.classes] == [False]
    assert (a.classes[0].met, a.classes[0].ttft_p99_ms, a.overloaded) == (False, 120.0, False)
    assert (b.classes[0].met, b.classes[0].ttft_p99_ms, b.overloaded) == (False, 90.0, True)


def test_a_redundant_plan_holds_its_slos_with_its_spares_down(tmp_path: Path) -> None:
    """``redundancy: 1`` promises that every pool carries its load with one replica down. The
    loop simulated the plan with every replica up only, credited the working replica with the
    spare's share (a conversation trace at 9 req/s on two H100s, one of them the spare, was
    answered 'x1.53 a lone replica's capacity'), and the N+1 plan could not lose a replica.
    Its working replicas alone are simulated too, as with churn spares: with its spares down
    the plan still meets every SLO."""
    import yaml

    from fleetplan import load_scenario, simulate, solve

    data = {"model": "DeepSeek-R1-Distill-Qwen-14B", "context_window": 4096,
            "classes": [{"name": "conv", "overlong": "drop", "slo": {"ttft_p99_ms": 1500},
                         "trace": {"file": str(ROOT / "examples" / "azure-conv-10min.csv"),
                                   "scale_to_rps": 6}},
                        {"name": "batch", "rate_rps": 3, "slo": {"ttft_p99_ms": 8000},
                         "input_tokens": {"dist": "lognormal", "mean": 1200, "cv": 0.6,
                                          "max": 3500},
                         "output_tokens": {"dist": "lognormal", "mean": 400, "cv": 0.8,
                                           "max": 500}}],
            "candidates": ["1xH100-PCIe"], "redundancy": 1,
            "sim": {"duration_s": 300, "warmup_s": 30, "seed": 2, "replications": 2}}
    path = tmp_path / "n1.yaml"
    path.write_text(yaml.safe_dump(data))
    sc = load_scenario(path)
    plan = solve(sc, executor="serial", cache_dir=False)
    assert plan.verified
    # one spare per configuration, held in its strictest tier's pool
    assert sum(e.spare or 0 for e in plan.fleet) == len({e.config for e in plan.fleet})
    from fleetplan.fleet.simulate import planned_scenario

    fleet = [{**e.scenario_pool(), "count": e.count - (e.spare or 0)} for e in plan.fleet
             if e.count > (e.spare or 0)]
    down = planned_scenario(sc.with_updates(redundancy=0), fleet,
                            {c.name: c.split for c in plan.for_replay().classes})
    assert all(c.slo_met for c in simulate(down).classes), (
        "the N+1 plan misses an SLO with a replica of each pool down")
