"""fleetplan: plan LLM serving fleets mixing enterprise and consumer GPUs.

The public API, for notebooks and other code (each result has ``to_dict()``, ``to_frame()``,
``plot()`` where it makes sense, and an HTML view in Jupyter):

- :func:`load_profiles`: the measured-run store (:class:`ProfileStore`).
- :func:`predict`: one replica's behaviour at a rate (a benchmark burst, or ``steady=True``);
  :func:`replica_params`, :func:`replay`, :func:`steady_state` are its building blocks.
- :class:`Scenario`, :func:`load_scenario`: traffic classes, SLOs, fleet, prices, carbon.
- :func:`simulate`: a fleet under a scenario's traffic (:class:`SimulationResult`).
- :func:`solve`: the cheapest verified fleet (:class:`Plan`); :func:`frontier`: cost vs carbon,
  SLO or rate (:class:`Frontier`).
- :func:`read_trace`, :func:`fit_trace`: production traces (Azure LLM trace format).
- :class:`ModelSpec` (``ModelSpec.from_hf_config(path)``: a model from its Hugging Face
  ``config.json``), :class:`Catalog` (the bundled tables plus your folders of ``gpus.csv``,
  ``prices.csv`` ...), :class:`DataContext` (catalog, store, calibration and cache folder a call
  reads: ``predict(..., context=ctx)`` or ``with ctx.activate(): ...``).
- :func:`error_band`: how far off an uncalibrated (spec-path) prediction has been
  (:mod:`fleetplan.validate.bands`; ``safety_factor`` there is for a solver's margin).

Every name is imported on first use (PEP 562), so ``import fleetplan`` (and the CLI's
``--help``) loads none of pandas, scipy, simpy, pulp or matplotlib; ``from fleetplan import
solve`` works as usual. Plots live in :mod:`fleetplan.viz` (imported on demand too).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from fleetplan._version import __version__

# public name -> module defining it (imported when the name is first used)
_LAZY = {
    "Catalog": "fleetplan.catalog.catalog",
    "DataContext": "fleetplan.context",
    "ModelSpec": "fleetplan.catalog.models",
    "error_band": "fleetplan.validate.bands",
    "FleetplanError": "fleetplan.errors",
    "SimulationResult": "fleetplan.fleet",
    "simulate": "fleetplan.fleet",
    "Frontier": "fleetplan.optimize",
    "Plan": "fleetplan.optimize",
    "frontier": "fleetplan.optimize",
    "solve": "fleetplan.optimize",
    "ProfileStore": "fleetplan.profiles.store",
    "load_profiles": "fleetplan.profiles.store",
    "replica_params": "fleetplan.replica.params",
    "predict": "fleetplan.replica.predict",
    "replay": "fleetplan.replica.protocol",
    "steady_state": "fleetplan.replica.steady",
    "Scenario": "fleetplan.scenario",
    "load_scenario": "fleetplan.scenario",
    "scenario_from_dict": "fleetplan.scenario",
    "fit_trace": "fleetplan.workload.trace",
    "read_trace": "fleetplan.workload.trace",
}

if TYPE_CHECKING:
    from fleetplan.catalog.catalog import Catalog
    from fleetplan.catalog.models import ModelSpec
    from fleetplan.context import DataContext
    from fleetplan.errors import FleetplanError
    from fleetplan.fleet.results import SimulationResult
    from fleetplan.fleet.simulate import simulate
    from fleetplan.optimize.frontier import Frontier, frontier
    from fleetplan.optimize.plan import Plan
    from fleetplan.optimize.solve import solve
    from fleetplan.profiles.store import ProfileStore, load_profiles
    from fleetplan.replica.params import replica_params
    from fleetplan.replica.predict import predict
    from fleetplan.replica.protocol import replay
    from fleetplan.replica.steady import steady_state
    from fleetplan.scenario import Scenario, load_scenario, scenario_from_dict
    from fleetplan.validate.bands import error_band
    from fleetplan.workload.trace import fit_trace, read_trace

__all__ = [
    "Catalog", "DataContext", "FleetplanError", "Frontier", "ModelSpec", "Plan", "ProfileStore",
    "Scenario", "SimulationResult", "__version__", "error_band", "fit_trace", "frontier",
    "load_profiles", "load_scenario", "predict", "read_trace", "replay", "replica_params",
    "scenario_from_dict", "simulate", "solve", "steady_state",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fleetplan' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
