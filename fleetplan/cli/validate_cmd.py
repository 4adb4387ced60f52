"""``fleetplan validate``: replay measured runs on the calibrated model and compare."""

from __future__ import annotations

import enum
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer

from fleetplan.cli._format import dumps, emit_table
from fleetplan.cli._options import (
    CALIBRATION_DEFAULT,
    CATALOG_HELP,
    MODEL_CONFIG_HELP,
    PROGRESS_HELP,
    QUIET_HELP,
    STORE_DEFAULT,
    note_user_files,
    parse_fit_seeds,
    progress_reporter,
    use_cli_context,
)
from fleetplan.replica.calibrate import FIT_SEEDS


class ValidateFormat(enum.StrEnum):
    table = "table"
    json = "json"
    markdown = "markdown"


def validate_cmd(
    runs: list[Path] = typer.Argument(
        None, help="Result files or folders (default: the store's runs)."
    ),
    cv: bool = typer.Option(
        False, "--cv", help="Leave-one-rate-out and leave-one-config-out over the store."
    ),
    store: Path | None = typer.Option(None, "--store", help=f"Profile store ({STORE_DEFAULT})."),
    calibration: Path | None = typer.Option(
        None, "--calibration", help=f"Calibration file ({CALIBRATION_DEFAULT})."
    ),
    jobs: int | None = typer.Option(None, "--jobs", min=1, help="Processes for --cv refits."),
    fit_seeds: str | None = typer.Option(
        None, "--fit-seeds", metavar="N,N",
        help="With --cv: the length seeds every leave-one-rate-out refit replays, "
        "comma-separated (default: the calibration's, 0,1); another set shows how far the "
        "fit's own noise moves the figures. The in-sample and leave-one-config-out figures "
        "use the calibration file as it is (calibrate --fit-seeds writes one)."),
    model_config: list[Path] | None = typer.Option(
        None, "--model-config", help=MODEL_CONFIG_HELP),
    catalog: list[Path] | None = typer.Option(None, "--catalog", help=CATALOG_HELP),
    fmt: ValidateFormat = typer.Option(
        ValidateFormat.table, "--format", help="table, json or markdown."
    ),
    progress: bool = typer.Option(False, "--progress", help=PROGRESS_HELP + (
        " --cv shows its progress on stderr by default, one line per fold off a terminal.")),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="With --cv: the per-run table of the in-sample replay "
        "too (without --cv it is the output)."),
) -> None:
    """Predicted vs measured for each run, with percent errors; parameters come from the store's
    calibration only, never from RUNS. A file or record that cannot be read, or a run whose
    model or GPU the catalog does not know (--catalog, --model-config add them), is refused
    alone with one line on stderr; the others are validated and the command exits 2.

    Example: fleetplan validate --cv --format markdown > docs/validation.md
    """
    import pandas as pd

    from fleetplan.catalog.models import load_models
    from fleetplan.errors import FleetplanError
    from fleetplan.profiles.ingest import IngestOptions
    from fleetplan.profiles.store import load_profiles
    from fleetplan.replica.calibration_file import load_calibration_file
    from fleetplan.replica.runs import VALIDATED_METRICS
    from fleetplan.validate.core import load_runs, validate
    from fleetplan.validate.cv import leave_one_config_out, leave_one_rate_out
    from fleetplan.validate.markdown import validation_markdown
    from fleetplan.validate.records import CrossValidation

    if fit_seeds is not None and not cv:
        print("fleetplan: error: --fit-seeds sets the seeds of --cv's refits: give --cv too",
              file=sys.stderr)
        raise typer.Exit(2)
    seeds = parse_fit_seeds(fit_seeds) or FIT_SEEDS
    use_cli_context(catalog=catalog, model_config=model_config, store=store,
                    calibration=calibration)
    note_user_files(store=store is None, calibration=calibration is None)
    st, refused = load_profiles(store).split_known()  # unknown model/GPU: refused alone
    cal = load_calibration_file(calibration)
    if runs:
        refused = []  # only the given files' runs are validated: judge those
        opts = IngestOptions(known_models=frozenset(load_models()))
        todo = load_runs(st, runs, options=opts, refused=refused)
    else:
        todo = load_runs(st)
    for line in refused:
        print(f"fleetplan: error: {line}", file=sys.stderr)
    if not todo:
        raise typer.Exit(2)
    try:
        result = validate(todo, calibration=cal)
    except FleetplanError:  # find the run(s) at fault, refuse them alone, validate the others
        kept = []
        for one in todo:
            try:
                validate([one], calibration=cal)
                kept.append(one)
            except FleetplanError as exc:
                line = (f"{one.source}: {one.model} on {one.config} at {one.request_rate:g} "
                        f"req/s: {exc}; this run is refused, the others are validated")
                print(f"fleetplan: error: {line}", file=sys.stderr)
                refused.append(line)
        if not kept:
            raise typer.Exit(2) from None
        result = validate(kept, calibration=cal)
    if cv:
        store_runs = load_runs(st)
        cal_keys = {e.key for e in cal.configs}
        store_runs = [r for r in store_runs if r.key in cal_keys]
        # minutes of refits: progress by default, also into a log (one line per fold)
        with progress_reporter(quiet, True, lines=True) as reporter:
            result = replace(
                result,
                cv=CrossValidation(
                    leave_one_rate_out=leave_one_rate_out(store_runs, jobs=jobs,
                                                          progress=reporter,
                                                          fit_seeds=seeds),
                    leave_one_config_out=leave_one_config_out(store_runs, cal.configs,
                                                              progress=reporter),
                    fit_seeds=seeds,
                ),
            )
    if fmt is ValidateFormat.json:
        sys.stdout.write(dumps(result.to_dict()))
        _exit_if(refused)
        return
    if fmt is ValidateFormat.markdown:
        args = " ".join(
            [
                "fleetplan validate",
                *(str(p) for p in runs or []),
                *(["--cv"] if cv else []),
                *([f"--fit-seeds {','.join(map(str, seeds))}"] if fit_seeds is not None else []),
                "--format markdown",
            ]
        )
        sys.stdout.write(validation_markdown(result, command=args) + "\n")
        _exit_if(refused)
        return
    if result.cv is not None:  # the answer first: what the README quotes, then the tables
        _print_cv_summary(result)
    rows = []
    for r in result.runs:
        row: dict[str, object] = {
            "model": r.model,
            "config": r.config,
            "rate": r.request_rate,
            "calibrated": r.calibrated,
            "flagged": r.flagged,
        }
        for m in VALIDATED_METRICS:
            row[f"{m} err%"] = r.metrics[m].error_pct
        rows.append(row)
    summ = "; ".join(
        f"{m} {v.median_abs_error_pct:.1f}%"
        for m, v in result.summary.items()
        if v.median_abs_error_pct is not None
    )
    if result.cv is not None:
        for name, part in (
            ("leave_one_rate_out", result.cv.leave_one_rate_out),
            ("leave_one_config_out", result.cv.leave_one_config_out),
        ):
            df = pd.DataFrame([{"metric": m, **v.to_dict()} for m, v in part.summary.items()])
            emit_table(df, title=name.replace("_", "-"))
    if result.cv is None or verbose:
        emit_table(
            pd.DataFrame(rows),
            title="Predicted vs measured (percent error)",
            caption=f"median |error| over unflagged runs: {summ}",
        )
    else:
        print(f"in-sample (the calibration replaying its own {len(rows)} runs), median "
              f"|error| over unflagged runs: {summ}; per run: --verbose")
    _exit_if(refused)


