"""``fleetplan simulate``: a scenario's fleet under its traffic: latency per class, cost, carbon."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from fleetplan._notes import print_notes
from fleetplan.cli._format import (
    MTOK,
    OutputFormat,
    check_no_overwrite,
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
    ScenarioArg,
    StoreOpt,
    VerboseOpt,
    load_cli_scenario,
)
from fleetplan.cli._plot import check_plot_path, save_result_plot
from fleetplan.fleet import SimulationResult
from fleetplan.fleet.results import share_verdict
from fleetplan.optimize.requests import SimulateRequest, run_simulate

FLEET_HELP = (
    "Override the scenario's fleet: pools joined by '+', each <replicas>x<config>[@REGION], "
    "e.g. 2x1xH100-PCIe+4x2xRTX-4090@FRA (region default EU27); a configuration's layout "
    "keeps its '+': 2x8xRTX-4090+tp4pp2+1x1xH100-PCIe.")


SHOW_AFTER_S = 1.5


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[float], None] | None]:
    """A progress bar on stderr, shown once a run has lasted ``SHOW_AFTER_S`` seconds, when
    asked for and stderr is a terminal; else nothing."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    t0 = time.monotonic()
    bar = Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                   TimeElapsedColumn(), console=Console(stderr=True), transient=True)
    task = bar.add_task("simulate", total=1.0)
    started = False

    def update(f: float) -> None:
        nonlocal started
        if not started and time.monotonic() - t0 >= SHOW_AFTER_S:
            bar.start()
            started = True
        bar.update(task, completed=f)

    try:
        yield update
    finally:
        if started:
            bar.stop()


def _pool_word(share: dict, slo_ttft_p99_ms: float | None) -> str:
    """A class's verdict on one pool's requests (``by_pool``) in words
    (:func:`~fleetplan.fleet.results.share_verdict`), judged on its P99 TTFT."""
    ttft = share.get("ttft_p99_ms")
    within = slo_ttft_p99_ms is not None and ttft is not None and ttft <= slo_ttft_p99_ms
    return share_verdict(share["met"], within, unfinished=bool(share.get("unfinished")))


