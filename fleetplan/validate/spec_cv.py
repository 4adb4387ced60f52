"""Leave-one-model-out cross-validation of the spec path, and the error table it yields.

Main entries: :func:`leave_one_model_out` (each calibrated model's configurations predicted
from specs with efficiency ratios learned from the *other models'* calibrated configurations,
the tiers of :func:`fleetplan.replica.params.learned_efficiency`; since a configuration's
ratios come first from the same GPU and count, and a model has one configuration per GPU and
count, it matches leave-one-config-out wherever that tier exists), :func:`leave_one_gpu_out`
(ratios pooled over the other GPU types: a user's new GPU), :func:`error_quantiles`
(signed error quantiles per GPU type and pooled, from cross-validation records: what
``data/spec_errors.json`` holds, read by :mod:`fleetplan.validate.bands`) and
:func:`spec_path_markdown` (``docs/spec-path-validation.md``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fleetplan._progress import Progress, step
from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.replica.calibrate import group_runs
from fleetplan.replica.calibration_file import CalibrationEntry
from fleetplan.replica.params import learned_efficiency, path_in, with_learned_delay
from fleetplan.replica.priors import prior_params
from fleetplan.replica.runs import MeasuredRun, predict_run
from fleetplan.replica.transfer import fit_transfer_efficiency, spec_prior
from fleetplan.validate.bands import POOLED, ErrorQuantiles
from fleetplan.validate.core import VALIDATE_SEEDS, run_record, unflagged_errors_pct
from fleetplan.validate.cv import summaries
from fleetplan.validate.records import CvResult, RunRecord

TABLE_METRICS = ("request_throughput", "output_throughput", "ttft_p50_ms", "ttft_p99_ms",
                 "tpot_p50_ms")


def _spec_folds(runs: Sequence[MeasuredRun], entries: Sequence[CalibrationEntry],
                name: str, params_of: Callable[[tuple[str, str], HardwareConfig], Any],
                seeds: Sequence[int], progress: Progress | None,
                catalog: Catalog) -> CvResult:
    """Predict the runs of each calibrated configuration with ``params_of(key, hw)`` (``None``:
    the fold is not covered), one progress unit per fold."""
    calibrated = {e.key for e in entries if e.calibrated}
    folds = [(key, rs) for key, rs in group_runs(runs).items() if key in calibrated]
    records: list[RunRecord] = []
    not_covered: list[tuple[str, str]] = []
    with step(progress, name, len(folds)) as advance:
        for key, rs in folds:
            params = params_of(key, HardwareConfig.parse(key[1], catalog))
            if params is None:
                not_covered.append(key)
            else:
                records.extend(run_record(run, False, predict_run(params, run, seeds=seeds,
                                                                     catalog=catalog))
                               for run in rs)
            advance(1)
    return summaries(records, False, not_covered=not_covered)


def leave_one_model_out(runs: Sequence[MeasuredRun], entries: Sequence[CalibrationEntry], *,
                        seeds: Sequence[int] = VALIDATE_SEEDS, transfer: bool = False,
                        paths: Mapping[str, str] | None = None,
                        progress: Progress | None = None,
                        catalog: Catalog | None = None) -> CvResult:
    """Predict each calibrated model's runs with ratios learned from other models only
    (``transfer``: with :func:`~fleetplan.replica.transfer.fit_transfer_efficiency` of the other
    models' configurations of the GPU type instead, where it can be fitted; ``paths``: GPU
    type -> ``"ratios"`` or ``"transfer"``, per GPU type). Names of ``catalog`` (default: the
    bundled one)."""
    cat = catalog if catalog is not None else bundled_catalog()

    def params_of(key: tuple[str, str], hw: HardwareConfig) -> Any:
        others = [e for e in entries if e.model != key[0]]
        eff, _how = learned_efficiency(others, hw.gpu, hw.gpu_count)
        if eff is None or not any(e.gpu == hw.gpu for e in others if e.calibrated):
            return None
        use = transfer if paths is None else path_in(paths, hw.gpu, hw.gpu_count) == "transfer"
        fit = fit_transfer_efficiency(entries, hw.gpu, exclude_model=key[0], catalog=cat) \
            if use else None
        return with_learned_delay(spec_prior(cat.model(key[0]), hw, eff, fit), hw, others, cat)

    return _spec_folds(runs, entries, "leave-one-model-out folds", params_of, seeds, progress,
                       cat)


def leave_one_gpu_out(runs: Sequence[MeasuredRun], entries: Sequence[CalibrationEntry], *,
                      seeds: Sequence[int] = VALIDATE_SEEDS,
                      progress: Progress | None = None,
                      catalog: Catalog | None = None) -> CvResult:
    """Predict each calibrated configuration with ratios pooled over the *other GPU types'*
    calibrated configurations: what a GPU absent from the store (a user's ``gpus.csv`` row)
    gets. Names of ``catalog`` (default: the bundled one)."""
    cat = catalog if catalog is not None else bundled_catalog()

    def params_of(key: tuple[str, str], hw: HardwareConfig) -> Any:
        others = [e for e in entries if e.gpu != hw.gpu]
        eff, _how = learned_efficiency(others, hw.gpu, hw.gpu_count)
        return None if eff is None else with_learned_delay(
            prior_params(cat.model(key[0]), hw, efficiency=eff), hw, others, cat)

    return _spec_folds(runs, entries, "leave-one-gpu-out folds", params_of, seeds, progress,
                       cat)


def error_quantiles(records: Sequence[RunRecord],
                    metrics: Sequence[str] = TABLE_METRICS, *,
                    by: Callable[[RunRecord], str] = lambda r: r.gpu
                    ) -> dict[str, dict[str, Any]]:
    """GPU type (``by``: another grouping, e.g. the server kind) and ``all`` -> metric ->
    ``{p10, p50, p90, n, median_abs_pct}`` of the signed relative errors (predicted / measured
    - 1) of unflagged records."""
    groups: dict[str, list[RunRecord]] = {POOLED: list(records)}
    for r in records:
        groups.setdefault(by(r), []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for g, rs in sorted(groups.items()):
        row: dict[str, Any] = {}
        for m in metrics:
            if errs := [e / 100.0 for e in unflagged_errors_pct(rs, m)]:
                row[m] = {**ErrorQuantiles.of(errs).to_dict(),
                          "median_abs_pct": round(100 * statistics.median(
                              abs(e) for e in errs), 1)}
        out[g] = row
    return out


# the metrics on which a GPU type's transfer path must be no worse to be its spec path
PATH_CHOICE_METRICS = ("request_throughput", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms")


def choose_path(ratios: Mapping[str, Mapping[str, Any]],
                transfer: Mapping[str, Mapping[str, Any]]) -> str:
    """A GPU type's spec path from its leave-one-model-out rows of :func:`error_quantiles` on
    each path: ``"transfer"`` when its median |error| is no worse than the ratios' on every
    metric of :data:`PATH_CHOICE_METRICS` (both measured), else ``"ratios"``
    (:func:`fleetplan.replica.params.spec_path` reads the recorded choice)."""
    if not all(m in ratios and m in transfer for m in PATH_CHOICE_METRICS):
        return "ratios"
    better = all(transfer[m]["median_abs_pct"] <= ratios[m]["median_abs_pct"]
                 for m in PATH_CHOICE_METRICS)
    return "transfer" if better else "ratios"


def spec_path_markdown(table: Mapping[str, Any], *, command: str) -> str:
    """The generated page: per fold and GPU type, median |error| and the 10-90% signed range."""
    lines = [
        "# Spec-path validation: error bands of uncalibrated predictions",
        "",
        f"Generated by `{command}`; do not edit by hand. {table['source']}",
        "",
        "A prediction with `calibrated: false` (a model or configuration never measured) comes "
        "from the model card and the GPU datasheet times efficiency ratios learned from other "
        "calibrated configurations. These tables measure that path on the bundled store: "
        "**leave-one-config-out** predicts each calibrated configuration from the other "
        "configurations of its GPU type; **leave-one-model-out** predicts every configuration "
        "of a model from the *other models* only (what a new model gets). Errors are "
        "predicted / measured - 1 over unflagged runs; `p10`/`p90` bound 80% of the held-out "
        "runs and give the `*_band` fields of `fleetplan predict` "
        "(`fleetplan.validate.bands`; default fold: leave-one-model-out). "
        "**leave-one-gpu-out** predicts each configuration with ratios pooled over the other "
        "GPU types (what a GPU absent from the store gets): a GPU type not in these tables (a "
        "user's GPU) gets its `all` rows. A model has one configuration per GPU and count, and "
        "ratios come first from the same GPU and count, so on the ratio path "
        "leave-one-model-out and leave-one-config-out agree wherever that tier exists (the "
        "transfer path's leave-one-config-out keeps the model's other configurations of the "
        "GPU type in its fit).",
        "",
    ]
    if table.get("paths"):
        lines += ["## Spec path per server kind", "",
                  "An uncalibrated pair takes, per server kind (GPU type, one GPU or "
                  "tensor-parallel), the per-coefficient efficiency "
                  "**ratios** or the **transfer** efficiencies (bandwidth-, compute- and "
                  "interconnect-bound parts fitted across models, docs/catalogs.md): transfer "
                  "where its leave-one-model-out median |error| over that kind's runs is no "
                  "worse than the ratios' on every metric below "
                  "(`fleetplan.replica.params.spec_path`; `fleetplan predict --efficiency` "
                  "overrides it). The tables after this one measure the "
                  "chosen paths.", "",
                  "| server kind | path | " + " | ".join(
                      f"`{m}` ratios / transfer %" for m in PATH_CHOICE_METRICS) + " |",
                  "| --- | --- |" + " --- |" * len(PATH_CHOICE_METRICS)]
        choice = table.get("path_choice", {})
        for gpu, path in table["paths"].items():
            cells = []
            for m in PATH_CHOICE_METRICS:
                a = choice.get("ratios", {}).get(gpu, {}).get(m)
                b = choice.get("transfer", {}).get(gpu, {}).get(m)
                cells.append(f"{'-' if a is None else f'{a:.1f}'} / "
                             f"{'-' if b is None else f'{b:.1f}'}")
            lines.append(f"| {gpu} | {path} | " + " | ".join(cells) + " |")
        lines.append("")
    for fold, by_gpu in table["folds"].items():
        lines += [f"## {fold}", "",
                  "| GPU type | metric | median abs % | p10 % | p50 % | p90 % | n |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for gpu, metrics in by_gpu.items():
            for m, q in metrics.items():
                lines.append(f"| {gpu} | `{m}` | {q['median_abs_pct']:.1f} | "
                             f"{100 * q['p10']:+.1f} | {100 * q['p50']:+.1f} | "
                             f"{100 * q['p90']:+.1f} | {q['n']} |")
        not_covered = table.get("not_covered", {}).get(fold) or []
        if not_covered:
            lines += ["", "Not covered (alone of their GPU type): "
                      + ", ".join(f"{m} on {c}" for m, c in not_covered)]
        lines.append("")
    return "\n".join(lines)
