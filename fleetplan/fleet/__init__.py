"""Fleet simulation: pools of replicas, routing policies, replications, cost / energy / carbon.

Main entry: :func:`simulate` (scenario [+ fleet] -> :class:`SimulationResult`). Routing
policies live in one registry (:data:`ROUTERS`, :func:`register_router`, :func:`get_router`).
"""

from fleetplan.fleet.results import (
    ClassResult,
    PoolResult,
    SimStatus,
    SimulatedClass,
    SimulationResult,
)
from fleetplan.fleet.routing import ROUTERS, Router, RoutingContext, get_router, register_router
from fleetplan.fleet.simulate import simulate

__all__ = [
    "ROUTERS", "ClassResult", "PoolResult", "Router", "RoutingContext", "SimStatus",
    "SimulatedClass",
    "SimulationResult", "get_router", "register_router", "simulate",
]
