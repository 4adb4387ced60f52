"""The closed loop: solve, simulate the answer, tighten what failed, solve again (bounded).

Each round solves the MILP, then simulates every hour of the plan (planned routing, several
seeds; :mod:`fleetplan.optimize.verify`). When a class misses its SLO, every pool that carries it
has its capacities (for the tier it runs at) *derated* so that the load the plan put there no
longer fits: the new capacity is the pool's planned utilization x ``0.93`` (x ``0.8`` when the
simulated P99 is more than 1.5x the SLO) of the old one, so the next answer must add replicas or
move load; integer slack alone cannot absorb it. When the simulated carbon exceeds the cap (the
MILP's power model is linear, the simulator's is not), the cap handed to the MILP is scaled by
the ratio. Once a plan passes, up to ``max_trims`` rounds try one replica fewer in the dearest
pool (capacities measured on one replica are conservative for a pool of several, where the
router spreads requests); a trial is kept only if its simulation passes with the capacities'
safety margin (every P99 within ``(1 - slo_margin) x`` its SLO). At most
``max_rounds`` rounds in all; an answer that never passed is returned with ``verified=False``
and its failing classes marked as not met, never as met. A round whose MILP returns a plan
already simulated (same pools, counts, tiers and splits: e.g. a trim that saved nothing) reuses
that simulation's checks instead of simulating it again (same seeds, so the same checks), and a
trial whose MILP saves nothing is rejected without being simulated (its simulation could not
change that).

Main entry: :func:`closed_loop` (returns a :class:`LoopOutcome`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from fleetplan._progress import Progress, step
from fleetplan.optimize.executors import Executor, SerialExecutor
from fleetplan.optimize.milp import MilpSolution, candidate_key, solve_problem
from fleetplan.optimize.problem import PlanProblem, Tier
from fleetplan.optimize.solvers import SolverSettings
from fleetplan.optimize.verify import HourCheck

DEFAULT_MAX_ROUNDS = 8
DEFAULT_MAX_TRIMS = 3
MIN_DERATE = 0.05

# verify(solution) -> one HourCheck per hour of the plan
Verifier = Callable[[MilpSolution, Executor], Sequence[HourCheck]]


@dataclass
class LoopOutcome:
    """The last answer, its simulation, and how it was reached."""

    solution: MilpSolution
    checks: tuple[HourCheck, ...]
    rounds: int
    verified: bool
    problem: PlanProblem
    derate: dict[tuple[str, Tier], float] = field(default_factory=dict)
    carbon_scale: float = 1.0
    solve_seconds: float = 0.0
    history: list[str] = field(default_factory=list)
    first: MilpSolution | None = None


def derated(problem: PlanProblem, derate: dict[tuple[str, Tier], float],
            carbon_scale: float = 1.0) -> PlanProblem:
    """``problem`` with capacities scaled per (configuration, tier) and the carbon cap scaled."""
    cap = {k: v * derate.get((k[1], k[2]), 1.0) for k, v in problem.capacity.items()}
    lim = problem.limits
    if carbon_scale != 1.0:
        lim = replace(lim, max_g_per_mtok=None if lim.max_g_per_mtok is None
                      else lim.max_g_per_mtok * carbon_scale,
                      max_kg_per_day=None if lim.max_kg_per_day is None
                      else lim.max_kg_per_day * carbon_scale)
    return replace(problem, capacity=cap, limits=lim)


def _utilization(problem: PlanProblem, sol: MilpSolution, pool_key: str, hour: int) -> float:
    """Planned load of a pool (``config@region/tier``) in replicas at its tier, over the
    replicas that carry load (spares not counted)."""
    tier = sol.tiers.get((pool_key, hour))
    n = sol.working(pool_key, hour)
    if tier is None or n <= 0:
        return 1.0
    pool = next(p for p in problem.pools if p.key == candidate_key(pool_key))
    load = 0.0
    for d in problem.demands:
        share = sol.shares.get((d.name, pool_key, hour), 0.0)
        if share > 0:
            load += d.rates_rps[hour] * share / problem.cap(d, pool, tier)
    return min(load / n, 1.0)


def _tighten(problem: PlanProblem, sol: MilpSolution, checks: Sequence[HourCheck],
             derate: dict[tuple[str, Tier], float]) -> list[str]:
    slo = {d.name: d for d in problem.demands}
    changes: dict[tuple[str, Tier], float] = {}
    notes = []
    for chk in checks:
        failing = {c.name: c for c in chk.classes if not c.met}
        if chk.overloaded and not failing:
            failing = {c.name: c for c in chk.classes}
        for name, c in failing.items():
            d = slo[name]
            severe = (c.ttft_p99_ms is None
                      or (d.ttft_p99_ms and c.ttft_p99_ms > 1.5 * d.ttft_p99_ms))
            for (cls, key, h), share in sol.shares.items():
                if cls != name or h != chk.hour or share <= 0:
                    continue
                tier = sol.tiers[(key, h)]
                config = key.partition("@")[0]
                u = _utilization(problem, sol, key, h)
                f = max(u * (0.8 if severe else 0.93), 0.3)
                changes[(config, tier)] = min(changes.get((config, tier), 1.0), f)
            seen = "no result" if c.ttft_p99_ms is None else f"{c.ttft_p99_ms:.0f} ms"
            notes.append(f"hour {chk.hour}: class {name} simulated P99 TTFT {seen} "
                         f"vs SLO {d.ttft_p99_ms:g} ms")
    for pool_tier, f in sorted(changes.items()):
        derate[pool_tier] = max(derate.get(pool_tier, 1.0) * f, MIN_DERATE)
    return notes


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
    """Every class's simulated P99s within ``(1 - slo_margin) x`` its SLO: a trimmed plan must
    pass with the same safety margin as the capacities, not by the luck of one short run."""
    keep = 1.0 - problem.slo_margin
    slo = {d.name: d for d in problem.demands}
    for chk in checks:
        for c in chk.classes:
            d = slo[c.name]
            for target, seen in ((d.ttft_p99_ms, c.ttft_p99_ms), (d.tpot_p99_ms, c.tpot_p99_ms),
                                 (d.e2e_p99_ms, c.e2e_p99_ms)):
                if target is not None and target != float("inf") and (
                        seen is None or seen > keep * target):
                    return False
    return True


def _trim_candidate(problem: PlanProblem, sol: MilpSolution,
                    tried: set[tuple[str, Tier]]) -> tuple[tuple[str, Tier], float, str] | None:
    """The dearest pool (with 2+ replicas) whose load might fit one replica fewer, and the
    capacity uplift that lets the MILP try it: ``load / (n - 1)`` replicas' worth."""
    prices = {p.key: p.price_usd_per_hour for p in problem.pools}
    best = None
    for (key, h), n in sol.counts.items():
        tier = sol.tiers.get((key, h))
        spare = sol.working(key, h)
        if tier is None or spare < 2:
            continue
        config = key.partition("@")[0]
        if (config, tier) in tried:
            continue
        load = _utilization(problem, sol, key, h) * spare
        f = max(load / (spare - 1), 1.0) * (1 + 1e-6)
        rank = (prices[candidate_key(key)], n, key)
        if best is None or rank > best[0]:
            hour = f" (hour {h})" if problem.hours > 1 else ""  # no hour in a one-rate plan
            best = (rank, (config, tier), f, f"{n}x{key}{hour}")
    return None if best is None else best[1:]


