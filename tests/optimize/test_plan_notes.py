"""What the terminal says under a plan: a few notes about the pools in it, all of them on request.

The rule (:mod:`fleetplan._notes`): by default at most three planner-level notes, each about the
plan as a whole or a pool in it, most important first; ``--verbose`` prints every note, and the
JSON carries every note (``notes``) with its topic, pools and level (``notes_detail``).
"""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan._notes import DETAIL, HEADLINE_LIMIT, PLAN, Note, headline, note_detail

ROOT = Path(__file__).resolve().parents[2]
CONFIG = re.compile(r"\b\d+x[A-Z][A-Za-z0-9-]*")  # a configuration named in a note

POOLS = ["1xH100-PCIe", "2xRTX-4090", "4xRTX-4090", "2xRTX-4090@EU27~spot"]
notes_st = st.lists(st.builds(
    lambda i, topic, pools, level, priority: Note(f"note {i}", topic, pools=pools, level=level,
                                                  priority=priority),
    st.integers(0, 99), st.sampled_from(["accuracy", "price", "other"]),
    st.lists(st.sampled_from(POOLS), max_size=2), st.sampled_from([PLAN, DETAIL]),
    st.integers(0, 100)), max_size=12)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(notes_st, st.sets(st.sampled_from(POOLS)))
def test_the_headline_is_the_most_important_planner_notes_about_the_pools_on_hand(
        notes: list[Note], on_hand: set[str]) -> None:
    chosen = headline(notes, on_hand)
    eligible = [n for n in notes if n.level == PLAN
                and (not n.pools or set(n.pools) & on_hand)]
    assert len(chosen) == min(HEADLINE_LIMIT, len(eligible))
    assert all(any(c is n for n in eligible) for c in chosen)
    assert [c.priority for c in chosen] == sorted(c.priority for c in chosen)
    left = [n for n in eligible if not any(n is c for c in chosen)]
    if chosen and left:  # nothing left out outranks what was shown
        assert min(n.priority for n in left) >= max(c.priority for c in chosen)


def test_a_note_is_a_string_and_keeps_its_fields_through_a_process_pool() -> None:
    n = Note("2xRTX-4090: spares", "reliability", pools=["2xRTX-4090"], level=PLAN, priority=4)
    back = pickle.loads(pickle.dumps(n))
    assert back == "2xRTX-4090: spares" and json.dumps([back]) == '["2xRTX-4090: spares"]'
    assert note_detail(back) == {"text": "2xRTX-4090: spares", "topic": "reliability",
                                 "pools": ["2xRTX-4090"], "level": "plan", "priority": 4}
    assert note_detail("plain")["level"] == "detail"  # a plain string: a detail note


def test_the_line_after_the_notes_counts_what_was_left_out() -> None:
    from fleetplan._notes import print_notes

    notes = [Note(f"about {i}", "accuracy", pools=["2xRTX-4090"], level=PLAN, priority=i)
             for i in range(5)]
    notes += ["how it was made", Note("unused", "price", pools=["8xRTX-4090"], level=PLAN)]
    lines: list[str] = []
    print_notes(lines.append, notes, {"2xRTX-4090"}, verbose=False)
    assert lines[:3] == ["note: about 0", "note: about 1", "note: about 2"]
    assert lines[3].startswith("(4 more notes, 2 of them about these pools; --verbose")
    lines.clear()
    print_notes(lines.append, notes, {"2xRTX-4090"}, verbose=True)
    assert lines == [f"note: {n}" for n in notes]


def _note_lines(text: str) -> list[str]:
    """The ``note: ...`` paragraphs of a table output (rich wraps long lines); the notes come
    last, then the "(N more notes ...)" line."""
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith("note: "):
            out.append(line[len("note: "):])
        elif line.startswith("("):
            break
        elif out:
            out[-1] += " " + line
    return out


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory, capacity_cache_dir: str):
    """The README quickstart's scenario (no fleet given) with shorter simulations, and at most
    one H100, so that its plan mixes an H100 with RTX 4090 servers, whose calibrations carry
    notes of their own."""
    data = yaml.safe_load((ROOT / "examples" / "hybrid-chat-batch.yaml").read_text())
    data["sim"] = {"duration_s": 120, "warmup_s": 20, "seed": 7, "replications": 2}
    data["candidates"] = [{"config": "1xH100-PCIe", "max_replicas": 1}, "2xRTX-4090",
                          "4xRTX-4090", "8xRTX-4090"]
    data.pop("fleet")
    path = tmp_path_factory.mktemp("notes") / "quick.yaml"
    path.write_text(yaml.safe_dump(data))
    mp = pytest.MonkeyPatch()
    mp.setenv("FLEETPLAN_CACHE_DIR", capacity_cache_dir)
    yield str(path)
    mp.undo()


