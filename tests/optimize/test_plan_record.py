"""One plan record (issue 40): what solve writes, the report reads and simulate --plan replays is
the same :class:`Plan`, its JSON read back unchanged; the planning commands' typed requests
refuse bad options in the library, as a notebook user meets them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fleetplan.errors import InputError
from fleetplan.optimize.frontier import Sweep
from fleetplan.optimize.plan import Plan, PlanStatus, load_plan
from fleetplan.optimize.requests import FrontierRequest, SimulateRequest, SolveRequest
from fleetplan.report.plan_file import PlanDoc
from fleetplan.report.request import ReportRequest

DATA = Path(__file__).resolve().parents[1] / "report" / "data"
SOLVED = sorted((DATA / "solved").glob("*.plan.json"))


@pytest.mark.parametrize("path", SOLVED, ids=lambda p: p.name)
def test_a_plan_file_reads_back_to_the_same_json(path: Path) -> None:
    # files solve wrote (optimal, diurnal, on-demand, spot, --confidence, infeasible): the
    # record writes back exactly the fields and values it read
    raw = json.loads(path.read_text(encoding="utf-8"))
    plan = load_plan(path)
    assert json.loads(json.dumps(plan.to_dict())) == raw
    assert plan.source == str(path)


def test_notes_keep_their_topic_unless_their_text_was_edited() -> None:
    raw = json.loads((DATA / "solved" / "spot.plan.json").read_text(encoding="utf-8"))
    first = raw["notes_detail"][0]
    assert (first["topic"], first["level"]) == ("accuracy", "plan")  # as solve wrote it
    assert Plan.from_dict(raw).to_dict()["notes_detail"][0] == first
    raw["notes"][0] = "edited by hand"
    assert Plan.from_dict(raw).to_dict()["notes_detail"][0] == {
        "text": "edited by hand", "topic": "other", "pools": [], "level": "detail",
        "priority": 100}
    raw["notes"][1] = raw["notes_detail"][1]["text"]
    raw["notes_detail"][1]["priority"] = -3
    with pytest.raises(InputError, match=r"notes_detail\[1\]\.priority = -3: expected a whole "
                                         "number >= 0"):
        Plan.from_dict(raw, "p.json")


def test_the_report_and_the_library_share_the_record() -> None:
    assert PlanDoc is Plan
    plan = load_plan(DATA / "hybrid-chat-batch.plan.json")
    assert isinstance(plan, Plan) and plan.status is PlanStatus.optimal


def test_a_replay_keys_an_older_split_by_the_pool_it_names() -> None:
    # the older shape: one pool per (configuration, region), split keyed by configuration
    plan = load_plan(DATA / "hybrid-chat-batch.v1.plan.json")
    assert [c.split for c in plan.classes] == [{"1xH100-PCIe": 1.0}, {"2xRTX-4090": 1.0}]
    assert not plan.tiered
    replay = plan.for_replay()
    assert [c.split for c in replay.classes] == [{"1xH100-PCIe@EU27": 1.0},
                                                 {"2xRTX-4090@EU27": 1.0}]
    assert replay.fleet == plan.fleet


def test_an_infeasible_plan_is_read_but_never_replayed() -> None:
    path = DATA / "solved" / "infeasible.plan.json"
    plan = load_plan(path)
    assert plan.status is PlanStatus.infeasible and plan.fleet == ()
    with pytest.raises(InputError, match=rf"^{path}: status = \"infeasible\": the plan has no "
                                         "fleet to simulate$"):
        plan.for_replay()


def test_without_timing_leaves_only_the_solver_seconds_out() -> None:
    raw = json.loads((DATA / "solved" / "hcb.plan.json").read_text(encoding="utf-8"))
    raw["solver"]["seconds"] = 1.25
    plan = Plan.from_dict(raw)
    assert plan.solver.seconds == 1.25
    assert plan.without_timing().to_dict() == {**raw, "solver": {**raw["solver"],
                                                                 "seconds": None}}
    assert plan.to_dict(timing=False) == plan.without_timing().to_dict()


@pytest.mark.parametrize("make, words", [
    (lambda: SolveRequest(plot_kind="pie"), "--plot-kind: plot kind 'pie': expected latency"),
    (lambda: SolveRequest(confidence=1.0), "--confidence 1: expected a probability in (0, 1)"),
    (lambda: SolveRequest(max_rounds=0), "--max-rounds 0: expected 1..50"),
    (lambda: SimulateRequest(fleet="1x1xH100-PCIe", plan=Path("p.json")),
     "--plan and --fleet: give one"),
    (lambda: SimulateRequest(plot_kind="hours"), "--plot-kind: plot kind 'hours': expected "
     "latency or fleet"),
    (lambda: FrontierRequest(Sweep.carbon, lo=math.inf), "--lo inf: a sweep end is a finite"),
    (lambda: FrontierRequest(Sweep.rate, hi=math.nan), "--hi nan: a sweep end is a finite"),
    (lambda: FrontierRequest(Sweep.rate, points=0), "--points 0: expected 1..10000"),
    (lambda: ReportRequest((Path("a"), Path("b"), Path("c"))), "report: 3 plan files given"),
    (lambda: ReportRequest((Path("a"), Path("b")), frontier=Path("f.json")),
     "--frontier: a diff of two plans shows no frontier"),
])
def test_a_request_refuses_a_bad_option_in_one_line(make, words: str) -> None:
    with pytest.raises(InputError) as err:
        make()
    assert str(err.value).startswith(words) and "\n" not in str(err.value)


def test_an_hourly_plot_of_a_one_hour_plan_is_refused_before_anything_is_written() -> None:
    plan = load_plan(DATA / "hybrid-chat-batch.plan.json")
    with pytest.raises(InputError, match="plot kind 'hours' needs a diurnal plan"):
        SolveRequest(plot_kind="hours").check_plan(plan)
    SolveRequest(plot_kind="hours").check_plan(load_plan(DATA / "solved" / "diurnal.plan.json"))


def test_a_report_request_names_its_page_after_its_plans() -> None:
    assert ReportRequest((Path("x/plan.json"),)).default_out() == Path("x/plan.html")
    assert ReportRequest((Path("a.json"), Path("y/b.json"))).default_out() == Path("y/a-vs-b.html")
