"""The scenario's own documentation: every field described in the schema, the region codes in the
reference, and the concepts page using the schema's names."""

from __future__ import annotations

import typing
from pathlib import Path

from fleetplan.catalog import bundled_catalog
from fleetplan.fleet import ROUTERS
from fleetplan.scenario import Commitment, scenario_json_schema
from fleetplan.workload.arrivals import ARRIVALS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_scenario_field_is_described() -> None:
    schema = scenario_json_schema()
    records = [("Scenario", schema), *schema["$defs"].items()]
    missing = [f"{name}.{field}" for name, rec in records
               for field, spec in rec.get("properties", {}).items() if not spec.get("description")]
    assert not missing


def test_reference_lists_every_region_with_its_intensity_and_source() -> None:
    page = (DOCS / "scenario-reference.md").read_text(encoding="utf-8")
    for code, g in bundled_catalog().grid().items():
        assert f"| `{code}` | {g.name} | {g.g_co2_per_kwh:g} | {g.year} |" in page, code


def test_concepts_page_uses_the_schema_names() -> None:
    page = (DOCS / "concepts.md").read_text(encoding="utf-8")
    modes = typing.get_args(Commitment.model_fields["mode"].annotation)
    names = [*ROUTERS, *ARRIVALS, *modes, "routing", "arrivals", "rate_rps", "rate_profile_rps",
             "trace", "burstiness", "split", "pin", "candidates", "availability",
             "budget_usd_per_hour", "redundancy", "max_g_per_mtok", "max_kg_per_day"]
    missing = [n for n in names if f"`{n}`" not in page]
    assert not missing
