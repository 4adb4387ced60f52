"""Reading a scenario: file or parsed dict -> :class:`~fleetplan.scenario.model.Scenario`.

Main entries: :func:`load_scenario` (YAML or JSON file; trace paths relative to its folder),
:func:`scenario_from_dict` and :func:`scenario_json_schema` (``fleetplan schema``). Every error is
one :class:`~fleetplan.errors.InputError` line naming the file, the field path and the value.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fleetplan._load import load_data
from fleetplan.errors import InputError
from fleetplan.scenario.messages import format_validation_error
from fleetplan.scenario.model import Scenario


def _resolve_traces(data: Any, base: Path) -> Any:
    """Trace paths relative to the scenario file's folder (a path operation, no disk access)."""
    if not isinstance(data, dict) or not isinstance(data.get("classes"), list):
        return data
    for c in data["classes"]:
        if not isinstance(c, dict):
            continue
        t = c.get("trace")
        if isinstance(t, str) and not os.path.isabs(t):
            c["trace"] = str(base / t)
        for rec in (t, c.get("arrivals")):  # a trace record, or a process reading a file
            f = rec.get("file") if isinstance(rec, dict) else None
            if isinstance(rec, dict) and isinstance(f, str) and not os.path.isabs(f):
                rec["file"] = str(base / f)
    return data


def scenario_from_dict(data: Any, source: str = "scenario",
                       base_dir: str | os.PathLike[str] | None = None) -> Scenario:
    """Validate a parsed scenario; errors become one-line :class:`InputError` messages."""
    if base_dir is not None:
        data = _resolve_traces(copy.deepcopy(data), Path(base_dir))
    if not isinstance(data, dict):
        raise InputError(f"{source}: a scenario is a mapping of fields, not {type(data).__name__}")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise InputError(format_validation_error(exc, data, source)) from None


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read and validate a YAML or JSON scenario file (trace paths relative to its folder).

    Read through :func:`fleetplan._load.load_data`: a regular file of at most 16 MiB, nesting,
    aliases and duplicate keys bounded before anything is built."""
    p = Path(path)
    data = load_data(p, what="scenario file")
    return scenario_from_dict(data, str(p), base_dir=p.parent.resolve())


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file (``fleetplan schema``)."""
    return Scenario.model_json_schema(by_alias=True)
