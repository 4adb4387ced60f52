"""fleetplan: plan LLM serving fleets mixing enterprise and consumer GPUs.

Public API (more arrives with the replica model, fleet simulator and optimizer):
:func:`load_profiles` (the measured-run store).
"""

from fleetplan.errors import FleetplanError
from fleetplan.profiles.store import ProfileStore, load_profiles

__version__ = "0.1.0"

__all__ = ["FleetplanError", "ProfileStore", "__version__", "load_profiles"]
