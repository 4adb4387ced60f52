"""Laws of the optimum (hypothesis), on the MILP with a fixed, monotone capacity table.

Loosening an SLO or a carbon cap never raises the optimal cost; raising a rate never lowers it.
(The rate law is stated without a per-token carbon cap: a g/Mtok cap amortizes idle carbon over
more tokens at a higher rate, so there more traffic can make a cheaper fleet admissible.)
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from optimize_helpers import H100, R2, R4, synth_problem

from fleetplan.optimize.milp import solve_problem
from fleetplan.optimize.problem import Limits
from fleetplan.optimize.solvers import SolverSettings

EXACT = SolverSettings("cbc", time_limit_s=30, gap=0.0)
TOL = 1e-6

classes = st.lists(
    st.tuples(st.floats(0.5, 30.0), st.floats(30.0, 2000.0), st.sampled_from([0.5, 1.0, 2.0])),
    min_size=1, max_size=3)
pools = st.sampled_from([(H100, R2, R4), (H100, R4), (R2, R4), (H100,)])
law = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _problem(cls, pool_set, limits=None):
    named = [(f"c{i}", rate, slo, scale) for i, (rate, slo, scale) in enumerate(cls)]
    return synth_problem(named, pools=pool_set, limits=limits)


def _cost(problem):
    sol = solve_problem(problem, EXACT)
    return sol.cost_per_day_usd if sol.has_plan else None


@law
@given(classes, pools, st.data())
def test_loosening_an_slo_never_raises_cost(cls, pool_set, data):
    i = data.draw(st.integers(0, len(cls) - 1))
    f = data.draw(st.floats(1.0, 5.0))
    before = _cost(_problem(cls, pool_set))
    assume(before is not None)
    looser = list(cls)
    rate, slo, scale = looser[i]
    looser[i] = (rate, slo * f, scale)
    after = _cost(_problem(looser, pool_set))
    assert after is not None and after <= before + TOL


@law
@given(classes, pools, st.floats(0.3, 1.0), st.floats(1.0, 3.0))
def test_loosening_a_carbon_cap_never_raises_cost(cls, pool_set, tight, f):
    free = _problem(cls, pool_set)
    sol = solve_problem(free, EXACT)
    assume(sol.has_plan)
    g = sol.g_co2_per_day / 24 / free.mtok_per_hour(0)
    cap = g * tight
    before = _cost(replace(free, limits=Limits(max_g_per_mtok=cap)))
    assume(before is not None)
    after = _cost(replace(free, limits=Limits(max_g_per_mtok=cap * f)))
    assert after is not None and after <= before + TOL


@law
@given(classes, pools, st.data())
def test_raising_a_rate_never_lowers_cost(cls, pool_set, data):
    i = data.draw(st.integers(0, len(cls) - 1))
    f = data.draw(st.floats(1.0, 4.0))
    more = list(cls)
    rate, slo, scale = more[i]
    more[i] = (rate * f, slo, scale)
    after = _cost(_problem(more, pool_set))
    assume(after is not None)
    before = _cost(_problem(cls, pool_set))
    assert before is not None and after >= before - TOL
