"""``fleetplan calibrate``: fit the replica model to the measured runs of a profile store."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from fleetplan.cli._format import TableOrJson, check_no_overwrite, emit_json, emit_table
from fleetplan.cli._options import (
    CATALOG_HELP,
    FIT_SEEDS_HELP,
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
from fleetplan.replica.calibration import DEFAULT_MAX_NFEV
from fleetplan.replica.host_time import HOST_TIME_GRID_S
from fleetplan.replica.params import C_DELIVER_MAX_S
from fleetplan.replica.priors import C_DELIVER_S

_GRID_US = ", ".join(f"{v * 1e6:g}" for v in HOST_TIME_GRID_S)


def calibrate(
    model: str | None = typer.Option(None, "--model", "-m", help="Only this model."),
    config: str | None = typer.Option(None, "--config", "-c", help="Only this configuration."),
    out: Path | None = typer.Option(
        None, "--out", help="Result file. Default: your calibration, "
        "$XDG_DATA_HOME/fleetplan/calibration.json (~/.local/share/fleetplan/), started from "
        "the one read so far; every command then reads it. The bundled data/ is never written."
    ),
    store: Path | None = typer.Option(None, "--store", help=f"Profile store ({STORE_DEFAULT})."),
    jobs: int | None = typer.Option(None, "--jobs", min=1, help="Processes (default: all cores)."),
    max_nfev: int = typer.Option(
        DEFAULT_MAX_NFEV, "--max-nfev", min=5, max=1000, help="Simulations per configuration fit."
    ),
    host_time_us: float | None = typer.Option(
        None, "--host-time-us", min=0.0, max=C_DELIVER_MAX_S * 1e6,
        help="Host time per streamed output (API server and client on the server's host), us, "
        "for every configuration fitted: a first token waits for the outputs listed before it "
        f"in its step. Default {C_DELIVER_S * 1e6:g}, chosen over the bundled study's servers "
        "(docs/replica-model.md); or let --fit-host-time choose it from your runs."),
    fit_host_time: bool = typer.Option(
        False, "--fit-host-time",
        help="Choose the host time from the runs: every configuration is fitted at "
        f"{_GRID_US} us and the value of lowest "
        "summed loss is kept (its fits are the result; six calibrations' time). One host "
        "time for the whole store: calibrate runs from different hosts separately."),
    fit_seeds: str | None = typer.Option(None, "--fit-seeds", metavar="N,N",
                                         help=FIT_SEEDS_HELP),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format", help="table or json."),
    catalog: list[Path] | None = typer.Option(None, "--catalog", help=CATALOG_HELP),
    model_config: list[Path] | None = typer.Option(None, "--model-config",
                                                   help=MODEL_CONFIG_HELP),
    progress: bool = typer.Option(False, "--progress", help=PROGRESS_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
) -> None:
    """Fit each configuration's step-time parameters to its unflagged runs; flag and report the
    runs no work-conserving server can produce. The file is written atomically; configurations
    not refitted keep their entries. A run whose model or GPU the catalog does not know
    (--catalog, --model-config add them) is refused alone with one line on stderr; the others
    are fitted and written, and the command exits 2.

    Example: fleetplan calibrate --config 1xH100-PCIe --out my-calibration.json
    """
    import pandas as pd

    from fleetplan._io import write_bytes_atomic
    from fleetplan.catalog.models import normalize_model
    from fleetplan.errors import FleetplanError
    from fleetplan.profiles.store import ProfileStore, load_profiles
    from fleetplan.replica.calibration import (
        calibrate_store,
        check_merge_seeds,
        selected_keys,
        write_calibration,
    )
    from fleetplan.replica.params import default_calibration_path, user_calibration_path

    if fit_host_time and host_time_us is not None:
        print("fleetplan: error: --host-time-us and --fit-host-time: give a host time or let "
              "the runs choose it, not both", file=sys.stderr)
        raise typer.Exit(2)
    # --out is read too (the new fits join it), never a file of another kind
    check_no_overwrite([("--out", out)],
                       [("the --store", store), *(("a --catalog", c) for c in catalog or ()),
                        *(("a --model-config", m) for m in model_config or ())])
    grid = HOST_TIME_GRID_S if fit_host_time else None
    seeds = parse_fit_seeds(fit_seeds) or FIT_SEEDS
    use_cli_context(catalog=catalog, model_config=model_config, store=store)
    note_user_files(store=store is None)
    c_deliver = None if host_time_us is None else host_time_us * 1e-6
    st, refused = load_profiles(store).split_known()  # unknown model/GPU: refused alone
    for line in refused:
        print(f"fleetplan: error: {line}", file=sys.stderr)
    if refused and not len(st):
        raise typer.Exit(2)
    target = out if out is not None else user_calibration_path()
    start = default_calibration_path()
    into = target if target.exists() else (start if out is None and start.is_file() else None)
    if into is not None:  # before the fits: a file records one set of length seeds
        check_merge_seeds(into, selected_keys(st, model, config), seeds,
                          name=str(target) if into == target
                          else f"{target} (to start from the bundled {into})")
    with progress_reporter(quiet, progress) as reporter:
        try:
            cals = [calibrate_store(st, model=model, config=config, jobs=jobs,
                                    max_nfev=max_nfev, progress=reporter, c_deliver=c_deliver,
                                    host_time_grid=grid, fit_seeds=seeds)]
        except FleetplanError:
            if config is not None:
                raise  # the one configuration asked for: its error is the answer
            cals = []  # find the configuration(s) at fault; fit the others
            bad = []
            for key in sorted({(r["model"], r["config"]) for r in
                               st.frame[["model", "config"]].to_dict("records")
                               if model is None or r["model"] == normalize_model(model)}):
                try:  # with a grid, a short fit finds the fault: the search comes after
                    cals.append(calibrate_store(st, model=key[0], config=key[1], jobs=jobs,
                                                max_nfev=max_nfev if grid is None else 5,
                                                progress=reporter, c_deliver=c_deliver,
                                                fit_seeds=seeds))
                except FleetplanError as exc:
                    line = (f"{st.path or 'store'}: {key[0]} on {key[1]}: {exc}; this "
                            "configuration is refused, the others are fitted")
                    print(f"fleetplan: error: {line}", file=sys.stderr)
                    refused.append(line)
                    bad.append(key)
            if not cals:
                raise typer.Exit(2) from None
            if grid is not None:  # one host time for the others together, as asked
                keys = list(zip(st.frame["model"], st.frame["config"], strict=True))
                rest = ProfileStore(st.frame[[k not in bad for k in keys]]
                                    .reset_index(drop=True), st.path)
                cals = [calibrate_store(rest, model=model, jobs=jobs, max_nfev=max_nfev,
                                        progress=reporter, host_time_grid=grid,
                                        fit_seeds=seeds)]
    if out is None and not target.exists() and start.is_file():  # start from the bundled one
        write_bytes_atomic(target, start.read_bytes())
    for cal in cals:  # each merges into the file: configurations not refitted keep theirs
        write_calibration(cal, target)
    if out is None:
        print(f"fleetplan: your calibration: {target}", file=sys.stderr)
    rows = []
    for f in (f for cal in cals for f in cal.fits):
        p = f.params
        rows.append(
            {
                "model": p.model,
                "config": p.config,
                "calibrated": p.calibrated,
                "runs": len(f.runs),
                "flagged": sum(r.flagged for r in f.runs),
                # replayed with each request's recorded tokens instead of drawn lengths
                "runs_with_recorded_lengths": sum(
                    r.key == (p.model, p.config) and r.request_lengths is not None
                    for cal in cals for r in cal.runs),
                "loss": f.loss,
                "c_step_ms": p.c_step * 1e3,
                "c_prefill_tok_us": p.c_prefill_tok * 1e6,
                "c_seq_us": p.c_seq * 1e6,
                "c_kv_tok_ns": p.c_kv_tok * 1e9,
                "overhead_ms": p.overhead_s * 1e3,
                "host_time_us": p.c_deliver * 1e6,
                "kv_capacity_tokens": p.kv_capacity_tokens,
            }
        )
    flagged = [
        {
            "model": r.model,
            "config": r.config,
            "request_rate": r.request_rate,
            "flag_reason": r.flag_reason,
        }
        for cal in cals
        for r in cal.runs
        if r.flagged
    ]
    # one metric of an otherwise usable run that its own figures contradict (runs.bunched_itl)
    excluded = [
        {
            "model": r.model,
            "config": r.config,
            "request_rate": r.request_rate,
            "metric": metric,
            "reason": why,
        }
        for cal in cals
        for r in cal.runs
        for metric, why in r.excluded
    ]
    chosen = [cal.host_time for cal in cals if cal.host_time is not None]  # at most one
    if fmt is TableOrJson.json:
        doc: dict[str, object] = {"out": str(target), "configs": rows, "flagged": flagged,
                                  "excluded": excluded, "fit_seeds": list(seeds)}
        if chosen:
            c = chosen[0]
            doc["host_time_search"] = {"host_time_us": c.host_time_s * 1e6,
                                       "configs": c.configs,
                                       "points": [p.to_dict() for p in c.points]}
        emit_json(doc)
        if refused:
            raise typer.Exit(2)
        return
    table = pd.DataFrame(rows)
    if not table.empty and not table["runs_with_recorded_lengths"].any():
        table = table.drop(columns="runs_with_recorded_lengths")
    emit_table(
        table,
        title=f"Calibration -> {target}",
        caption="\n".join(
            [c.summary() for c in chosen]
            + ([f"fit seeds: {', '.join(map(str, seeds))}"] if seeds != FIT_SEEDS else [])
            + [f"flagged: {f['model']} {f['config']} {f['request_rate']:g} req/s: "
             f"{f['flag_reason']}" for f in flagged]
            + [f"left out: {e['model']} {e['config']} {e['request_rate']:g} req/s "
               f"{e['metric']}: {e['reason']}" for e in excluded]
        )
        or None,
    )
    if refused:
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)
