"""``fleetplan report``: a plan as one self-contained HTML page, or the diff of two plans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from fleetplan.cli._format import check_no_overwrite, check_output_path, scenario_inputs
from fleetplan.cli._options import (
    CALIBRATION_OPTION,
    CATALOG_OPTION,
    MODEL_CONFIG_OPTION,
    STORE_OPTION,
)
from fleetplan.errors import InputError

REPORT_HELP = ("Also write the plan as one self-contained HTML page (fleetplan report, with "
               "the scenario's assumptions); infeasible plans too.")


def check_html_path(path: Path, option: str = "--out") -> Path:
    """``path``, when it names an HTML file that can be written (checked before any long
    computation: :func:`fleetplan.cli._format.check_output_path`)."""
    if path.suffix.lower() not in (".html", ".htm"):
        raise InputError(f"{option} {path}: the report is an HTML page; name it FILE.html")
    return check_output_path(path, option)


def write_plan_page(plan: dict[str, Any], path: Path, scenario: Any, scenario_path: Path,
                    plan_name: str) -> None:
    """``fleetplan solve --report``: the page of a plan just solved (its JSON contract)."""
    from fleetplan.report import plan_from_dict
    from fleetplan.report.render import write_report

    write_report(path, plan_from_dict(plan, plan_name), scenario=scenario,
                 scenario_path=str(scenario_path))
    typer.echo(f"report written to {path}", err=True)


def _out_path(out: Path | None, plans: list[Path]) -> Path:
    if out is None:
        if len(plans) == 1:
            return plans[0].with_suffix(".html")
        return plans[1].with_name(f"{plans[0].stem}-vs-{plans[1].stem}.html")
    return check_html_path(out)


def report_cmd(
    plans: list[Path] = typer.Argument(
        ..., help="A plan file (fleetplan solve --format json), or two (A then B) to diff.",
        metavar="PLAN [PLAN_B]"),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Where to write the page (default: the plan's name with "
        ".html; a diff: A-vs-B.html beside B)."),
    scenario: Path | None = typer.Option(
        None, "--scenario", "-s", help="The scenario the plan was solved from: states prices "
        "(with dates), power, grid intensity and embodied carbon with their sources, splits "
        "carbon into operational and embodied, and gives the model's accuracy per "
        "configuration. A diff prices each pool's change with it."),
    frontier: Path | None = typer.Option(
        None, "--frontier", help="A frontier file (fleetplan frontier --format json) to show "
        "beside the plan."),
    catalog: list[Path] | None = CATALOG_OPTION,
    model_config: list[Path] | None = MODEL_CONFIG_OPTION,
    store: Path | None = STORE_OPTION,
    calibration: Path | None = CALIBRATION_OPTION,
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
    from fleetplan.report import load_frontier, load_plan
    from fleetplan.report.render import write_diff, write_report

    if len(plans) > 2:
        raise InputError(f"report: {len(plans)} plan files given; give one (a report) or two "
                         "(a diff of A and B)")
    if len(plans) == 2 and frontier is not None:
        raise InputError("--frontier: a diff of two plans shows no frontier; report one plan")
    target = _out_path(out, plans)
    if out is None:
        check_output_path(target, "--out")
    check_no_overwrite([("--out", target)],
                       [*(("the plan", p) for p in plans), ("the --frontier", frontier),
                        *scenario_inputs(scenario, catalog=catalog, model_config=model_config,
                                         store=store, calibration=calibration)])
    # the scenario first, read as solve read it (its catalog, model_config; the data options):
    # a plan's configurations may name a GPU only that catalog knows
    from fleetplan.cli._options import load_cli_scenario, use_cli_context

    sc = None
    if scenario is not None:
        sc = load_cli_scenario(scenario, catalog=catalog, model_config=model_config,
                               store=store, calibration=calibration)
    else:
        use_cli_context(catalog=catalog, model_config=model_config, store=store,
                        calibration=calibration)
    docs = [load_plan(p) for p in plans]
    if len(docs) == 1:
        fr = load_frontier(frontier) if frontier is not None else None
        write_report(target, docs[0], scenario=sc, scenario_path=str(scenario or ""),
                     frontier=fr)
    else:
        write_diff(target, docs[0], docs[1], scenario=sc, scenario_path=str(scenario or ""))
    typer.echo(f"report written to {target}", err=True)


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)
