"""One call from names to a prediction: :func:`predict` (model, configuration, rate).

It resolves the replica parameters (calibrated, or spec-based and marked ``calibrated: false``)
and either replays vLLM's benchmark (a burst of ``num_prompts`` requests, the protocol of the
measured runs) or, with ``steady=True``, simulates sustained load (what planning uses). The model
may be a catalog name or a :class:`~fleetplan.catalog.models.ModelSpec` (e.g.
``ModelSpec.from_hf_config("Qwen3-8B/")``); ``context`` names the catalog, store and calibration
to read (:class:`fleetplan.context.DataContext`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from fleetplan.catalog.catalog import active_catalog
from fleetplan.catalog.models import ModelSpec
from fleetplan.context import DataContext, active_data, use_context
from fleetplan.replica.params import ReplicaParams, replica_params
from fleetplan.replica.protocol import ReplayResult, replay
from fleetplan.replica.steady import SteadyResult, steady_state
from fleetplan.workload.lengths import LengthModel


def resolve_params(model: str | ModelSpec, config: str, *,
                   calibration: str | Path | None = None,
                   context: DataContext | None = None,
                   engine_version: str | None = None,
                   efficiency: str = "auto") -> ReplicaParams:
    """:func:`~fleetplan.replica.params.replica_params` of ``model`` (a name, or a spec that
    joins the catalog for this call) on ``config``, read through ``context``; an uncalibrated
    pair's prior uses ``engine_version``'s vLLM defaults when given; ``efficiency`` chooses its
    spec path (:func:`~fleetplan.replica.params.replica_params`: ``"auto"``, the default, takes
    the GPU type's measured better path; ``"ratios"`` or ``"transfer"`` force one)."""
    if isinstance(model, ModelSpec):
        base = context or active_data()
        cat = (base.catalog or active_catalog()).extend(models=[model])
        context, name = dataclasses.replace(base, catalog=cat, models=(model,)), model.model
    else:
        name = model
    with use_context(context):
        return replica_params(name, config, calibration=calibration,
                              engine_version=engine_version, efficiency=efficiency)


def predict(model: str | ModelSpec, config: str, *, rate: float, steady: bool = False,
            num_prompts: int = 200, burstiness: float = 1.0,
            lengths: LengthModel | None = None, calibration: str | Path | None = None,
            context: DataContext | None = None, engine_version: str | None = None,
            efficiency: str = "auto", **options: Any) -> ReplayResult | SteadyResult:
    """Predict ``model`` on ``config`` at ``rate`` req/s.

    ``steady=False``: :func:`~fleetplan.replica.protocol.replay` of a ``num_prompts`` burst
    (extra ``options``: ``seeds``, ``arrival_seed``, ``warm_prefix_cache``, ``max_concurrency``).
    ``steady=True``: :func:`~fleetplan.replica.steady.steady_state` (extra ``options``:
    ``duration_s``, ``warmup_s``, ``seed``). An uncalibrated pair is predicted from the spec
    path; :func:`fleetplan.validate.bands.error_band` says how far off that path has been.
    """
    params = resolve_params(model, config, calibration=calibration, context=context,
                            engine_version=engine_version, efficiency=efficiency)
    if steady:
        return steady_state(params, rate=rate, lengths=lengths, burstiness=burstiness, **options)
    return replay(params, rate=rate, num_prompts=num_prompts, burstiness=burstiness,
                  lengths=lengths, **options)
