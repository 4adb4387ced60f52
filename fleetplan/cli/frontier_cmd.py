"""``fleetplan frontier``: cost vs carbon cap, SLO or rate; each point a full verified solve."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from fleetplan._io import atomic_write_text
from fleetplan.cli._format import (
    MTOK_NOTE,
    OutputFormat,
    check_no_overwrite,
    check_output_path,
    dumps,
    emit_csv,
    emit_json,
    emit_table,
    errors_name_file,
    scenario_inputs,
    stdout_console,
)
from fleetplan.cli._options import (
    CalibrationOpt,
    CatalogOpt,
    PlanModelConfigOpt,
    ProgressOpt,
    QuietOpt,
    ScenarioArg,
    StoreOpt,
    TimingOpt,
    load_cli_scenario,
    progress_reporter,
)
from fleetplan.cli._plot import check_plot_path
from fleetplan.errors import InputError
from fleetplan.optimize.frontier import Frontier, Sweep
from fleetplan.optimize.plan import ClassResult
from fleetplan.optimize.requests import FrontierRequest, run_frontier

SweepOpt = Annotated[Sweep, typer.Option(
    "--sweep", help="carbon, slo, rate, confidence (solve --confidence P over P) or churn "
    "(failures per replica-hour of the reliability entries that state one).")]
PointsOpt = Annotated[int, typer.Option("--points", min=1, max=10000,
                                        help="Points of the sweep.")]
SchedulerOpt = Annotated[str | None, typer.Option(
    "--scheduler", help="Dask scheduler address (tcp://HOST:PORT); default: local processes.")]
LoOpt = Annotated[float | None, typer.Option(
    "--lo", help="Sweep start (carbon: g CO2e per Mtok, prompt + output tokens; slo and rate: "
    "scale factor, default 0.5; confidence: default 0.5; churn: failures per replica-hour, "
    "default 0).")]
HiOpt = Annotated[float | None, typer.Option(
    "--hi", help="Sweep end (default: the simulated carbon of the plan the closed loop "
    "verifies without a carbon cap (solve's answer on the scenario without its carbon: "
    "cap), where that is above the MILP's cheapest plan's; or scale 2.0; confidence 0.99; "
    "churn 0.2).")]


def frontier_cmd(
    scenario: ScenarioArg, sweep: SweepOpt, points: PointsOpt = 8,
    plot: Annotated[Path | None, typer.Option("--plot",
                                              help="Write the frontier plot (PNG).")] = None,
    scheduler: SchedulerOpt = None, lo: LoOpt = None, hi: HiOpt = None,
    solver: Annotated[str | None, typer.Option(
        "--solver", help="MILP solver (cbc, highs ...).")] = None,
    fmt: Annotated[OutputFormat, typer.Option(
        "--format", help="table, csv or json.")] = OutputFormat.table,
    timing: TimingOpt = True, progress: ProgressOpt = False, quiet: QuietOpt = False,
    catalog: CatalogOpt = None, model_config: PlanModelConfigOpt = None, store: StoreOpt = None,
    calibration: CalibrationOpt = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="Write the frontier (the --format json content) to FILE, atomically; "
        "fleetplan report PLAN --frontier FILE draws it beside a plan.")] = None,
) -> None:
    """The cost frontier of a scenario: each point is a full solve checked by simulation.

    Example: fleetplan frontier examples/hybrid-chat-batch.yaml --sweep carbon --points 6
    --plot f.png

    The scenario's fleet, if it names one, is not used: each point's solve chooses the fleet.
    Costs and carbon per Mtok count prompt + output tokens.
    """
    request = FrontierRequest(sweep, points, scheduler, solver=solver, lo=lo, hi=hi)
    if plot is not None and plot.suffix.lower() != ".png":
        raise InputError(f"--plot {plot}: the plot is written as PNG; name it FILE.png")
    check_plot_path(plot, suffixes=(".png",))  # writable, before the sweep (issue 16)
    if out is not None:
        check_output_path(out, "--out")
    check_no_overwrite([("--plot", plot), ("--out", out)],
                       scenario_inputs(scenario, catalog=catalog, model_config=model_config,
                                       store=store, calibration=calibration))
    sc = load_cli_scenario(scenario, chooser="each point's solve chooses the fleet",
                           catalog=catalog, model_config=model_config, store=store,
                           calibration=calibration)
    with errors_name_file(scenario), progress_reporter(quiet, progress) as reporter:
        result = run_frontier(sc, request, reporter)
    if out is not None:
        atomic_write_text(out, dumps(result.to_dict(timing=timing)))
    if plot is not None:
        from fleetplan.viz.style import offscreen_axes, save_figure

        save_figure(result.plot(offscreen_axes()), plot)
    if fmt is OutputFormat.json:
        emit_json(result.to_dict(timing=timing))
        return
    df = result.to_frame()
    if fmt is OutputFormat.csv:
        emit_csv(df)
        return
    _print_table(result, df)
    for note in result.notes:
        stdout_console().print(f"note: {note}", highlight=False)
    if plot is not None:
        Console(stderr=True).print(f"plot written to {plot}")


def _print_table(result: Frontier, df: Any) -> None:
    """The frontier as a table: the swept quantity's columns, then the outcome of each point."""
    swept = _SWEPT[result.sweep]
    table = df.assign(pareto=df["pareto"].map({True: "yes", False: ""}))
    if result.sweep is Sweep.slo:  # every class's SLO at this scale, not only the strictest
        table["SLOs ms"] = [" / ".join(f"{c['slo_ttft_p99_ms']:.4g}" for c in pt["classes"]
                                       if c["slo_ttft_p99_ms"]) or "-"
                            for pt in result.to_dict()["points"]]
    cols = {**swept, **_COMMON}
    names = " / ".join(c.name for c in _classes(result))
    emit_table(table[list(cols)].rename(columns=cols), fit=True,
               title=f"Frontier: cost vs {result.parameter} ({result.unit})", digits=3,
               caption=_SWEPT_NOTE[result.sweep] + " Each point: MILP + simulation of the "
               "plan. outcome: verified (the "
               "simulation met every SLO), not verified (a plan whose simulation still missed "
               "an SLO or the cap: not drawn in the plot), infeasible (no plan). pareto: not "
               f"dominated in (swept quantity, cost). {result.label_note()}."
               + (f" SLOs ms: the P99 TTFT targets of {names}." if result.sweep is Sweep.slo
                  and names else "")
               + f" {MTOK_NOTE}.")


