"""What the closed loop learns from simulated plans: bounds on capacity multipliers.

Each simulated plan is evidence about a multiplier per (configuration, tier) of the measured
single-replica capacities (:mod:`fleetplan.optimize.loop`'s module docstring gives the rules):
a pool that passed its load raises that key's lower bound; a class that failed makes suspects of
the pools whose own share of it missed (where the simulation judged each pool's share:
:class:`fleetplan.optimize.verify.PoolCheck`), else of every pool that carried it, cut alone or,
when several share the failure, together until later evidence explains it (:class:`_Evidence`).
:func:`_cut` and :func:`_vouch` read a plan and its
simulation into the evidence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from fleetplan.fleet.results import share_verdict
from fleetplan.optimize.milp import MilpSolution, candidate_key
from fleetplan.optimize.problem import Demand, PlanProblem, Tier
from fleetplan.optimize.verify import ClassCheck, HourCheck
from fleetplan.scenario.fleet import SPOT_MARK, split_pool_name

MIN_DERATE = 0.05

Key = tuple[str, Tier]  # (configuration, tier)

@dataclass
class _Seen:
    """A plan the loop simulated, its verdict, and the table that gave it."""

    solution: MilpSolution
    checks: tuple[HourCheck, ...]
    problem: PlanProblem
    derate: dict[Key, float]
    scale: float
    ok: bool
    accepted: bool
    ratio: float


@dataclass
class _Evidence:
    """Bounds on each (configuration, tier)'s capacity multiplier (module docstring).

    ``hi`` is derived (:meth:`settle`) from the failures: ``sole`` holds the cuts of failures
    with one suspect key (``bad``: the least load at which a key was a sole suspect); ``joint``
    the failures with several, each as key -> (load, cut). A joint failure cuts all its
    suspects until the evidence explains it: one suspect failed alone at no more load (it was
    over there too: ``explained``, whose other suspects are probe candidates at their bound
    without it), or every suspect but one passed as much load (that one becomes a sole
    suspect)."""

    hi: dict[Key, float] = field(default_factory=dict)
    lo: dict[Key, float] = field(default_factory=dict)
    sole: dict[Key, float] = field(default_factory=dict)
    bad: dict[Key, float] = field(default_factory=dict)
    joint: list[dict[Key, tuple[float, float]]] = field(default_factory=list)
    explained: list[dict[Key, tuple[float, float]]] = field(default_factory=list)

    def blame(self, suspects: dict[Key, tuple[float, float]]) -> None:
        """One failure's suspects, key -> (load, cut)."""
        if len(suspects) == 1:
            ((k, (u, f)),) = suspects.items()
            self.sole[k] = min(self.sole.get(k, 1.0), f)
            self.bad[k] = min(self.bad.get(k, math.inf), u)
        elif suspects:
            self.joint.append(dict(suspects))
        self.settle()

    def settle(self) -> None:
        """Resolve the joint failures the evidence explains; recompute ``hi``."""
        changed = True
        while changed:
            changed = False
            keep = []
            for rec in self.joint:
                if any(u >= self.bad.get(k, math.inf) - 1e-9 for k, (u, _f) in rec.items()):
                    # a suspect was over alone at no more load: explained. Its cuts stay
                    # (clearing them at once sends the MILP back to the other suspects'
                    # loads round after round while the guilty one is cut down step by step);
                    # a probe re-tests each other suspect at its bound without this failure
                    self.explained.append(rec)
                    continue
                left = {k: v for k, v in rec.items() if self.lo.get(k, 0.0) + 1e-9 < v[0]}
                if len(left) == 1:  # the others passed as much: this one is to blame
                    ((k, (u, f)),) = left.items()
                    self.sole[k] = min(self.sole.get(k, 1.0), f)
                    self.bad[k] = min(self.bad.get(k, math.inf), u)
                    changed = True
                    continue
                keep.append(rec)
            self.joint = keep
        hi = dict(self.sole)
        for rec in self.joint + self.explained:
            for k, (_u, f) in rec.items():
                hi[k] = min(hi.get(k, 1.0), f)
        self.hi = hi

    def without(self, rec: dict[Key, tuple[float, float]], key: Key) -> float:
        """``key``'s multiplier were joint failure ``rec`` not blamed on it."""
        h = self.sole.get(key, 1.0)
        for other in self.joint + self.explained:
            if other != rec and key in other:
                h = min(h, other[key][1])
        return max(h, self.lo.get(key, 0.0))

    def m(self, key: Key) -> float:
        return max(self.hi.get(key, 1.0), self.lo.get(key, 0.0))

    def table(self) -> dict[Key, float]:
        keys = sorted(set(self.hi) | set(self.lo))
        return {k: v for k in keys if (v := self.m(k)) != 1.0}


