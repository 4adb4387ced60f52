"""The registry of routing policies, and the record a scenario's ``routing:`` field holds.

:data:`ROUTERS` maps a policy's name to its router class (a
:class:`fleetplan.fleet.routing.Router`, registered there with ``@register_router(NAME)``;
duplicates refused). The scenario schema validates ``routing:`` against
:func:`routing_policies` (each policy's parameters, a :class:`RoutingPolicy` model) and never
imports the fleet: the built-in policies' module, ``fleetplan.fleet.routing``, is this
registry's provider, imported on the registry's first read (:mod:`fleetplan.registry.base`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from fleetplan.registry.base import Registry

__all__ = ["ROUTERS", "RoutingPolicy", "routing_policies"]


class RoutingPolicy(BaseModel):
    """A routing policy a scenario selects (``policy``) and its parameters (none by default).

    A policy with parameters subclasses this with ``policy: Literal[NAME] = NAME`` and its
    fields, and names it as its router's ``Params``.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    policy: str


# members are Router classes: typed Any here, since the class lives in the fleet (above this
# module); fleetplan.fleet.routing.get_router hands them out typed
ROUTERS: Registry[Any] = Registry("routing policy", providers=("fleetplan.fleet.routing",))
"""Policy name -> its router class (``fleetplan.fleet.routing.Router``)."""


def routing_policies() -> dict[str, type[RoutingPolicy]]:
    """Policy name -> its parameters model (what the scenario's ``routing:`` accepts)."""
    return {name: router.Params for name, router in ROUTERS.items()}
