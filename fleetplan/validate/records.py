"""Typed records of a validation result; ``to_dict()`` is the binding JSON of
``fleetplan validate --format json`` (field names and order are a contract, see issue 3).

Main entries: :class:`ValidationResult` (``runs`` + ``summary`` + ``noise_floor`` [+ ``cv``]),
:class:`RunRecord` (one run, its :class:`MetricRow` per metric), :class:`CvResult` (one
cross-validation: leave-one-rate-out rows carry a baseline, :class:`BaselineMetricRow`), and
:meth:`ValidationResult.from_dict` (a saved JSON result read back, e.g. to render Markdown).
Mappings keyed by metric or GPU name stay dicts (the keys are data, not field names).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from fleetplan.errors import DataError
from fleetplan.replica.calibrate import FIT_SEEDS
from fleetplan.validate.bands import ErrorQuantiles


@dataclass(frozen=True)
class MetricRow:
    """One metric of one run: measured, predicted, error relative to measured (percent), and
    for an uncalibrated prediction ``band_80pct``: where 80% of held-out runs measured, given
    this prediction (:func:`fleetplan.validate.bands.prediction_bands`; absent from the JSON
    when the pair is calibrated or the metric has no band)."""

    measured: float | None
    predicted: float | None
    error_pct: float | None
    band_80pct: tuple[float, float] | None = None

    @property
    def in_band(self) -> bool | None:
        """Whether the measured value lies inside ``band_80pct`` (None: no band or no value)."""
        if self.band_80pct is None or self.measured is None:
            return None
        return self.band_80pct[0] <= self.measured <= self.band_80pct[1]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.band_80pct is None:
            del out["band_80pct"]
        else:
            out["band_80pct"] = list(self.band_80pct)
        return out


@dataclass(frozen=True)
class BaselineMetricRow(MetricRow):
    """A leave-one-rate-out row: the geometric-interpolation baseline beside the model."""

    baseline_predicted: float | None = None
    baseline_error_pct: float | None = None


@dataclass(frozen=True)
class RunRecord:
    """One entry of ``runs``."""

    model: str
    config: str
    gpu: str
    gpu_count: int
    request_rate: float
    calibrated: bool
    flagged: bool
    flag_reason: str | None
    metrics: dict[str, MetricRow]

    @property
    def key(self) -> tuple[str, str]:
        return self.model, self.config

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "config": self.config, "gpu": self.gpu,
                "gpu_count": self.gpu_count, "request_rate": self.request_rate,
                "calibrated": self.calibrated, "flagged": self.flagged,
                "flag_reason": self.flag_reason,
                "metrics": {m: row.to_dict() for m, row in self.metrics.items()}}


@dataclass(frozen=True)
class MetricSummary:
    """Median absolute percent error of one metric over the unflagged runs."""

    median_abs_error_pct: float | None
    n: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CvMetricSummary(MetricSummary):
    """A cross-validation summary row: with the metric's target."""

    target_pct: float | None = None


@dataclass(frozen=True)
class BaselineCvMetricSummary(CvMetricSummary):
    """A leave-one-rate-out summary row: with the baseline's median error."""

    baseline_median_abs_error_pct: float | None = None
    baseline_n: int = 0


@dataclass(frozen=True)
class BandCoverage:
    """How many measured values of one metric their uncalibrated prediction's 80% band held
    (``inside`` of ``n`` unflagged runs; the band is honest when that is about 80%) and the
    median of the bands' widths (``hi / lo``)."""

    inside: int
    n: int
    median_width: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def band_coverage(records: Sequence[RunRecord]) -> dict[str, BandCoverage]:
    """Per metric with a band, the :class:`BandCoverage` over the unflagged records."""
    rows: dict[str, list[MetricRow]] = {}
    for r in records:
        if r.flagged:
            continue
        for m, row in r.metrics.items():
            if row.in_band is not None:
                rows.setdefault(m, []).append(row)
    out = {}
    for m, got in rows.items():
        widths = [b[1] / b[0] for row in got if (b := row.band_80pct) is not None and b[0] > 0]
        out[m] = BandCoverage(sum(bool(row.in_band) for row in got), len(got),
                              round(statistics.median(widths), 4) if widths else None)
    return out


@dataclass(frozen=True)
class NoiseMetric:
    """Run-to-run spread of one metric over repeated pairs (percent)."""

    median_abs_diff_pct: float | None
    max_abs_diff_pct: float | None
    n_pairs: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class NoiseFloor:
    settings_with_repeats: int
    metrics: dict[str, NoiseMetric]

    def to_dict(self) -> dict[str, Any]:
        return {"settings_with_repeats": self.settings_with_repeats,
                "metrics": {m: v.to_dict() for m, v in self.metrics.items()}}


