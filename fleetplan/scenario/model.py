"""The :class:`Scenario` record: the whole scenario file, with its cross-field checks.

Copies (:meth:`Scenario.with_fleet`, :meth:`Scenario.with_updates`) are validated again, so a
what-if run never holds a scenario the schema would refuse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from fleetplan.catalog.grid import load_grid
from fleetplan.catalog.models import get_model
from fleetplan.catalog.prices import DEFAULT_MARKET, markets
from fleetplan.errors import FleetplanError, InputError, UnknownNameError
from fleetplan.scenario.base import Strict, canon_gpu, check_region
from fleetplan.scenario.fleet import Pool, match_pools
from fleetplan.scenario.messages import format_validation_error
from fleetplan.scenario.settings import (
    Candidate,
    CapacitySettings,
    CarbonCap,
    Commitment,
    Embodied,
    SimSettings,
    SolverSettings,
)
from fleetplan.scenario.traffic import TrafficClass


class Scenario(Strict):
    """A complete scenario; see :mod:`fleetplan.scenario` and ``fleetplan schema``."""

    model: str
    classes: list[TrafficClass] = Field(min_length=1)
    fleet: list[Pool] | None = Field(default=None, min_length=1)
    routing: str = "least-outstanding"
    context_window: int | None = Field(
        default=None, ge=2, description="served max_model_len (default: the model's, capped by "
        "what one replica's KV cache holds)")
    market: str = DEFAULT_MARKET
    prices_usd_per_gpu_hour: dict[str, Annotated[float, Field(gt=0, le=1000)]] = Field(
        default_factory=dict)
    grid_g_per_kwh: dict[str, Annotated[float, Field(ge=0, le=5000)]] = Field(
        default_factory=dict)
    power_w_per_gpu: dict[str, Annotated[float, Field(gt=0, le=5000)]] = Field(
        default_factory=dict, description="busy power per GPU (W), e.g. {H100-PCIe: 350}; "
        "default: measured in the profiles, else datasheet TDP")
    embodied: Embodied = Field(default_factory=Embodied)
    sim: SimSettings = Field(default_factory=SimSettings)
    candidates: list[Candidate] | None = Field(default=None, min_length=1)
    availability: dict[str, Any] | None = Field(
        default=None, description="max GPUs per GPU type ({H100-PCIe: 8}) or per region and "
        "type ({EU27: {H100-PCIe: 8}})")
    budget_usd_per_hour: float | None = Field(default=None, gt=0)
    redundancy: int = Field(default=0, ge=0, le=100)
    carbon: CarbonCap | None = None
    commitment: Commitment = Field(default_factory=Commitment)
    solver: SolverSettings = Field(default_factory=SolverSettings)
    capacity: CapacitySettings = Field(default_factory=CapacitySettings)

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        try:
            return get_model(v).model
        except FleetplanError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("routing")
    @classmethod
    def _routing(cls, v: str) -> str:
        from fleetplan.fleet.routing import ROUTERS

        if v not in ROUTERS:
            raise ValueError(f"unknown routing policy {v} (valid: {', '.join(sorted(ROUTERS))})")
        return v

    @field_validator("market")
    @classmethod
    def _market(cls, v: str) -> str:
        if v not in markets():
            raise ValueError(f"unknown market {v} (valid: {', '.join(markets())})")
        return v

    @field_validator("prices_usd_per_gpu_hour")
    @classmethod
    def _prices(cls, v: dict[str, float]) -> dict[str, float]:
        return {canon_gpu(k): p for k, p in v.items()}

    @field_validator("power_w_per_gpu")
    @classmethod
    def _power(cls, v: dict[str, float]) -> dict[str, float]:
        return {canon_gpu(k): w for k, w in v.items()}

    @field_validator("availability")
    @classmethod
    def _availability(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is None:
            return v
        def count(where: str, n: Any) -> int:
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ValueError(f"{where}: {n!r} must be a whole number of GPUs >= 0")
            return n

        out: dict[str, Any] = {}
        for k, cap in v.items():
            if isinstance(cap, dict):
                check_region(k)
                out[k] = {canon_gpu(g): count(f"{k}.{g}", n) for g, n in cap.items()}
            else:
                out[canon_gpu(k)] = count(k, cap)
        return out

    @model_validator(mode="after")
    def _cross(self) -> Scenario:
        names = [c.name for c in self.classes]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"class names must be unique (repeated: {', '.join(dup)})")
        for i, c in enumerate(self.classes):
            if self.routing == "planned" and self.fleet is not None and c.split is None:
                raise ValueError(f"classes[{i}].split: routing planned needs a split per class")
            if self.routing == "planned" and c.pin is not None:
                raise ValueError(f"classes[{i}].pin: planned routing follows split, not pins")
            if self.fleet is not None:
                for key in (*(c.pin or ()), *(c.split or {})):
                    try:
                        match_pools(key, self.fleet)
                    except InputError as exc:
                        field = "pin" if key in (c.pin or ()) else "split"
                        raise ValueError(f"classes[{i}].{field}: {exc}") from None
        regions = {p.region for p in self.fleet or ()}
        for r in sorted(regions):
            if r not in self.grid_g_per_kwh and r not in load_grid():
                raise ValueError(f"fleet region {r} has no grid intensity")
        return self

    def with_fleet(self, fleet: Sequence[Pool]) -> Scenario:
        """A copy with another fleet (validated again: pins and splits must still match)."""
        data = self.model_dump(mode="python", by_alias=True, exclude_unset=True)
        data["fleet"] = [p.model_dump() for p in fleet]
        return _revalidate(data)

    def with_updates(self, **fields: Any) -> Scenario:
        """A validated copy with some top-level fields replaced (e.g. ``routing="planned"``)."""
        data = self.model_dump(mode="python", by_alias=True, exclude_unset=True)
        data.update({k: _dumpable(v) for k, v in fields.items()})
        return _revalidate(data)

    def class_index(self, name: str) -> int:
        for i, c in enumerate(self.classes):
            if c.name == name:
                return i
        raise UnknownNameError("class", name, [c.name for c in self.classes])


def _dumpable(v: Any) -> Any:
    if isinstance(v, BaseModel):
        return v.model_dump(mode="python", by_alias=True, exclude_unset=True)
    if isinstance(v, list | tuple):
        return [_dumpable(x) for x in v]
    if isinstance(v, dict):
        return {k: _dumpable(x) for k, x in v.items()}
    return v


def _revalidate(data: dict[str, Any]) -> Scenario:
    data = _plain(data)
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise InputError(format_validation_error(exc, data, "scenario")) from None


def _plain(v: Any) -> Any:
    """Tuples to lists (strict mode wants lists for sequences read back from a dump)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v
