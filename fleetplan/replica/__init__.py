"""The replica performance model: one vLLM-like serving replica, calibrated to measured runs.

Main entries: :func:`replica_params` (parameters of a model x configuration),
:class:`ReplicaEngine` (the SimPy engine, many may share one environment), :func:`replay`
(vLLM's benchmark protocol), :func:`steady_state` (sustained load, for planning).
"""

from fleetplan.replica.engine import ReplicaEngine, Request
from fleetplan.replica.params import ReplicaParams, replica_params
from fleetplan.replica.priors import prior_params
from fleetplan.replica.protocol import ReplayResult, replay

__all__ = ["ReplayResult", "ReplicaEngine", "ReplicaParams", "Request", "prior_params",
           "replay", "replica_params"]