@dataclass(frozen=True)
class CvResult:
    """One cross-validation (leave-one-rate-out, or leave-one-config-out with ``not_covered``:
    the (model, config) pairs alone of their GPU type)."""

    runs: tuple[RunRecord, ...]
    summary: dict[str, CvMetricSummary]
    by_gpu: dict[str, dict[str, CvMetricSummary]]
    not_covered: tuple[tuple[str, str], ...] | None = None
    #: the same per :func:`server_kind` (GPU type, one GPU or tensor-parallel)
    by_kind: dict[str, dict[str, CvMetricSummary]] = field(default_factory=dict)
    #: per server kind and metric, the signed errors (predicted / measured - 1) of the
    #: unflagged runs: 10/50/90th percentile and n (``solve --confidence`` takes its margins
    #: from ``ttft_p99_ms``'s, fleetplan/optimize/confidence.py)
    error_quantiles_by_kind: dict[str, dict[str, ErrorQuantiles]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "runs": [r.to_dict() for r in self.runs],
            "summary": {m: s.to_dict() for m, s in self.summary.items()},
            "by_gpu": {g: {m: s.to_dict() for m, s in rows.items()}
                       for g, rows in self.by_gpu.items()}}
        if self.not_covered is not None:
            out["not_covered"] = [{"model": m, "config": c} for m, c in self.not_covered]
        if self.by_kind:
            out["by_kind"] = {k: {m: s.to_dict() for m, s in rows.items()}
                              for k, rows in self.by_kind.items()}
        if self.error_quantiles_by_kind:
            out["error_quantiles_by_kind"] = {
                k: {m: q.to_dict() for m, q in rows.items()}
                for k, rows in self.error_quantiles_by_kind.items()}
        return out


@dataclass(frozen=True)
class CrossValidation:
    leave_one_rate_out: CvResult
    leave_one_config_out: CvResult
    #: the length seeds every leave-one-rate-out fold's fit replayed
    fit_seeds: tuple[int, ...] = FIT_SEEDS

    def to_dict(self) -> dict[str, Any]:
        return {"leave_one_rate_out": self.leave_one_rate_out.to_dict(),
                "leave_one_config_out": self.leave_one_config_out.to_dict(),
                "fit_seeds": list(self.fit_seeds)}


@dataclass(frozen=True)
class ValidationResult:
    """What ``fleetplan validate`` reports."""

    runs: tuple[RunRecord, ...]
    summary: dict[str, MetricSummary]
    noise_floor: NoiseFloor
    cv: CrossValidation | None = None
    #: per metric, how many measured values the uncalibrated predictions' 80% bands held
    #: (``band_coverage`` in the JSON; absent when every run's pair is calibrated)
    bands: dict[str, BandCoverage] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"runs": [r.to_dict() for r in self.runs],
                               "summary": {m: s.to_dict() for m, s in self.summary.items()},
                               "noise_floor": self.noise_floor.to_dict()}
        if self.bands:
            out["band_coverage"] = {m: b.to_dict() for m, b in self.bands.items()}
        if self.cv is not None:
            out["cv"] = self.cv.to_dict()
        return out

    @classmethod
    def from_dict(cls, obj: Any, where: str = "validation result") -> ValidationResult:
        """A saved ``fleetplan validate --format json`` result; a missing or mistyped field
        raises :class:`DataError` naming it."""
        try:
            cv = obj.get("cv")
            return cls(
                runs=tuple(_run(r) for r in obj["runs"]),
                summary={m: MetricSummary(**s) for m, s in obj["summary"].items()},
                noise_floor=NoiseFloor(
                    obj["noise_floor"]["settings_with_repeats"],
                    {m: NoiseMetric(**v) for m, v in obj["noise_floor"]["metrics"].items()}),
                cv=None if not cv else CrossValidation(
                    _cv(cv["leave_one_rate_out"], BaselineCvMetricSummary),
                    _cv(cv["leave_one_config_out"], CvMetricSummary),
                    # a result saved before the field: the default seeds made it
                    tuple(int(s) for s in cv.get("fit_seeds", FIT_SEEDS))),
                bands={m: BandCoverage(**b) for m, b in obj.get("band_coverage", {}).items()})
        except KeyError as exc:
            raise DataError(f"{where}: missing field {exc}") from None
        except (TypeError, AttributeError) as exc:
            raise DataError(f"{where}: not a fleetplan validation result ({exc})") from None


def _row(d: Mapping[str, Any]) -> MetricRow:
    band = d.get("band_80pct")
    fields = {**d, "band_80pct": None if band is None else (float(band[0]), float(band[1]))}
    return BaselineMetricRow(**fields) if "baseline_predicted" in d else MetricRow(**fields)


def _run(d: Mapping[str, Any]) -> RunRecord:
    return RunRecord(**{**d, "metrics": {m: _row(v) for m, v in d["metrics"].items()}})


def _cv(d: Mapping[str, Any], summary: type[CvMetricSummary]) -> CvResult:
    nc = d.get("not_covered")
    return CvResult(
        runs=tuple(_run(r) for r in d["runs"]),
        summary={m: summary(**s) for m, s in d["summary"].items()},
        by_gpu={g: {m: summary(**s) for m, s in rows.items()} for g, rows in d["by_gpu"].items()},
        by_kind={k: {m: summary(**s) for m, s in rows.items()}
                 for k, rows in d.get("by_kind", {}).items()},
        error_quantiles_by_kind={k: {m: ErrorQuantiles(**q) for m, q in rows.items()}
                                 for k, rows in d.get("error_quantiles_by_kind", {}).items()},
        not_covered=None if nc is None else tuple((c["model"], c["config"]) for c in nc))
