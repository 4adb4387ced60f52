"""The exception hierarchy of fleetplan.

Every error a user can cause derives from :class:`FleetplanError`. The CLI turns any of them into
one line on stderr and exit code 2 (``exit_code`` lets a subclass ask for another: 3 for an
infeasible plan, 4 for a plan its simulation did not verify). Messages name the file, field
and value at fault.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class FleetplanError(Exception):
    """Root of every error fleetplan raises on purpose."""

    exit_code: int = 2


class InputError(FleetplanError):
    """A file, field or value given by the user is invalid."""


class DataError(FleetplanError):
    """A bundled or stored table fails its schema check."""


class UnknownNameError(InputError):
    """A name (GPU, configuration, model, region, policy, solver ...) is not known."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]) -> None:
        valid = sorted(set(valid))
        self.kind, self.name, self.valid = kind, name, valid
        close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        shown = ", ".join(valid[:20]) + (" ..." if len(valid) > 20 else "")
        super().__init__(f"unknown {kind} {name}{hint} (valid: {shown})")


class ModelError(FleetplanError):
    """The performance model cannot answer (e.g. no calibration and no spec)."""


class DoesNotFit(ModelError):
    """The model does not fit on a configuration: its weights (or one sequence's fixed-size
    state) leave no room for a KV cache. A solve leaves such a candidate out with a note."""


class InfeasibleError(FleetplanError):
    """No plan meets the scenario's constraints."""

    exit_code = 3


class NotVerifiedError(FleetplanError):
    """A plan was made, but its simulation misses an SLO or the carbon cap (it is still printed
    and written, marked ``verified: false``)."""

    exit_code = 4


class InputLimitError(InputError):
    """An input is over a limit set before reading or allocating it (bytes, nesting, aliases,
    arrivals to draw ...); the message states the figure and the limit."""