def _print_cv_summary(result: Any) -> None:
    """The cross-validation's answer, one line per metric: the model's median |error| on runs
    it was not fitted to, beside the interpolation baseline's (leave-one-rate-out), and the
    spec path's (leave-one-config-out); the lines README.md and docs/validation.md quote."""
    from fleetplan.replica.runs import VALIDATED_METRICS

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}%"  # as docs/validation.md prints them

    loro, loco = result.cv.leave_one_rate_out, result.cv.leave_one_config_out
    held = sum(not r.flagged for r in loro.runs)
    print(f"leave-one-rate-out: each interior rate refitted without its runs and predicted "
          f"({held} unflagged run{'s' * (held != 1)} held out); interpolation baseline: "
          "between the two "
          "neighbouring measured rates")
    for m in VALIDATED_METRICS:
        v = loro.summary.get(m)
        if v is not None:
            print(f"  {m}: model {pct(v.median_abs_error_pct)} median error, interpolation "
                  f"baseline {pct(v.baseline_median_abs_error_pct)}")
    n = sum(not r.flagged for r in loco.runs)
    print("leave-one-config-out: each calibrated configuration predicted from specs and the "
          f"other configurations' efficiencies ({n} unflagged run{'s' * (n != 1)})")
    for m in VALIDATED_METRICS:
        v = loco.summary.get(m)
        if v is not None:
            print(f"  {m}: spec path {pct(v.median_abs_error_pct)} median error")


def _exit_if(refused: list[str]) -> None:
    """Exit 2 once the others are reported when any run or file was refused (as ingest)."""
    if refused:
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate_cmd)
