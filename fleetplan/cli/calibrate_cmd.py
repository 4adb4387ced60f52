"""``fleetplan calibrate``: fit the replica model to the measured runs of a profile store.

Parses the options into a :class:`~fleetplan.replica.calibrate_run.CalibrateRequest`, calls
:func:`~fleetplan.replica.calibrate_run.run_calibration`, saves and formats its outcome."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from fleetplan.cli._format import TableOrJson, check_no_overwrite, emit_json, emit_table
from fleetplan.cli._options import (
    FIT_SEEDS_HELP,
    CatalogOpt,
    ModelConfigOpt,
    ProgressOpt,
    QuietOpt,
    StoreOpt,
    check_read_files,
    note_user_files,
    parse_fit_seeds,
    progress_reporter,
    use_cli_context,
)
from fleetplan.replica.calibrate import FIT_SEEDS
from fleetplan.replica.calibrate_run import (
    MAX_MAX_NFEV,
    MIN_MAX_NFEV,
    CalibrateRequest,
    CalibrationOutcome,
    run_calibration,
)
from fleetplan.replica.calibration import DEFAULT_MAX_NFEV
from fleetplan.replica.host_time import HOST_TIME_GRID_S
from fleetplan.replica.params_record import C_DELIVER_MAX_S
from fleetplan.replica.priors import C_DELIVER_S

_GRID_US = ", ".join(f"{v * 1e6:g}" for v in HOST_TIME_GRID_S)


ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Only this model.")]
ConfigOpt = Annotated[str | None, typer.Option("--config", "-c",
                                               help="Only this configuration.")]
OutOpt = Annotated[Path | None, typer.Option(
    "--out", help="Result file. Default: your calibration, "
    "$XDG_DATA_HOME/fleetplan/calibration.json (~/.local/share/fleetplan/), started from "
    "the one read so far; every command then reads it. The bundled data/ is never written.")]
JobsOpt = Annotated[int | None, typer.Option("--jobs", min=1,
                                             help="Processes (default: all cores).")]
MaxNfevOpt = Annotated[int, typer.Option("--max-nfev", min=MIN_MAX_NFEV, max=MAX_MAX_NFEV,
                                         help="Simulations per configuration fit.")]
HostTimeOpt = Annotated[float | None, typer.Option(
    "--host-time-us", min=0.0, max=C_DELIVER_MAX_S * 1e6,
    help="Host time per streamed output (API server and client on the server's host), us, "
    "for every configuration fitted: a first token waits for the outputs listed before it "
    f"in its step. Default {C_DELIVER_S * 1e6:g}, chosen over the bundled study's servers "
    "(docs/replica-model.md); or let --fit-host-time choose it from your runs.")]
FitHostTimeOpt = Annotated[bool, typer.Option(
    "--fit-host-time",
    help="Choose the host time from the runs: every configuration is fitted at "
    f"{_GRID_US} us and the value of lowest "
    "summed loss is kept (its fits are the result; six calibrations' time). One host "
    "time for the whole store: calibrate runs from different hosts separately.")]
FitSeedsOpt = Annotated[str | None, typer.Option("--fit-seeds", metavar="N,N",
                                                 help=FIT_SEEDS_HELP)]
FormatOpt = Annotated[TableOrJson, typer.Option("--format", help="table or json.")]
# how the library's one-line errors name the request's fields: the flags
CLI_NAMES = {"host_time_us": "--host-time-us", "fit_host_time": "--fit-host-time",
             "jobs": "--jobs", "max_nfev": "--max-nfev", "fit_seeds": "--fit-seeds"}


def calibrate(model: ModelOpt = None, config: ConfigOpt = None, out: OutOpt = None,
              store: StoreOpt = None, jobs: JobsOpt = None,
              max_nfev: MaxNfevOpt = DEFAULT_MAX_NFEV, host_time_us: HostTimeOpt = None,
              fit_host_time: FitHostTimeOpt = False, fit_seeds: FitSeedsOpt = None,
              fmt: FormatOpt = TableOrJson.table, catalog: CatalogOpt = None,
              model_config: ModelConfigOpt = None, progress: ProgressOpt = False,
              quiet: QuietOpt = False) -> None:
    """Fit each configuration's step-time parameters to its unflagged runs; flag and report the
    runs no work-conserving server can produce. The file is written atomically; configurations
    not refitted keep their entries. A run whose model or GPU the catalog does not know
    (--catalog, --model-config add them) is refused alone with one line on stderr; the others
    are fitted and written, and the command exits 2.

    Example: fleetplan calibrate --config 1xH100-PCIe --out my-calibration.json
    """
    request = CalibrateRequest(
        model=model, config=config, out=out, store=store, jobs=jobs, max_nfev=max_nfev,
        host_time_us=host_time_us, fit_host_time=fit_host_time,
        fit_seeds=parse_fit_seeds(fit_seeds) or FIT_SEEDS, names=CLI_NAMES)
    # --out is read too (the new fits join it), never a file of another kind
    check_no_overwrite([("--out", out)],
                       [("the --store", store), *(("a --catalog", c) for c in catalog or ()),
                        *(("a --model-config", m) for m in model_config or ())])
    check_read_files(store=store)
    names = use_cli_context(catalog=catalog, model_config=model_config, store=store).catalog
    note_user_files(store=store is None)
    with progress_reporter(quiet, progress) as reporter:
        outcome = run_calibration(request, progress=reporter, on_refused=_say_refused,
                                  catalog=names)
    if not outcome.calibrations:
        raise typer.Exit(2)
    target = outcome.save()
    if out is None:
        print(f"fleetplan: your calibration: {target}", file=sys.stderr)
    if fmt is TableOrJson.json:
        emit_json(outcome.to_dict())
    else:
        _show_table(outcome)
    if outcome.refused:
        raise typer.Exit(2)


def _say_refused(line: str) -> None:
    print(f"fleetplan: error: {line}", file=sys.stderr)


def _show_table(outcome: CalibrationOutcome) -> None:
    import pandas as pd

    seeds = outcome.request.fit_seeds
    flagged, excluded = outcome.flagged(), outcome.excluded()
    chosen = outcome.host_time_choice()
    table = pd.DataFrame(outcome.rows())
    if not table.empty and not table["runs_with_recorded_lengths"].any():
        table = table.drop(columns="runs_with_recorded_lengths")
    emit_table(
        table,
        title=f"Calibration -> {outcome.target}",
        caption="\n".join(
            ([chosen.summary()] if chosen is not None else [])
            + ([f"fit seeds: {', '.join(map(str, seeds))}"] if seeds != FIT_SEEDS else [])
            + [f"flagged: {f['model']} {f['config']} {f['request_rate']:g} req/s: "
               f"{f['flag_reason']}" for f in flagged]
            + [f"left out: {e['model']} {e['config']} {e['request_rate']:g} req/s "
               f"{e['metric']}: {e['reason']}" for e in excluded]
        )
        or None,
    )


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)
