"""``solve --confidence P`` keeps its promise (issue 39): every class of a verified plan has
``slo_met_probability >= P``; else the plan is infeasible and says which margin binds (its size
and error table) and the highest confidence at which a plan exists; the infeasible plan is
written (``--out``) and reported (``--report``) like any other.
"""

from __future__ import annotations

import json
import math

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fleetplan.optimize.confidence import (
    ConfigError,
    Margins,
    hold_confidence,
    quantile_error,
    shown_probability,
)
from fleetplan.optimize.confidence_limit import STEP, highest_confidence
from fleetplan.optimize.explain import explain_infeasible
from fleetplan.optimize.problem import Demand, PlanProblem, Pool, Probe
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.optimize.verify import ClassCheck, HourCheck, PoolCheck
from fleetplan.validate.bands import ErrorQuantiles


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


@settings(max_examples=60, deadline=None)
@given(p10=st.floats(-0.95, 0.5), d1=st.floats(0.01, 1.0), d2=st.floats(0.01, 2.0),
       conf=st.floats(0.5, 0.999))
def test_a_p99_at_the_slo_over_the_factor_meets_it_with_the_stated_probability(
        p10, d1, d2, conf) -> None:
    """The factor and ``slo_met_probability`` are one error model: a simulated P99 of
    ``SLO / f`` meets the SLO with probability ``P`` (``f = 1``: at least ``P``)."""
    q = ErrorQuantiles(p10, p10 + d1, p10 + d1 + d2, 10)
    e = quantile_error("1xX", False, q, 10.0, conf, "test")
    # ln(1 + e) split normal through the 10/50/90th: median ln(1 + p50), deviation from the
    # 10th to the 50th below it, from the 50th to the 90th above
    bias = math.log1p(q.p50)
    z = math.log(e.factor) + bias
    sigma = ((bias - math.log1p(q.p10)) if z >= 0 else (math.log1p(q.p90) - bias)) / (
        1.2815515655446004)
    got = Margins(conf, {"1xX": e}).met_probability(1000.0, 1000.0 / e.factor, ["1xX"])
    assert got == pytest.approx(_phi(z / sigma), abs=1e-9)
    if e.factor > 1.0:
        assert got == pytest.approx(conf, abs=1e-9)
    else:
        assert got >= conf - 1e-9


def test_a_class_below_the_confidence_is_not_met() -> None:
    """The closed loop's verdict: a simulated P99 that meets the SLO divided by the factor but
    whose probability is below ``P`` (another configuration carries the class too) fails."""
    from fleetplan.scenario import scenario_from_dict

    sc = scenario_from_dict({"model": "DeepSeek-R1-Distill-Qwen-14B", "classes": [
        {"name": "chat", "rate_rps": 1, "slo": {"ttft_p99_ms": 100}}]})
    sure = ConfigError("1xA", True, 5.0, 0.1, 1.2, "a")
    loose = ConfigError("1xB", True, 50.0, 1.0, 1.0, "b", bias=-0.5)
    m = Margins(0.9, {"1xA": sure, "1xB": loose})
    chk = HourCheck(0, (ClassCheck("chat", 80.0, None, None, True),), False, 1.0, 1.0, {},
                    (PoolCheck("1xB@EU27/100ms", False, (ClassCheck("chat", 80.0, None, None,
                                                                    True),)),))
    (only_a,) = hold_confidence([chk], sc, m, {"chat": {"1xA"}})
    assert only_a.classes[0].met  # Phi(ln(100/80) / 0.1) = 0.987
    (both,) = hold_confidence([chk], sc, m, {"chat": {"1xA", "1xB"}})
    assert not both.classes[0].met  # Phi((ln(1.25) - 0.5) / 1) = 0.39 < 0.9
    # a pool's own verdict (what the closed loop blames and vouches on) is held to it too
    assert not both.pools[0].classes[0].met and only_a.pools[0].classes[0].met


@settings(max_examples=60, deadline=None)
@given(t=st.floats(0.5, 0.98), extra=st.floats(0.011, 0.45), guess=st.booleans())
@example(t=0.7, extra=0.25, guess=True)  # a level exactly at t
def test_the_highest_confidence_is_bracketed(t, extra, guess) -> None:
    requested = min(t + extra, 0.999)
    calls: list[float] = []

    def feasible(level: float) -> bool:
        calls.append(level)
        return level <= t

    b = highest_confidence(feasible, requested, t if guess else None)
    assert len(calls) <= 6
    assert b.has_plan is not None and b.has_plan <= t < b.no_plan  # a plan at one, none above
    assert b.has_plan in calls and b.no_plan <= requested
    if guess:  # the guess finds the edge: the highest level of the grid at or below t
        # (the grid's levels are whole hundredths: 70 x 0.01 is 0.7000000000000001, above
        # t = 0.7, where the level 0.7 is not)
        edge = round(math.floor(t / STEP + 1e-9) * STEP, 2)
        edge = round(edge - STEP, 2) if edge > t else edge  # t a hair below a level
        assert b.has_plan == pytest.approx(edge)


def test_a_guess_a_hair_below_a_level_still_finds_the_level_below() -> None:
    t = 0.98 - 5e-14  # a guess computed in floating point, just under the grid's 0.98
    b = highest_confidence(lambda level: level <= t, 0.991, t)
    assert (b.has_plan, b.no_plan) == (0.97, 0.98)


def test_no_plan_from_the_lowest_level_says_so() -> None:
    b = highest_confidence(lambda level: False, 0.9)
    assert b.has_plan is None and b.no_plan == 0.5
    assert "no plan at confidence 0.5 either" in b.phrase()


