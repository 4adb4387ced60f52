"""The closed loop: solve, simulate, learn bounds on capacities, re-optimise (bounded rounds).

The MILP's capacities are single-replica measurements of the replica model; the fleet simulator
is the judge. The loop treats each simulated plan as evidence about a capacity *multiplier*
``m[(configuration, tier)]`` (the MILP uses ``base capacity x m``; ``m = 1`` is the measured
capacity) and keeps every plan it simulated with its verdict:

- **A plan that passes** shows each of its pools carrying its per-replica load ``u`` (in
  replicas at the base capacity, spares not counted): ``u`` is a *lower bound* ``lo`` of what
  that configuration sustains at that tier.
- **A plan that fails** (a class misses its SLO, or the fleet is overloaded) puts an *upper
  bound* ``hi`` on the pools that carry a failing class: ``u x 0.93`` (``x 0.8`` when the
  simulated P99 is more than 1.5x the SLO; at least 0.3 x the multiplier in use, at least
  :data:`MIN_DERATE`), so the next answer must add replicas or move load. The simulation judges
  each pool's share of a class on that pool's own requests too
  (:class:`fleetplan.optimize.verify.PoolCheck`; under planned routing a pool's requests do not
  depend on the other pools, and a class misses a P99 only if some pool's share does): then only
  the pools whose share missed are blamed, each alone, and a pool whose every share met its
  SLO (and was not overloaded) passed its load, whatever the other pools did. The rules below
  read the class's verdict alone, where per-pool verdicts are not known. A pool that carried
  as much load in a plan that passed is *vouched for* and not blamed, unless every pool of the
  failing class is (then the evidence conflicts and all are blamed, their ``lo`` dropped). In
  a failing plan, a pool whose classes all met their SLO (within the margin above its measured
  capacity) is vouched for too: under planned routing its requests do not depend on the other
  pools.
- **A failure shared by several pools** (a class split over two suspects) cuts all of them
  until the evidence explains it: when one suspect later fails alone at no more load, the
  others get their bounds back; when all suspects but one passed as much load, that one is
  blamed alone (:class:`_Evidence`).
- The MILP runs at ``m = max(hi, lo)``: a pass outweighs a joint blame it contradicts.
- Simulated carbon above the cap scales the cap handed to the MILP by the ratio (the MILP's
  power model is linear, the simulator's is not).

A plan is **accepted** when every class meets its SLO, the simulated carbon is within the cap,
and, where it runs a pool above its measured capacity (``u > 1``), every P99 is also within
``(1 - slo_margin) x`` its SLO (capacities above the measurement carry no safety margin of their
own). The rule reads the plan and its simulation only, never the path that led to it.

Once a plan is accepted, rounds *probe* a cheaper plan until ``max_trims`` probes have failed
(a probe that passes made the plan cheaper and spends nothing): a changed multiplier
table whose MILP answer is cheaper (:mod:`fleetplan.optimize.probes` says which: one replica
fewer in a pool, a cut taken back, a shared failure cleared, and the least uplift that saves
anything of a key, or of two keys together; on a problem larger than
:data:`~fleetplan.optimize.probes.SMALL_PROBLEM` only the first few trims and un-cuts, whose
MILPs take seconds there). MILP solves are cheap, simulations are not: of the candidates whose
answer is cheaper than the best plan and was never simulated, the one with the smallest uplift
(then the cheapest) is simulated, after any that raises no key to a load at which it already
failed alone (such a probe is simulated only when nothing else is on offer: its plan may still
vouch for other pools). An accepted probe raises the lower bounds of the multipliers it
changed. A rejected one is evidence like any failing plan (cuts, vouches); a probed key among
its suspects is not tried again above ``PROBE_BACKOFF`` times the multiplier; when
its failure lies with other pools only (the probe's plan moved load onto them), the round does
not count against ``max_trims`` (``max_rounds`` still bounds the loop). So the returned plan is
the cheapest accepted plan of all that were simulated, and the MILP optimum (within the
solver's gap) of the final multiplier table (``LoopOutcome.derate``): no cheaper plan fits what
the loop learned. At most ``max_rounds`` rounds in all (a round: MILP solves and at most one
simulation); a plan already simulated (same pools, counts, tiers and splits) reuses its checks.
An answer that never passed is returned with ``verified=False`` and its failing classes marked
as not met.

Main entry: :func:`closed_loop` (returns a :class:`LoopOutcome`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from fleetplan._progress import Progress, step
from fleetplan.optimize.evidence import (  # noqa: F401  (tests read them here)
    MIN_DERATE,
    Key,
    _config_tier,
    _cut,
    _Evidence,
    _failing,
    _Seen,
    _vouch,
    _within,
    evidence_config,
    pool_loads,
)
from fleetplan.optimize.executors import Executor, SerialExecutor
from fleetplan.optimize.explain import explain_infeasible
from fleetplan.optimize.milp import MilpSolution, solve_problem
from fleetplan.optimize.probes import (
    LARGE_PROBE_MILPS,
    LEAST_STEPS,
    MAX_PROBE_MILPS,
    PROBE_BACKOFF,
    SMALL_PROBLEM,
    UPLIFT_CAP,
    Found,
    known_to_fail,
    least_groups,
    least_label,
    pick,
    probe_key,
    trim_probes,
)
from fleetplan.optimize.problem import PlanProblem
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.optimize.verify import HourCheck

# 16: on 240 random problems judged by experiments/try_loop_paths.py's fake verifier (every miss
# mild, so each cut is the small one), 12 rounds left the uncapped answer above the cheapest plan
# any of its capped loops verified on 8 problems, 16 on 2, at 5.99 / 6.11 simulations on average
# (a loop that converges stops before its bound; docs/optimizer.md)
DEFAULT_MAX_ROUNDS = 16
DEFAULT_MAX_TRIMS = 3
# a probe's MILP answer must save at least this share of the best plan's cost to be simulated
# (solver round-off is not a saving)
_SAVING = 1e-6


# verify(solution) -> one HourCheck per hour of the plan
Verifier = Callable[[MilpSolution, Executor], Sequence[HourCheck]]


@dataclass
class LoopOutcome:
    """The answer (the cheapest accepted plan, else the last one), its simulation, and how it
    was reached. ``derate``: the multiplier table of the MILP that gave it."""

    solution: MilpSolution
    checks: tuple[HourCheck, ...]
    rounds: int
    verified: bool
    problem: PlanProblem
    derate: dict[Key, float] = field(default_factory=dict)
    carbon_scale: float = 1.0
    solve_seconds: float = 0.0
    history: list[str] = field(default_factory=list)
    first: MilpSolution | None = None
    simulated: int = 0  # distinct plans simulated
    # why the loop stopped with no plan left, where it did (:data:`NO_PLAN_LEFT`, the binding
    # constraint and its cheapest relaxation); None otherwise
    no_plan_left: str | None = None


# the round note of a loop that stops because what its simulations found leaves no plan
NO_PLAN_LEFT = "with the capacities the simulations found, no plan meets every constraint"


def derated(problem: PlanProblem, derate: dict[Key, float],
            carbon_scale: float = 1.0) -> PlanProblem:
    """``problem`` with capacities scaled per (configuration, tier) and the carbon cap scaled."""
    cap = {k: v * derate.get((k[1], k[2]), 1.0) for k, v in problem.capacity.items()}
    # spot pools carry their own multiplier (evidence.evidence_config): relative to the
    # on-demand one the capacity table now holds, 1 / that where they have none
    spot: dict[Key, float] = {}
    for (c, t) in {(k[1], k[2]) for k in problem.capacity}:
        od = derate.get((c, t), 1.0)
        own = derate.get((evidence_config(c, "spot"), t), 1.0)
        if od > 0 and own != od:
            spot[(c, t)] = own / od
    problem = replace(problem, spot_factor=spot)
    lim = problem.limits
    if carbon_scale != 1.0:
        lim = replace(lim, max_g_per_mtok=None if lim.max_g_per_mtok is None
                      else lim.max_g_per_mtok * carbon_scale,
                      max_kg_per_day=None if lim.max_kg_per_day is None
                      else lim.max_kg_per_day * carbon_scale)
    return replace(problem, capacity=cap, limits=lim)


def _carbon_ratio(problem: PlanProblem, checks: Sequence[HourCheck]) -> float:
    """Simulated carbon over the cap (> 1: the plan breaks the cap in simulation)."""
    lim = problem.limits
    g = sum(c.g_co2_per_hour for c in checks)
    ratios = [0.0]
    if lim.max_g_per_mtok is not None:
        tokens = sum(c.tokens_per_hour for c in checks)
        if tokens > 0:
            ratios.append((g / tokens * 1e6) / max(lim.max_g_per_mtok, 1e-12))
    if lim.max_kg_per_day is not None and checks:
        ratios.append(g * 24 / len(checks) / 1000 / max(lim.max_kg_per_day, 1e-12))
    return max(ratios)


def _with_margin(problem: PlanProblem, checks: Sequence[HourCheck]) -> bool:
    """Every class's simulated P99s within ``(1 - slo_margin) x`` its SLO: a plan above the
    measured capacities must pass with the same safety margin as they have, not by the luck of
    one short run."""
    keep = 1.0 - problem.slo_margin
    slo = {d.name: d for d in problem.demands}
    return all(_within(slo[c.name], c, keep) for chk in checks for c in chk.classes)


def _plan_key(sol: MilpSolution) -> tuple[object, ...]:
    """Everything of a solution that decides its simulation (what :mod:`verify` reads)."""
    def items(d: dict) -> tuple[tuple[str, object], ...]:  # type: ignore[type-arg]
        return tuple(sorted((repr(k), v) for k, v in d.items()))

    return (sol.hours, items(sol.counts), items(sol.tiers), items(sol.shares),
            items(sol.base_counts), items(sol.spares))


def _above_measured(problem: PlanProblem, sol: MilpSolution) -> bool:
    return any(u > 1.0 + 1e-6 for u in pool_loads(problem, sol).values())


def closed_loop(problem: PlanProblem, settings: SolverSettings, verify: Verifier, *,
                executor: Executor | None = None, max_rounds: int = DEFAULT_MAX_ROUNDS,
                max_trims: int = DEFAULT_MAX_TRIMS,
                progress: Progress | None = None) -> LoopOutcome:
    """Solve, simulate and learn until a plan is accepted, then probe cheaper plans until
    ``max_trims`` probes failed (see the module docstring). Returns after the first round whose
    MILP has no plan when nothing was simulated (``solution.has_plan`` is false). ``progress``
    receives each round's steps, ``round N: MILP`` and ``round N: simulate the plan``."""
    executor = executor or SerialExecutor()
    ev = _Evidence()
    scale = 1.0
    history: list[str] = []
    no_plan_left: str | None = None  # set where the loop stops with no plan left
    seconds = 0.0
    first: MilpSolution | None = None
    seen: dict[tuple[object, ...], _Seen] = {}
    best: _Seen | None = None
    last: _Seen | None = None
    tried: set[tuple[object, ...]] = set()  # probes whose MILP offered nothing to simulate
    failed: dict[Key, float] = {}  # the smallest multiplier whose probe failed in simulation
    probes = 0
    rnd = 0

    def milp(table: dict[Key, float], label: str) -> tuple[MilpSolution, PlanProblem]:
        nonlocal seconds
        current = derated(problem, table, scale)
        with step(progress, label):
            sol = solve_problem(current, settings)
        seconds += sol.seconds
        return sol, current

    def evaluate(sol: MilpSolution, current: PlanProblem, table: dict[Key, float]) -> _Seen:
        key = _plan_key(sol)
        if key not in seen:
            with step(progress, f"round {rnd}: simulate the plan"):
                checks = tuple(verify(sol, executor))
            ratio = _carbon_ratio(problem, checks)
            ok = all(c.met for c in checks) and ratio <= 1.0 + 1e-9
            accepted = ok and (not _above_measured(problem, sol)
                               or _with_margin(problem, checks))
            seen[key] = _Seen(sol, checks, current, dict(table), scale, ok, accepted, ratio)
        return seen[key]

    while rnd < max_rounds:
        rnd += 1
        if best is None:  # cut phase: the MILP over what the loop learned
            table = ev.table()
            sol, current = milp(table, f"round {rnd}: MILP")
            first = first or sol
            if not sol.has_plan:
                if last is None:
                    return LoopOutcome(sol, (), rnd, False, current, table, scale, seconds,
                                       history, first)
                no_plan_left = (f"{NO_PLAN_LEFT} ({sol.status.value}): "
                                f"{explain_infeasible(current, settings).message}")
                history.append(f"round {rnd}: {no_plan_left}")
                break
            repeat = _plan_key(sol) in seen
            s = evaluate(sol, current, table)
            if s.accepted:
                best = s
                _vouch(problem, sol, ev)
                history.append(f"round {rnd}: every class met its SLO"
                               + (" and the carbon cap" if problem.limits.carbon_capped
                                  else "")
                               + " in simulation: the first verified plan "
                               f"(${sol.cost_per_day_usd / 24:.2f}/h)")
                continue
            last = s
            _vouch(problem, sol, ev, s.checks)
            notes = _cut(problem, s, ev, repeat)
            if s.ratio > 1.0 + 1e-9:
                scale *= 0.99 / s.ratio
                notes.append(f"simulated carbon {s.ratio:.3f}x the cap")
            history.append(f"round {rnd}: " + "; ".join(notes))
            continue
        # probe phase: the cheapest MILP answer of one changed multiplier, not simulated before
        if probes >= max_trims:
            rnd -= 1
            break
        found: Found | None = None
        rejected: list[str] = []
        bar = best.solution.cost_per_day_usd * (1 - _SAVING) - 1e-9

        def cheaper(sol: MilpSolution, bar: float = bar) -> bool:
            return sol.has_plan and sol.cost_per_day_usd < bar and _plan_key(sol) not in seen

        small = (len(problem.demands) * len(problem.pools) * problem.hours
                 <= SMALL_PROBLEM)
        cands: list[tuple[dict[Key, float], str]] = [
            ({ct: m}, label) for ct, m, label in
            trim_probes(problem, best, ev, tried, failed)[:MAX_PROBE_MILPS if small
                                                      else LARGE_PROBE_MILPS]]
        for group in least_groups(problem, best.solution, small):
            top = min(min(failed.get(ct, math.inf) * PROBE_BACKOFF, UPLIFT_CAP) / ev.m(ct)
                      for ct in group)
            changes = {ct: ev.m(ct) * top for ct in group}
            if top > 1 + 1e-6 and probe_key(ev, changes) not in tried:
                cands.append((changes, "least"))
        for changes, label in cands:
            table = {**ev.table(), **changes}
            sol, current = milp(table, f"round {rnd}: MILP ({label})")
            if label == "least":  # the smallest common uplift of the group that saves anything
                if not cheaper(sol):
                    tried.add(probe_key(ev, changes))
                    continue
                lo_f, hi_f = 1.0, max(m / ev.m(ct) for ct, m in changes.items())
                for _ in range(LEAST_STEPS):
                    mid = math.sqrt(lo_f * hi_f)
                    t2 = {**ev.table(), **{ct: ev.m(ct) * mid for ct in changes}}
                    s2, c2 = milp(t2, f"round {rnd}: MILP (least uplift of "
                                      f"{' and '.join(ct[0] for ct in changes)})")
                    if cheaper(s2):
                        hi_f, sol, current, table = mid, s2, c2, t2
                    else:
                        lo_f = mid
                changes = {ct: ev.m(ct) * hi_f for ct in changes}
                label = least_label(changes, hi_f)
            ratio = max(m / ev.m(ct) for ct, m in changes.items())
            known = known_to_fail(ev, changes)
            if not sol.has_plan or sol.cost_per_day_usd >= bar:
                rejected.append(f"{label} saved nothing")
                tried.add(probe_key(ev, changes))
            elif _plan_key(sol) in seen:
                rejected.append(f"{label} gave a plan simulated before, which was not accepted")
                tried.add(probe_key(ev, changes))
            elif found is None or pick(sol, ratio, found, known):
                found = Found(sol, current, table, changes, label, ratio, known)
        if found is None:
            rnd -= 1  # no simulation: this round did not happen
            if rejected:
                history.append(f"after round {rnd}: " + "; ".join(rejected)
                               + "; kept the verified plan")
            break
        probes += 1
        sol, current, table, changes, label, _ratio, _known = found
        s = evaluate(sol, current, table)
        if s.accepted:
            probes -= 1  # a probe that made the plan cheaper is progress, not spent budget
            best = s
            for ct, m in changes.items():
                ev.lo[ct] = max(ev.lo.get(ct, 0.0), m)
            _vouch(problem, sol, ev)  # settles the evidence
            history.append(f"round {rnd}: {label} passed simulation too; kept "
                           f"(${sol.cost_per_day_usd / 24:.2f}/h)")
        else:
            missed = bool(_failing(problem, s.checks))
            why = ("missed an SLO in simulation" if missed else
                   "broke the carbon cap in simulation" if not s.ok else
                   "came within the safety margin of an SLO")
            # the failure is evidence like any other: the pools that carried a failing class
            # are cut, those whose classes all met their SLO vouched for; a probed key is held
            # below the multiplier tried only when it is among the blamed (a probe's plan may
            # fail on a pool it merely moved load to)
            _vouch(problem, sol, ev, s.checks)
            blamed: set[Key] = set()
            notes = _cut(problem, s, ev, False, blamed) if missed else []
            refuted = [ct for ct in changes if not missed or ct in blamed
                       or any(ct in rec for rec in ev.joint)]
            for ct in refuted:
                failed[ct] = min(failed.get(ct, changes[ct]), changes[ct])
            if not refuted:
                probes -= 1  # or whose failure lay with other pools (the round taught a cut
                # elsewhere, as a cut round does), does not (max_rounds bounds the loop)
            history.append(f"round {rnd}: {label} {why}; kept the verified plan"
                           + "".join(f"; {n}" for n in notes))
    if best is not None:
        return LoopOutcome(best.solution, best.checks, rnd, True, best.problem, best.derate,
                           best.scale, seconds, history, first, len(seen))
    assert last is not None
    return LoopOutcome(last.solution, last.checks, rnd, False, last.problem, last.derate,
                       last.scale, seconds, history, first, len(seen), no_plan_left)