def _print(res: SimulationResult, verbose: bool = False) -> None:
    d = res.to_dict()
    # a TPOT or E2E target of any class: its target and P99 beside the TTFT ones ("-": none)
    tpot = any(c.get("slo_tpot_p99_ms") for c in d["classes"])
    e2e = any(c.get("slo_e2e_p99_ms") for c in d["classes"])
    classes = pd.DataFrame([{
        "class": c["name"], "requests": c["requests"], "rate_rps": c["rate_rps"],
        "ttft_p50_ms": c["ttft_p50_ms"], "ttft_p99_ms": c["ttft_p99_ms"],
        "p99_ci_ms": ("-" if c["ttft_p99_ci_ms"][0] is None else
                      f"{c['ttft_p99_ci_ms'][0]:.1f}-{c['ttft_p99_ci_ms'][1]:.1f}"),
        "tpot_p50_ms": c["tpot_p50_ms"], "e2e_p99_ms": c["e2e_p99_ms"],
        "slo_ttft_p99_ms": c["slo_ttft_p99_ms"],
        **({} if not tpot else {"tpot_p99_ms": c["tpot_p99_ms"],
                                "slo_tpot_p99_ms": c.get("slo_tpot_p99_ms") or "-"}),
        **({} if not e2e else {"slo_e2e_p99_ms": c.get("slo_e2e_p99_ms") or "-"}),
        "slo_met": "-" if c["slo_met"] is None else ("yes" if c["slo_met"] else "NO"),
        # a share of requests: 0.979 must not read 1.0 at the table's one decimal
        "goodput": "-" if c["goodput_fraction"] is None else f"{100 * c['goodput_fraction']:.1f}%",
        **({} if "requests_retried" not in c else {  # a reliability block: churn
            "retried": c["requests_retried"], "lost": c["requests_lost"]}),
    } for c in d["classes"]])
    emit_table(classes, title=f"Classes ({res.replications} replication(s), seed {res.seed}, "
               f"{res.routing} routing)", digits=1)
    # the JSON's `utilization` is the share of time a replica's engine steps (any request in
    # flight): ~1.0 for any loaded replica under continuous batching, so it is shown under that
    # name, beside the load each replica carried (completed req/s per replica)
    pools = pd.DataFrame([{
        "pool": p["label"], "count": p["count"],
        "done_rps_per_replica": p["completed_rps"] / p["count"],
        "engine_busy": p["utilization"],
        "requests": p["requests"], "overloaded": "YES" if p["overloaded"] else "no",
        "calibrated": "yes" if p["calibrated"] else "no", "usd_per_hour": p["cost_per_hour_usd"],
        "power_w": p["power_w"], "g_co2_per_hour": p["g_co2_operational_per_hour"]
        + p["g_co2_embodied_per_hour"],
        **({} if "availability" not in p else {"availability": p["availability"]}),
    } for p in d["pools"]])
    emit_table(pools, title="Pools", digits=2,
               caption="engine_busy: share of time the engine is stepping (one request in "
               "flight is enough), not a share of capacity; power_w: see the power lines")
    if "models" in d:  # several models: each one's pools, and the fleet's totals below
        emit_table(pd.DataFrame([{
            "model": m["model"], "classes": ", ".join(m["classes"]),
            "slo_met": "-" if m["slo_met"] is None else ("yes" if m["slo_met"] else "NO"),
            "replicas": m["replicas"], "gpus": m["gpus"], "requests": m["requests"],
            "usd_per_hour": m["cost_per_hour_usd"], "g_co2_per_hour": m["g_co2_per_hour"],
        } for m in d["models"]]), title="Models (their pools' sums; the fleet's totals below)",
            digits=2)
    out = stdout_console(width=160)
    per = "-" if d["cost_per_mtok_usd"] is None else f"${d['cost_per_mtok_usd']:.3f}/{MTOK}"
    out.print(f"cost: ${d['cost_per_hour_usd']:.2f}/h, {per}; energy "
              f"{d['energy_kwh_per_hour']:.2f} kWh/h")
    gm = d["g_co2_per_mtok"]
    out.print(f"carbon: {d['g_co2_per_hour']:.0f} g CO2e/h (operational "
              f"{d['g_co2_operational_per_hour']:.0f}, embodied "
              f"{d['g_co2_embodied_per_hour']:.0f})"
              + ("" if gm is None else f", {gm:.1f} g/{MTOK}"))
    if res.overloaded:
        out.print(f"OVERLOADED: offered {res.offered_rps:.2f} req/s, sustainable "
                  f"{res.sustainable_rps or 0:.2f} req/s")
    for c in d["classes"]:  # a class that missed on some of its pools: which
        shares = c["by_pool"]
        if c["slo_met"] is False and len(shares) > 1:
            out.print(f"class {c['name']} by pool: " + "; ".join(
                f"{_pool_word(v, c['slo_ttft_p99_ms'])} on {k}"
                + ("" if v["ttft_p99_ms"] is None else f" (P99 TTFT {v['ttft_p99_ms']:.0f} ms)")
                for k, v in shares.items()))
    for p in d["pools"]:
        scales = ("the steps' activity" if p["power_model"] == "activity"
                  else f"engine_busy; the steps' activity: {p['power_activity']:.2f}")
        out.print(f"power {p['label']}: {p['power_w_per_gpu']:.0f} W per GPU on average = "
                  f"idle + (busy - idle) x {p['power_share']:.2f} ({scales}; power: "
                  f"{p['power_model']})")
    for p in d["pools"]:
        out.print(f"sources {p['label']}: price {p['price_source']}; power {p['power_source']}; "
                  f"grid {p['grid_source']}; embodied {p['embodied_source']}")
    print_notes(out.print, res.notes, {p["label"] for p in d["pools"]}, verbose=verbose)


