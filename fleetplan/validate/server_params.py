"""Where :func:`apply_server` and :func:`apply_stated` were first placed; they live in
:mod:`fleetplan.replica.server_params` now, so that ``fleetplan calibrate`` (the replica layer)
replays each run with its server's settings too. Importable here for the code that reads them
from this module."""

from __future__ import annotations

from fleetplan.replica.server_params import apply_server, apply_stated

__all__ = ["apply_server", "apply_stated"]
