"""The replica model's own error around a plan's simulated P99 TTFT: an 80% band per class.

The fleet simulation's 95% interval (``ttft_p99_ci_ms``) says how far the simulated P99 moves
between replications of the *model*; it says nothing about how far the model is from the real
server. That error is measured on held-out runs, as signed errors ``e = predicted / measured -
1`` (the measured P99 is the predicted one / ``(1 + e)``):

- a calibrated configuration (the model was measured on it): its server kind's leave-one-rate-out
  errors (:data:`fleetplan.optimize.confidence.MODEL_ERROR_QUANTILES_BY_KIND`, from ``fleetplan
  validate --cv``); a kind with too few runs: its GPU type's median ``|e|`` read as an unbiased
  log-normal (:func:`fleetplan.optimize.confidence.model_error`);
- an uncalibrated (spec-based) one: the spec path's held-out errors, ``data/spec_errors.json``
  (the table ``fleetplan predict`` prints its 80% band from; leave-one-config-out for a model
  measured on other configurations, leave-one-model-out for one never measured).

A pool's band of the measured P99 is ``[p / (1 + e90), p / (1 + e10)]`` around the simulated
``p``; a class's is the widest (largest ``hi / lo``) of the pools that carry its traffic, with
the words naming its table (``band_basis``), and ``calibrated`` says whether every one of those
pools is. Each fleet entry records whether its configuration is calibrated.

Main entries: :func:`pool_band` (one configuration), :func:`with_model_bands` (a :class:`Plan`
with the fields filled; ``solve`` calls it on every plan it returns) and :func:`class_band`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.optimize.plan import ClassResult, Plan, PlanStatus

if TYPE_CHECKING:
    from fleetplan.replica.calibration_file import CalibrationSource

BAND_LEVEL = 0.8  # the share of held-out runs whose measured value fell inside the band
Z_90 = 1.2815515655446004  # the standard normal's 90th percentile (10-90: 80%)
SPEC_TABLE = "data/spec_errors.json"


@dataclass(frozen=True)
class PoolBand:
    """How far the real P99 TTFT of one configuration may sit from the model's: ``lo`` and
    ``hi`` multiply the predicted value (80% of held-out runs fell inside)."""

    config: str
    calibrated: bool
    lo: float
    hi: float
    basis: str

    @property
    def width(self) -> float:
        return self.hi / self.lo


def spec_fold(model: str, *, store: str | os.PathLike[str] | None = None) -> str:
    """The spec path's fold that matches ``model``: a model measured on some configuration (of
    ``store``, a data context's, else the default store) is a held-out configuration on the
    others, a model never measured a held-out model (the rule of
    :func:`fleetplan.optimize.confidence.margins`)."""
    from fleetplan.profiles.store import load_profiles

    return ("leave-one-config-out" if load_profiles(default=store).configs(model)
            else "leave-one-model-out")


def pool_band(model: str, config: str, catalog: Catalog | None = None, *,
              store: str | os.PathLike[str] | None = None,
              calibration: CalibrationSource = None) -> PoolBand:
    """The 80% band factors of ``model`` on ``config`` (names of ``catalog``, default: the
    bundled one; ``store`` and ``calibration``: a data context's, else the default files) and
    the words naming their table."""
    return _pool_band(model, config, spec_fold(model, store=store), catalog, calibration)


def _pool_band(model: str, config: str, fold: str, catalog: Catalog | None,
               calibration: CalibrationSource) -> PoolBand:
    from fleetplan.catalog.hardware import HardwareConfig, server_kind
    from fleetplan.optimize.confidence import kind_quantiles, model_error, sigma_of
    from fleetplan.replica.params import replica_params
    from fleetplan.validate.bands import error_table

    hw = HardwareConfig.parse(config, catalog)
    params = replica_params(model, config, catalog=catalog, calibration=calibration)
    if not params.calibrated:
        mla = (catalog or bundled_catalog()).model(model).is_mla
        q, basis = error_table().quantiles(hw.gpu, "ttft_p99_ms", fold, moe=params.is_moe,
                                           mla=mla)
        return PoolBand(config, False, *q.measured_range(),
                        f"spec path (not calibrated), {SPEC_TABLE}: {basis}"
                        + ("; no pipeline-parallel run is among them" if hw.pp_size > 1
                           else ""))
    tp = int(hw.tp_size or hw.gpu_count)
    signed = kind_quantiles(hw.gpu, tp)
    if signed is not None:
        q = signed[0]
        return PoolBand(config, True, *q.measured_range(),
                        f"calibrated, leave-one-rate-out errors of {q.n} held-out runs of "
                        f"{server_kind(hw.gpu, tp)} servers (fleetplan validate --cv)")
    m, src = model_error(hw.gpu, tp)  # a median |error| only: read as unbiased log-normal
    s = math.exp(Z_90 * sigma_of(m))
    # the figures are the validation run's (fleetplan validate --cv), bundled with the package
    src = src.replace("docs/validation.md", "fleetplan validate --cv")
    return PoolBand(config, True, 1.0 / s, s, f"calibrated, {src} (as a log-normal error)")


def class_band(model: str, p99_ms: float | None, configs: Iterable[str],
               catalog: Catalog | None = None, *, store: str | os.PathLike[str] | None = None,
               calibration: CalibrationSource = None
               ) -> tuple[tuple[float, float] | None, str | None, bool | None]:
    """``([lo, hi] ms, basis, calibrated)`` of a class whose simulated P99 is ``p99_ms``,
    carried by ``configs``: the widest of their bands (``store`` and ``calibration`` as in
    :func:`pool_band`); ``calibrated`` only when every one is. ``(None, None, None)`` without
    a simulated P99 or a configuration."""
    names = sorted(set(configs))
    fold = spec_fold(model, store=store) if names else ""
    bands = [_pool_band(model, c, fold, catalog, calibration) for c in names]
    if not bands:
        return None, None, None
    calibrated = all(b.calibrated for b in bands)
    if p99_ms is None or not math.isfinite(p99_ms) or p99_ms <= 0:
        return None, None, calibrated
    widest = max(bands, key=lambda b: (b.width, b.hi, b.config))
    lo, hi = round(p99_ms * widest.lo, 3), round(p99_ms * widest.hi, 3)
    return (lo, hi), f"{BAND_LEVEL:.0%} band of {widest.config}: {widest.basis}", calibrated


def with_model_bands(model: str, plan: Plan, catalog: Catalog | None = None, *,
                     store: str | os.PathLike[str] | None = None,
                     calibration: CalibrationSource = None) -> Plan:
    """``plan`` with every class's band (:func:`class_band`) and every fleet entry's
    ``calibrated`` filled (an infeasible plan is returned as it is). ``model``: the served
    model, of every class and entry that does not name its own (a plan of several models
    names one for each). ``store`` and ``calibration``: the scenario's data context's (else
    the default files), as in :func:`pool_band`."""
    if plan.status is PlanStatus.infeasible:
        return plan
    config_of = {e.pool: e.config for e in (*plan.fleet, *(e for h in plan.hours or ()
                                                            for e in (*h.fleet, *h.on_demand)))}
    classes: list[ClassResult] = []
    for c in plan.classes:
        configs = [config_of.get(k, k.split("@", 1)[0]) for k, s in c.split.items() if s > 0]
        band, basis, calibrated = class_band(c.model or model, c.ttft_p99_ms, configs, catalog,
                                             store=store, calibration=calibration)
        classes.append(replace(c, ttft_p99_band_ms=band, band_basis=basis,
                               calibrated=calibrated))
    folds = {m: spec_fold(m, store=store) for m in {e.model or model for e in plan.fleet}}
    fleet = tuple(replace(e, calibrated=_pool_band(e.model or model, e.config,
                                                   folds[e.model or model], catalog,
                                                   calibration).calibrated)
                  for e in plan.fleet)
    return replace(plan, classes=tuple(classes), fleet=fleet)
