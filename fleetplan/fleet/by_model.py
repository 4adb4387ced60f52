"""A simulated fleet of several models, model by model: what each model's pools cost and emit.

In a scenario with several models every pool serves one model (its name starts with it,
``Meta-Llama-3-8B-Instruct/1xRTX-4090@EU27``) and every class is served by one. The totals of
a model are its pools' sums (replicas, GPUs, cost, energy, carbon: each pool's own accounting,
:mod:`fleetplan.fleet.accounting`), with its classes and whether each met its SLO; over all the
models they add up to the fleet's. Main entry: :func:`model_totals`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleetplan.fleet.results import PoolResult, SimulatedClass
from fleetplan.scenario.fleet import split_model


@dataclass(frozen=True)
class ModelTotals:
    """One model's share of a simulated fleet."""

    model: str
    classes: tuple[str, ...]
    slo_met: bool | None          # every class with an SLO met it (None: no class judged)
    pools: int
    replicas: int
    gpus: int
    requests: int
    cost_per_hour_usd: float
    energy_kwh_per_hour: float
    g_co2_per_hour: float         # operational + embodied

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "classes": list(self.classes), "slo_met": self.slo_met,
                "pools": self.pools, "replicas": self.replicas, "gpus": self.gpus,
                "requests": self.requests, "cost_per_hour_usd": self.cost_per_hour_usd,
                "energy_kwh_per_hour": self.energy_kwh_per_hour,
                "g_co2_per_hour": self.g_co2_per_hour}


def model_totals(models: Sequence[str], pools: Sequence[PoolResult],
                 classes: Sequence[SimulatedClass],
                 class_model: Mapping[str, str]) -> tuple[ModelTotals, ...]:
    """Per model of ``models`` (in that order): its pools' sums and its classes' verdict.
    ``class_model``: class name -> the model serving it."""
    out = []
    for m in models:
        mine = [p for p in pools if split_model(p.label)[0] == m]
        cls = [c for c in classes if class_model.get(c.name) == m]
        judged = [c.slo_met for c in cls if c.slo_met is not None]
        out.append(ModelTotals(
            model=m, classes=tuple(c.name for c in cls),
            slo_met=all(judged) if judged else None, pools=len(mine),
            replicas=sum(p.count for p in mine), gpus=sum(p.gpus for p in mine),
            requests=sum(p.requests for p in mine),
            cost_per_hour_usd=sum(p.cost_per_hour_usd for p in mine),
            energy_kwh_per_hour=sum(p.energy_kwh_per_hour for p in mine),
            g_co2_per_hour=sum(p.g_co2_operational_per_hour + p.g_co2_embodied_per_hour
                               for p in mine)))
    return tuple(out)
