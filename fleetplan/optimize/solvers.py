"""Building the PuLP solver of a :class:`~fleetplan.scenario.SolverSettings`: quiet,
deterministic, always with a time limit and a gap.

The solver names and which are available on this machine are the solver registry's
(:mod:`fleetplan.registry.solvers`: ``cbc``, ``highs``, ``glpk`` or any PuLP name available),
re-exported here. Main entries: :func:`make_solver`, :func:`achieved_gap`.
"""

from __future__ import annotations

import os
import sys
import warnings
from functools import cache

import pulp

from fleetplan.registry.solvers import SOLVERS, register_solver, resolve_solver, solver_names
from fleetplan.scenario.settings import (
    DEFAULT_GAP,
    DEFAULT_SOLVER,
    DEFAULT_TIME_LIMIT_S,
    SolverSettings,
)

__all__ = [
    "DEFAULT_GAP", "DEFAULT_SOLVER", "DEFAULT_TIME_LIMIT_S", "SOLVERS", "SolverSettings",
    "achieved_gap", "make_solver", "register_solver", "resolve_solver", "solver_names",
]


@cache
def _silence_highs_banner() -> None:
    """HiGHS prints a copyright banner on stdout when its first instance is created in a process,
    whatever ``output_flag`` says; create that first instance with stdout sent to /dev/null so
    the library never writes to the caller's stdout (JSON output stays clean)."""
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def make_solver(settings: SolverSettings, *, mip: bool = True) -> pulp.LpSolver:
    """The PuLP solver for ``settings``: quiet, deterministic, time limit and gap set."""
    kwargs: dict[str, object] = {"msg": False, "timeLimit": settings.time_limit_s,
                                 "gapRel": settings.gap, "mip": mip}
    pulp_name = settings.pulp_name
    # CBC: no `threads` option. CBC's default is its serial branch and bound; `-threads 1` runs
    # the parallel code with one thread, which now and then stalls until the time limit on a
    # loaded machine (8 of 400 solves of a 1 ms model under two busy cores, 0 of 400 without
    # it), turning an optimal plan into a time-limited "feasible" one at random.
    # not for HiGHS: its thread pool is global to the process, and asking for another size once
    # any HiGHS instance has run makes every later solve fail ("Not Solved")
    if pulp_name in ("PULP_CBC_CMD", "COIN_CMD"):
        kwargs["timeMode"] = "elapsed"
    if pulp_name == "HiGHS":
        _silence_highs_banner()
    with warnings.catch_warnings():
        # PuLP 3.3 announces that its bundled CBC leaves in PuLP 4; fleetplan pins PuLP 3.x
        warnings.filterwarnings("ignore", message="PULP_CBC_CMD is deprecated",
                                category=DeprecationWarning)
        return pulp.getSolver(pulp_name, **kwargs)


def achieved_gap(prob: pulp.LpProblem) -> float | None:
    """The relative gap the solver proved, where it reports one (HiGHS); else ``None``."""
    model = getattr(prob, "solverModel", None)
    if model is None or not hasattr(model, "getInfo"):
        return None
    try:
        gap = float(model.getInfo().mip_gap)
    except Exception:  # noqa: BLE001 - a solver without MIP info reports no gap
        return None
    if gap != gap or gap == float("inf"):  # NaN or no incumbent
        return None
    return max(gap, 0.0)
