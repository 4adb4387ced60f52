"""The probes of the closed loop (:mod:`fleetplan.optimize.loop`): which cheaper plans are worth
a MILP, and which of their answers is worth a simulation.

Once the loop has accepted a plan, each probe round changes the multiplier table the MILP sees
and asks for a cheaper answer. Candidates (:func:`trim_probes`, :func:`least_groups`):

- for every pool of the best plan with two or more working replicas, the multiplier that lets
  it run one replica fewer;
- for every (configuration, tier) a failure cut below its measured capacity, its measured
  capacity back; for every suspect of a shared failure not yet explained, its bound were that
  failure not blamed on it;
- the least uplift (up to :data:`UPLIFT_CAP`, :data:`LEAST_STEPS` bisection MILPs) at which the
  MILP finds any cheaper plan, for each of the :data:`LEAST_KEYS` dearest keys of the best
  plan, as many keys it does not use, and each *pair* of those dearest used keys raised by one
  common factor (a cheaper plan may need two pools to carry a little more each, where either
  alone would have to carry much more: on 360 random problems judged by
  ``experiments/try_loop_paths.py``, each solved without a carbon cap and at three tighter
  ones, pairs took the comparisons where a tighter cap verified a cheaper plan from 23 of 1080
  to 15, at no more simulations).

Of the answers cheaper than the best plan and never simulated, one that raises no key to a load
at which it already failed alone (:func:`known_to_fail`) comes first, then the smallest uplift
(:func:`pick`); a key whose probe failed is not tried again above :data:`PROBE_BACKOFF` times
that multiplier.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from fleetplan.optimize.evidence import (
    Key,
    _config_tier,
    _Evidence,
    _Seen,
    evidence_config,
    pool_loads,
)
from fleetplan.optimize.milp import MilpSolution, candidate_key
from fleetplan.optimize.problem import PlanProblem

# at most this many probe MILPs are solved per probe round (the dearest pools first)
MAX_PROBE_MILPS = 8
# a probe raises a multiplier to at most this (twice the measured capacity), and the least uplift
# that saves anything is searched (LEAST_STEPS bisection MILPs) for the LEAST_KEYS dearest keys
UPLIFT_CAP = 2.0
LEAST_KEYS = 4
LEAST_STEPS = 5
# above this many classes x candidates x hours (a MILP of a second or more: the 100-class
# benchmark has 800), a probe round solves at most LARGE_PROBE_MILPS MILPs, trims and un-cuts,
# and searches no least uplift
SMALL_PROBLEM = 200
# after a probe of a key failed at a multiplier, the next probe of that key stays this much
# below it (a plan a hair less loaded fails too, and each try costs a simulation)
PROBE_BACKOFF = 0.97
LARGE_PROBE_MILPS = 2


def trim_probes(problem: PlanProblem, best: _Seen, ev: _Evidence,
                tried: set[tuple[object, ...]], failed: dict[Key, float]
                ) -> list[tuple[Key, float, str]]:
    """Multipliers worth a MILP (module docstring), dearest pool first: (key, multiplier,
    what it tries); none at or above a multiplier whose probe failed in simulation."""
    sol = best.solution
    prices = {p.key: p.price_usd_per_hour for p in problem.pools}
    loads = pool_loads(problem, sol)
    out: dict[Key, tuple[tuple[float, int, str], float, str]] = {}
    for (key, h), u in sorted(loads.items()):
        n = sol.working(key, h)
        ct = _config_tier(sol, key, h)
        if n < 2:
            continue
        m = max(u * n / (n - 1), ev.m(ct)) * (1 + 1e-6)
        hour = f" (hour {h})" if problem.hours > 1 else ""  # no hour in a one-rate plan
        rank = (prices[candidate_key(key)], sol.counts[(key, h)], key)
        if (probe_key(ev, {ct: m}) not in tried
                and m < failed.get(ct, math.inf) * PROBE_BACKOFF
                and (ct not in out or m < out[ct][1])):
            out[ct] = (rank, m, f"one replica fewer than {sol.counts[(key, h)]}x{key}{hour}")
    ranked = sorted(out.items(), key=lambda kv: kv[1][0], reverse=True)
    probes = [(ct, m, label) for ct, (_r, m, label) in ranked]
    # re-test a shared failure: one suspect back, the others kept cut (a suspect that failed
    # alone at no more load is not re-tested: the evidence is against it)
    for rec in ev.explained + ev.joint:
        for ct in sorted(rec):
            if rec[ct][0] >= ev.bad.get(ct, math.inf) - 1e-9:
                continue
            m = ev.without(rec, ct)
            if (m > ev.m(ct) * (1 + 1e-6) and probe_key(ev, {ct: m}) not in tried
                    and m < failed.get(ct, math.inf) * PROBE_BACKOFF):
                probes.append((ct, m, f"{ct[0]} at {ct[1].words} cleared of a failure it "
                                      f"shared (x{m:.3f})"))
    for ct, hi in sorted(ev.hi.items()):  # a cut that a joint blame may have put there
        if (hi < 1.0 and ev.m(ct) < 1.0 and probe_key(ev, {ct: 1.0}) not in tried
                and failed.get(ct, math.inf) * PROBE_BACKOFF > 1.0):
            probes.append((ct, 1.0, f"the measured capacity of {ct[0]} at {ct[1].words} "
                                    f"(cut to x{ev.m(ct):.3f})"))
    return probes


def keys_by_price(problem: PlanProblem, sol: MilpSolution) -> list[Key]:
    """The (configuration, tier) keys of ``sol``'s pools, dearest pool first."""
    prices = {p.key: p.price_usd_per_hour for p in problem.pools}
    ranked: dict[Key, tuple[float, int, str]] = {}
    for (key, h), n in sorted(sol.counts.items()):
        if (key, h) in sol.tiers and n > 0:
            ct = _config_tier(sol, key, h)
            ranked[ct] = max(ranked.get(ct, (0.0, 0, "")), (prices[candidate_key(key)], n, key))
    return [ct for ct, _r in sorted(ranked.items(), key=lambda kv: kv[1], reverse=True)]


