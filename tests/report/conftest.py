"""Plans to report on: the bundled example's plan (committed, see data/README.md) and the same
plan in its older shape (one pool per configuration and region), as parsed JSON. Plots render
off-screen. Helpers shared by the test modules live in ``report_helpers``."""

from __future__ import annotations

import json

import matplotlib
import pytest
from report_helpers import EXAMPLE_PLAN, LEGACY_PLAN, tiered

matplotlib.use("Agg")


@pytest.fixture
def example_plan() -> dict:
    return json.loads(EXAMPLE_PLAN.read_text(encoding="utf-8"))


@pytest.fixture
def legacy_plan() -> dict:
    return json.loads(LEGACY_PLAN.read_text(encoding="utf-8"))


@pytest.fixture
def tiered_plan(legacy_plan: dict) -> dict:
    return tiered(legacy_plan)
