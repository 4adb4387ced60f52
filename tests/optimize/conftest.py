"""Fixtures of the optimizer tests: solver names and a per-session capacity cache."""

from __future__ import annotations

import pytest
from optimize_helpers import SOLVERS


@pytest.fixture(params=SOLVERS)
def solver_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="session")
def capacity_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One capacity cache for the whole test session (real searches run once)."""
    return str(tmp_path_factory.mktemp("fleetplan-cache"))
