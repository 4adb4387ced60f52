"""Replay validation: predicted vs measured for each run, with the binding JSON shape.

Main entries: :func:`load_runs` (the store's runs, or result files / folders judged against the
store), :func:`validate` (predict each run with parameters calibrated from the store only) ->
a :class:`~fleetplan.validate.records.ValidationResult` whose ``to_dict()`` field names are a
contract (see issue 3), and :func:`noise_floor` (run-to-run spread of repeated runs).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.errors import InputError
from fleetplan.profiles.ingest import IngestOptions, ingest_paths
from fleetplan.profiles.server import ServerDescription
from fleetplan.profiles.store import ProfileStore, empty_frame
from fleetplan.replica.calibration_file import CalibrationSource
from fleetplan.replica.params import replica_params
from fleetplan.replica.runs import VALIDATED_METRICS, MeasuredRun, predict_run, runs_from_frame
from fleetplan.validate.bands import BANDED, prediction_bands
from fleetplan.validate.records import (
    MetricRow,
    MetricSummary,
    NoiseFloor,
    NoiseMetric,
    RunRecord,
    ValidationResult,
    band_coverage,
)

VALIDATE_SEEDS = (0, 1, 2, 3, 4)


def load_runs(store: ProfileStore, paths: Iterable[str | Path] = (), *,
              options: IngestOptions | None = None,
              refused: list[str] | None = None,
              recorded: dict[str, dict[str, object]] | None = None) -> list[MeasuredRun]:
    """Runs to validate: ``paths`` (files or folders of result JSON) or, when none are given,
    the store's runs. Flags and protocol order are judged over the store and the given runs
    together. With ``refused`` (a list), a refused file or record adds its one line there and
    the others go on (none left: an empty list); without, the first refusals raise. With
    ``recorded`` (a dict), the given runs' server fields (``engine_args``, ``prefix_cache``,
    :func:`fleetplan.profiles.formats.server_fields`) are added there by run id."""
    paths = list(paths)
    if not paths:
        return runs_from_frame(store.frame)
    given = ProfileStore(empty_frame())
    report = ingest_paths(paths, given, options or IngestOptions())
    if report.errors and refused is None:
        raise InputError("; ".join(report.errors[:3]) + (" ..." if len(report.errors) > 3 else ""))
    if refused is not None:
        refused.extend(report.errors)
        if report.errors and not len(given):
            return []
    if not len(given):
        raise InputError(f"no runs found in {', '.join(str(p) for p in paths)}")
    if recorded is not None:
        cols = [c for c in ("engine_args", "prefix_cache") if c in given.frame.columns]
        for rec in given.frame[["run_id", *cols]].to_dict("records"):
            recorded[str(rec.pop("run_id"))] = {str(k): v for k, v in rec.items()
                                                if isinstance(v, str)}
    both = pd.concat([store.frame, given.frame], ignore_index=True)
    both = both.drop_duplicates(subset="run_id", keep="first").reset_index(drop=True)
    return runs_from_frame(given.frame, series=both, tails_from=store.frame)


def metric_row(measured: float | None, predicted: float | None,
               band: tuple[float, float] | None = None) -> MetricRow:
    """Measured, predicted, the error relative to measured (percent) and the prediction's 80%
    band (``band_80pct``, an uncalibrated prediction's)."""
    return MetricRow(measured, predicted, error_pct(measured, predicted), band)


def error_pct(measured: float | None, predicted: float | None) -> float | None:
    """100 x (predicted - measured) / measured, None where undefined."""
    if measured is not None and predicted is not None and measured > 0 and math.isfinite(
            predicted):
        return 100.0 * (predicted - measured) / measured
    return None


def run_record(run: MeasuredRun, calibrated: bool, pred: dict[str, float],
               metrics: Sequence[str] = VALIDATED_METRICS, *,
               bands: Mapping[str, Any] | None = None) -> RunRecord:
    """One entry of ``runs`` in the JSON contract; ``bands``: the ``{metric}_band`` fields of
    :func:`~fleetplan.validate.bands.prediction_bands` (an uncalibrated prediction's)."""
    def band(m: str) -> tuple[float, float] | None:
        lo_hi = (bands or {}).get(f"{m}_band")
        return None if lo_hi is None else (float(lo_hi[0]), float(lo_hi[1]))

    return RunRecord(
        model=run.model, config=run.config, gpu=run.gpu, gpu_count=run.gpu_count,
        request_rate=run.request_rate, calibrated=calibrated, flagged=run.flagged,
        flag_reason=run.flag_reason,
        metrics={m: metric_row(run.measured.get(m), pred.get(m), band(m)) for m in metrics})


def summarize(records: Sequence[RunRecord],
              metrics: Sequence[str] = VALIDATED_METRICS) -> dict[str, MetricSummary]:
    """Median absolute error per metric over the unflagged records."""
    out: dict[str, MetricSummary] = {}
    for m in metrics:
        errs = [abs(e) for e in unflagged_errors_pct(records, m)]
        out[m] = MetricSummary(statistics.median(errs) if errs else None, len(errs))
    return out


def unflagged_errors_pct(records: Sequence[RunRecord], metric: str) -> list[float]:
    """The signed percent errors of ``metric`` over the unflagged records that have one."""
    return [e for r in records if not r.flagged and (e := r.metrics[metric].error_pct) is not None]


def noise_floor(runs: Sequence[MeasuredRun],
                metrics: Sequence[str] = VALIDATED_METRICS) -> NoiseFloor:
    """Run-to-run spread where the data hold repeated runs of one setting: per metric, the
    median and max of |a - b| / mean(a, b) in percent over repeated pairs."""
    groups: dict[tuple[str, str, float], list[MeasuredRun]] = {}
    for r in runs:
        groups.setdefault((r.model, r.config, r.request_rate), []).append(r)
    reps = [g for g in groups.values() if len(g) >= 2]
    out: dict[str, NoiseMetric] = {}
    for m in metrics:
        diffs = []
        for g in reps:
            vals = [r.measured[m] for r in g if m in r.measured]
            for i in range(len(vals)):
                for j in range(i + 1, len(vals)):
                    mean = (vals[i] + vals[j]) / 2
                    if mean > 0:
                        diffs.append(100.0 * abs(vals[i] - vals[j]) / mean)
        out[m] = NoiseMetric(statistics.median(diffs) if diffs else None,
                             max(diffs) if diffs else None, len(diffs))
    return NoiseFloor(len(reps), out)


def validate(runs: Sequence[MeasuredRun], *, calibration: CalibrationSource,
             seeds: Sequence[int] = VALIDATE_SEEDS,
             catalog: Catalog | None = None,
             servers: Mapping[str, ServerDescription] | None = None) -> ValidationResult:
    """Predict every run with the store's calibration (never fitted to ``runs`` themselves
    unless they are the store's own runs) and compare; ``to_dict()`` is the binding JSON.
    ``catalog``: where the runs' models and GPUs are read (default: the bundled one).
    ``servers``: by run id, the server a run was measured on as described by the user
    (:mod:`fleetplan.profiles.server`): such a run is replayed with its engine settings
    (:func:`~fleetplan.validate.server_params.apply_server`) and a cold prefix cache unless
    the description says warm. A run not in it follows the study's series protocol (its
    prompts cached after the series' first run, :func:`~fleetplan.replica.runs.predict_run`)."""
    from fleetplan.validate.server_params import apply_server

    described = servers or {}
    records = []
    for run in sorted(runs, key=lambda r: (r.model, r.config, r.request_rate, r.run_id)):
        params = replica_params(run.model, run.config, calibration=calibration,
                                engine_version=run.engine_version,  # uncalibrated: its vLLM
                                catalog=catalog)
        sd = described.get(run.run_id)
        warm = None
        if sd is not None:
            params = apply_server(params, sd, engine_version=run.engine_version,
                                  catalog=catalog)
            warm = sd.warm()
        pred = predict_run(params, run, seeds=seeds, catalog=catalog, warm=warm)
        bands = None if params.calibrated else prediction_bands(
            run.gpu, {m: v for m, v in pred.items() if m in BANDED}, config=run.config,
            moe=params.is_moe,
            mla=(catalog or bundled_catalog()).model(run.model).is_mla)
        records.append(run_record(run, params.calibrated, pred, bands=bands))
    return ValidationResult(tuple(records), summarize(records), noise_floor(runs),
                            bands=band_coverage(records))
