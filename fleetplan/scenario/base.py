"""The strict base of every scenario record, and the canonicalisers its validators share.

:class:`Strict`: strict types (no ``"8"`` read as 8), frozen, unknown fields refused with the
valid ones named. :func:`check_region`, :func:`canon_config`, :func:`canon_gpu`: turn a region
code, a hardware configuration or a GPU name into its canonical spelling in a catalog, or raise a
``ValueError`` whose text pydantic puts on the one-line error. The catalog comes with the
validation (``Scenario.model_validate(data, context={"catalog": cat})``, what
:func:`~fleetplan.scenario.loading.scenario_from_dict` passes): :func:`catalog_of`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from fleetplan.catalog.catalog import Catalog, bundled_catalog
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
                    shown = ", ".join(cls.file_fields())
                    raise PydanticCustomError(
                        "unknown_field", "unknown field (valid: {valid}){hint}",
                        {"field": str(key), "valid": shown, "hint": cls._unknown_hint()},
                    )
        return data

    @classmethod
    def file_fields(cls) -> list[str]:
        """The record's field names as a scenario file spells them (aliases where set)."""
        return [f.alias or n for n, f in cls.model_fields.items()]

    @classmethod
    def _unknown_hint(cls) -> str:
        return ""


def catalog_of(info: ValidationInfo) -> Catalog:
    """The catalog a validation reads: its context's ``catalog``, else the bundled one."""
    cat = (info.context or {}).get("catalog")
    return cat if isinstance(cat, Catalog) else bundled_catalog()


def check_region(region: str, catalog: Catalog) -> str:
    """``region`` if the catalog's grid table knows it; else ``ValueError``."""
    grid = catalog.grid()
    if region not in grid:
        raise ValueError(str(UnknownNameError("region", region, grid)))
    return region


def canon_config(text: str, catalog: Catalog) -> str:
    """Canonical name of a hardware configuration (``1xh100-pcie`` -> ``1xH100-PCIe``)."""
    try:
        hw = HardwareConfig.parse(text, catalog)
    except FleetplanError as exc:
        raise ValueError(str(exc)) from None
    except ValidationError as exc:
        raise ValueError(exc.errors()[0]["msg"]) from None
    # a layout (``+tp4pp2``, ``+tp1dp2``, ``+tp8pp2n2``) is planned as one replica of its
    # engines (fleetplan.replica.engine_group)
    return hw.name


def canon_gpu(name: str, catalog: Catalog) -> str:
    """Canonical name of a GPU type (``h100-pcie`` -> ``H100-PCIe``)."""
    try:
        return catalog.normalize_gpu(name)
    except FleetplanError as exc:
        raise ValueError(str(exc)) from None
