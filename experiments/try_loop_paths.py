"""A measurement: does a tighter carbon cap lead the closed loop to a cheaper verified plan?

Usage: python experiments/try_loop_paths.py FIRST_SEED LAST_SEED [--class-only] [--json FILE]
[--trims N] [--rounds N]

For each seed, a random small problem (``random_case`` of tests/optimize/optimize_helpers.py:
one or two classes on its three synthetic pools, the cases tests/optimize/test_loop_optimum.py
draws) is judged by a fake verifier with hidden true capacity multipliers per (configuration,
tier), drawn in [0.5, 1.4]: a class fails when a pool carrying it holds more load per working
replica than its truth allows, and (unless ``--class-only``, the verifier before per-pool
verdicts) each pool's share of a class is judged on its own, as
:func:`fleetplan.optimize.verify.run_verification` reports it. The closed loop runs without a
carbon cap and with caps at 0.97, 0.9 and 0.8 times the carbon of the MILP's cheapest plan
(``max_rounds`` the solver's default); a comparison *loses* when the capped loop verified a
cheaper plan than the uncapped one, or verified where the uncapped one did not (a cheaper plan
the uncapped loop's path never reached); ``--trims N`` gives every loop ``max_trims`` N instead
of the default, ``--rounds N`` ``max_rounds`` N instead of the default (16; 12 before 7 Dec
2026). Prints each loss and their count (docs/optimizer.md, "The closed loop"). ``--json FILE``
also writes each seed's answers ($/h, or null where unverified: uncapped, then each cap), so
that two loops can be compared by what they answer, not only by whether their capped runs beat
their uncapped one.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "optimize"))

from optimize_helpers import random_case  # noqa: E402

from fleetplan.optimize import loop as loop_mod  # noqa: E402
from fleetplan.optimize.evidence import pool_loads  # noqa: E402
from fleetplan.optimize.milp import solve_problem  # noqa: E402
from fleetplan.optimize.problem import Limits  # noqa: E402
from fleetplan.optimize.solvers import SolverSettings  # noqa: E402
from fleetplan.optimize.verify import ClassCheck, HourCheck, PoolCheck  # noqa: E402

EXACT = SolverSettings("cbc", time_limit_s=30, gap=0.0)


def judge(problem, truth, per_pool=True):  # type: ignore[no-untyped-def]
    def verify(sol, executor):  # type: ignore[no-untyped-def]
        loads = pool_loads(problem, sol)
        out = []
        for h in range(sol.hours):
            over = {k: loads.get((k, h), 0.0) > truth[(k.partition("@")[0], sol.tiers[(k, h)])]
                    + 1e-9 for (k, hh) in sol.tiers if hh == h}
            classes, served = [], {}
            for d in problem.demands:
                mine = [k for (c, k, hh), s in sol.shares.items()
                        if c == d.name and hh == h and s > 0]
                bad = any(over[k] for k in mine)
                classes.append(ClassCheck(d.name, d.ttft_p99_ms * (1.2 if bad else 0.5),
                                          None, None, not bad))
                for k in mine:
                    served.setdefault(k, []).append(ClassCheck(
                        d.name, d.ttft_p99_ms * (1.2 if over[k] else 0.5), None, None,
                        not over[k]))
            pools = tuple(PoolCheck(k, False, tuple(v)) for k, v in sorted(served.items()))
            out.append(HourCheck(h, tuple(classes), False, sol.g_co2_per_day / 24,
                                 problem.mtok_per_hour(h) * 1e6, {},
                                 pools if per_pool else ()))
        return out
    return verify


def _cost(out) -> float | None:  # type: ignore[no-untyped-def]
    return round(out.solution.cost_per_day_usd / 24, 6) if out.verified else None


def main(first: int, last: int, per_pool: bool = True, out_json: str | None = None,
         trims: int = loop_mod.DEFAULT_MAX_TRIMS,
         rounds: int = loop_mod.DEFAULT_MAX_ROUNDS) -> None:
    losses = comparisons = unverified = problems = simulated = 0
    answers: dict[int, list[float | None]] = {}
    for seed in range(first, last):
        p, truth = random_case(seed)
        free = solve_problem(p, EXACT)
        if not free.has_plan:
            continue
        loose = loop_mod.closed_loop(p, EXACT, judge(p, truth, per_pool), max_rounds=rounds,
                                    max_trims=trims)
        unverified += not loose.verified
        problems += 1
        simulated += loose.simulated
        answers[seed] = [_cost(loose)]
        g = free.g_co2_per_day / (sum(p.mtok_per_hour(h) for h in range(p.hours)) * 24 / p.hours)
        for f in (0.97, 0.9, 0.8):
            q = replace(p, limits=Limits(max_g_per_mtok=g * f))
            tight = loop_mod.closed_loop(q, EXACT, judge(q, truth, per_pool), max_rounds=rounds,
                                        max_trims=trims)
            comparisons += 1
            answers[seed].append(_cost(tight))
            if tight.verified and (not loose.verified or tight.solution.cost_per_day_usd
                                   < loose.solution.cost_per_day_usd - 1e-6):
                losses += 1
                print(f"seed {seed} cap x{f}: "
                      + (f"${loose.solution.cost_per_day_usd / 24:.2f}/h" if loose.verified
                         else "no verified plan")
                      + f" without a cap, ${tight.solution.cost_per_day_usd / 24:.2f}/h with it")
    print(f"{losses} of {comparisons} comparisons: the capped loop verified a cheaper plan "
          f"(or verified where the uncapped one did not); {unverified} uncapped loops "
          f"unverified; {simulated / max(problems, 1):.2f} plans simulated per uncapped loop")
    if out_json:
        with open(out_json, "w", encoding="utf-8") as fh:
            json.dump({"simulated_per_loop": simulated / max(problems, 1), "answers": answers},
                      fh, indent=1)


if __name__ == "__main__":
    rest = sys.argv[3:]
    main(int(sys.argv[1]), int(sys.argv[2]), per_pool="--class-only" not in rest,
         out_json=rest[rest.index("--json") + 1] if "--json" in rest else None,
         trims=int(rest[rest.index("--trims") + 1]) if "--trims" in rest
         else loop_mod.DEFAULT_MAX_TRIMS,
         rounds=int(rest[rest.index("--rounds") + 1]) if "--rounds" in rest
         else loop_mod.DEFAULT_MAX_ROUNDS)
