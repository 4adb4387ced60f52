"""The process-wide cache folder: ``$FLEETPLAN_CACHE_DIR``, else ``~/.cache/fleetplan``.

At the bottom of the package, so every layer that keeps files there (the optimizer's capacity
and plan cache, :mod:`fleetplan.optimize.cache`; the compiled replica engine's machine code,
:mod:`fleetplan.replica.steady_kernel`) reads the one setting without importing the other.
Main entry: :func:`user_cache_dir` (read at call time, never created here).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "FLEETPLAN_CACHE_DIR"


def user_cache_dir() -> Path:
    """``$FLEETPLAN_CACHE_DIR``, else ``~/.cache/fleetplan`` (read at call time): the
    process-wide folder, whatever data context is active."""
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "fleetplan"
