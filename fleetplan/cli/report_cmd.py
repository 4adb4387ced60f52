"""``fleetplan report``: a plan as one self-contained HTML page, or the diff of two plans."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetplan.cli._format import check_no_overwrite, check_output_path, scenario_inputs
from fleetplan.cli._options import (
    CalibrationOpt,
    CatalogOpt,
    PlanModelConfigOpt,
    StoreOpt,
    load_cli_scenario,
    use_cli_context,
)
from fleetplan.errors import InputError

if TYPE_CHECKING:
    from fleetplan.optimize.plan import Plan

REPORT_HELP = ("Also write the plan as one self-contained HTML page (fleetplan report, with "
               "the scenario's assumptions); infeasible plans too.")


def check_html_path(path: Path, option: str = "--out") -> Path:
    """``path``, when it names an HTML file that can be written (checked before any long
    computation: :func:`fleetplan.cli._format.check_output_path`)."""
    if path.suffix.lower() not in (".html", ".htm"):
        raise InputError(f"{option} {path}: the report is an HTML page; name it FILE.html")
    return check_output_path(path, option)


def write_plan_page(plan: Plan, path: Path, scenario: Any, scenario_path: Path) -> None:
    """``fleetplan solve --report``: the page of the plan just solved (the record itself, named
    by its ``source``)."""
    from fleetplan.report.render import write_report

    write_report(path, plan, scenario=scenario, scenario_path=str(scenario_path))
    typer.echo(f"report written to {path}", err=True)


PlansArg = Annotated[list[Path], typer.Argument(
    help="A plan file (fleetplan solve --format json), or two (A then B) to diff.",
    metavar="PLAN [PLAN_B]")]
OutOpt = Annotated[Path | None, typer.Option(
    "--out", "-o", help="Where to write the page (default: the plan's name with .html; a diff: "
    "A-vs-B.html beside B).")]
ScenarioOpt = Annotated[Path | None, typer.Option(
    "--scenario", "-s", help="The scenario the plan was solved from: states prices (with "
    "dates), power, grid intensity and embodied carbon with their sources, splits carbon into "
    "operational and embodied, and gives the model's accuracy per configuration. A diff prices "
    "each pool's change with it.")]
FrontierOpt = Annotated[Path | None, typer.Option(
    "--frontier", help="A frontier file (fleetplan frontier --format json) to show beside the "
    "plan.")]


def report_cmd(
    plans: PlansArg, out: OutOpt = None, scenario: ScenarioOpt = None,
    frontier: FrontierOpt = None, catalog: CatalogOpt = None,
    model_config: PlanModelConfigOpt = None, store: StoreOpt = None,
    calibration: CalibrationOpt = None,
) -> None:
    """A plan as one self-contained HTML page (no scripts, no network), or the diff of two plans.

    Example: fleetplan report plan.json -s examples/hybrid-chat-batch.yaml

    The page shows the fleet and its pools, cost per hour and per 1M tokens (input + output),
    carbon (operational and embodied), each class's SLO against its simulated P99 with the
    simulation's 95% interval and the replica model's 80% error band, spot pools and spares, the
    split, the hourly plan and the frontier when there are ones, the replica
    model's accuracy per configuration, and every assumption with its source. With two plans:
    what changed from A to B and what it costs. Give --scenario and the data options
    (--catalog, --model-config, --store, --calibration) as they were given to solve.
    """
    from fleetplan.report.request import ReportRequest, write_requested

    request = ReportRequest(tuple(plans), frontier, str(scenario or ""))
    target = check_html_path(out) if out is not None else request.default_out()
    if out is None:
        check_output_path(target, "--out")
    check_no_overwrite([("--out", target)],
                       [*(("the plan", p) for p in plans), ("the --frontier", frontier),
                        *scenario_inputs(scenario, catalog=catalog, model_config=model_config,
                                         store=store, calibration=calibration)])
    # the scenario first, read as solve read it (its catalog, model_config; the data options):
    # a plan's configurations may name a GPU only that catalog knows
    sc = None
    if scenario is not None:
        sc = load_cli_scenario(scenario, catalog=catalog, model_config=model_config,
                               store=store, calibration=calibration)
        names = sc.data_context().catalog
    else:
        names = use_cli_context(catalog=catalog, model_config=model_config, store=store,
                                calibration=calibration).catalog
    write_requested(target, request, sc, names)
    typer.echo(f"report written to {target}", err=True)


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)