def test_solve_prints_few_notes_about_the_plans_pools_and_all_on_request(cli,
                                                                         quickstart) -> None:
    res = cli("solve", quickstart, "--format", "json", "--no-timing")
    assert res.exit_code == 0, res.stderr
    plan = json.loads(res.stdout)
    in_plan = {e["config"] for e in plan["fleet"]}
    # the JSON carries every note, and the same notes with their fields
    assert [d["text"] for d in plan["notes_detail"]] == plan["notes"]
    assert len(plan["notes"]) > HEADLINE_LIMIT
    # notes about candidates the plan does not use exist (the MILP's inputs name them) ...
    assert any(set(CONFIG.findall(n)) - in_plan for n in plan["notes"])

    table = cli("solve", quickstart)
    assert table.exit_code == 0, table.stderr
    shown = _note_lines(table.stdout)
    assert 1 <= len(shown) <= HEADLINE_LIMIT, table.stdout
    for n in shown:  # ... but the default ones name only pools of the plan
        assert set(CONFIG.findall(n)) <= in_plan, (n, in_plan)
    rest = len(plan["notes"]) - len(shown)
    assert f"({rest} more notes" in table.stdout and "--verbose" in table.stdout
    # the capacity line is still there, with the plan's own figures
    assert "sustained capacity per replica at the SLO tier" in table.stdout

    verbose = cli("solve", quickstart, "--verbose")
    assert verbose.exit_code == 0, verbose.stderr
    flat = " ".join(verbose.stdout.split())
    assert all(" ".join(n.split()) in flat for n in plan["notes"])
    assert "more note" not in verbose.stdout


def test_simulate_prints_few_notes_and_all_with_verbose(cli, quickstart) -> None:
    args = ("simulate", quickstart, "--fleet", "1x1xH100-PCIe+2x2xRTX-4090", "--quiet")
    res = json.loads(cli(*args, "--format", "json").stdout)
    assert [d["text"] for d in res["notes_detail"]] == res["notes"]
    table = cli(*args)
    assert table.exit_code == 0, table.stderr
    shown = _note_lines(table.stdout)
    assert len(shown) <= HEADLINE_LIMIT < len(res["notes"])
    assert all(n.startswith("pool 2xRTX-4090@EU27") for n in shown), shown
    flat = " ".join(cli(*args, "--verbose").stdout.split())
    assert all(" ".join(n.split()) in flat for n in res["notes"])


def test_accuracy_notes_give_the_held_out_band_of_datasheet_predictions() -> None:
    from types import SimpleNamespace

    from fleetplan.optimize.plan_build import _accuracy_notes
    from fleetplan.scenario import load_scenario

    sc = load_scenario(ROOT / "examples" / "hybrid-chat-batch.yaml")  # the 14B model
    pools = [SimpleNamespace(config="1xH100-SXM", gpu="H100-SXM", market=None),
             SimpleNamespace(config="2xRTX-4090", gpu="RTX-4090", market=None)]
    uncal, flagged = _accuracy_notes(sc, pools)
    # an H100 SXM was never measured here, nor by the people whose runs data/external holds:
    # the errors of all their runs (data/spec_errors.json's external fold, judged
    # leave-one-dataset-out in docs/validation.md); measured = predicted / (1 + error)
    errors = json.loads((ROOT / "data" / "spec_errors.json").read_text())
    assert "H100-SXM" not in errors["folds"]["external"]
    q = errors["folds"]["external"]["all"]["ttft_p99_ms"]
    assert uncal.startswith("1xH100-SXM: latencies predicted from datasheets")
    assert f"real P99 TTFT was {1 / (1 + q['p90']):.2g}-{1 / (1 + q['p10']):.2g}x" in uncal
    assert "(docs/validation.md, other people's runs)" in uncal
    assert uncal.pools == ("1xH100-SXM",) and uncal.level == PLAN
    # the 14B 2 x RTX 4090 calibration left its 1 req/s run out (docs/validation.md)
    assert flagged.startswith("2xRTX-4090: near 1 req/s per replica expect a higher TTFT")