# the table's columns (frame column -> header: short, so no header wraps at 80 columns)
_COMMON = {"outcome": "outcome", "cost_per_hour_usd": "$/h", "cost_per_mtok_usd": "$/Mtok",
           "pareto": "pareto", "label": "fleet"}
# per sweep, the swept quantity's own columns first (--format csv or json: every column)
_SWEPT: dict[Sweep, dict[str, str]] = {
    Sweep.carbon: {"value": "cap g/Mtok", "g_co2_per_mtok": "g/Mtok"},
    Sweep.slo: {"value": "SLO x", "SLOs ms": "SLOs ms"},
    Sweep.rate: {"value": "rate x", "rate_rps": "req/s"},
    Sweep.confidence: {"value": "confidence"},
    Sweep.churn: {"value": "failures/h"},
}


_SWEPT_NOTE = {
    Sweep.carbon: "cap g/Mtok: the point's carbon cap; g/Mtok: its plan's simulated carbon.",
    Sweep.slo: "SLO x: every target of every class's SLO (P99 TTFT, and TPOT or E2E where "
               "set) scaled by it.",
    Sweep.rate: "rate x: every class's rate scaled by it; req/s: all classes together.",
    Sweep.confidence: "confidence: solve --confidence of the point.",
    Sweep.churn: "failures/h: failures per replica-hour of the reliability entries that state "
                 "one.",
}


def _classes(result: Frontier) -> tuple[ClassResult, ...]:
    """The classes of the first point that has a plan (their names label the SLO column)."""
    return next((pt.plan.classes for pt in result.points if pt.plan.classes), ())


def register(app: typer.Typer) -> None:
    app.command("frontier")(frontier_cmd)
