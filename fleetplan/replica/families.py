"""Step-cost efficiencies of GPU families, fitted on runs other people measured.

A GPU type the bundled store never measured has no calibrated configuration to learn its
efficiencies from. The nearest measured evidence is other people's runs on GPUs of the same
*family* (``data/external/``): vLLM's kernels, the link between the GPUs and the software stack
differ far more between families (a GeForce card over PCIe, a data-centre GPU on NVLink, an AMD
Instinct on ROCm) than between the GPUs of one family. ``scripts/fit_family_efficiency.py``
fits, per family, the efficiencies of the parts of a step
(:class:`~fleetplan.replica.transfer.TransferEfficiency`: weight streaming, all-reduce latency,
host time, token compute, all-reduce bytes, host time per sequence, a mixture-of-experts
layer's own time per step) to those runs by least squares on the replica
model's own replays (throughput, TPOT p50 and TTFT p50, in log ratio), and writes
``data/family_efficiency.json``; the same script judges the fit leave-one-dataset-out
(docs/validation.md). A family whose dense parts do not hold up held out may be kept for its
time per MoE layer alone (:attr:`FamilyFit.moe_only`): its GPU types keep the spec path, and an
MoE model's step takes that time on top.

Main entries: :func:`gpu_family` (a GPU's family, from its catalog row) and
:func:`family_efficiency` (the fitted efficiencies of a GPU's family, or None).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from fleetplan.catalog._tables import data_dir
from fleetplan.catalog.gpus import GPUSpec
from fleetplan.errors import DataError

FAMILY_FILE = "family_efficiency.json"
PARTS = ("weights_bw", "comm_step", "host_s", "compute", "comm_tok", "seq_host_s",
         "moe_layer_s")
# parts a family file written before them may lack (read as 0: no such cost)
OPTIONAL_PARTS = ("seq_host_s", "moe_layer_s")
FAMILIES = ("nvidia-geforce", "nvidia-datacenter-nvlink", "nvidia-datacenter-pcie",
            "amd-instinct")
# a family without a time per MoE layer of its own takes this one's: the same vendor's
# data-centre GPUs run the same MoE kernels whatever joins them (an H100 on PCIe or on NVLink)
MOE_SIBLING = {"nvidia-datacenter-pcie": "nvidia-datacenter-nvlink"}


def gpu_family(gpu: GPUSpec) -> str:
    """The family of a GPU from its catalog row: AMD Instinct, NVIDIA GeForce, or an NVIDIA
    data-centre GPU on NVLink or on PCIe (by its ``interconnect``)."""
    name = gpu.vendor_name.lower()
    if "amd" in name or "instinct" in name:
        return "amd-instinct"
    if "geforce" in name or gpu.gpu.upper().startswith("RTX-"):
        return "nvidia-geforce"
    if gpu.interconnect.lower().startswith("nvlink"):
        return "nvidia-datacenter-nvlink"
    return "nvidia-datacenter-pcie"


@dataclass(frozen=True)
class FamilyFit:
    """One family's fitted efficiencies (``parts``, keyed as :data:`PARTS`), the runs and
    datasets they were fitted on and the GPU types those runs used."""

    family: str
    parts: dict[str, float]
    n_runs: int
    datasets: tuple[str, ...]
    gpus: tuple[str, ...]
    # kept for its time per MoE layer alone (its dense parts were not, held out): the GPU types
    # keep the spec path, and an MoE model's step takes that time on top
    moe_only: bool = False

    def describe(self) -> str:
        """What a prediction takes from this fit, where it came from (a parameters' source)."""
        return self.moe_describe() if self.moe_only else f"efficiencies of {self._fitted()}"

    def moe_describe(self) -> str:
        """The same, for its time per MoE layer alone."""
        return (f"time per mixture-of-experts layer ({1e6 * self.parts['moe_layer_s']:.0f} us) "
                f"of {self._fitted()}")

    def _fitted(self) -> str:
        return (f"{self.family} GPUs fitted on {self.n_runs} runs others measured "
                f"({', '.join(self.gpus)}; data/external: {', '.join(self.datasets)}; "
                f"data/{FAMILY_FILE})")

    def to_dict(self) -> dict[str, Any]:
        out = {"parts": self.parts, "n_runs": self.n_runs, "datasets": list(self.datasets),
               "gpus": list(self.gpus)}
        if self.moe_only:
            out["moe_only"] = True
        return out


def _fit(family: str, obj: Any, where: str) -> FamilyFit:
    try:
        parts = {k: float(obj["parts"][k]) for k in PARTS
                 if k in obj["parts"] or k not in OPTIONAL_PARTS}
        parts.update({k: 0.0 for k in OPTIONAL_PARTS if k not in parts})
        fit = FamilyFit(family, parts, int(obj["n_runs"]), tuple(map(str, obj["datasets"])),
                        tuple(map(str, obj["gpus"])), moe_only=obj.get("moe_only", False))
        if not isinstance(fit.moe_only, bool):
            raise TypeError
    except (KeyError, TypeError, ValueError):
        raise DataError(f"{where}: expected parts ({', '.join(PARTS)}), n_runs, datasets and "
                        "gpus (and moe_only true or false)") from None
    if not all(math.isfinite(v) and v >= 0 for v in parts.values()):
        raise DataError(f"{where}: parts must be finite and >= 0")
    return fit


@cache
def _load(path: str, mtime: float) -> dict[str, FamilyFit]:
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a readable family efficiency table ({exc})") from None
    fams = obj.get("families") if isinstance(obj, dict) else None
    if not isinstance(fams, dict):
        raise DataError(f"{path}: no 'families' object")
    return {f: _fit(f, v, f"{path}: families.{f}") for f, v in fams.items()}


def family_fits(path: str | Path | None = None) -> dict[str, FamilyFit]:
    """The fitted families of ``path`` (default: the bundled ``data/family_efficiency.json``;
    none when it is absent)."""
    p = Path(path) if path is not None else data_dir() / FAMILY_FILE
    if not p.is_file():
        return {}
    return _load(str(p.resolve()), p.stat().st_mtime)


def family_efficiency(gpu: GPUSpec, path: str | Path | None = None) -> FamilyFit | None:
    """The fitted efficiencies of ``gpu``'s family (None: that family has no fit)."""
    return family_fits(path).get(gpu_family(gpu))


def moe_layer_family(gpu: GPUSpec, fits: Mapping[str, FamilyFit] | None = None
                     ) -> FamilyFit | None:
    """The family fit whose time per MoE layer an MoE model's step takes on ``gpu`` where the
    spec path predicts it (its dense step from datasheets and efficiency ratios, which no MoE
    model taught): its own family's, else its :data:`MOE_SIBLING`'s; None where neither has
    one. ``fits``: the family table (default the bundled one)."""
    table = family_fits() if fits is None else fits
    own = gpu_family(gpu)
    for fam in (own, MOE_SIBLING.get(own)):
        fit = table.get(fam) if fam is not None else None
        if fit is not None and fit.parts.get("moe_layer_s", 0.0) > 0:
            return fit
    return None