def test_an_slo_that_the_margin_breaks_is_explained_with_the_margin() -> None:
    """The issue's contradiction: a candidate whose best P99 (237 ms) is within the SLO (300) but
    not within the SLO divided by its x6.4 margin. The sentence names the margin, what it leaves
    of the SLO, and the relaxation that would hold it (237 x 6.4 = 1516.8 ms)."""
    pool = Pool("1xA100-80GB", "EU27", "A100-80GB", 1, 1.5, 100.0, 242.0)
    d = Demand("chat", (40.0,), 300.0)
    problem = PlanProblem((d,), (pool,), {("chat", "1xA100-80GB", d.tier): 0.0},
                          probes={("chat", "1xA100-80GB"): Probe(0.25, 237.0)})
    e = ConfigError("1xA100-80GB", False, 40.0, 1.0, 6.4,
                    "data/spec_errors.json (spec path, uncalibrated): leave-one-gpu-out errors "
                    "of 81 held-out runs of all GPU types (ttft_p99_ms; none measured on "
                    "A100-80GB); factor at confidence 0.9 of those errors")
    why = explain_infeasible(problem, SolverSettings(), Margins(0.9, {"1xA100-80GB": e}))
    assert "is below the best" not in why.reason
    assert "x6.4 latency margin of 1xA100-80GB at confidence 0.9" in why.reason
    assert "data/spec_errors.json" in why.reason and "none measured on A100-80GB" in why.reason
    assert "leaves 47 ms" in why.reason  # 300 / 6.4 = 46.9
    assert "reaches 237 ms" in why.reason
    assert why.relaxation.startswith("classes[0].slo.ttft_p99_ms >= 1520")  # 1516.8, 3 digits up
    assert why.binding == "classes[0].slo.ttft_p99_ms"


SCENARIO = {
    "model": "DeepSeek-R1-Distill-Qwen-14B",
    "classes": [{"name": "batch", "rate_rps": 4.0, "slo": {"ttft_p99_ms": 2000},
                 "input_tokens": {"dist": "fixed", "value": 300},
                 "output_tokens": {"dist": "fixed", "value": 50}}],
    "candidates": ["2xRTX-4090"],
    "sim": {"duration_s": 60, "warmup_s": 10, "seed": 3, "replications": 1},
}


def test_an_infeasible_confidence_is_explained_written_and_reported(cli, tmp_path, monkeypatch,
                                                                    capacity_cache_dir) -> None:
    """14B on 2 x RTX 4090 at a 2000 ms P99: the tensor-parallel kind's margin at 0.95 leaves
    no capacity. The plan file lists the class (rate, SLO, nothing simulated) and the report
    page is written from it."""
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", capacity_cache_dir)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    out, page = tmp_path / "plan.json", tmp_path / "plan.html"
    res = cli("solve", str(path), "--confidence", "0.95", "--out", str(out), "--report",
              str(page), "--no-timing", "-q")
    assert res.exit_code == 3
    line = res.stderr.strip().splitlines()[-1]
    assert "latency margin of 2xRTX-4090 at confidence 0.95" in line
    assert "RTX-4090, tensor-parallel" in line  # the kind whose held-out errors it comes from
    assert "confidence with a plan" in line or "a plan exists at confidence" in line
    plan = json.loads(out.read_text())
    assert plan["status"] == "infeasible" and plan["fleet"] == []
    (c,) = plan["classes"]
    assert (c["name"], c["rate_rps"], c["slo_ttft_p99_ms"], c["ttft_p99_ms"]) == (
        "batch", 4.0, 2000, None)
    html = page.read_text()
    assert "infeasible" in html and "latency margin of 2xRTX-4090" in html


@given(st.floats(min_value=0.0, max_value=1.0))
@example(0.9718)
@example(0.9992)
@example(1.0)
@example(0.95)
def test_a_shown_chance_is_never_more_than_the_plan_has(p: float) -> None:
    """The table and the report print P(SLO met) with three decimals rounded down: a 0.9718
    printed as '1.0' (the solve table's one decimal) read as a certainty."""
    shown = shown_probability(p)
    assert len(shown) == 5 and float(shown) <= p + 1e-12 and p - float(shown) < 0.001 + 1e-12
    assert (shown == "1.000") == (p == 1.0)


@settings(max_examples=60, deadline=None)
@given(p10=st.floats(-0.95, 0.5), d1=st.floats(0.01, 1.0), d2=st.floats(0.01, 2.0),
       p99=st.floats(10.0, 10_000.0))
def test_the_probability_agrees_with_the_band_the_plan_shows(p10, d1, d2, p99) -> None:
    """A class's 80% band is the simulated P99 / (1 + e) at the table's 90th and 10th
    percentiles of ``e``: an SLO at its top is met with probability 0.9, one at its bottom
    with 0.1, one at its middle (the 50th) with 0.5. One normal through the 10-90 spread put
    0.92 beside a band reaching above the SLO (a planner's chat class, 7 Dec 2026)."""
    q = ErrorQuantiles(p10, p10 + d1, p10 + d1 + d2, 10)
    e = quantile_error("1xX", False, q, 10.0, 0.9, "test")
    m = Margins(0.9, {"1xX": e})
    for edge, chance in ((q.p10, 0.9), (q.p50, 0.5), (q.p90, 0.1)):
        got = m.met_probability(p99 / (1.0 + edge), p99, ["1xX"])
        assert got == pytest.approx(chance, abs=1e-9)
