"""The scenario: what traffic to serve, on which fleet, at what price and carbon (one schema).

A scenario file (YAML or JSON) names the model, the traffic classes (arrivals: rate, hourly
profile or trace; lengths; SLO), the fleet to simulate, the routing policy, catalog overrides and
simulation settings, plus the optimizer's inputs (candidates, availability, budget, redundancy,
carbon cap, commitment, solver). Main entries: :class:`Scenario`, :func:`load_scenario` (file ->
Scenario, errors naming file, full field path and value), :func:`parse_fleet`
(``2x1xH100-PCIe+4x2xRTX-4090``).

Validation is strict (no coercion of ``"8"`` to 8), refuses unknown fields, and never touches the
disk: trace files are read when the scenario is simulated (:mod:`fleetplan.workload.trace`).

Modules: :mod:`~fleetplan.scenario.base` (strict base record, canonicalisers),
:mod:`~fleetplan.scenario.traffic` (classes, arrivals, SLOs, traces),
:mod:`~fleetplan.scenario.fleet` (pools, ``--fleet`` specs), :mod:`~fleetplan.scenario.settings`
(solver, capacity, sim, commitment, carbon, embodied, candidates),
:mod:`~fleetplan.scenario.model` (the :class:`Scenario`), :mod:`~fleetplan.scenario.loading` and
:mod:`~fleetplan.scenario.messages` (files, one-line errors, the JSON Schema).
"""

from fleetplan.scenario.fleet import Pool, match_pools, parse_fleet
from fleetplan.scenario.loading import load_scenario, scenario_from_dict, scenario_json_schema
from fleetplan.scenario.messages import format_validation_error
from fleetplan.scenario.model import Scenario
from fleetplan.scenario.settings import (
    Candidate,
    CapacitySettings,
    CarbonCap,
    Commitment,
    Embodied,
    SimSettings,
    SolverSettings,
)
from fleetplan.scenario.traffic import SLO, TraceSpec, TrafficClass

__all__ = [
    "SLO", "Candidate", "CapacitySettings", "CarbonCap", "Commitment", "Embodied", "Pool",
    "Scenario", "SimSettings", "SolverSettings", "TraceSpec", "TrafficClass",
    "format_validation_error", "load_scenario", "match_pools", "parse_fleet",
    "scenario_from_dict", "scenario_json_schema",
]
