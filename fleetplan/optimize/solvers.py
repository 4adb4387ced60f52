"""MILP solver registry: fleetplan names -> PuLP solvers, always with a time limit and a gap.

The one registry of solvers (:func:`register_solver`): ``cbc`` (PuLP's bundled CBC, the
default), ``highs`` (HiGHS through ``highspy``, when that is installed) and ``glpk`` (GLPK's
``glpsol``, when that is on the PATH); any solver PuLP itself lists as available is accepted by
its PuLP name too. Unknown or unavailable names fail with the names valid on this machine, both
when a scenario is loaded (``solver.name``) and here. The settings record is
:class:`fleetplan.scenario.SolverSettings` (one record for the scenario and the optimizer). Main
entries: :func:`make_solver`, :func:`solver_names`, :func:`resolve_solver`.
"""

from __future__ import annotations

import os
import sys
import warnings
from functools import cache

import pulp

from fleetplan.errors import InputError, UnknownNameError
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

SOLVERS: dict[str, str] = {}
"""fleetplan solver name -> PuLP solver name (the registry; lower-case names)."""
_INSTALL_HINTS: dict[str, str] = {}


def register_solver(name: str, pulp_name: str, install_hint: str = "") -> None:
    """Register ``name`` for the PuLP solver class named ``pulp_name``; duplicates are refused.

    ``install_hint`` is shown when the solver is not available on the machine.
    """
    key = name.lower()
    if key in SOLVERS:
        raise ValueError(f"solver {name!r} is already registered")
    SOLVERS[key] = pulp_name
    if install_hint:
        _INSTALL_HINTS[key] = install_hint


register_solver("cbc", "PULP_CBC_CMD")
register_solver("highs", "HiGHS", "pip install highspy")
register_solver("glpk", "GLPK_CMD", "install GLPK's glpsol, e.g. apt-get install glpk-utils")


def _available() -> set[str]:
    return set(pulp.listSolvers(onlyAvailable=True))


def solver_names() -> list[str]:
    """Names accepted by ``--solver`` on this machine."""
    avail = _available()
    ours = [n for n, p in SOLVERS.items() if p in avail]
    return sorted(ours) + sorted(avail - set(SOLVERS.values()))


def resolve_solver(name: str) -> str:
    """PuLP's name for ``name`` (a registered fleetplan name or an available PuLP name)."""
    avail = _available()
    pulp_name = SOLVERS.get(name.lower(), name)
    if pulp_name not in avail:
        if name.lower() in SOLVERS:
            how = _INSTALL_HINTS.get(name.lower())
            hint = f" ({how})" if how else ""
            raise InputError(f"solver {name} is not available on this machine{hint}; "
                             f"available: {', '.join(solver_names())}")
        raise UnknownNameError("solver", name, solver_names())
    return pulp_name


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
