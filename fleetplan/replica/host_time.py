"""Choosing the host time per streamed output (``c_deliver``) from a store's own runs.

Main entry: :func:`choose_host_time`. The host time is the one figure of the replica model that
belongs to the host (API server and benchmark client beside the server,
:mod:`fleetplan.replica.delivery`), not to the GPUs, and the runs of one configuration cannot
separate it from ``c_seq`` (both grow with the running sequences). So it is chosen the way
docs/replica-model.md chose the bundled 60 us: every configuration of the store is fitted at
each value of a grid with the host time held fixed, and the value with the lowest summed
calibration loss is kept (ties: the smaller value). The fits at the chosen value are the
calibration; nothing is fitted twice.

What it costs: one calibration per grid value (:data:`HOST_TIME_GRID_S`, six). What it assumes:
one host time for every server of the store (runs from one kind of host, as the study's were);
a store of servers on different hosts is better calibrated per host, a store at a time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from fleetplan._progress import Progress
from fleetplan.catalog.catalog import Catalog
from fleetplan.errors import InputError
from fleetplan.replica.calibrate import FIT_SEEDS, FitResult, fit_many
from fleetplan.replica.measured_run import MeasuredRun
from fleetplan.replica.params_record import C_DELIVER_MAX_S, is_host_time
from fleetplan.workload.lengths import LengthModel

#: Host times tried, s: none, the bundled prior's neighbours, and up to 300 us (a host that
#: streams slowly; the study's tensor-parallel RTX 4090 fits kept falling to 300 us).
HOST_TIME_GRID_S: tuple[float, ...] = (0.0, 30e-6, 60e-6, 100e-6, 150e-6, 300e-6)


@dataclass(frozen=True)
class HostTimePoint:
    """One grid value and the summed calibration loss of the store's configurations at it."""

    host_time_s: float
    summed_loss: float

    def to_dict(self) -> dict[str, float]:
        return {"host_time_us": self.host_time_s * 1e6, "summed_loss": self.summed_loss}


@dataclass(frozen=True)
class HostTimeChoice:
    """The chosen host time, every value tried, and the fits at the chosen one."""

    host_time_s: float
    points: tuple[HostTimePoint, ...]
    configs: int
    fits: tuple[FitResult, ...]

    @property
    def identified(self) -> bool:
        """Whether the choice rests on more than one configuration (one alone cannot separate
        the host time from ``c_seq``)."""
        return self.configs > 1

    def summary(self) -> str:
        """One line: the choice and the loss of every value tried."""
        tried = ", ".join(f"{p.host_time_s * 1e6:g} us {p.summed_loss:.4g}" for p in self.points)
        line = (f"host time {self.host_time_s * 1e6:g} us, the lowest summed loss over "
                f"{self.configs} configuration(s) ({tried})")
        if not self.identified:
            line += ("; one configuration cannot separate the host time from c_seq: choose "
                     "it over several servers of the same host")
        return line


def check_grid(grid: Sequence[float]) -> tuple[float, ...]:
    """The grid as sorted, distinct floats; :class:`InputError` for an empty one or a value
    outside 0..:data:`~fleetplan.replica.params_record.C_DELIVER_MAX_S`."""
    values = sorted({float(v) for v in grid})
    if not values:
        raise InputError("host time grid: give at least one value")
    for v in values:
        if not is_host_time(v):
            raise InputError(f"host time grid: {v!r} s must be between 0 and "
                             f"{C_DELIVER_MAX_S:g} s")
    return tuple(values)


def choose_host_time(groups: Sequence[list[MeasuredRun]], *,
                     grid: Sequence[float] = HOST_TIME_GRID_S,
                     lengths: LengthModel | None = None, jobs: int | None = None,
                     max_nfev: int, progress: Progress | None = None,
                     seeds: Sequence[int] = FIT_SEEDS,
                     catalog: Catalog | None = None) -> HostTimeChoice:
    """Fit every group (one model x configuration each) at every host time of ``grid`` and
    keep the value of lowest summed loss (every fit replaying the length ``seeds``). A
    configuration whose fit has no finite loss at some value (no unflagged run) takes no part
    in the sum."""
    values = check_grid(grid)
    if not groups:
        raise InputError("no configurations to choose a host time from")
    by_value = [fit_many(groups, lengths=lengths, jobs=jobs, max_nfev=max_nfev,
                         progress=progress, c_deliver=v, seeds=seeds, catalog=catalog,
                         step_name=f"fits at host time {v * 1e6:g} us")
                for v in values]
    usable = [i for i in range(len(groups))
              if all(math.isfinite(fits[i].loss) for fits in by_value)]
    if not usable:
        raise InputError("no configuration has an unflagged run to choose a host time from")
    points = tuple(HostTimePoint(v, math.fsum(fits[i].loss for i in usable))
                   for v, fits in zip(values, by_value, strict=True))
    best = min(range(len(values)), key=lambda k: (points[k].summed_loss, values[k]))
    why = (f"; host time {values[best] * 1e6:g} us chosen by the lowest summed loss over "
           f"{len(usable)} configuration(s) (fleetplan calibrate --fit-host-time)")
    fits = tuple(replace(f, params=f.params.with_(source=f.params.source + why))
                 for f in by_value[best])
    return HostTimeChoice(values[best], points, len(usable), fits)
