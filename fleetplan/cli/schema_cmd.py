"""``fleetplan schema``: the JSON Schema of a scenario file."""

from __future__ import annotations

import typer

from fleetplan.cli._format import emit_json


def schema_cmd() -> None:
    """Print the JSON Schema of scenario files (YAML or JSON), for editors and validators.

    Example: fleetplan schema > scenario.schema.json
    """
    from fleetplan.scenario import scenario_json_schema

    emit_json(scenario_json_schema())


def register(app: typer.Typer) -> None:
    app.command("schema")(schema_cmd)
