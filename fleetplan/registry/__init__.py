"""The plug-in registries of fleetplan, at the bottom of the package (below every reader).

One registry per plug-in family, each a :class:`~fleetplan.registry.base.Registry` filled by
decorator (duplicates refused, naming both members; unknown names fail with the valid ones):

- solvers: :mod:`fleetplan.registry.solvers` (read by the scenario's ``solver:`` and the
  optimizer);
- routing policies: :mod:`fleetplan.registry.routing` (read by the scenario's ``routing:``;
  the policies are :mod:`fleetplan.fleet.routing`'s, its provider);
- arrival processes: :data:`fleetplan.workload.arrivals.ARRIVALS` (on the scenario's own floor);
- ingest formats: :mod:`fleetplan.profiles.formats` (providers: the ``vllm`` and ``guidellm``
  readers).

How a provider's members get in before a lookup is :mod:`fleetplan.registry.base`'s docstring.
"""

from fleetplan.registry.base import Registry

__all__ = ["Registry"]
