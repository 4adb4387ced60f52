"""Typed records of the live validation: the held-out analysis and the client cross-check.

Main entries: :class:`LiveAnalysis` (what :func:`fleetplan.bench.live.analyze` finds) and
:class:`ClientComparison` (what :func:`fleetplan.bench.live.compare_clients` finds); each
``to_dict()`` is its section of ``live-validation-report.json`` (``analysis``, ``crosscheck``)
and ``from_dict()`` reads a saved one back (a missing field raises :class:`DataError` naming it).
The report around them (date, server, timings, environment) is assembled by
``scripts/live-validate`` and stays a free-form document. Mappings keyed by metric or rate stay
dicts (their keys are data).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from fleetplan.errors import DataError
from fleetplan.replica.calibration_file import FitRunReport
from fleetplan.replica.params import ReplicaParams


@dataclass(frozen=True)
class HeldOutCheck:
    """One metric at the held-out rate: relative error, its floor and bound, within it; ``note``
    says which held-out runs' figures were left out and why (an error of NaN: none measured
    it, so nothing was checked)."""

    error: float
    floor: float
    bound: float
    ok: bool
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.error, "floor": self.floor, "bound": self.bound, "ok": self.ok,
                "note": self.note}


@dataclass(frozen=True)
class RateSummary:
    """One measured rate: mean over its runs (and the prediction at the held-out rate)."""

    request_rate: float
    held_out: bool
    runs: int
    measured: dict[str, float]
    predicted: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"request_rate": self.request_rate, "held_out": self.held_out, "runs": self.runs,
                **{f"measured_{m}": v for m, v in self.measured.items()},
                **({f"predicted_{m}": v for m, v in self.predicted.items()}
                   if self.predicted is not None else {})}


@dataclass(frozen=True)
class LiveAnalysis:
    """Spread, calibration and held-out prediction of one live session."""

    model: str
    config: str
    rates: tuple[float, ...]
    holdout_rate: float
    series: int
    runs: int
    spread_by_rate: dict[str, dict[str, float]]
    max_spread: dict[str, float]
    params: ReplicaParams
    prior: ReplicaParams
    fit_loss: float | None
    fit_evaluations: int
    fitted: tuple[str, ...]
    fit_runs: tuple[FitRunReport, ...]
    flagged: tuple[str, ...]
    measured: dict[str, float]
    predicted: dict[str, float]
    errors: dict[str, float]
    checks: dict[str, HeldOutCheck]
    per_rate: tuple[RateSummary, ...]
    ok: bool
    # calibrated on the TTFT medians alone (fleetplan.replica.calibrate.fit_config; reports
    # written before 7 Dec 2026 lack it: False)
    ttft_median_only: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "config": self.config, "rates": list(self.rates),
            "holdout_rate": self.holdout_rate, "series": self.series, "runs": self.runs,
            "spread_by_rate": self.spread_by_rate, "max_spread": self.max_spread,
            "params": self.params.model_dump(), "prior": self.prior.model_dump(),
            "fit_loss": self.fit_loss, "fit_evaluations": self.fit_evaluations,
            "fitted": list(self.fitted), "fit_runs": [r.to_dict() for r in self.fit_runs],
            "flagged": list(self.flagged), "measured": self.measured,
            "predicted": self.predicted, "errors": self.errors,
            "checks": {m: c.to_dict() for m, c in self.checks.items()},
            "per_rate": [r.to_dict() for r in self.per_rate], "ok": self.ok,
            "ttft_median_only": self.ttft_median_only,
        }

    @classmethod
    def from_dict(cls, d: Any, where: str = "analysis") -> LiveAnalysis:
        try:
            metrics = list(d["measured"])
            return cls(
                model=str(d["model"]), config=str(d["config"]),
                rates=tuple(float(r) for r in d["rates"]),
                holdout_rate=float(d["holdout_rate"]), series=int(d["series"]),
                runs=int(d["runs"]), spread_by_rate=dict(d["spread_by_rate"]),
                max_spread=dict(d["max_spread"]),
                params=ReplicaParams.model_validate(d["params"]),
                prior=ReplicaParams.model_validate(d["prior"]),
                fit_loss=None if d["fit_loss"] is None else float(d["fit_loss"]),
                fit_evaluations=int(d["fit_evaluations"]), fitted=tuple(d["fitted"]),
                fit_runs=tuple(FitRunReport.from_dict(r, f"{where}.fit_runs[{i}]")
                               for i, r in enumerate(d["fit_runs"])),
                flagged=tuple(d["flagged"]), measured=_nums(d["measured"]),
                predicted=_nums(d["predicted"]), errors=_nums(d["errors"]),
                checks={m: HeldOutCheck(_num(c["error"]), c.get("floor", c["bound"]),
                                        c["bound"], bool(c["ok"]), c.get("note"))
                        for m, c in d["checks"].items()},
                per_rate=tuple(_rate(r, metrics) for r in d["per_rate"]), ok=bool(d["ok"]),
                ttft_median_only=bool(d.get("ttft_median_only", False)))
        except KeyError as exc:
            raise DataError(f"{where}: missing field {exc}") from None
        except (TypeError, ValueError, AttributeError, ValidationError) as exc:
            raise DataError(f"{where}: not a live validation analysis ({exc})") from None


def _num(x: Any) -> float:
    """A float from the report (JSON writes NaN as null)."""
    return math.nan if x is None else float(x)


def _nums(d: Mapping[str, Any]) -> dict[str, float]:
    return {str(k): _num(v) for k, v in d.items()}


def _rate(d: Mapping[str, Any], metrics: list[str]) -> RateSummary:
    predicted = ({m: d[f"predicted_{m}"] for m in metrics}
                 if f"predicted_{metrics[0]}" in d else None) if metrics else None
    return RateSummary(float(d["request_rate"]), bool(d["held_out"]), int(d["runs"]),
                       {m: d[f"measured_{m}"] for m in metrics}, predicted)


@dataclass(frozen=True)
class ClientMetric:
    """One metric of the cross-check: each client's runs, means, spreads and the bound, and
    ``note``: why it was not compared (runs whose tokens the starved clients read in bunches)."""

    fleetplan: tuple[float, ...]
    vllm: tuple[float, ...]
    fleetplan_mean: float
    vllm_mean: float
    rel_diff: float
    fleetplan_spread: float
    vllm_spread: float
    bound: float
    ok: bool
    note: str | None = None  # why the metric was not compared (ok is then True)

    def to_dict(self) -> dict[str, Any]:
        return {"fleetplan": list(self.fleetplan), "vllm": list(self.vllm),
                "fleetplan_mean": self.fleetplan_mean, "vllm_mean": self.vllm_mean,
                "rel_diff": self.rel_diff, "fleetplan_spread": self.fleetplan_spread,
                "vllm_spread": self.vllm_spread, "bound": self.bound, "ok": self.ok,
                "note": self.note}


@dataclass(frozen=True)
class ClientComparison:
    """fleetplan bench vs vllm bench serve at one rate."""

    runs_per_client: tuple[int, int]
    metrics: dict[str, ClientMetric]
    k: float
    floor: float
    ok: bool

    def to_dict(self) -> dict[str, Any]:
        return {"runs_per_client": list(self.runs_per_client),
                "metrics": {m: c.to_dict() for m, c in self.metrics.items()},
                "k": self.k, "floor": self.floor, "ok": self.ok}

    @classmethod
    def from_dict(cls, d: Any, where: str = "crosscheck") -> ClientComparison:
        try:
            a, b = d["runs_per_client"]
            return cls((int(a), int(b)),
                       {m: ClientMetric(**{**c, "fleetplan": tuple(c["fleetplan"]),
                                           "vllm": tuple(c["vllm"])})
                        for m, c in d["metrics"].items()},
                       float(d["k"]), float(d["floor"]), bool(d["ok"]))
        except KeyError as exc:
            raise DataError(f"{where}: missing field {exc}") from None
        except (TypeError, ValueError) as exc:
            raise DataError(f"{where}: not a client cross-check ({exc})") from None
