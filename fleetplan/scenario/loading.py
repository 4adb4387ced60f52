"""Reading a scenario: file or parsed dict -> :class:`~fleetplan.scenario.model.Scenario`.

Main entries: :func:`load_scenario` (YAML or JSON file; trace paths relative to its folder),
:func:`scenario_from_dict` and :func:`scenario_json_schema` (``fleetplan schema``). Both take the
:class:`~fleetplan.context.DataContext` to read names in (``context=``; default: the bundled
catalog); the scenario keeps it, its own ``catalog:`` and ``model_config:`` added. Every error is
one :class:`~fleetplan.errors.InputError` line naming the file, the field path and the value.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fleetplan._load import load_data
from fleetplan.context import DataContext
from fleetplan.errors import InputError
from fleetplan.scenario.messages import format_validation_error
from fleetplan.scenario.model import Scenario


def _resolve_traces(data: Any, base: Path) -> Any:
    """Trace paths relative to the scenario file's folder (a path operation, no disk access).

    Returns a copy where a path changes (only the records on the way are copied: a deep copy
    of a 10^5-class file cost seconds); the caller's data is never modified."""
    if not isinstance(data, dict) or not isinstance(data.get("classes"), list):
        return data
    classes = list(data["classes"])
    for i, c in enumerate(classes):
        if not isinstance(c, dict) or ("trace" not in c and "arrivals" not in c):
            continue
        c = dict(c)
        t = c.get("trace")
        if isinstance(t, str) and not os.path.isabs(t):
            c["trace"] = str(base / t)
        for key in ("trace", "arrivals"):  # a trace record, or a process reading a file
            rec = c.get(key)
            f = rec.get("file") if isinstance(rec, dict) else None
            if isinstance(rec, dict) and isinstance(f, str) and not os.path.isabs(f):
                c[key] = {**rec, "file": str(base / f)}
        classes[i] = c
    return {**data, "classes": classes}


def scenario_from_dict(data: Any, source: str = "scenario",
                       base_dir: str | os.PathLike[str] | None = None, *,
                       context: DataContext | None = None) -> Scenario:
    """Validate a parsed scenario in ``context`` (default: the bundled catalog, the usual
    files); errors become one-line :class:`InputError` messages."""
    if base_dir is not None:
        data = _resolve_traces(data, Path(base_dir))
    if not isinstance(data, dict):
        raise InputError(f"{source}: a scenario is a mapping of fields, not {type(data).__name__}")
    data = dict(data)  # _data_context fills in paths and the model: the caller's dict stays
    ctx = _data_context(data, source, Path(base_dir) if base_dir is not None else None,
                        context if context is not None else DataContext())
    try:
        return Scenario.validate_in(data, ctx)
    except ValidationError as exc:
        raise InputError(format_validation_error(exc, data, source)) from None


def _data_context(data: dict[str, Any], source: str, base: Path | None,
                  given: DataContext) -> DataContext:
    """``given`` with the scenario's ``catalog:`` and ``model_config:`` added (paths made
    relative to its folder in ``data``; ``model`` filled from the config when left out)."""
    several = data.get("models")
    if ("model" not in data and "model_config" not in data and several is None
            and given.model is not None):
        data["model"] = given.model.model  # --model-config
    paths: dict[str, str | None] = {}
    for key in ("catalog", "model_config"):
        v = data.get(key)
        if v is not None and not isinstance(v, str):
            raise InputError(f"{source}: {key}: {v!r} must be a path (text)")
        if isinstance(v, str) and base is not None and not os.path.isabs(v):
            v = data[key] = str(base / v)
        paths[key] = v
    configs = _served_configs(data, source, base)
    if paths["catalog"] is None and paths["model_config"] is None and not configs:
        return given
    try:
        ctx = given.for_scenario(paths["catalog"], paths["model_config"])
        for cfg in configs:  # models[].model_config: each joins the catalog in turn
            ctx = ctx.for_scenario(None, cfg)
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None
    if "model" not in data and several is None and ctx.model is not None:
        data["model"] = ctx.model.model
    return ctx


def _served_configs(data: dict[str, Any], source: str, base: Path | None) -> list[str]:
    """The ``model_config`` paths of ``models:`` entries, resolved against the scenario's
    folder (written back into copies of the entries in ``data``)."""
    models = data.get("models")
    if not isinstance(models, list):
        return []
    out: list[str] = []
    entries = []
    for i, m in enumerate(models):
        v = m.get("model_config") if isinstance(m, dict) else None
        if v is not None and not isinstance(v, str):
            raise InputError(f"{source}: models[{i}].model_config: {v!r} must be a path (text)")
        if isinstance(v, str):
            if base is not None and not os.path.isabs(v):
                v = str(base / v)
            m = {**m, "model_config": v}
            out.append(v)
        entries.append(m)
    data["models"] = entries
    return out


def load_scenario(path: str | os.PathLike[str], *,
                  context: DataContext | None = None) -> Scenario:
    """Read and validate a YAML or JSON scenario file (trace paths relative to its folder), in
    ``context`` (default: the bundled catalog and the usual files).

    Read through :func:`fleetplan._load.load_data`: a regular file of at most 16 MiB, nesting,
    aliases and duplicate keys bounded before anything is built."""
    p = Path(path)
    data = load_data(p, what="scenario file")
    return scenario_from_dict(data, str(p), base_dir=p.parent.resolve(), context=context)


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file (``fleetplan schema``)."""
    return Scenario.model_json_schema(by_alias=True)
