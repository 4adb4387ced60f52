"""GPU specifications (datasheet figures plus marked estimates) and GPU-name normalization.

Main entries: :func:`load_gpus` (catalog name -> :class:`GPUSpec`), :func:`normalize_gpu`
(``NVIDIA-GeForce-RTX-4090`` -> ``RTX-4090``).
"""

from __future__ import annotations

import re
from functools import cache

from pydantic import BaseModel, ConfigDict, Field

from fleetplan.catalog._tables import bundled, read_checked_csv
from fleetplan.errors import UnknownNameError


class GPUSpec(BaseModel):
    """One GPU model. Figures come from the datasheet named in ``spec_source``; idle power and
    embodied carbon are estimates and say so in their ``*_source`` field."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: str = Field(min_length=1, description="canonical catalog name, e.g. RTX-4090")
    vendor_name: str
    vram_gb: float = Field(gt=0)
    tdp_w: float = Field(gt=0, description="board power from the datasheet")
    idle_w: float = Field(ge=0)
    idle_w_source: str
    fp16_tflops_dense: float = Field(gt=0)
    mem_bandwidth_gb_s: float = Field(gt=0)
    interconnect: str
    interconnect_gb_s: float = Field(gt=0, description="GPU-to-GPU bandwidth per direction")
    embodied_kg_co2e: float = Field(ge=0)
    embodied_source: str
    spec_source: str
    spec_date: str


_NUMERIC = ["vram_gb", "tdp_w", "idle_w", "fp16_tflops_dense", "mem_bandwidth_gb_s",
            "interconnect_gb_s", "embodied_kg_co2e"]


@cache
def load_gpus() -> dict[str, GPUSpec]:
    """All catalogued GPUs by canonical name."""
    path = bundled("gpus.csv")
    df = read_checked_csv(path, required=list(GPUSpec.model_fields), numeric=_NUMERIC)
    return {r["gpu"]: GPUSpec.model_validate(r) for r in df.to_dict("records")}


@cache
def _aliases() -> dict[str, str]:
    df = read_checked_csv(bundled("gpu_aliases.csv"), required=["alias", "gpu"])
    return {_key(a): g for a, g in zip(df["alias"], df["gpu"], strict=True)}


def _key(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip()).lower()


def normalize_gpu(name: str) -> str:
    """Canonical catalog name of a GPU, from a canonical name or a vendor spelling.

    Raises :class:`UnknownNameError` (with the closest valid name) when it is not known.
    """
    gpus = load_gpus()
    if name in gpus:
        return name
    hit = _aliases().get(_key(name))
    if hit is None:
        for canon in gpus:
            if _key(canon) == _key(name):
                return canon
        raise UnknownNameError("GPU", name, gpus)
    return hit


def get_gpu(name: str) -> GPUSpec:
    """The spec of a GPU by any accepted spelling."""
    return load_gpus()[normalize_gpu(name)]
