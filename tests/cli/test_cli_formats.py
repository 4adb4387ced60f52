"""What each command's help offers is what it does: --format choices, example paths, units.

Every ``--format`` names in its help exactly the formats the option accepts, and a format it
accepts gives that format (CSV parses as CSV, with the JSON's figures); every ``examples/...``
path a help names exists; per-token figures say they count prompt + output tokens.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from fleetplan.cli.app import COMMANDS, load_command

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ("table", "csv", "json", "markdown")
MODEL = "DeepSeek-R1-Distill-Qwen-14B"
HYBRID = str(ROOT / "examples" / "hybrid-chat-batch.yaml")


# (typer builds its commands with its own copy of click: duck typing, not isinstance)


def _commands() -> list[tuple[tuple[str, ...], Any]]:
    out: list[tuple[tuple[str, ...], Any]] = []
    for name in COMMANDS:
        cmd = load_command(name)
        if hasattr(cmd, "commands"):  # a group (cache info, cache clear)
            out += [((name, sub), c) for sub, c in cmd.commands.items()]
        else:
            out.append(((name,), cmd))
    return out


def _format_option(cmd: Any) -> Any:
    return next((p for p in cmd.params if "--format" in getattr(p, "opts", ())), None)


def _choices(path: tuple[str, ...], cli: Any) -> set[str] | None:
    """The choices ``--help`` shows for ``--format`` (``<table|csv|json>``); None: free text."""
    m = re.search(r"--format <([^>]+)>", cli(*path, "--help").stdout)
    assert m, path
    return set(m[1].split("|")) if "|" in m[1] else None


WITH_FORMAT = [(path, cmd) for path, cmd in _commands() if _format_option(cmd) is not None]


@pytest.mark.parametrize("path, cmd", WITH_FORMAT, ids=[" ".join(p) for p, _ in WITH_FORMAT])
def test_format_help_names_exactly_the_choices_offered(path: tuple[str, ...], cmd: Any,
                                                       cli: Any) -> None:
    opt = _format_option(cmd)
    assert opt is not None and opt.help
    named = {w for w in re.findall(r"[a-z]+", opt.help) if w in FORMATS}
    offered = _choices(path, cli)
    if offered is not None:
        assert named == offered, (path, opt.help, offered)
    else:  # free text, checked by the command itself (bench): see the test below
        assert named, (path, opt.help)


def test_a_free_text_format_refuses_what_its_help_does_not_name(cli: Any) -> None:
    free = [p for p, _c in WITH_FORMAT if _choices(p, cli) is None]
    assert free == [("bench",)]  # the others are choices, refused by the parser
    res = cli("bench", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--format", "csv")
    assert res.exit_code == 2 and "table or json" in res.stderr


def test_every_example_path_named_in_a_help_exists(cli: Any) -> None:
    texts = [cli("--help").stdout]
    for path, _cmd in _commands():
        res = cli(*path, "--help")
        assert res.exit_code == 0, (path, res.stderr)
        texts.append(res.stdout)
    named = set(re.findall(r"examples/[\w./-]*\w", "\n".join(texts)))
    assert named, "no help names an example"
    assert sorted(p for p in named if not (ROOT / p).is_file()) == []


def _csv(text: str) -> list[dict[str, str]]:
    assert "┃" not in text and "│" not in text, "a table, not CSV"
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and all(None not in r for r in rows)
    return rows


def test_predict_csv_has_the_json_figures(cli: Any) -> None:
    base = ("predict", "-m", MODEL, "-c", "1xH100-PCIe", "--rate", "16", "--seeds", "1")
    res = cli(*base, "--format", "csv")
    assert res.exit_code == 0, res.stderr
    rows = _csv(res.stdout)
    assert list(rows[0]) == ["metric", "mean", "std"]
    metrics = json.loads(cli(*base, "--format", "json").stdout)["metrics"]
    assert {r["metric"] for r in rows} == set(metrics)
    for r in rows:
        assert float(r["mean"]) == pytest.approx(metrics[r["metric"]]["mean"], rel=1e-5)


def test_predict_steady_csv_has_the_json_figures(cli: Any) -> None:
    base = ("predict", "-m", MODEL, "-c", "1xH100-PCIe", "--rate", "4", "--steady")
    res = cli(*base, "--format", "csv")
    assert res.exit_code == 0, res.stderr
    rows = {r["metric"]: r["value"] for r in _csv(res.stdout)}
    out = json.loads(cli(*base, "--format", "json").stdout)
    assert float(rows["ttft_p99_ms"]) == pytest.approx(out["ttft_p99_ms"], rel=1e-5)
    assert rows["status"] == out["status"]


def _table_rows(text: str, title: str) -> list[dict[str, str]]:
    """The rows of the rich table titled ``title`` (one line per row at the 160-column width)."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == title)
    head = [c.strip() for c in lines[start + 2].strip().strip("┃").split("┃")]
    rows = []
    for ln in lines[start + 4:]:
        if not ln.startswith("│"):
            break
        rows.append(dict(zip(head, (c.strip() for c in ln.strip().strip("│").split("│")),
                             strict=True)))
    return rows


