"""``fleetplan validate``: replay measured runs on the calibrated model and compare.

Parses the options into a :class:`~fleetplan.validate.run.ValidateRequest`, calls
:func:`~fleetplan.validate.run.run_validation` and formats its outcome (table, JSON or the
Markdown of docs/validation.md)."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fleetplan.cli._format import dumps, emit_table
from fleetplan.cli._options import (
    PROGRESS_HELP,
    CalibrationOpt,
    CatalogOpt,
    ModelConfigOpt,
    QuietOpt,
    StoreOpt,
    check_read_files,
    note_user_files,
    parse_fit_seeds,
    progress_reporter,
    use_cli_context,
)
from fleetplan.cli._server_options import (
    DpOpt,
    EngineArgOpt,
    EngineVersionOpt,
    GpuCountOpt,
    GpuOpt,
    InterconnectOpt,
    NodesOpt,
    PpOpt,
    TpOpt,
    WarmPrefixOpt,
    server_description,
)
from fleetplan.validate.run import ValidateRequest, run_validation

if TYPE_CHECKING:
    from fleetplan.validate.records import CrossValidation, ValidationResult


class ValidateFormat(enum.StrEnum):
    table = "table"
    json = "json"
    markdown = "markdown"


RunsArg = Annotated[list[Path] | None, typer.Argument(
    help="Result files or folders (default: the store's runs).")]
CvOpt = Annotated[bool, typer.Option(
    "--cv", help="Leave-one-rate-out and leave-one-config-out over the store.")]
JobsOpt = Annotated[int | None, typer.Option("--jobs", min=1,
                                             help="Processes for --cv refits.")]
FitSeedsOpt = Annotated[str | None, typer.Option(
    "--fit-seeds", metavar="N,N",
    help="With --cv: the length seeds every leave-one-rate-out refit replays, "
    "comma-separated (default: the calibration's, 0,1); another set shows how far the "
    "fit's own noise moves the figures. The in-sample and leave-one-config-out figures "
    "use the calibration file as it is (calibrate --fit-seeds writes one).")]
FormatOpt = Annotated[ValidateFormat, typer.Option("--format",
                                                   help="table, json or markdown.")]
ValidateProgressOpt = Annotated[bool, typer.Option("--progress", help=PROGRESS_HELP + (
    " --cv shows its progress on stderr by default, one line per fold off a terminal."))]
VerboseOpt = Annotated[bool, typer.Option(
    "--verbose", "-v", help="With --cv: the per-run table of the in-sample replay "
    "too (without --cv it is the output).")]
# how the library's one-line errors name the request's fields: the flags
CLI_NAMES = {"fit_seeds": "--fit-seeds", "cv": "--cv", "jobs": "--jobs"}


def validate_cmd(runs: RunsArg = None, cv: CvOpt = False, store: StoreOpt = None,
                 calibration: CalibrationOpt = None, jobs: JobsOpt = None,
                 fit_seeds: FitSeedsOpt = None, model_config: ModelConfigOpt = None,
                 catalog: CatalogOpt = None, fmt: FormatOpt = ValidateFormat.table,
                 progress: ValidateProgressOpt = False, quiet: QuietOpt = False,
                 verbose: VerboseOpt = False, gpu: GpuOpt = None, gpu_count: GpuCountOpt = None,
                 tp: TpOpt = None, pp: PpOpt = None, nodes: NodesOpt = None,
                 dp: DpOpt = None, interconnect: InterconnectOpt = None,
                 engine_version: EngineVersionOpt = None, engine_arg: EngineArgOpt = None,
                 warm_prefix_cache: WarmPrefixOpt = False) -> None:
    """Predicted vs measured for each run, with percent errors; parameters come from the store's
    calibration only, never from RUNS. A file or record that cannot be read, or a run whose
    model or GPU the catalog does not know (--catalog, --model-config add them), is refused
    alone with one line on stderr; the others are validated and the command exits 2.

    Describe the server RUNS were measured on with --gpu, --gpu-count, --tp, --pp, --dp,
    --nodes, --interconnect, --engine-version and --engine-arg (what a file states is read; a
    contradiction refuses the run). A run the store does not hold is replayed on a cold prefix
    cache unless --warm-prefix-cache.

    Example: fleetplan validate --cv --format markdown > docs/validation.md
    """
    server = server_description(gpu=gpu, gpu_count=gpu_count, tp=tp, pp=pp, nodes=nodes,
                                dp=dp, interconnect=interconnect,
                                engine_version=engine_version, engine_args=engine_arg,
                                warm_prefix_cache=warm_prefix_cache)
    request = ValidateRequest(runs=tuple(runs or ()), cv=cv, store=store,
                              calibration=calibration, jobs=jobs,
                              fit_seeds=parse_fit_seeds(fit_seeds),
                              server=server if server.stated else None, names=CLI_NAMES)
    check_read_files(store=store, calibration=calibration)
    names = use_cli_context(catalog=catalog, model_config=model_config, store=store,
                            calibration=calibration).catalog
    note_user_files(store=store is None, calibration=calibration is None)
    # --cv's minutes of refits: progress by default, also into a log (one line per fold)
    with progress_reporter(quiet or not cv, True, lines=True) as reporter:
        outcome = run_validation(request, progress=reporter, on_refused=_say_refused,
                                 catalog=names)
    result = outcome.result
    if result is None:
        raise typer.Exit(2)
    if fmt is ValidateFormat.json:
        sys.stdout.write(dumps(result.to_dict()))
    elif fmt is ValidateFormat.markdown:
        from fleetplan.validate.markdown import validation_markdown

        args = " ".join(["fleetplan validate", *(str(p) for p in request.runs),
                         *(["--cv"] if cv else []),
                         *([f"--fit-seeds {','.join(map(str, request.seeds))}"]
                           if fit_seeds is not None else []),
                         "--format markdown"])
        sys.stdout.write(validation_markdown(result, command=args) + "\n")
    else:
        _show_tables(result, verbose)
    if outcome.refused:  # exit 2 once the others are reported (as ingest)
        raise typer.Exit(2)


def _say_refused(line: str) -> None:
    print(f"fleetplan: error: {line}", file=sys.stderr)


def _show_tables(result: ValidationResult, verbose: bool) -> None:
    """The table form: the cross-validation's answer first (what the README quotes), its
    summary tables, then the per-run table (with --cv: only with --verbose)."""
    import pandas as pd

    from fleetplan.replica.runs import VALIDATED_METRICS

    if result.cv is not None:
        _print_cv_summary(result.cv)
    rows = []
    for r in result.runs:
        row: dict[str, object] = {"model": r.model, "config": r.config,
                                  "rate": r.request_rate, "calibrated": r.calibrated,
                                  "flagged": r.flagged}
        for m in VALIDATED_METRICS:
            row[f"{m} err%"] = r.metrics[m].error_pct
        rows.append(row)
    summ = "; ".join(f"{m} {v.median_abs_error_pct:.1f}%" for m, v in result.summary.items()
                     if v.median_abs_error_pct is not None)
    if result.cv is not None:
        for name, part in (("leave_one_rate_out", result.cv.leave_one_rate_out),
                           ("leave_one_config_out", result.cv.leave_one_config_out)):
            df = pd.DataFrame([{"metric": m, **v.to_dict()} for m, v in part.summary.items()])
            emit_table(df, title=name.replace("_", "-"))
    if result.cv is None or verbose:
        emit_table(pd.DataFrame(rows), title="Predicted vs measured (percent error)",
                   caption=f"median |error| over unflagged runs: {summ}")
    else:
        print(f"in-sample (the calibration replaying its own {len(rows)} runs), median "
              f"|error| over unflagged runs: {summ}; per run: --verbose")
    if result.bands:
        held = "; ".join(f"{m} {b.inside} of {b.n}" + (f" (median width x{b.median_width:.2f})"
                                                     if b.median_width is not None else "")
                         for m, b in result.bands.items())
        print(f"80% bands of the uncalibrated predictions (band_80pct in --format json) held "
              f"the measured value: {held}")


def _print_cv_summary(cv: CrossValidation) -> None:
    """The cross-validation's answer, one line per metric: the model's median |error| on runs
    it was not fitted to, beside the interpolation baseline's (leave-one-rate-out), and the
    spec path's (leave-one-config-out); the lines README.md and docs/validation.md quote."""
    from fleetplan.replica.runs import VALIDATED_METRICS

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}%"  # as docs/validation.md prints them

    loro, loco = cv.leave_one_rate_out, cv.leave_one_config_out
    held = sum(not r.flagged for r in loro.runs)
    print(f"leave-one-rate-out: each interior rate refitted without its runs and predicted "
          f"({held} unflagged run{'s' * (held != 1)} held out); interpolation baseline: "
          "between the two "
          "neighbouring measured rates")
    for m in VALIDATED_METRICS:
        v = loro.summary.get(m)
        if v is not None:
            print(f"  {m}: model {pct(v.median_abs_error_pct)} median error, interpolation "
                  f"baseline {pct(getattr(v, 'baseline_median_abs_error_pct', None))}")
    n = sum(not r.flagged for r in loco.runs)
    print("leave-one-config-out: each calibrated configuration predicted from specs and the "
          f"other configurations' efficiencies ({n} unflagged run{'s' * (n != 1)})")
    for m in VALIDATED_METRICS:
        v = loco.summary.get(m)
        if v is not None:
            print(f"  {m}: spec path {pct(v.median_abs_error_pct)} median error")


def register(app: typer.Typer) -> None:
    app.command("validate")(validate_cmd)
