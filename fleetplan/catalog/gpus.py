"""GPU specifications (datasheet figures plus marked estimates): the record, its readers and the
name rule.

Main entries: :class:`GPUSpec`, :func:`read_gpus` (one ``gpus.csv``), :func:`read_aliases` (one
``gpu_aliases.csv``), :func:`canonical_gpu` (``NVIDIA-GeForce-RTX-4090`` -> ``RTX-4090`` given a
catalog's GPUs and aliases). A catalog's GPUs are looked up through
:class:`~fleetplan.catalog.catalog.Catalog` (:meth:`Catalog.gpu`, :meth:`Catalog.normalize_gpu`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fleetplan._load import show_value
from fleetplan.catalog._names import check_name
from fleetplan.catalog._tables import read_checked_csv, row_line
from fleetplan.errors import DataError, UnknownNameError


class GPUSpec(BaseModel):
    """One GPU model. Figures come from the datasheet named in ``spec_source``; idle power and
    embodied carbon are estimates and say so in their ``*_source`` field."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Bounds are what a serving device can plausibly have (an order of magnitude or more
    # beyond today's cards, and down to a CPU backend's effective figures, tests/live): a typo
    # like 1e-9 TFLOPS is refused here, with its file and row, not met as an overflow in the
    # replica model. docs/catalogs.md lists them.
    gpu: str = Field(min_length=1, description="canonical catalog name, e.g. RTX-4090")
    vendor_name: str
    vram_gb: float = Field(ge=0.1, le=4096)
    tdp_w: float = Field(ge=1, le=5000, description="board power from the datasheet")
    idle_w: float = Field(ge=0, le=5000)
    idle_w_source: str
    fp16_tflops_dense: float = Field(ge=0.001, le=100_000)
    mem_bandwidth_gb_s: float = Field(ge=0.1, le=1_000_000)
    interconnect: str
    interconnect_gb_s: float = Field(ge=0.01, le=100_000,
                                     description="GPU-to-GPU bandwidth per direction")
    embodied_kg_co2e: float = Field(ge=0, le=100_000)
    embodied_source: str
    spec_source: str
    spec_date: str

    @field_validator("gpu")
    @classmethod
    def _gpu_name(cls, v: str) -> str:
        return check_name("GPU", v)

    @model_validator(mode="after")
    def _idle_below_board_power(self) -> GPUSpec:
        if self.idle_w > self.tdp_w:
            raise ValueError(f"idle_w: {self.idle_w:g} W is above the board power tdp_w "
                             f"{self.tdp_w:g} W")
        return self


NUMERIC = ["vram_gb", "tdp_w", "idle_w", "fp16_tflops_dense", "mem_bandwidth_gb_s",
            "interconnect_gb_s", "embodied_kg_co2e"]


def read_gpus(path: str | os.PathLike[str]) -> dict[str, GPUSpec]:
    """The GPUs of one ``gpus.csv`` in the bundled schema (every column given)."""
    df = read_checked_csv(path, required=list(GPUSpec.model_fields), numeric=NUMERIC,
                          unique=["gpu"])
    return {r["gpu"]: GPUSpec.model_validate(r) for r in df.to_dict("records")}


# a user's gpus.csv needs the datasheet figures; the rest has named defaults
USER_REQUIRED = ["gpu", "vram_gb", "tdp_w", "fp16_tflops_dense", "mem_bandwidth_gb_s",
                 "interconnect_gb_s"]


def user_gpu_defaults(row: dict[str, Any], path: Path) -> dict[str, Any]:
    """Defaults for the columns a user row leaves out (each says it is a default)."""
    tdp = float(row["tdp_w"])
    return {
        "vendor_name": str(row["gpu"]), "interconnect": "PCIe",
        "idle_w": round(0.1 * tdp, 1),
        "idle_w_source": f"estimate: 10% of TDP (no idle_w in {path})",
        "embodied_kg_co2e": 150.0,
        "embodied_source": ("estimate: the ~150 kg per A100 of Luccioni et al. 2023 (BLOOM); "
                            f"no embodied_kg_co2e in {path}"),
        "spec_source": f"user catalog {path}", "spec_date": "given",
    }


def read_aliases(path: str | os.PathLike[str],
                 gpus: dict[str, Any] | None = None) -> dict[str, str]:
    """Normalized alias -> canonical GPU name, from ``path``'s ``alias,gpu`` rows. With ``gpus``
    (the catalog's GPUs by canonical name), every target must be one of them: a row naming
    another is one :class:`DataError` line with the file, row, alias and target."""
    df = read_checked_csv(path, required=["alias", "gpu"], unique=["alias"])
    out = {}
    for i, (alias, gpu) in enumerate(zip(df["alias"], df["gpu"], strict=True)):
        target = str(gpu).strip()
        if gpus is not None and target not in gpus:
            raise DataError(
                f"{path}: row {row_line(df, i)}, column gpu: {show_value(target, 60)} (the GPU "
                f"alias {show_value(str(alias), 60)} stands for): not a GPU of the catalog (valid: "
                f"{', '.join(sorted(gpus))}; a GPU of your own goes in gpus.csv)")
        out[alias_key(alias)] = target
    return out


def alias_key(name: str) -> str:
    """The spelling-insensitive key of a GPU name (case, spaces and ``_`` ignored)."""
    return re.sub(r"[\s_]+", "-", name.strip()).lower()


def canonical_gpu(name: str, gpus: Mapping[str, GPUSpec], aliases: Mapping[str, str]) -> str:
    """Canonical name of a GPU among ``gpus`` (by canonical name), from a canonical name, an
    alias (``aliases``: :func:`alias_key` -> canonical) or a vendor spelling.

    Raises :class:`UnknownNameError` (with the closest valid name) when it is not known.
    """
    if name in gpus:
        return name
    hit = aliases.get(alias_key(name))
    if hit is not None:
        return hit
    key = alias_key(name)
    for canon, spec in gpus.items():
        if key in (alias_key(canon), alias_key(spec.vendor_name)):
            return canon
    # the same without the vendor's name (nvidia-smi's "NVIDIA A100-SXM4-80GB" written
    # "A100-SXM4-80GB"): one GPU so named, never two
    bare = _without_vendor(key)
    same = {canon for spelling, canon in (
        *aliases.items(), *((alias_key(c), c) for c in gpus),
        *((alias_key(s.vendor_name), c) for c, s in gpus.items()))
        if _without_vendor(spelling) == bare}
    if len(same) == 1:
        return same.pop()
    raise UnknownNameError("GPU", name, gpus)


def _without_vendor(key: str) -> str:
    """An :func:`alias_key` without a leading vendor name (``nvidia-``, ``amd-``)."""
    return re.sub(r"^(nvidia|amd)-", "", key)
