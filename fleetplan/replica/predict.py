"""One call from names to a prediction: :func:`predict` (a benchmark burst, the protocol of the
measured runs) and :func:`predict_steady` (sustained load, what planning uses).

Both resolve the replica parameters (calibrated, or spec-based and marked ``calibrated: false``)
with :func:`resolve_params`. The model may be a catalog name or a
:class:`~fleetplan.catalog.models.ModelSpec` (e.g. ``ModelSpec.from_hf_config("Qwen3-8B/")``);
``context`` names the catalog, store and calibration to read
(:class:`fleetplan.context.DataContext`). The CLI's ``predict`` (bands, own runs and measured
runs beside the figures) is :func:`fleetplan.validate.prediction.run_prediction`.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, overload

from fleetplan._progress import Progress
from fleetplan.catalog.models import ModelSpec
from fleetplan.context import DataContext
from fleetplan.replica.params import ReplicaParams, replica_params
from fleetplan.replica.protocol import ReplayResult, replay
from fleetplan.replica.steady import STEADY_DURATION_S, SteadyResult, steady_state
from fleetplan.workload.lengths import LengthModel

DEFAULT_SEEDS = (0, 1, 2, 3, 4)  # the length seeds a burst is averaged over by default


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
    base = context if context is not None else DataContext()
    if isinstance(model, ModelSpec):
        cat = base.catalog.extend(models=[model])
        base, name = dataclasses.replace(base, catalog=cat, models=(model,)), model.model
    else:
        name = model
    cal = calibration if calibration is not None else base.calibration  # else the default
    return replica_params(name, config, calibration=cal,
                          engine_version=engine_version, efficiency=efficiency,
                          catalog=base.catalog)


def predict_steady(model: str | ModelSpec, config: str, *, rate: float,
                   burstiness: float = 1.0, lengths: LengthModel | None = None,
                   prefix_cache_hit: float = 0.0, duration_s: float = STEADY_DURATION_S,
                   warmup_s: float = 60, seed: int = 0,
                   calibration: str | Path | None = None, context: DataContext | None = None,
                   engine_version: str | None = None, efficiency: str = "auto",
                   progress: Progress | None = None) -> SteadyResult:
    """Sustained behaviour of ``model`` on ``config`` at ``rate`` req/s: a
    :class:`~fleetplan.replica.steady.SteadyResult`
    (:func:`~fleetplan.replica.steady.steady_state` of the resolved parameters; its
    ``status`` says whether the replica keeps up). ``prefix_cache_hit``: the share (0-1) of
    each prompt you assume already cached. An uncalibrated pair is predicted from the spec
    path; :func:`fleetplan.validate.bands.error_band` says how far off that path has been."""
    params = resolve_params(model, config, calibration=calibration, context=context,
                            engine_version=engine_version, efficiency=efficiency)
    return steady_state(params, rate=rate, lengths=lengths, burstiness=burstiness,
                        duration_s=duration_s, warmup_s=warmup_s, seed=seed,
                        prefix_cache_hit=prefix_cache_hit, progress=progress)


@overload
def predict(model: str | ModelSpec, config: str, *, rate: float, num_prompts: int = ...,
            burstiness: float = ..., max_concurrency: int | None = ...,
            lengths: LengthModel | None = ..., seeds: Sequence[int] = ...,
            arrival_seed: int | None = ..., warm_prefix_cache: bool = ...,
            calibration: str | Path | None = ..., context: DataContext | None = ...,
            engine_version: str | None = ..., efficiency: str = ...,
            steady: Literal[False] = ...) -> ReplayResult: ...


@overload
def predict(model: str | ModelSpec, config: str, *, rate: float, burstiness: float = ...,
            lengths: LengthModel | None = ..., calibration: str | Path | None = ...,
            context: DataContext | None = ..., engine_version: str | None = ...,
            efficiency: str = ..., steady: Literal[True], duration_s: float = ...,
            warmup_s: float = ..., seed: int = ...) -> SteadyResult: ...


def predict(model: str | ModelSpec, config: str, *, rate: float, num_prompts: int = 200,
            burstiness: float = 1.0, max_concurrency: int | None = None,
            lengths: LengthModel | None = None, seeds: Sequence[int] = DEFAULT_SEEDS,
            arrival_seed: int | None = None, warm_prefix_cache: bool = False,
            calibration: str | Path | None = None, context: DataContext | None = None,
            engine_version: str | None = None, efficiency: str = "auto",
            steady: bool = False, duration_s: float | None = None,
            warmup_s: float | None = None, seed: int | None = None,
            ) -> ReplayResult | SteadyResult:
    """What vLLM's benchmark would measure for ``model`` on ``config``: a burst of
    ``num_prompts`` requests sent at ``rate`` req/s that the server then drains, averaged over
    the length ``seeds`` (:func:`~fleetplan.replica.protocol.replay`; a
    :class:`~fleetplan.replica.protocol.ReplayResult`). ``arrival_seed`` reproduces the send
    times of ``vllm bench serve --seed N``; ``warm_prefix_cache``: the prompts are already in
    vLLM's prefix cache (a repeated run). An uncalibrated pair is predicted from the spec
    path; :func:`fleetplan.validate.bands.error_band` says how far off that path has been.

    Sustained load is :func:`predict_steady`. ``steady=True`` (with ``duration_s``,
    ``warmup_s``, ``seed``) is the older spelling of it: it still returns its
    :class:`~fleetplan.replica.steady.SteadyResult`, with a :class:`DeprecationWarning`, and
    goes in the next release.
    """
    if steady:
        warnings.warn("predict(..., steady=True) is deprecated: call predict_steady(...), which "
                      "returns the same SteadyResult", DeprecationWarning, stacklevel=2)
        extra = {k: v for k, v in (("duration_s", duration_s), ("warmup_s", warmup_s),
                                   ("seed", seed)) if v is not None}
        return predict_steady(model, config, rate=rate, burstiness=burstiness, lengths=lengths,
                              calibration=calibration, context=context,
                              engine_version=engine_version, efficiency=efficiency,
                              **extra)  # type: ignore[arg-type]
    steady_only = [k for k, v in (("duration_s", duration_s), ("warmup_s", warmup_s),
                                  ("seed", seed)) if v is not None]
    if steady_only:
        raise TypeError(f"predict() got {steady_only[0]}=, which applies to sustained load: "
                        "call predict_steady(...)")
    params = resolve_params(model, config, calibration=calibration, context=context,
                            engine_version=engine_version, efficiency=efficiency)
    return replay(params, rate=rate, num_prompts=num_prompts, burstiness=burstiness,
                  max_concurrency=max_concurrency, lengths=lengths, seeds=seeds,
                  arrival_seed=arrival_seed, warm_prefix_cache=warm_prefix_cache)