def test_simulate_pools_show_engine_busy_share_beside_the_load(cli: Any) -> None:
    args = ("simulate", HYBRID, "--replications", "1")
    res = cli(*args)
    assert res.exit_code == 0, res.stderr
    pools = _table_rows(res.stdout, "Pools")
    assert pools and "utilization" not in pools[0]
    out = json.loads(cli(*args, "--format", "json").stdout)
    for row, p in zip(pools, out["pools"], strict=True):
        assert row["engine_busy"] == f"{p['utilization']:.2f}"
        assert row["done_rps_per_replica"] == f"{p['completed_rps'] / p['count']:.2f}"
    assert "not a share of capacity" in res.stdout
    # per-token figures say what they count
    assert "/Mtok (in+out)" in res.stdout
    assert not re.search(r"/Mtok(?! \(in\+out\))", res.stdout)


@pytest.mark.parametrize("command", ["solve", "simulate", "frontier"])
def test_help_says_per_mtok_counts_prompt_and_output(cli: Any, command: str) -> None:
    text = " ".join(cli(command, "--help").stdout.split())
    assert "Mtok count prompt + output tokens" in text


def test_a_table_wider_than_the_terminal_loses_nothing(capsys: Any, monkeypatch: Any) -> None:
    """A frontier of a several-model scenario names pools of 40 characters; at 80 columns
    (not a terminal) rich cropped each line at the edge, printing 'fleet' cells without their
    middle ('1xQwen2.5-14B-Instruct' then '80GB/500ms') and captions cut mid-word. A table
    that cannot fold to the width is printed at its own."""
    import pandas as pd

    from fleetplan.cli._format import emit_table

    monkeypatch.setenv("COLUMNS", "80")
    fleet = ("1xQwen2.5-14B-Instruct/1xA100-80GB/500ms + "
             "2xQwen2.5-14B-Instruct/1xH100-PCIe/3000ms")
    caption = ("cap g/Mtok: the point's carbon cap; g/Mtok: its plan's simulated carbon. Each "
               "point: MILP + simulation of the plan.")
    df = pd.DataFrame([{"cap g/Mtok": 5.294, "g/Mtok": 4.5, "outcome": "not verified",
                        "$/h": 6.4, "$/Mtok": 0.089, "pareto": "", "fleet": fleet}])
    emit_table(df, fit=True, title="Frontier", caption=caption)
    out = capsys.readouterr().out
    # the fleet column, read down its lines, is the label whole
    start = next(ln for ln in out.splitlines() if "fleet" in ln).index("fleet")
    column = "".join(ln[start:].strip() for ln in out.splitlines()
                     if ln[start:].strip() and "fleet" not in ln
                     and not ln.strip().startswith(("\u2500", "cap g/Mtok:", "simulation")))
    assert column.replace(" ", "").startswith(fleet.replace(" ", ""))
    assert all(w in out.split() for w in caption.split())  # no word cut at the edge
    # a table that fits keeps the terminal's width
    emit_table(pd.DataFrame([{"a": 1, "fleet": "short"}]), fit=True, title="t")
    assert max(len(ln) for ln in capsys.readouterr().out.splitlines()) <= 80
    # rich lays some tables out a few characters wider than their measured minimum (an SLO
    # sweep's table: 82 measured, 85 rendered, 'tpot80ms' printed as 'tpot80'): the width
    # is the widest line the table renders to
    label = "1x1xH100-PCIe/1600ms-tpot80ms + 3x2xRTX-4090/3000ms"
    df = pd.DataFrame([{"SLO x": 1.0, "SLOs ms": "800 / 3000", "outcome": "verified",
                        "$/h": 3.5, "$/Mtok": 0.082, "pareto": "yes", "fleet": label}])
    emit_table(df, fit=True, title="Frontier", caption=caption * 2)
    out = capsys.readouterr().out
    assert "1x1xH100-PCIe/1600ms-tpot80ms" in out.split()
    assert all(w in out.split() for w in caption.split())
