"""MILP solver registry: fleetplan names -> PuLP solvers, always with a time limit and a gap.

``cbc`` (PuLP's bundled CBC, the default) and ``highs`` (HiGHS through ``highspy``, when that is
installed) are registered; any solver PuLP itself lists as available is accepted by its PuLP name
too. Unknown or unavailable names fail with the list of valid ones. Main entries:
:func:`make_solver`, :func:`solver_names`.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from functools import cache

import pulp

from fleetplan.errors import InputError, UnknownNameError

DEFAULT_SOLVER = "cbc"
DEFAULT_TIME_LIMIT_S = 60.0
DEFAULT_GAP = 1e-4

_REGISTRY: dict[str, str] = {}


def register_solver(name: str, pulp_name: str) -> None:
    """Register ``name`` for the PuLP solver class named ``pulp_name``; duplicates are refused."""
    if name in _REGISTRY:
        raise ValueError(f"solver {name!r} is already registered")
    _REGISTRY[name] = pulp_name


register_solver("cbc", "PULP_CBC_CMD")
register_solver("highs", "HiGHS")


def _available() -> set[str]:
    return set(pulp.listSolvers(onlyAvailable=True))


def solver_names() -> list[str]:
    """Names accepted by ``--solver`` on this machine."""
    avail = _available()
    ours = [n for n, p in _REGISTRY.items() if p in avail]
    return sorted(ours) + sorted(avail - set(_REGISTRY.values()))


@dataclass(frozen=True)
class SolverSettings:
    """Which solver, and the stop criteria that are always set and always reported."""

    name: str = DEFAULT_SOLVER
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    gap: float = DEFAULT_GAP

    def __post_init__(self) -> None:
        if not self.time_limit_s > 0:
            raise InputError(f"solver.time_limit_s(={self.time_limit_s}) must be > 0")
        if not 0 <= self.gap < 1:
            raise InputError(f"solver.gap(={self.gap}) must be in [0, 1)")

    @property
    def pulp_name(self) -> str:
        return resolve_solver(self.name)


def resolve_solver(name: str) -> str:
    """PuLP's name for ``name`` (a registered fleetplan name or an available PuLP name)."""
    avail = _available()
    pulp_name = _REGISTRY.get(name.lower(), name)
    if pulp_name not in avail:
        if name.lower() in _REGISTRY:
            hint = " (pip install highspy)" if pulp_name == "HiGHS" else ""
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
    if pulp_name in ("PULP_CBC_CMD", "COIN_CMD"):
        kwargs["threads"] = 1
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
