"""fleetplan: plan LLM serving fleets mixing enterprise and consumer GPUs.

The public API, for notebooks and other code (each result has ``to_dict()``, ``to_frame()``,
``plot()`` where it makes sense, and an HTML view in Jupyter):

- :func:`load_profiles`: the measured-run store (:class:`ProfileStore`);
  :func:`run_economics_table` (:class:`EconomicsRequest`): its runs with cost, energy and
  carbon; :func:`ingest_files` (:class:`IngestRequest` -> :class:`IngestOutcome`, whose
  ``save()`` writes the store): result files read into it.
- :func:`predict`: what vLLM's benchmark would measure for one replica (a burst:
  :class:`ReplayResult`); :func:`predict_steady`: its sustained behaviour at a rate
  (:class:`SteadyResult`, with a :class:`SteadyStatus`); :func:`replica_params` (a
  :class:`ReplicaParams`), :func:`replay`, :func:`steady_state` are their building blocks.
  :func:`run_prediction` of a :class:`PredictRequest` is ``fleetplan predict``: the
  :class:`Prediction` with its error bands, own runs and measured runs.
- Each command of the CLI is one call taking a typed request record, which checks its fields
  when built: :func:`run_calibration` (:class:`CalibrateRequest` -> :class:`CalibrationOutcome`,
  whose ``save()`` writes the file) and :func:`run_validation` (:class:`ValidateRequest` ->
  :class:`ValidationOutcome` holding a :class:`ValidationResult`). ``fleetplan bench``'s is
  :func:`fleetplan.bench.sweep.prepare_sweep` (a live server: not imported from here, since
  the load generator reads this package's version).
- :class:`Scenario`, :func:`load_scenario`: traffic classes, SLOs, fleet, prices, carbon.
- :func:`simulate`: a fleet under a scenario's traffic (:class:`SimulationResult`: a
  :class:`SimStatus`, one :class:`SimulatedClass` per class, one :class:`PoolResult` per pool).
- :func:`solve`: the cheapest verified fleet (:class:`Plan`: a :class:`PlanStatus`, one
  :class:`PlannedClass` per class); :func:`frontier`: cost vs carbon, SLO or rate
  (:class:`Frontier`).
- :func:`read_trace`, :func:`fit_trace`: production traces (Azure LLM trace format).
- :class:`ModelSpec` (``ModelSpec.from_hf_config(path)``: a model from its Hugging Face
  ``config.json``), :class:`Catalog` (the bundled tables plus your folders of ``gpus.csv``,
  ``prices.csv`` ...), :class:`DataContext` (catalog, store, calibration and cache folder a call
  reads: ``predict(..., context=ctx)``, ``load_scenario(path, context=ctx)``).
- :func:`error_band`: how far off an uncalibrated (spec-path) prediction has been
  (:mod:`fleetplan.validate.bands`; ``safety_factor`` there is for a solver's margin).
- Errors: every one derives from :class:`FleetplanError` (the CLI's exit 2):
  :class:`InputError` (bad input; :class:`UnknownNameError`, :class:`InputLimitError`),
  :class:`DataError`, :class:`ModelError`, :class:`InfeasibleError` (exit 3).

Every name is imported on first use (PEP 562), so ``import fleetplan`` (and the CLI's
``--help``) loads none of pandas, scipy, simpy, pulp or matplotlib; ``from fleetplan import
solve`` works as usual. Plots live in :mod:`fleetplan.viz` (imported on demand too).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from fleetplan._version import __version__

# public name -> module defining it (imported when the name is first used); a public name that
# differs from the one its module uses maps to (module, name there)
_LAZY: dict[str, str | tuple[str, str]] = {
    "Catalog": "fleetplan.catalog.catalog",
    "DataContext": "fleetplan.context",
    "ModelSpec": "fleetplan.catalog.models",
    "error_band": "fleetplan.validate.bands",
    "DataError": "fleetplan.errors",
    "FleetplanError": "fleetplan.errors",
    "InfeasibleError": "fleetplan.errors",
    "InputError": "fleetplan.errors",
    "InputLimitError": "fleetplan.errors",
    "ModelError": "fleetplan.errors",
    "UnknownNameError": "fleetplan.errors",
    "PoolResult": "fleetplan.fleet.results",
    "SimStatus": "fleetplan.fleet.results",
    "SimulatedClass": "fleetplan.fleet.results",
    "SimulationResult": "fleetplan.fleet",
    "simulate": "fleetplan.fleet",
    "Frontier": "fleetplan.optimize",
    "Plan": "fleetplan.optimize",
    "PlanStatus": "fleetplan.optimize.plan",
    "PlannedClass": ("fleetplan.optimize.plan", "ClassResult"),
    "frontier": "fleetplan.optimize",
    "solve": "fleetplan.optimize",
    "ProfileStore": "fleetplan.profiles.store",
    "load_profiles": "fleetplan.profiles.store",
    "EconomicsRequest": "fleetplan.profiles.entries",
    "run_economics_table": "fleetplan.profiles.entries",
    "IngestRequest": "fleetplan.profiles.entries",
    "IngestOutcome": "fleetplan.profiles.entries",
    "ingest_files": "fleetplan.profiles.entries",
    "ReplicaParams": "fleetplan.replica.params",
    "replica_params": "fleetplan.replica.params",
    "predict": "fleetplan.replica.predict",
    "predict_steady": "fleetplan.replica.predict",
    "ReplayResult": "fleetplan.replica.protocol",
    "replay": "fleetplan.replica.protocol",
    "SteadyResult": "fleetplan.replica.steady",
    "SteadyStatus": "fleetplan.replica.steady",
    "steady_state": "fleetplan.replica.steady",
    "PredictRequest": "fleetplan.validate.prediction",
    "Prediction": "fleetplan.validate.prediction",
    "run_prediction": "fleetplan.validate.prediction",
    "CalibrateRequest": "fleetplan.replica.calibrate_run",
    "CalibrationOutcome": "fleetplan.replica.calibrate_run",
    "run_calibration": "fleetplan.replica.calibrate_run",
    "ValidateRequest": "fleetplan.validate.run",
    "ValidationOutcome": "fleetplan.validate.run",
    "ValidationResult": "fleetplan.validate.records",
    "run_validation": "fleetplan.validate.run",
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
    from fleetplan.errors import (
        DataError,
        FleetplanError,
        InfeasibleError,
        InputError,
        InputLimitError,
        ModelError,
        UnknownNameError,
    )
    from fleetplan.fleet.results import PoolResult, SimStatus, SimulatedClass, SimulationResult
    from fleetplan.fleet.simulate import simulate
    from fleetplan.optimize.frontier import Frontier, frontier
    from fleetplan.optimize.plan import ClassResult as PlannedClass
    from fleetplan.optimize.plan import Plan, PlanStatus
    from fleetplan.optimize.solve import solve
    from fleetplan.profiles.entries import (
        EconomicsRequest,
        IngestOutcome,
        IngestRequest,
        ingest_files,
        run_economics_table,
    )
    from fleetplan.profiles.store import ProfileStore, load_profiles
    from fleetplan.replica.calibrate_run import (
        CalibrateRequest,
        CalibrationOutcome,
        run_calibration,
    )
    from fleetplan.replica.params import ReplicaParams, replica_params
    from fleetplan.replica.predict import predict, predict_steady
    from fleetplan.replica.protocol import ReplayResult, replay
    from fleetplan.replica.steady import SteadyResult, SteadyStatus, steady_state
    from fleetplan.scenario import Scenario, load_scenario, scenario_from_dict
    from fleetplan.validate.bands import error_band
    from fleetplan.validate.prediction import Prediction, PredictRequest, run_prediction
    from fleetplan.validate.records import ValidationResult
    from fleetplan.validate.run import ValidateRequest, ValidationOutcome, run_validation
    from fleetplan.workload.trace import fit_trace, read_trace

# the public names, sorted: exactly _LAZY's and __version__ (tests/test_api.py keeps them one set)
__all__ = [
    "CalibrateRequest", "CalibrationOutcome", "Catalog", "DataContext", "DataError",
    "EconomicsRequest", "FleetplanError", "Frontier", "InfeasibleError", "IngestOutcome",
    "IngestRequest", "InputError", "InputLimitError", "ModelError", "ModelSpec", "Plan",
    "PlanStatus", "PlannedClass", "PoolResult", "PredictRequest", "Prediction", "ProfileStore",
    "ReplayResult", "ReplicaParams", "Scenario", "SimStatus", "SimulatedClass", "SimulationResult",
    "SteadyResult", "SteadyStatus", "UnknownNameError", "ValidateRequest", "ValidationOutcome",
    "ValidationResult", "__version__", "error_band", "fit_trace", "frontier", "ingest_files",
    "load_profiles", "load_scenario", "predict", "predict_steady", "read_trace", "replay",
    "replica_params", "run_calibration", "run_economics_table", "run_prediction", "run_validation",
    "scenario_from_dict", "simulate", "solve", "steady_state",
]


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'fleetplan' has no attribute {name!r}")
    module, attr = (where, name) if isinstance(where, str) else where
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
