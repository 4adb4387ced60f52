"""The registry of MILP solvers: fleetplan's solver names -> PuLP solvers, and which work here.

``cbc`` (PuLP's bundled CBC, the default), ``highs`` (HiGHS through ``highspy``, when that is
installed) and ``glpk`` (GLPK's ``glpsol``, when that is on the PATH); any solver PuLP itself
lists as available is accepted by its PuLP name too. A member is data (:class:`SolverEntry`: the
PuLP class name and how to install it), registered with :func:`register_solver`; duplicates are
refused. Unknown or unavailable names fail with the names valid on this machine, both when a
scenario is loaded (``solver.name``, :class:`fleetplan.scenario.SolverSettings`) and when the
optimizer builds its solver (:func:`fleetplan.optimize.solvers.make_solver`).

This module sits below the scenario schema (which validates against it) and the optimizer (which
solves with it). Main entries: :func:`resolve_solver`, :func:`solver_names`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetplan.errors import InputError, UnknownNameError
from fleetplan.registry.base import Registry

__all__ = ["SOLVERS", "SolverEntry", "register_solver", "resolve_solver", "solver_names"]


@dataclass(frozen=True)
class SolverEntry:
    """A registered solver: PuLP's name of its class, and how to install it where it is not."""

    pulp_name: str
    install_hint: str = ""


SOLVERS: Registry[SolverEntry] = Registry("solver")
"""fleetplan solver name (lower case) -> :class:`SolverEntry`."""


def register_solver(name: str, pulp_name: str, install_hint: str = "") -> SolverEntry:
    """Register ``name`` for the PuLP solver class named ``pulp_name``; duplicates are refused.

    ``install_hint`` is shown when the solver is not available on the machine.
    """
    return SOLVERS.add(name.lower(), SolverEntry(pulp_name, install_hint))


register_solver("cbc", "PULP_CBC_CMD")
register_solver("highs", "HiGHS", "pip install highspy")
register_solver("glpk", "GLPK_CMD", "install GLPK's glpsol, e.g. apt-get install glpk-utils")


def _available() -> set[str]:
    import pulp  # not at import: the scenario schema loads this module, pulp is slow to import

    return set(pulp.listSolvers(onlyAvailable=True))


def solver_names() -> list[str]:
    """Names accepted by ``--solver`` on this machine."""
    avail = _available()
    ours = [n for n, e in SOLVERS.items() if e.pulp_name in avail]
    return sorted(ours) + sorted(avail - {e.pulp_name for e in SOLVERS.values()})


def resolve_solver(name: str) -> str:
    """PuLP's name for ``name`` (a registered fleetplan name or an available PuLP name)."""
    avail = _available()
    entry = SOLVERS.get(name.lower())
    pulp_name = entry.pulp_name if entry is not None else name
    if pulp_name not in avail:
        if entry is not None:
            hint = f" ({entry.install_hint})" if entry.install_hint else ""
            raise InputError(f"solver {name} is not available on this machine{hint}; "
                             f"available: {', '.join(solver_names())}")
        raise UnknownNameError("solver", name, solver_names())
    return pulp_name
