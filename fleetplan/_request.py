"""The base of the request records a command fills and the library checks
(:class:`~fleetplan.validate.prediction.PredictRequest`,
:class:`~fleetplan.validate.run.ValidateRequest`,
:class:`~fleetplan.replica.calibrate_run.CalibrateRequest`,
:class:`~fleetplan.bench.sweep.SweepRequest`): how their errors call a field.

Main entry: :class:`RequestRecord` (``names``, field name -> what the user typed for it, e.g.
the CLI's flag; :meth:`RequestRecord.name` reads it, the field's own name when none is given, as
a notebook user calls it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class RequestRecord:
    """A request record's ``names``: how its checks call each field in an error (the CLI's
    ``--num-prompts`` for ``num_prompts``). Not compared, not shown in its repr."""

    names: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def name(self, field_name: str) -> str:
        """How errors call ``field_name`` (its flag on the CLI; its own name without one)."""
        return self.names.get(field_name, field_name)
