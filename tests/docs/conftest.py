"""Docs and notebook tests: the ``slow`` marker (notebook execution, about 2 minutes in all)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: runs for more than a few seconds")
