"""Error bands for uncalibrated (spec-path) predictions, from cross-validation on the bundled
store.

``scripts/gen_spec_errors.py`` predicts every calibrated configuration of the bundled store the
way an unmeasured pair is predicted (model card + GPU datasheet x efficiency ratios learned from
*other* calibrated configurations) twice: leave-one-config-out (the other configurations of the
same GPU type, the fold's own excluded) and leave-one-model-out (every configuration of the
fold's model excluded, so the ratios come from other models only). The signed relative errors
(predicted / measured - 1) of unflagged runs, per GPU type and pooled, are summarized in
``data/spec_errors.json`` (10th, 50th and 90th percentiles, n); ``docs/spec-path-validation.md``
renders them.

Main entries:

- :func:`error_table` (the loaded table), :func:`error_band` (one metric: the range the measured
  value fell in for 80% of held-out runs, given a prediction: ``[pred / (1 + e90),
  pred / (1 + e10)]``), :func:`prediction_bands` (every banded metric of a prediction, the
  ``*_band`` fields ``fleetplan predict`` prints).
- :func:`safety_factor` for a solver's safety margin (``solve --confidence``): the factor by
  which a spec-path capacity (throughput) or latency must be derated so that, at quantile
  ``q`` of the held-out errors, the measured value would still meet it (measured = predicted /
  (1 + e)): for throughput ``1 / (1 + e_q)``, capped at 1; for latencies ``1 / (1 + e_(1-q))``,
  at least 1. Quantiles between the
  stored 10/50/90th are interpolated linearly; outside them the end value is used.

A GPU type absent from the table (a user's GPU) gets the pooled ``leave-one-gpu-out`` figures
(each configuration predicted with ratios of the other GPU types only), and says so
(``basis``). Calibrated predictions carry no band: their error is the in-sample one of
``docs/validation.md``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import DataError, InputError

ERRORS_FILE = "spec_errors.json"
# prediction metric -> the cross-validated metric whose errors bound it
BANDED = {
    "request_throughput": "request_throughput",
    "output_throughput": "output_throughput",
    "ttft_p50_ms": "ttft_p50_ms",
    "ttft_p99_ms": "ttft_p99_ms",
    "tpot_p50_ms": "tpot_p50_ms",
    "tpot_p99_ms": "tpot_p50_ms",  # TPOT p99 is not in the measured tables: p50's errors
    # other people's runs rarely give the TTFT mean or p90: the nearest metric's errors (held
    # out model by model on the study's runs, such bands held the mean 60/81 and the p90 64/81,
    # bands of their own errors 62/81 and 63/81; tests/validate/test_band_proxies.py)
    "ttft_mean_ms": "ttft_p50_ms",
    "ttft_p90_ms": "ttft_p99_ms",
}
LATENCY = {m for m in BANDED if m.endswith("_ms")}  # the banded latencies
POOLED = "all"
MLA_POOLED = "mla"  # the external fold's row of latent-attention models' runs
UNMEASURED_GPU_FOLD = "leave-one-gpu-out"
# errors of the spec path on other people's runs (data/external; fleetplan.validate.
# external_bands): where a GPU type the bundled store never measured takes its band from
EXTERNAL_FOLD = "external"


@dataclass(frozen=True)
class ErrorQuantiles:
    """Signed relative errors (predicted / measured - 1) of held-out runs: 10/50/90th, n."""

    p10: float
    p50: float
    p90: float
    n: int

    @classmethod
    def of(cls, errors: Sequence[float]) -> ErrorQuantiles:
        """The quantiles of signed relative errors (fractions), linear between order
        statistics, rounded to 4 decimals as the tables store them."""
        if not errors:
            raise DataError("no errors to summarize")
        p10, p50, p90 = (round(float(v), 4) for v in np.quantile(errors, (0.1, 0.5, 0.9)))
        return cls(p10, p50, p90, len(errors))

    def to_dict(self) -> dict[str, Any]:
        return {"p10": self.p10, "p50": self.p50, "p90": self.p90, "n": self.n}

    def measured_range(self, predicted: float = 1.0) -> tuple[float, float]:
        """Where the measured value fell for 80% of these held-out runs around ``predicted``
        (measured = predicted / (1 + e)): ``(predicted / (1 + e90), predicted / (1 + e10))``;
        by default as multiples of the prediction."""
        return predicted / (1.0 + self.p90), predicted / (1.0 + self.p10)

    def latency_factor(self, confidence: float) -> float:
        """How many times worse a predicted latency is taken so that the measured one
        (``predicted / (1 + e)``) meets it at ``confidence`` of these errors: ``1 / (1 +
        e_(1 - confidence))``, at least 1 (never loosens a prediction)."""
        return max(1.0, 1.0 / (1.0 + self.at(1.0 - confidence)))

    def at(self, q: float) -> float:
        """The error at quantile ``q`` (0-1), linear between the stored ones, clamped."""
        pts = ((0.1, self.p10), (0.5, self.p50), (0.9, self.p90))
        if q <= pts[0][0]:
            return self.p10
        if q >= pts[-1][0]:
            return self.p90
        for (q0, e0), (q1, e1) in zip(pts, pts[1:], strict=False):
            if q0 <= q <= q1:
                return e0 + (e1 - e0) * (q - q0) / (q1 - q0)
        return self.p50


@dataclass(frozen=True)
class Band:
    """Where the measured value fell for 80% of held-out runs, given ``predicted``."""

    lo: float
    hi: float
    basis: str

    def to_list(self) -> list[float]:
        return [self.lo, self.hi]


@dataclass(frozen=True)
class ErrorTable:
    """``fold`` ('leave-one-config-out' / 'leave-one-model-out') -> GPU type (or ``all``) ->
    metric -> quantiles; ``source``: how it was made."""

    folds: dict[str, dict[str, dict[str, ErrorQuantiles]]]
    source: str
    path: Path
    # (fold, GPU type or all, metric) -> median |error| %, where the table states one
    median_abs_pct: dict[tuple[str, str, str], float] = field(default_factory=dict)

    def quantiles(self, gpu: str, metric: str, fold: str, *, moe: bool = False,
                  mla: bool = False) -> tuple[ErrorQuantiles, str]:
        """The quantiles for ``gpu`` (the pooled ones when the GPU type has none) and a basis
        line naming which (:meth:`lookup`)."""
        row = self.lookup(gpu, metric, fold, moe=moe, mla=mla)
        return row.quantiles, row.basis

    def lookup(self, gpu: str, metric: str, fold: str, *, moe: bool = False,
               mla: bool = False) -> TableRow:
        """The row of held-out errors that bounds ``metric`` of a prediction on ``gpu``:
        ``fold``'s row of the GPU type; for a GPU type the store never measured, other people's
        runs of that type, else of all theirs (the external fold, judged leave-one-dataset-out,
        docs/validation.md); else the store's leave-one-gpu-out errors of all GPU types.
        ``moe``: the prediction is of a mixture-of-experts model, which the store's folds
        (the bundled study's models, all dense) never held out: other people's runs, MoE models
        among them, bound it on every GPU type. ``mla``: of a model of multi-head latent
        attention, bounded by other people's runs of such models where the external fold has
        them (:mod:`fleetplan.validate.external_bands`), else as an MoE model."""
        table = self.folds.get(fold)
        if table is None:
            raise InputError(f"error table fold {fold!r} unknown (valid: "
                             f"{', '.join(sorted(self.folds))})")
        cv = BANDED.get(metric, metric)
        row = table.get(gpu, {}).get(cv)
        ext = self.folds.get(EXTERNAL_FOLD, {})
        mine = None if row is None else self._row(
            row, fold, gpu, cv, f"{fold} errors of {row.n} held-out {gpu} runs ({cv})")
        if mine is not None and not (moe or mla):
            return mine
        # a GPU type never measured here (or an MoE model, which the store never held out):
        # how the spec path did on other people's runs of that GPU type, else of every GPU
        # type (judged leave-one-dataset-out, docs/validation.md); a latent-attention model's
        # on such models' runs (external_bands' mla row), where the fold has one
        why = (f"the bundled store's {gpu} runs are of dense models only" if mine is not None
               else f"none measured on {gpu} here")
        latent = ext.get(MLA_POOLED, {}).get(cv) if mla else None
        if latent is not None:
            return self._row(latent, EXTERNAL_FOLD, MLA_POOLED, cv, (
                f"errors of {latent.n} runs others measured of latent-attention models on "
                f"their own GPUs ({cv}; data/external)"))
        if mine is not None and not moe:
            return mine
        own = ext.get(gpu, {}).get(cv)
        if own is not None:
            return self._row(own, EXTERNAL_FOLD, gpu, cv, (
                f"errors of {own.n} runs others measured on {gpu} ({cv}; data/external"
                + (f"; {why})" if mine is not None else ")")))
        pooled_ext = ext.get(POOLED, {}).get(cv)
        if pooled_ext is not None:
            return self._row(pooled_ext, EXTERNAL_FOLD, POOLED, cv, (
                f"errors of {pooled_ext.n} runs others measured on their own GPUs ({cv}; "
                f"data/external; {why})"))
        if mine is not None:
            return mine
        # no such table: what the other GPU types' ratios did on each type
        fold = UNMEASURED_GPU_FOLD if UNMEASURED_GPU_FOLD in self.folds else fold
        pooled = self.folds[fold].get(POOLED, {}).get(cv)
        if pooled is None:
            raise InputError(f"no cross-validated errors for metric {metric}")
        return self._row(pooled, fold, POOLED, cv, (
            f"{fold} errors of {pooled.n} held-out runs of all GPU types ({cv}; "
            f"none measured on {gpu})"))

    def _row(self, q: ErrorQuantiles, fold: str, key: str, metric: str, basis: str
             ) -> TableRow:
        return TableRow(q, fold, key, metric, basis,
                        self.median_abs_pct.get((fold, key, metric)))


@dataclass(frozen=True)
class TableRow:
    """One row of the error table as a prediction reads it: its ``quantiles``, the ``fold``
    and ``key`` (GPU type or ``all``) it was found under, the cross-validated ``metric``, a
    ``basis`` line naming it, and the table's median |error| of that row, if stated."""

    quantiles: ErrorQuantiles
    fold: str
    key: str
    metric: str
    basis: str
    median_abs_pct: float | None = None  # the table's median |error| %, where it states one

    @property
    def doc(self) -> str:
        """The page that judges this row's errors: other people's runs (the ``external``
        fold) are judged leave-one-dataset-out in docs/validation.md, the store's folds in
        docs/spec-path-validation.md."""
        return ("docs/validation.md, other people's runs" if self.fold == EXTERNAL_FOLD
                else "docs/spec-path-validation.md")

    def band(self, predicted: float) -> Band:
        """Where the measured value fell for 80% of these held-out runs, around ``predicted``:
        ``[pred / (1 + e90), pred / (1 + e10)]``."""
        return Band(*self.quantiles.measured_range(predicted), self.basis)


def _quantiles(obj: Any, where: str) -> ErrorQuantiles:
    try:
        q = ErrorQuantiles(float(obj["p10"]), float(obj["p50"]), float(obj["p90"]),
                           int(obj["n"]))
    except (KeyError, TypeError, ValueError):
        raise DataError(f"{where}: expected p10, p50, p90 and n") from None
    if not all(math.isfinite(v) and v > -1 for v in (q.p10, q.p50, q.p90)) or not (
            q.p10 <= q.p50 <= q.p90):
        raise DataError(f"{where}: quantiles must be finite, > -1 and ordered")
    return q


@cache
def _load(path: str, mtime: float) -> ErrorTable:
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a readable error table ({exc})") from None
    folds = {}
    median_abs: dict[tuple[str, str, str], float] = {}
    for fold, by_gpu in (obj.get("folds") or {}).items():
        folds[fold] = {g: {m: _quantiles(q, f"{path}: folds.{fold}.{g}.{m}")
                           for m, q in metrics.items()} for g, metrics in by_gpu.items()}
        median_abs.update(((fold, g, m), float(q["median_abs_pct"]))
                          for g, metrics in by_gpu.items() for m, q in metrics.items()
                          if isinstance(q.get("median_abs_pct"), int | float))
    return ErrorTable(folds, str(obj.get("source", "")), Path(path), median_abs)


def error_table(path: str | Path | None = None) -> ErrorTable:
    """The error table (default: the bundled ``data/spec_errors.json``)."""
    from fleetplan.catalog._tables import data_dir

    p = Path(path) if path is not None else data_dir() / ERRORS_FILE
    if not p.is_file():
        raise DataError(f"{p}: error table not found (scripts/gen_spec_errors.py writes it)")
    return _load(str(p.resolve()), p.stat().st_mtime)


def error_band(gpu: str, metric: str, predicted: float, *,
               fold: str = "leave-one-model-out", table: ErrorTable | None = None,
               moe: bool = False) -> Band:
    """The 80% band of the measured value of ``metric`` around a spec-path prediction on a
    ``gpu`` (catalog name): ``[pred / (1 + e90), pred / (1 + e10)]`` (``moe``: of an MoE
    model, :meth:`ErrorTable.lookup`)."""
    return (table or error_table()).lookup(gpu, metric, fold, moe=moe).band(predicted)


def prediction_bands(gpu: str, metrics: dict[str, float], *,
                     fold: str = "leave-one-model-out", table: ErrorTable | None = None,
                     digits: int = 4, config: str | None = None,
                     moe: bool = False, mla: bool = False) -> dict[str, Any]:
    """``{metric}_band: [lo, hi]`` for every banded metric of ``metrics`` and
    ``band_basis``: the one line saying which held-out errors they come from (``config``: the
    configuration predicted; one of pipeline stages says that no such run is among them;
    ``moe``: the model is a mixture of experts, ``mla`` one of multi-head latent attention,
    :meth:`ErrorTable.lookup`)."""
    t = table or error_table()
    out: dict[str, Any] = {}
    basis: TableRow | None = None
    for m, v in metrics.items():
        if m in BANDED and isinstance(v, int | float) and math.isfinite(v):
            row = t.lookup(gpu, m, fold, moe=moe, mla=mla)
            b = row.band(float(v))
            out[f"{m}_band"] = [round(b.lo, digits), round(b.hi, digits)]
            if m == "ttft_p99_ms" or basis is None:
                basis = row
    if out and basis is not None:
        out["band_basis"] = (f"80% of held-out runs measured inside the band: {basis.basis} "
                             f"({basis.doc})")
        if config is not None and int(HardwareConfig.split_layout(config).get("pp_size", 1)) > 1:
            out["band_basis"] += (f"; no pipeline-parallel run is among them: the band of "
                                  f"{config} is a tensor-parallel server's")
    return out


def safety_factor(gpu: str, metric: str, *, confidence: float = 0.9,
                  fold: str = "leave-one-model-out", table: ErrorTable | None = None,
                  moe: bool = False) -> float:
    """Derating factor for a spec-path figure at ``confidence`` (0.5-0.99): multiply a
    predicted throughput/capacity by it, or a predicted latency by it, so that the measured
    value meets the derated figure for that share of held-out runs (see the module docstring).
    Never loosens the prediction: the factor is <= 1 for throughput and >= 1 for latencies."""
    if not 0.5 <= confidence < 1.0:
        raise InputError(f"confidence(={confidence!r}) must be in [0.5, 1)")
    t = table or error_table()
    q, _basis = t.quantiles(gpu, metric, fold, moe=moe)
    if metric in LATENCY:
        return q.latency_factor(confidence)
    # measured = pred / (1 + e): the measured throughput is below pred / (1 + e_hi) ...
    return min(1.0, 1.0 / (1.0 + q.at(confidence)))