def pool_loads(problem: PlanProblem, sol: MilpSolution) -> dict[tuple[str, int], float]:
    """Per (pool, hour) of ``sol``: its planned load per working replica, in replicas at the
    *base* capacities of ``problem`` (1.0: every working replica at its measured capacity)."""
    pools = {p.key: p for p in problem.pools}
    by_name = {d.name: d for d in problem.demands}
    load: dict[tuple[str, int], float] = {}
    for (name, key, h), share in sol.shares.items():
        if share <= 0 or (key, h) not in sol.tiers:
            continue
        d = by_name[name]
        cap = problem.cap(d, pools[candidate_key(key)], sol.tiers[(key, h)])
        if cap > 0:
            load[(key, h)] = load.get((key, h), 0.0) + d.rates_rps[h] * share / cap
    return {k: v / max(sol.working(*k), 1) for k, v in load.items()}


def evidence_config(config: str, market: str | None) -> str:
    """The configuration part of an evidence key: spot pools learn their own multiplier
    (``config~spot``), since their churn costs them capacity that on-demand pools keep."""
    return config + SPOT_MARK if market == "spot" else config


def _config_tier(sol: MilpSolution, key: str, h: int) -> Key:
    config, _region, market = split_pool_name(key)
    return evidence_config(config, market), sol.tiers[(key, h)]


def _within(d: Demand, c: ClassCheck, keep: float) -> bool:
    """Every simulated P99 of class check ``c`` within ``keep x`` the SLO of ``d``."""
    for target, seen in ((d.ttft_p99_ms, c.ttft_p99_ms), (d.tpot_p99_ms, c.tpot_p99_ms),
                         (d.e2e_p99_ms, c.e2e_p99_ms)):
        if target is not None and target != float("inf") and (
                seen is None or seen > keep * target):
            return False
    return True


def _severe(d: Demand, c: ClassCheck) -> bool:
    """A miss by more than half the TTFT SLO (or no result at all): the larger cut."""
    return c.ttft_p99_ms is None or bool(d.ttft_p99_ms and c.ttft_p99_ms > 1.5 * d.ttft_p99_ms)


def _failing(problem: PlanProblem, checks: Sequence[HourCheck]) -> list[tuple[int, str, bool]]:
    """(hour, class, severe) of every class that failed (all classes of an overloaded hour)."""
    slo = {d.name: d for d in problem.demands}
    out = []
    for chk in checks:
        failing = [c for c in chk.classes if not c.met]
        if chk.overloaded and not failing:
            failing = list(chk.classes)
        for c in failing:
            out.append((chk.hour, c.name, _severe(slo[c.name], c)))
    return out


def _own_verdicts(chk: HourCheck, carriers: Sequence[str],
                  c: ClassCheck) -> dict[str, ClassCheck] | None:
    """Class ``c`` judged on each carrier pool's own requests, when the check has every
    carrier's verdict and they explain the failure: at least one missed (a class misses its P99
    only if some pool's share does), or the class itself met its SLO and fails only because
    another pool of the hour was overloaded (then none is blamed). Else ``None`` (the class's
    verdict alone is read). ``c``: the class's own check in ``chk``."""
    own = {k: chk.pool_class(k, c.name) for k in carriers}
    if not carriers or any(v is None for v in own.values()):
        return None
    got = {k: v for k, v in own.items() if v is not None}
    return got if any(not v.met for v in got.values()) or c.met else None


