"""What ``fleetplan frontier`` prints and draws: the swept quantity's columns, one word per
outcome shared by the table and the plot, fleet labels that name spot and the tier, headers that
never wrap at 80 columns. The frontier here is made of hand-built plans (no solve runs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fleetplan.optimize.frontier import Frontier, FrontierPoint, Sweep
from fleetplan.optimize.plan import ClassResult, FleetEntry, Plan, PlanStatus, SolverReport

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "hybrid-chat-batch.yaml")
SOLVER = SolverReport("cbc", "optimal", None, 0.01, 1, 10.0)


def _plan(scale: float, *, verified: bool = True, feasible: bool = True) -> Plan:
    if not feasible:
        return Plan(PlanStatus.infeasible, (), None, None, None, (), SOLVER, False, "no plan")
    chat, batch = 150 * scale, 2000 * scale
    fleet = (FleetEntry("1xH100-SXM", 2, "EU27", chat),
             FleetEntry("1xH100-SXM", 3, "EU27", batch),
             FleetEntry("1xRTX-4090", 4, "EU27", batch, market="spot"))
    classes = (ClassResult("chat", 4.0, chat, chat * 0.8, verified, {fleet[0].pool: 1.0}),
               ClassResult("batch", 6.0, batch, batch * 0.5, True,
                           {fleet[1].pool: 0.5, fleet[2].pool: 0.5}))
    return Plan(PlanStatus.optimal, fleet, 9.0 / scale, 0.3 / scale, 20.0 * scale, classes,
                SOLVER, verified)


def _frontier(sweep: Sweep) -> Frontier:
    plans = [(0.5, _plan(0.5, feasible=False)), (0.75, _plan(0.75, verified=False)),
             (1.0, _plan(1.0)), (2.0, _plan(2.0))]
    return Frontier(sweep, "p", "u", tuple(FrontierPoint(v, p, p.verified) for v, p in plans))


def _table(out: str) -> tuple[list[str], list[list[str]]]:
    """The header cells and each row's first cells (split on 2+ spaces) of the table."""
    lines = out.splitlines()
    rule = next(i for i, ln in enumerate(lines) if set(ln.strip()) == {"─"})
    head = re.split(r"\s{2,}", lines[rule - 1].strip())
    rows = [re.split(r"\s{2,}", ln.strip()) for ln in lines[rule + 1:]
            if ln.strip() and re.match(r"\s*[\d.]+\s", ln)]
    return head, rows


@pytest.mark.parametrize("sweep, swept", [
    (Sweep.carbon, ["cap g/Mtok", "g/Mtok"]), (Sweep.slo, ["SLO x", "SLOs ms"]),
    (Sweep.rate, ["rate x", "req/s"]), (Sweep.confidence, ["confidence"]),
    (Sweep.churn, ["failures/h"])])
def test_the_table_shows_the_swept_quantitys_columns_and_the_plot_its_outcomes(
        cli, monkeypatch, tmp_path, sweep: Sweep, swept: list[str]) -> None:
    shown = _frontier(sweep)
    monkeypatch.setattr("fleetplan.cli.frontier_cmd.run_frontier", lambda *a, **k: shown)
    monkeypatch.setenv("COLUMNS", "80")
    png = tmp_path / "f.png"
    res = cli("frontier", EXAMPLE, "--sweep", sweep.value, "--plot", str(png))
    assert res.exit_code == 0, res.stderr
    head, rows = _table(res.stdout)
    assert head == [*swept, "outcome", "$/h", "$/Mtok", "pareto", "fleet"], res.stdout
    assert all(len(ln) <= 80 for ln in res.stdout.splitlines())
    # no header wraps: the line under the header row is the rule, the one above is blank
    lines = res.stdout.splitlines()
    rule = next(i for i, ln in enumerate(lines) if set(ln.strip()) == {"─"})
    assert not lines[rule - 2].strip()
    outcomes = [r[len(swept)] for r in rows]
    assert outcomes == ["infeasible", "not verified", "verified", "verified"], rows
    # the plot draws the verified points only and names the others in the table's words
    ax = shown.plot()
    assert "not shown: 1 infeasible point, 1 not verified point" in ax.get_title()
    assert "infeasible" not in ax.get_title().replace("1 infeasible point", "")
    drawn = sum(len(line.get_xdata()) for line in ax.get_lines()) + sum(
        len(c.get_offsets()) for c in ax.collections)
    assert drawn == 2


def test_fleet_labels_name_spot_and_the_tier_and_the_slo_axis_every_class() -> None:
    f = _frontier(Sweep.slo)
    label = f.to_frame()["label"].tolist()[2]
    assert label == ("2x1xH100-SXM/150ms + 3x1xH100-SXM/2000ms + 4x1xRTX-4090 spot/2000ms")
    ax = f.plot()
    assert ax.get_legend().get_title().get_text().startswith("fleet: replicas x configuration/")
    # a long fleet is drawn one pool per line (the same words as the table's label)
    assert label.replace(" + ", "\n+ ") in [t.get_text() for t in ax.texts]
    xlabel = ax.get_xlabel()
    assert "every class" in xlabel and "chat 150 ms" in xlabel and "batch 2000 ms" in xlabel
    assert f.to_dict()["points"][1]["outcome"] == "not verified"


def test_a_frontier_in_one_region_other_than_the_default_names_it() -> None:
    """Candidates in EU27 and FRA, every plan in FRA: the labels named no region, as if the
    pools were the default EU27's; they name FRA. A frontier all in EU27 stays as it was."""
    from dataclasses import replace

    def moved(p: Plan) -> Plan:
        return replace(p, fleet=tuple(replace(e, region="FRA") for e in p.fleet))

    f = _frontier(Sweep.carbon)
    fra = Frontier(f.sweep, f.parameter, f.unit,
                   tuple(replace(pt, plan=moved(pt.plan)) for pt in f.points))
    assert fra.to_frame()["label"].tolist()[2] == (
        "2x1xH100-SXM@FRA/150ms + 3x1xH100-SXM@FRA/2000ms + 4x1xRTX-4090@FRA spot/2000ms")
    assert "@" not in f.to_frame()["label"].tolist()[2]


@pytest.mark.parametrize("args,words", [
    (["--sweep", "slo", "--hi", "inf"], "--hi inf: a sweep end is a finite number"),
    (["--sweep", "carbon", "--lo", "nan"], "--lo nan: a sweep end is a finite number"),
    (["--sweep", "rate", "--hi", "1e308"], "sweep factor 1e+308 (--lo / --hi) scales the rates"),
    (["--sweep", "slo", "--hi", "1e300"], "sweep factor 1e+300 (--lo / --hi) scales the SLOs"),
])
def test_a_sweep_end_out_of_range_is_blamed_on_the_option_not_the_scenario(
        cli, args, words) -> None:
    r = cli("frontier", str(EXAMPLE), "--points", "2", *args)
    assert r.exit_code == 2
    errors = [line for line in r.stderr.splitlines() if line.startswith("fleetplan: error:")]
    assert len(errors) == 1 and words in errors[0], r.stderr