def _plan_key(sol: MilpSolution) -> tuple[object, ...]:
    """Everything of a solution that decides its simulation (what :mod:`verify` reads)."""
    def items(d: dict) -> tuple[tuple[str, object], ...]:  # type: ignore[type-arg]
        return tuple(sorted((repr(k), v) for k, v in d.items()))

    return (sol.hours, items(sol.counts), items(sol.tiers), items(sol.shares),
            items(sol.base_counts), items(sol.spares))


def closed_loop(problem: PlanProblem, settings: SolverSettings, verify: Verifier, *,
                executor: Executor | None = None, max_rounds: int = DEFAULT_MAX_ROUNDS,
                max_trims: int = DEFAULT_MAX_TRIMS,
                progress: Progress | None = None) -> LoopOutcome:
    """Solve and verify until every class meets its SLO in simulation (see module docstring);
    then try, at most ``max_trims`` times, a plan with one replica fewer in the dearest pool
    (single-replica capacities are conservative for pools: requests spread over replicas), kept
    only when its simulation passes too.

    Returns after the first round whose MILP has no plan (``solution.has_plan`` is false).
    ``progress`` receives each round's two steps, ``round N: MILP`` and ``round N: simulate the
    plan``.
    """
    executor = executor or SerialExecutor()
    derate: dict[tuple[str, Tier], float] = {}
    scale = 1.0
    history: list[str] = []
    seconds = 0.0
    first: MilpSolution | None = None
    last: tuple[MilpSolution, tuple[HourCheck, ...], PlanProblem] | None = None
    best: LoopOutcome | None = None
    tried: set[tuple[str, Tier]] = set()
    trial: tuple[tuple[str, Tier], float | None, str] | None = None  # key, old derate, label
    trims = 0
    rnd = 0
    simulated: dict[tuple[object, ...], tuple[HourCheck, ...]] = {}
    for rnd in range(1, max_rounds + 1):
        current = derated(problem, derate, scale)
        with step(progress, f"round {rnd}: MILP"):
            sol = solve_problem(current, settings)
        seconds += sol.seconds
        first = first or sol
        if not sol.has_plan and trial is None:
            if last is None:
                return LoopOutcome(sol, (), rnd, False, current, dict(derate), scale, seconds,
                                   history, first)
            history.append(f"round {rnd}: tightened model has no plan ({sol.status.value})")
            break
        checks: tuple[HourCheck, ...] = ()
        # a trial that saves nothing is rejected whatever its simulation would find
        futile = (trial is not None and best is not None and sol.has_plan
                  and sol.cost_per_day_usd >= best.solution.cost_per_day_usd - 1e-9)
        if sol.has_plan and not futile:
            seen = _plan_key(sol)
            if seen not in simulated:
                with step(progress, f"round {rnd}: simulate the plan"):
                    simulated[seen] = tuple(verify(sol, executor))
            checks = simulated[seen]
        ratio = _carbon_ratio(problem, checks)
        ok = sol.has_plan and all(c.met for c in checks) and ratio <= 1.0 + 1e-9
        if trial is not None:
            key, old, label = trial
            trial = None
            assert best is not None
            if (ok and _with_margin(problem, checks)
                    and sol.cost_per_day_usd < best.solution.cost_per_day_usd - 1e-9):
                history.append(f"round {rnd}: one replica fewer than {label} passed "
                               "simulation too; kept")
                best = LoopOutcome(sol, checks, rnd, True, current, dict(derate), scale,
                                   seconds, list(history), first)
            else:
                why = ("saved nothing" if not sol.has_plan or sol.cost_per_day_usd
                       >= best.solution.cost_per_day_usd - 1e-9 else
                       "missed an SLO in simulation" if not ok else
                       "came within the safety margin of an SLO")
                history.append(f"round {rnd}: one replica fewer than {label} {why}; kept the "
                               "verified plan")
                tried.add(key)
                if old is None:
                    derate.pop(key, None)
                else:
                    derate[key] = old
        elif ok:
            best = LoopOutcome(sol, checks, rnd, True, current, dict(derate), scale, seconds,
                               list(history), first)
        else:
            last = (sol, checks, current)
            notes = _tighten(current, sol, checks, derate)
            if ratio > 1.0 + 1e-9:
                scale *= 0.99 / ratio
                notes.append(f"simulated carbon {ratio:.3f}x the cap")
            history.append(f"round {rnd}: " + "; ".join(notes))
            continue
        cand = (_trim_candidate(best.problem, best.solution, tried)
                if trims < max_trims and rnd < max_rounds else None)
        if cand is None:
            break
        key, f, label = cand
        trims += 1
        trial = (key, derate.get(key), label)
        derate[key] = derate.get(key, 1.0) * f
    if best is not None:
        best.rounds, best.solve_seconds, best.history = rnd, seconds, history
        return best
    assert last is not None
    sol, checks, current = last
    return LoopOutcome(sol, checks, rnd, False, current, dict(derate), scale, seconds, history,
                       first)