def unused_keys(problem: PlanProblem, sol: MilpSolution) -> list[Key]:
    """The (configuration, tier) keys with a capacity that ``sol`` does not use, the least
    price per request first (the likeliest to save something at a small uplift)."""
    used = {_config_tier(sol, key, h) for (key, h), n in sol.counts.items()
            if n > 0 and (key, h) in sol.tiers}
    prices: dict[str, float] = {}  # by evidence configuration (a spot pool's its own)
    for p in problem.pools:
        c = evidence_config(p.config, p.market)
        prices[c] = min(prices.get(c, math.inf), p.price_usd_per_hour)
    best: dict[Key, float] = {}
    for (_cls, config, tier), cap in problem.capacity.items():
        for c in (config, evidence_config(config, "spot")):
            ct = (c, tier)
            if cap > 0 and ct not in used and c in prices:
                best[ct] = min(best.get(ct, math.inf), prices[c] / cap)
    return [ct for ct, _v in sorted(best.items(), key=lambda kv: (kv[1], kv[0][0],
                                                                  kv[0][1].label))]


def least_groups(problem: PlanProblem, sol: MilpSolution, small: bool) -> list[tuple[Key, ...]]:
    """The keys whose least uplift a probe round searches (none on a large problem): each of
    the :data:`LEAST_KEYS` dearest keys of ``sol`` and as many it does not use alone, then each
    pair of those dearest used keys raised together by one factor (a cheaper plan may need two
    pools to carry a little more each, where either alone would have to carry much more)."""
    if not small:
        return []
    used = keys_by_price(problem, sol)[:LEAST_KEYS]
    unused = unused_keys(problem, sol)[:LEAST_KEYS]
    singles: list[tuple[Key, ...]] = [(ct,) for ct in used + unused]
    pairs = [(a, b) for i, a in enumerate(used) for b in used[i + 1:]]
    return singles + pairs


def least_label(changes: dict[Key, float], factor: float) -> str:
    """What a least-uplift probe tried, in a planner's words."""
    what = " and ".join(f"{ct[0]} at {ct[1].words}" for ct in changes)
    if len(changes) == 1:
        return f"x{factor:.3f} the capacity of {what} (the least that saves anything)"
    return f"x{factor:.3f} the capacities of {what} together (the least that saves anything)"


class Found(NamedTuple):
    """The probe a round will simulate: its MILP answer on the ``current`` (derated) problem
    of multiplier ``table``, the multipliers it ``changes``, what it tried (``label``) and its
    uplift ``ratio`` (the largest factor over the evidence's multipliers)."""

    solution: MilpSolution
    current: PlanProblem
    table: dict[Key, float]
    changes: dict[Key, float]
    label: str
    ratio: float
    known: bool = False


def known_to_fail(ev: _Evidence, changes: dict[Key, float]) -> bool:
    """Whether a probe raises a key to a load at which it already failed alone in a cut round
    (``ev.bad``, less :data:`PROBE_BACKOFF`)."""
    return any(m >= ev.bad.get(ct, math.inf) * PROBE_BACKOFF for ct, m in changes.items())


def pick(sol: MilpSolution, ratio: float, found: Found, known: bool = False) -> bool:
    """Whether a probe's plan beats the one found so far: one that raises no key to a load it
    already failed at, then a smaller uplift (the likelier to pass), then a cheaper plan."""
    if known != found.known:
        return not known
    return ratio < found.ratio - 1e-9 or (abs(ratio - found.ratio) <= 1e-9
                                          and sol.cost_per_day_usd
                                          < found.solution.cost_per_day_usd - 1e-9)


def probe_key(ev: _Evidence, changes: dict[Key, float]) -> tuple[object, ...]:
    """A probe as its MILP sees it: the multiplier table with ``changes`` applied."""
    return tuple(sorted({**ev.table(), **{ct: round(m, 9) for ct, m in changes.items()}}
                        .items()))
