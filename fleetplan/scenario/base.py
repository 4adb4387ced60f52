"""The strict base of every scenario record, and the canonicalisers its validators share.

:class:`Strict`: strict types (no ``"8"`` read as 8), frozen, unknown fields refused with the
valid ones named. :func:`check_region`, :func:`canon_config`, :func:`canon_gpu`: turn a region
code, a hardware configuration or a GPU name into its canonical spelling, or raise a
``ValueError`` whose text pydantic puts on the one-line error.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from fleetplan.catalog.gpus import normalize_gpu
from fleetplan.catalog.grid import load_grid
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import FleetplanError, UnknownNameError

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class Strict(BaseModel):
    """Base of every scenario record: strict types, unknown fields refused (with the valid ones)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _unknown_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            valid = cls.__dict__.get("_valid_keys")
            if valid is None:  # once per record type (10^5 classes validated it 10^5 times)
                valid = frozenset({f.alias or n for n, f in cls.model_fields.items()}
                                  | set(cls.model_fields))
                type.__setattr__(cls, "_valid_keys", valid)
            for key in data:
                if key not in valid:
                    shown = ", ".join(f.alias or n for n, f in cls.model_fields.items())
                    raise PydanticCustomError(
                        "unknown_field", "unknown field (valid: {valid}){hint}",
                        {"field": str(key), "valid": shown, "hint": cls._unknown_hint()},
                    )
        return data

    @classmethod
    def _unknown_hint(cls) -> str:
        return ""


def check_region(region: str) -> str:
    """``region`` if the bundled grid catalog (or nothing else) knows it; else ``ValueError``."""
    if region not in load_grid():
        raise ValueError(str(UnknownNameError("region", region, load_grid())))
    return region


def canon_config(text: str) -> str:
    """Canonical name of a hardware configuration (``1xh100-pcie`` -> ``1xH100-PCIe``)."""
    try:
        return HardwareConfig.parse(text).name
    except FleetplanError as exc:
        raise ValueError(str(exc)) from None
    except ValidationError as exc:
        raise ValueError(exc.errors()[0]["msg"]) from None


def canon_gpu(name: str) -> str:
    """Canonical name of a GPU type (``h100-pcie`` -> ``H100-PCIe``)."""
    try:
        return normalize_gpu(name)
    except FleetplanError as exc:
        raise ValueError(str(exc)) from None
