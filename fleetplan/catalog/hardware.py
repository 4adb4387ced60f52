"""Hardware configurations: ``<count>x<GPU>`` (e.g. ``2xRTX-4090``), one serving replica's GPUs."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fleetplan.catalog.gpus import GPUSpec, get_gpu, normalize_gpu
from fleetplan.errors import InputError

_CONFIG_RE = re.compile(r"^\s*(\d+)\s*[xX×]\s*(.+?)\s*$")
_MAX_GPUS = 64  # GPUs one replica may span


class HardwareConfig(BaseModel):
    """The GPUs one replica runs on. ``tp_size`` defaults to ``gpu_count`` (the study's setup)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: str = Field(min_length=1)
    gpu_count: int = Field(ge=1, le=_MAX_GPUS)
    tp_size: int | None = Field(default=None, ge=1, le=_MAX_GPUS)

    @model_validator(mode="after")
    def _check(self) -> HardwareConfig:
        object.__setattr__(self, "gpu", normalize_gpu(self.gpu))
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
        return get_gpu(self.gpu)

    @classmethod
    def parse(cls, text: str) -> HardwareConfig:
        """Parse ``2xRTX-4090`` (any accepted GPU spelling after the ``x``)."""
        m = _CONFIG_RE.match(text)
        if not m:
            raise InputError(
                f"configuration {text!r} is not of the form <count>x<GPU>, e.g. 2xRTX-4090"
            )
        count = int(m.group(1))
        if not 1 <= count <= _MAX_GPUS:
            raise InputError(f"configuration {text!r}: the GPU count {count} must be within "
                             f"1..{_MAX_GPUS}")
        return cls(gpu=m.group(2), gpu_count=count)

    def __str__(self) -> str:
        return self.name


def config_name(gpu: str, gpu_count: int) -> str:
    """Canonical configuration name for a GPU spelling and a count."""
    return f"{int(gpu_count)}x{normalize_gpu(gpu)}"
