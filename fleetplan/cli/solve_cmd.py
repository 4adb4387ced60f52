"""``fleetplan solve``: the cheapest verified fleet for a scenario (exit 3 when infeasible, 4
when the plan it found is not verified by simulation)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from rich.console import Console

from fleetplan._io import atomic_write_text
from fleetplan._notes import pool_names, print_notes
from fleetplan.cli._format import (
    MTOK,
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
    PlotOpt,
    ProgressOpt,
    QuietOpt,
    ScenarioArg,
    SolverOpt,
    StoreOpt,
    TimingOpt,
    VerboseOpt,
    load_cli_scenario,
    progress_reporter,
)
from fleetplan.cli._plot import check_plot_path, save_result_plot
from fleetplan.cli.report_cmd import REPORT_HELP, check_html_path, write_plan_page
from fleetplan.errors import InfeasibleError, NotVerifiedError
from fleetplan.optimize.loop import DEFAULT_MAX_ROUNDS
from fleetplan.optimize.plan import Plan, PlanStatus
from fleetplan.optimize.plan_build import NOT_VERIFIED_NOTE
from fleetplan.optimize.requests import SolveRequest, run_solve
from fleetplan.optimize.solve import save_model


def _err() -> Console:
    return Console(stderr=True)


def _print_plan(plan: Plan, verbose: bool = False) -> None:
    from fleetplan.optimize.confidence import shown_probability

    out = stdout_console(width=160)
    fleet = pd.DataFrame([e.to_dict() for e in plan.fleet])
    if "tier_ttft_p99_ms" in fleet.columns:  # whole milliseconds as such: 400, not 400.000
        fleet["tier_ttft_p99_ms"] = [int(v) if float(v).is_integer() else v
                                     for v in fleet["tier_ttft_p99_ms"]]
    emit_table(fleet, title="Fleet" + (" (peak hour)" if plan.hours else ""),
               columns=["pool", "config", "region", "tier_ttft_p99_ms", "count"]
               + (["spare"] if "spare" in fleet.columns else []))
    rows = []
    # a TPOT or E2E target of any class: its columns beside the TTFT ones ("-": none set)
    tpot = any(c.slo_tpot_p99_ms for c in plan.classes)
    e2e = any(c.slo_e2e_p99_ms for c in plan.classes)
    for c in plan.classes:
        rows.append({"class": c.name, **({} if c.model is None else {"model": c.model}),
                     "rate_rps": c.rate_rps, "slo_ttft_p99_ms": c.slo_ttft_p99_ms,
                     "sim_ttft_p99_ms": c.ttft_p99_ms,
                     **({} if not tpot else {"slo_tpot_p99_ms": c.slo_tpot_p99_ms or "-",
                                             "sim_tpot_p99_ms": c.tpot_p99_ms or "-"}),
                     **({} if not e2e else {"slo_e2e_p99_ms": c.slo_e2e_p99_ms or "-",
                                            "sim_e2e_p99_ms": c.e2e_p99_ms or "-"}),
                     "model_band_80pct_ms": "-" if c.ttft_p99_band_ms is None else
                     f"{c.ttft_p99_band_ms[0]:.1f}-{c.ttft_p99_band_ms[1]:.1f}",
                     "calibrated": {None: "-", True: "yes", False: "NO"}[c.calibrated],
                     "met": "yes" if c.met else "NO",
                     "split": ", ".join(f"{k} {v:.1%}" for k, v in c.split.items()),
                     **({} if c.slo_met_probability is None else {
                         "slo_met_probability": shown_probability(c.slo_met_probability),
                         "margin_ms": c.margin_ms})})
    what = "P99 TTFT" + (", TPOT" if tpot else "") + (", E2E" if e2e else "")
    title = (f"Classes (rate: mean over the day; {what}: the worst hour's, simulated with the "
             "planned split)" if plan.hours else
             f"Classes ({what} simulated with the planned split)")
    emit_table(pd.DataFrame(rows), title=title, digits=1)
    if plan.hours:
        hours = pd.DataFrame([{
            "hour": h.hour, "rate_rps": h.rate_rps,
            "fleet": " + ".join(f"{e.count}x{e.pool}" for e in h.fleet),
            "on_demand": " + ".join(f"{e.count}x{e.pool}" for e in h.on_demand) or "-",
            "cost_per_hour_usd": h.cost_per_hour_usd, "g_co2_per_hour": h.g_co2_per_hour,
            "met": "yes" if h.met else "NO"} for h in plan.hours])
        emit_table(hours, title="Hourly plan", digits=2)
    s = plan.solver
    out.print(f"status: {plan.status.value}, verified by simulation: "
              f"{'yes' if plan.verified else 'NO'}")
    per_mtok = ("-" if plan.cost_per_mtok_usd is None
                else f"${plan.cost_per_mtok_usd:.3f}/{MTOK}")  # no tokens: no figure
    out.print(f"cost: ${plan.cost_per_hour_usd:.2f}/h, {per_mtok}; "
              + ("carbon (simulated): -" if plan.g_co2_per_mtok is None else
                 f"carbon (simulated): {plan.g_co2_per_mtok:.1f} g CO2e/{MTOK}"))
    gap = "" if s.gap_achieved is None else f", proven gap {s.gap_achieved:.2%}"
    out.print(f"solver: {s.name} {s.status} in {s.seconds or 0:.2f} s (time limit "
              f"{s.time_limit_s:g} s, gap {s.gap:g}{gap}), {s.rounds} round(s) of "
              "solve + simulate")
    caps = "; ".join(f"{c.pool or c.config} {c.capacity_rps:.2f} req/s for {c.class_name}"
                     + (f" (x{c.derate:.3f} a lone replica's {c.capacity_rps / c.derate:.2f}, "
                        "as the closed loop's simulations found)"
                        if c.derate not in (None, 1.0) else "")  # rounded: 1.0 is none
                     for c in plan.capacities)
    if caps:
        out.print(f"sustained capacity per replica at the SLO tier: {caps}")
    if plan.measure_next is not None:
        out.print(plan.measure_next.sentence() + "; to measure it and plan on the runs:")
        for command in plan.measure_next.commands:
            out.print(f"  {command}", soft_wrap=True)
    print_notes(out.print, plan.notes, pool_names(plan.fleet), verbose=verbose)


FormatOpt = Annotated[OutputFormat, typer.Option(
    "--format", help="table, csv (one row per class: rate, SLO, simulated P99 TTFT, share per "
    "configuration) or json (the plan).")]
SaveLpOpt = Annotated[Path | None, typer.Option(
    "--save-lp", help="Write the final MILP as an LP file (any LP solver re-solves it) and "
    "PuLP's model dict beside it (FILE.json).")]
ExecutorOpt = Annotated[str | None, typer.Option(
    "--executor", help="Where capacity searches and simulations run: local[:N] (default), "
    "serial, or a Dask scheduler address.")]
OutOpt = Annotated[Path | None, typer.Option(
    "--out", help="Write the plan (the --format json content) to FILE, atomically; fleetplan "
    "simulate SCENARIO --plan FILE replays it.")]
ReportOpt = Annotated[Path | None, typer.Option("--report", help=REPORT_HELP)]
MaxRoundsOpt = Annotated[int, typer.Option("--max-rounds", min=1, max=50,
                                           help="Bound on solve + simulate rounds.")]
PlotKindOpt = Annotated[str | None, typer.Option(
    "--plot-kind", help="latency (default), fleet, or hours (diurnal plans).")]
ConfidenceOpt = Annotated[float | None, typer.Option(
    "--confidence",
    help="A probability strictly between 0 and 1 (e.g. 0.95): plan so that every SLO still "
    "holds when latencies are as much worse as the replica model's measured error "
    "(validate --cv) allows at that quantile; the plan states each class's "
    "slo_met_probability and margin_ms. Default: off (the model's figures as they are).")]


def solve_cmd(
    scenario: ScenarioArg, fmt: FormatOpt = OutputFormat.table, solver: SolverOpt = None,
    save_lp: SaveLpOpt = None, executor: ExecutorOpt = None, out: OutOpt = None,
    report: ReportOpt = None, max_rounds: MaxRoundsOpt = DEFAULT_MAX_ROUNDS,
    timing: TimingOpt = True,
    plot: PlotOpt = None, plot_kind: PlotKindOpt = None, confidence: ConfidenceOpt = None,
    progress: ProgressOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
    catalog: CatalogOpt = None, model_config: PlanModelConfigOpt = None, store: StoreOpt = None,
    calibration: CalibrationOpt = None,
) -> None:
    """The cheapest fleet meeting every class's SLO, checked by simulation.

    Example: fleetplan solve examples/hybrid-chat-batch.yaml --out plan.json --save-lp plan.lp

    The scenario's fleet, if it names one, is not used: solve chooses the fleet (fleetplan
    simulate evaluates a given one). Costs and carbon per Mtok count prompt + output tokens.
    """
    if report is not None:
        check_html_path(report, "--report")
    # every file written after the solve is checked writable first (issue 16): none is lost
    for option, path in (("--out", out), ("--save-lp", save_lp)):
        if path is not None:
            check_output_path(path, option)
    check_plot_path(plot)
    check_no_overwrite(
        [("--out", out), ("--save-lp", save_lp),
         ("--save-lp", None if save_lp is None else Path(f"{save_lp}.json")),
         ("--report", report), ("--plot", plot)],
        scenario_inputs(scenario, catalog=catalog, model_config=model_config, store=store,
                        calibration=calibration))
    request = SolveRequest(solver=solver, executor=executor, max_rounds=max_rounds,
                           confidence=confidence, plot_kind=plot_kind if plot else None)
    sc = load_cli_scenario(scenario, chooser="solve chooses the fleet; fleetplan simulate "
                           "evaluates the given one", catalog=catalog,
                           model_config=model_config, store=store, calibration=calibration)
    with errors_name_file(scenario), progress_reporter(quiet, progress) as reporter:
        plan = run_solve(sc, request, reporter)
    if save_lp is not None and plan.problem is not None:
        lp, side = save_model(plan.problem, save_lp)
        if fmt is not OutputFormat.json:
            _err().print(f"saved the MILP to {lp} and {side}")
    shown = plan if timing else plan.without_timing()
    if out is not None:
        atomic_write_text(out, dumps(shown.to_dict()))
    if report is not None:
        name = str(out) if out is not None else f"fleetplan solve {scenario.name}"
        write_plan_page(replace(shown, source=name), report, sc, scenario)
    _emit(plan, fmt, timing, verbose, plot, plot_kind, out)


def _emit(plan: Plan, fmt: OutputFormat, timing: bool, verbose: bool, plot: Path | None,
          plot_kind: str | None, out: Path | None = None) -> None:
    """The plan on stdout in ``fmt`` and its plot; exit 3 (after both) when it is infeasible, 4
    when its simulation misses an SLO or the carbon cap (a CI job must not take such a plan
    for an answer)."""
    if fmt is OutputFormat.json:
        emit_json(plan.to_dict(timing=timing))
    elif fmt is OutputFormat.csv and plan.status is not PlanStatus.infeasible:
        emit_csv(plan.to_frame())
    if plot is not None and plan.status is not PlanStatus.infeasible:
        save_result_plot(plan, plot, kind=plot_kind)
    if plan.status is PlanStatus.infeasible:
        raise InfeasibleError(f"infeasible: {plan.reason}; cheapest relaxation: "
                              f"{plan.relaxation}")
    if fmt is OutputFormat.table:
        _print_plan(plan, verbose)
    if not plan.verified:
        raise NotVerifiedError(_not_verified(plan, out))


def _not_verified(plan: Plan, out: Path | None) -> str:
    """The one line of an unverified plan: the classes its simulation did not meet, and the
    loop's own account (its NOT VERIFIED note) where it gives one."""
    missed = ", ".join(c.name for c in plan.classes if c.met is False)
    what = (f"classes not met: {missed}" if missed else
            "no class missed its SLO outright: the carbon cap, or a P99 within the safety "
            "margin where a pool ran above its measured capacity, failed the plan")
    why = next((n.removeprefix(NOT_VERIFIED_NOTE) for n in plan.notes
                if n.startswith(NOT_VERIFIED_NOTE)), None)
    return (f"not verified by simulation (${plan.cost_per_hour_usd or 0:.2f}/h, {what})"
            + (f": {why}" if why else "")
            + "; the plan is printed" + (f" and written to {out}" if out is not None else "")
            + ", marked verified: false")


def register(app: typer.Typer) -> None:
    app.command("solve")(solve_cmd)