def _cut(problem: PlanProblem, seen: _Seen, ev: _Evidence, repeat: bool,
         blamed_keys: set[Key] | None = None) -> list[str]:
    """Upper bounds from a failing plan (module docstring); ``repeat``: the MILP gave this plan
    again, so every bound it touches shrinks further (progress is guaranteed). The keys it
    blames are added to ``blamed_keys``."""
    sol = seen.solution
    loads = pool_loads(problem, sol)
    slo = {d.name: d for d in problem.demands}
    notes = []
    changes: dict[Key, float] = {}
    for h, name, severe in _failing(problem, seen.checks):
        carriers = [key for key in sol.carriers(name, h) if (key, h) in loads]
        chk = next(chk for chk in seen.checks if chk.hour == h)
        c = next(c for c in chk.classes if c.name == name)
        own = _own_verdicts(chk, carriers, c)
        harsh = dict.fromkeys(carriers, severe)
        if own is not None:  # each pool judged on its own requests: blame those that missed
            blamed = [k for k in carriers if not own[k].met]
            harsh = {k: _severe(slo[name], own[k]) for k in carriers}
            for k in blamed:  # one that passed this load before: that evidence was wrong
                if loads[(k, h)] <= ev.lo.get(_config_tier(sol, k, h), 0.0) + 1e-9:
                    ev.lo.pop(_config_tier(sol, k, h), None)
        else:
            blamed = [k for k in carriers
                      if loads[(k, h)] > ev.lo.get(_config_tier(sol, k, h), 0.0) + 1e-9]
            if not blamed:  # every carrier passed this load before: the evidence conflicts
                blamed = carriers
                for k in carriers:
                    ev.lo.pop(_config_tier(sol, k, h), None)
        suspects: dict[Key, tuple[float, float]] = {}
        for k in blamed:
            ct = _config_tier(sol, k, h)
            now = seen.derate.get(ct, 1.0)
            f = max(loads[(k, h)] * (0.8 if harsh[k] else 0.93), 0.3 * now, MIN_DERATE)
            if repeat:
                f = min(f, now * 0.93)
            u0, f0 = suspects.get(ct, (0.0, math.inf))
            suspects[ct] = (max(u0, loads[(k, h)]), min(f0, f))
            changes[ct] = min(changes.get(ct, f), f)
        ev.blame(suspects)
        got = "no result" if c.ttft_p99_ms is None else f"{c.ttft_p99_ms:.0f} ms"
        where = ""
        if own is not None and len(carriers) > 1:  # which of its pools missed
            where = " (" + "; ".join(
                share_verdict(own[k].met, _within(slo[name], own[k], 1.0),
                              overloaded=chk.pool_overloaded(k)) + f" on {k}"
                + ("" if own[k].ttft_p99_ms is None else f", {own[k].ttft_p99_ms:.0f} ms")
                for k in carriers) + ")"
        hour = f"hour {h}: " if problem.hours > 1 else ""  # no hour in a one-rate plan
        why = _why_not_met(slo[name], c, chk, carriers)
        notes.append(f"{hour}class {name} simulated P99 TTFT {got} vs SLO "
                     f"{slo[name].ttft_p99_ms:g} ms{where}{why}")
    if blamed_keys is not None:  # the keys the evidence now blames alone
        blamed_keys.update(k for k in changes if k in ev.sole)
    return notes


def _why_not_met(d: Demand, c: ClassCheck, chk: HourCheck, carriers: Sequence[str]) -> str:
    """Why class ``c`` failed where its P99s are within their targets (else ""): a pool whose
    backlog grew through the simulation (overloaded: the queue would keep growing), or
    requests the simulation left unfinished."""
    if not _within(d, c, 1.0):
        return ""
    over = [k for k in carriers if chk.pool_overloaded(k)]
    if over:
        return (f", within it, but {' and '.join(over)} "
                f"{'was' if len(over) == 1 else 'were'} overloaded (the backlog grew through "
                "the simulation)")
    if chk.overloaded:
        return ", within it, but a pool of the plan was overloaded (the backlog grew through " \
               "the simulation)"
    return ", within it, but requests were left unfinished when the simulation ended"


def _vouch(problem: PlanProblem, sol: MilpSolution, ev: _Evidence,
           checks: Sequence[HourCheck] | None = None) -> None:
    """Lower bounds from a simulated plan. Accepted (``checks`` None): each pool's load per
    working replica passed. Otherwise, from ``checks``: a pool passed its load when every class
    it carries met its SLO in that hour (within the safety margin where the load is above the
    measured capacity) on that pool's own requests, and the pool was not overloaded (where the
    check has no per-pool verdicts: every class it carries met its SLO and no pool of the hour
    was overloaded). Under planned routing a pool's
    requests and replicas do not depend on the other pools, so a failure elsewhere in the plan
    says nothing against it."""
    loads = pool_loads(problem, sol)
    if checks is None:
        good = set(loads)
    else:
        slo = {d.name: d for d in problem.demands}
        keep = 1.0 - problem.slo_margin
        by_hour = {chk.hour: chk for chk in checks}
        good = set()
        for key, h in loads:
            chk = by_hour.get(h)
            if chk is None:
                continue
            carried = {cls for (cls, k, hh), s in sol.shares.items()
                       if k == key and hh == h and s > 0}
            mine = [chk.pool_class(key, c) for c in sorted(carried)]
            if chk.pool_overloaded(key) is False and all(c is not None for c in mine):
                # judged on its own requests: a failure elsewhere says nothing against it
                res = [c for c in mine if c is not None]
            elif chk.overloaded:
                continue
            else:
                res = [c for c in chk.classes if c.name in carried]
            if len(res) != len(carried) or not all(c.met for c in res):
                continue
            if loads[(key, h)] > 1.0 + 1e-6 and not all(
                    _within(slo[c.name], c, keep) for c in res):
                continue
            good.add((key, h))
    for key, h in sorted(good):
        ct = _config_tier(sol, key, h)
        ev.lo[ct] = max(ev.lo.get(ct, 0.0), loads[(key, h)])
    ev.settle()
