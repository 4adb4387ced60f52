"""Hardware configurations: ``<count>x<GPU>`` (e.g. ``2xRTX-4090``), one serving replica's GPUs.

Main entry: :meth:`HardwareConfig.parse` (the GPU spelled canonically by the catalog it is given,
whose spec of the GPU the configuration keeps: :attr:`HardwareConfig.spec`).
"""

from __future__ import annotations

import re
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, model_validator

from fleetplan.catalog.gpus import GPUSpec
from fleetplan.errors import InputError

_CONFIG_RE = re.compile(r"^\s*(\d+)\s*[xX×]\s*(.+?)\s*$")
_MAX_GPUS = 64  # GPUs one replica may span


class GpuNames(Protocol):
    """What a configuration needs of a catalog (:class:`fleetplan.catalog.catalog.Catalog`): a
    GPU's canonical name and its spec."""

    def normalize_gpu(self, name: str, *, where: str = "") -> str: ...

    def gpu(self, name: str) -> GPUSpec: ...


def _names(catalog: GpuNames | None) -> GpuNames:
    if catalog is not None:
        return catalog
    from fleetplan.catalog.catalog import bundled_catalog

    return bundled_catalog()


class HardwareConfig(BaseModel):
    """The GPUs one replica runs on. ``tp_size`` defaults to ``gpu_count`` (the study's setup)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: str = Field(min_length=1)
    gpu_count: int = Field(ge=1, le=_MAX_GPUS)
    tp_size: int | None = Field(default=None, ge=1, le=_MAX_GPUS)
    _spec: GPUSpec = PrivateAttr()

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> HardwareConfig:
        # the catalog that spells the GPU comes with the validation (parse passes it); the
        # configuration keeps that catalog's spec, so what reads it needs no catalog again
        names = _names((info.context or {}).get("catalog"))
        object.__setattr__(self, "gpu", names.normalize_gpu(self.gpu))
        self._spec = names.gpu(self.gpu)
        if self.tp_size is None:
            object.__setattr__(self, "tp_size", self.gpu_count)
        assert self.tp_size is not None
        if self.gpu_count % self.tp_size:
            raise ValueError(
                f"tp_size(={self.tp_size}) must divide gpu_count(={self.gpu_count})"
            )
        return self

    @property
    def name(self) -> str:
        """Canonical name, e.g. ``2xRTX-4090``."""
        return f"{self.gpu_count}x{self.gpu}"

    @property
    def spec(self) -> GPUSpec:
        """The GPU's spec, from the catalog the configuration was parsed with."""
        return self._spec

    @staticmethod
    def split(text: str) -> tuple[int, str]:
        """``(gpu_count, gpu)`` of ``<count>x<GPU>`` as written, no catalog read: for names
        already canonical (a plan's, a calibration's, a fitted record's)."""
        m = _CONFIG_RE.match(text)
        if not m:
            raise InputError(
                f"configuration {text!r} is not of the form <count>x<GPU>, e.g. 2xRTX-4090"
            )
        return int(m.group(1)), m.group(2)

    @classmethod
    def parse(cls, text: str, catalog: GpuNames | None = None) -> HardwareConfig:
        """Parse ``2xRTX-4090`` (any spelling of a GPU of ``catalog`` after the ``x``; default:
        the bundled catalog)."""
        count, gpu = cls.split(text)
        if not 1 <= count <= _MAX_GPUS:
            raise InputError(f"configuration {text!r}: the GPU count {count} must be within "
                             f"1..{_MAX_GPUS}")
        return cls.model_validate({"gpu": gpu, "gpu_count": count},
                                  context={"catalog": _names(catalog)})

    def __str__(self) -> str:
        return self.name


def config_name(gpu: str, gpu_count: int, catalog: GpuNames | None = None) -> str:
    """Canonical configuration name for a GPU spelling (of ``catalog``, default: the bundled
    one) and a count."""
    return f"{int(gpu_count)}x{_names(catalog).normalize_gpu(gpu)}"
