"""Cross-validation of the replica model over the profile store, beside the baseline.

Main entries: :func:`leave_one_rate_out` (for each interior rate of each configuration: refit
the configuration without that rate's runs, predict them; the geometric-interpolation baseline
predicts them from the neighbouring measured rates) and :func:`leave_one_config_out` (for each
calibrated configuration: predict its runs from the specs with efficiency ratios learned from the
other calibrated configurations of the same GPU type: the path of an unmeasured pair).
Summaries are medians of absolute percent errors over unflagged runs, overall, per GPU type and
per server kind, and per server kind the quantiles of the signed errors.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from fleetplan._progress import Progress, step
from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig, server_kind
from fleetplan.replica.burst_tail import infer_burst_tails
from fleetplan.replica.calibrate import (
    DEFAULT_MAX_NFEV,
    FIT_SEEDS,
    fit_many,
    group_runs,
    predict_on_server,
)
from fleetplan.replica.calibration_file import (
    CalibrationEntry,
    CalibrationFile,
    CalibrationSource,
    load_calibration_file,
)
from fleetplan.replica.params import (
    learned_efficiency,
    path_in,
    spec_path,
    with_learned_delay,
)
from fleetplan.replica.runs import (
    VALIDATED_METRICS,
    VLLM_BENCHMARK_SEED,
    MeasuredRun,
    with_burst_tails,
)
from fleetplan.replica.transfer import fit_transfer_efficiency, spec_prior
from fleetplan.validate.bands import ErrorQuantiles
from fleetplan.validate.baseline import interpolate, is_interior, rate_table
from fleetplan.validate.core import (
    VALIDATE_SEEDS,
    run_record,
    summarize,
    unflagged_errors_pct,
)
from fleetplan.validate.records import (
    BaselineCvMetricSummary,
    BaselineMetricRow,
    CvMetricSummary,
    CvResult,
    MetricRow,
    RunRecord,
)

TARGETS_PCT = {"request_throughput": 3.0, "output_throughput": 3.0, "ttft_p50_ms": 8.0,
               "ttft_p90_ms": 10.0, "ttft_p99_ms": 15.0, "tpot_p50_ms": 5.0}


def _summary(records: Sequence[RunRecord], with_baseline: bool) -> dict[str, CvMetricSummary]:
    """:func:`summarize`'s rows with each metric's target (and the baseline's median error)."""
    out: dict[str, CvMetricSummary] = {}
    for m, s in summarize(records, VALIDATED_METRICS).items():
        if with_baseline:
            b = [abs(e) for r in records if not r.flagged
                 and isinstance(x := r.metrics[m], BaselineMetricRow)
                 and (e := x.baseline_error_pct) is not None]
            out[m] = BaselineCvMetricSummary(
                s.median_abs_error_pct, s.n, TARGETS_PCT.get(m),
                baseline_median_abs_error_pct=statistics.median(b) if b else None,
                baseline_n=len(b))
        else:
            out[m] = CvMetricSummary(s.median_abs_error_pct, s.n, TARGETS_PCT.get(m))
    return out


def summaries(records: Sequence[RunRecord], with_baseline: bool, *,
              not_covered: Sequence[tuple[str, str]] | None = None) -> CvResult:
    """Overall, per-GPU-type and per-server-kind (:func:`server_kind`) summaries."""
    by_gpu: dict[str, list[RunRecord]] = {}
    by_kind: dict[str, list[RunRecord]] = {}
    for r in records:
        by_gpu.setdefault(r.gpu, []).append(r)
        by_kind.setdefault(server_kind(r.gpu, r.gpu_count), []).append(r)
    return CvResult(
        runs=tuple(records), summary=_summary(records, with_baseline),
        by_gpu={g: _summary(rs, with_baseline) for g, rs in sorted(by_gpu.items())},
        not_covered=None if not_covered is None else tuple(not_covered),
        by_kind={k: _summary(rs, with_baseline) for k, rs in sorted(by_kind.items())},
        error_quantiles_by_kind={k: _signed(rs) for k, rs in sorted(by_kind.items())})


def _signed(records: Sequence[RunRecord]) -> dict[str, ErrorQuantiles]:
    """Per metric, the quantiles of the unflagged records' signed errors (fractions)."""
    out = {}
    for m in VALIDATED_METRICS:
        if errs := [e / 100.0 for e in unflagged_errors_pct(records, m)]:
            out[m] = ErrorQuantiles.of(errs)
    return out


def leave_one_rate_out(runs: Sequence[MeasuredRun], *, jobs: int | None = None,
                       max_nfev: int = DEFAULT_MAX_NFEV, seeds: Sequence[int] = VALIDATE_SEEDS,
                       progress: Progress | None = None,
                       tail_pool: Sequence[MeasuredRun] | None = None,
                       fit_seeds: Sequence[int] = FIT_SEEDS,
                       catalog: Catalog | None = None) -> CvResult:
    """Refit without each interior rate (names of ``catalog``, default: the bundled one),
    predict it; baseline beside the model (the burst-tail
    lengths of :mod:`fleetplan.replica.burst_tail` are relearned without the held-out runs
    too). ``progress`` receives one unit per fold (refit).

    The burst-tail lengths are learned per prompt set from every run of ``tail_pool`` (default:
    ``runs``) except the held-out ones, so validating a subset of configurations with
    ``tail_pool`` set to the whole store gives the same rows as the whole cross-validation.
    ``fit_seeds``: the length seeds every fold's fit replays (default the calibration's,
    :data:`fleetplan.replica.calibrate.FIT_SEEDS`); ``seeds``: those of the predictions."""
    pool = runs if tail_pool is None else tail_pool
    table = rate_table(runs)
    groups = group_runs(runs)
    tasks: list[tuple[list[MeasuredRun], list[MeasuredRun]]] = []
    for key, rs in groups.items():
        for rate in sorted({r.request_rate for r in rs}):
            held = [r for r in rs if r.request_rate == rate and not r.flagged]
            if not held or not is_interior(table[key], rate):
                continue
            rest = [r for r in rs if r.request_rate != rate]
            if any(not r.flagged for r in rest):
                # the burst-tail lengths are learned without the held-out runs as well
                ids = {r.run_id for r in rs if r.request_rate == rate}
                tails = infer_burst_tails([r for r in pool if r.run_id not in ids],
                                          seed=VLLM_BENCHMARK_SEED)
                tasks.append((with_burst_tails(rest, tails), with_burst_tails(held, tails)))
    fits = fit_many([t[0] for t in tasks], jobs=jobs, max_nfev=max_nfev, progress=progress,
                    step_name="leave-one-rate-out folds", seeds=fit_seeds, catalog=catalog)
    records = []
    for (_rest, held), fit in zip(tasks, fits, strict=True):
        for run in held:
            pred = predict_on_server(fit.params, run, seeds=seeds,
                                     catalog=catalog or bundled_catalog())
            rec = run_record(run, True, pred)
            others = {rate: vals for rate, vals in table[run.key].items()
                      if rate != run.request_rate}
            others[run.request_rate] = {}
            rows: dict[str, MetricRow] = {}
            for m, row in rec.metrics.items():
                base = interpolate(others, run.request_rate, m)
                meas = row.measured
                rows[m] = BaselineMetricRow(
                    row.measured, row.predicted, row.error_pct, baseline_predicted=base,
                    baseline_error_pct=(100.0 * (base - meas) / meas
                                        if base is not None and meas else None))
            records.append(replace(rec, metrics=rows))
    return summaries(records, True)


def leave_one_config_out(runs: Sequence[MeasuredRun],
                         entries: Sequence[CalibrationEntry] | CalibrationSource, *,
                         seeds: Sequence[int] = VALIDATE_SEEDS,
                         paths: Mapping[str, str] | None = None,
                         progress: Progress | None = None,
                         catalog: Catalog | None = None) -> CvResult:
    """Predict each calibrated configuration's runs (names of ``catalog``, default: the bundled
    one) from specs + the efficiency ratios of the
    other calibrated configurations (same GPU and count when there are any, else same GPU type,
    as :func:`replica_params` does); configurations alone of their GPU type are listed in
    ``not_covered``. ``entries``: the calibration's entries (or the calibration itself).
    ``paths``: GPU type -> spec path (``"ratios"`` or ``"transfer"``; default: the one an
    unmeasured pair takes, :func:`~fleetplan.replica.params.spec_path`).
    ``progress`` receives one unit per configuration (fold)."""
    if entries is None or isinstance(entries, str | Path | Mapping | CalibrationFile):
        entries = load_calibration_file(entries).configs
    # entries as read from the file's JSON (``load_calibration()["configs"]``) are typed here
    entries = [e if isinstance(e, CalibrationEntry)
               else CalibrationEntry.from_dict(e, f"calibration configs[{i}]")
               for i, e in enumerate(entries)]
    cat = catalog if catalog is not None else bundled_catalog()
    calibrated = {e.key for e in entries if e.calibrated}
    records: list[RunRecord] = []
    not_covered: list[tuple[str, str]] = []
    folds = [(key, rs) for key, rs in group_runs(runs).items() if key in calibrated]
    with step(progress, "leave-one-config-out folds", len(folds)) as advance:
        for key, rs in folds:
            hw = HardwareConfig.parse(key[1], cat)
            eff, _how = learned_efficiency(entries, hw.gpu, hw.gpu_count, exclude=key)
            if eff is None or not any(e.gpu == hw.gpu and e.key != key
                                      for e in entries if e.calibrated):
                not_covered.append(key)
            else:
                path = (spec_path(hw.gpu, hw.gpu_count) if paths is None
                        else path_in(paths, hw.gpu, hw.gpu_count))
                fit = (fit_transfer_efficiency(entries, hw.gpu, exclude=key, catalog=cat)
                       if path == "transfer" else None)
                params = with_learned_delay(spec_prior(cat.model(key[0]), hw, eff, fit), hw,
                                            [e for e in entries if e.key != key], cat)
                for run in rs:
                    records.append(run_record(run, False, predict_on_server(
                        params, run, seeds=seeds, catalog=cat)))
            _describe(progress, "leave-one-config-out folds", f"{key[0]} on {key[1]}")
            advance(1)
    return summaries(records, False, not_covered=not_covered)


def _describe(progress: Progress | None, name: str, label: str) -> None:
    """Name the unit of step ``name`` just done, for a reporter that shows it (an optional
    ``describe`` method, as the CLI's progress lines have; others are not asked)."""
    describe = getattr(progress, "describe", None)
    if callable(describe):
        describe(name, label)