PlanOpt = Annotated[Path | None, typer.Option(
    "--plan", help="Replay a plan file (fleetplan solve --out): its pools, tiers and split, "
    "routed 'planned' unless --routing says otherwise.")]
RoutingOpt = Annotated[str | None, typer.Option(
    "--routing", help="Override the routing policy (e.g. least-outstanding, slo-aware) to "
    "stress-test a fleet or a --plan.")]
FormatOpt = Annotated[OutputFormat, typer.Option(
    "--format", help="table, json, or csv (one row per class).")]
SeedOpt = Annotated[int | None, typer.Option("--seed", min=0, max=2**63 - 1,
                                             help="Override sim.seed (0 to 2**63-1).")]
ReplicationsOpt = Annotated[int | None, typer.Option("--replications", min=1, max=1000,
                                                     help="Override sim.replications.")]
DurationOpt = Annotated[float | None, typer.Option(
    "--duration", help="Override sim.duration_s (seconds simulated per replication; e.g. long "
    "enough for failures of a reliability block to happen in it).")]
ExecutorOpt = Annotated[str | None, typer.Option(
    "--executor", help="Run the replications in parallel: local[:N] (worker processes), "
    "serial, or a Dask scheduler address; the same result as one after another (default, with "
    "a progress bar on a terminal).")]
PlotKindOpt = Annotated[str, typer.Option(
    "--plot-kind", help="latency (P99 TTFT vs SLO per class) or fleet.")]


def simulate_cmd(
    scenario: ScenarioArg,
    fleet: Annotated[str | None, typer.Option("--fleet", help=FLEET_HELP)] = None,
    plan: PlanOpt = None, routing: RoutingOpt = None, fmt: FormatOpt = OutputFormat.table,
    seed: SeedOpt = None, replications: ReplicationsOpt = None, duration: DurationOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    verbose: VerboseOpt = False, executor: ExecutorOpt = None, catalog: CatalogOpt = None,
    model_config: PlanModelConfigOpt = None, store: StoreOpt = None,
    calibration: CalibrationOpt = None, plot: PlotOpt = None,
    plot_kind: PlotKindOpt = "latency",
) -> None:
    """Simulate the scenario's fleet: per-class TTFT/TPOT percentiles with 95% CIs, pool
    utilization, overload, cost, energy and carbon.

    Example: fleetplan simulate examples/hybrid-chat-batch.yaml --fleet 2x1xH100-PCIe+4x2xRTX-4090

    Replay a solved plan: fleetplan solve S.yaml --out plan.json, then fleetplan simulate S.yaml
    --plan plan.json --seed 11.

    Pool utilization is the share of time each replica's engine steps (near 1.0 for any loaded
    replica); the table shows it beside each replica's completed req/s. Cost and carbon per Mtok
    count prompt + output tokens.

    The JSON (--format json) is a contract; same scenario and seed give byte-identical output.
    """
    check_plot_path(plot)  # before the run: an unwritable --plot fails at once, nothing lost
    check_no_overwrite([("--plot", plot)],
                       [*scenario_inputs(scenario, catalog=catalog, model_config=model_config,
                                         store=store, calibration=calibration),
                        ("the --plan", plan)])
    request = SimulateRequest(fleet=fleet, plan=plan, routing=routing, seed=seed,
                              replications=replications, duration_s=duration,
                              executor=executor, plot_kind=plot_kind if plot else None)
    sc = load_cli_scenario(scenario, catalog=catalog, model_config=model_config, store=store,
                           calibration=calibration)
    # the sim overrides first, outside errors_name_file: a bad one names the option's field,
    # not the file (run_simulate applies them again, to the same effect)
    sc = request.scenario(sc)
    with errors_name_file(scenario), _progress(not quiet and executor is None) as cb:
        res = run_simulate(sc, request, cb)
    if plot is not None:
        save_result_plot(res, plot, kind=plot_kind)
    if fmt is OutputFormat.json:
        emit_json(res.to_dict())
    elif fmt is OutputFormat.csv:
        emit_csv(res.to_frame())
    else:
        _print(res, verbose)


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_cmd)
