"""A refactoring guard (issue 40: "behaviour unchanged"): the bundled examples' plan, simulation,
report and validation outputs stay byte-identical while the house is rebuilt.

These files are not a statement of what is right: they record what the product printed at
the commit that wrote them, so a refactor that claims to change nothing can be held to it.
A change that is *meant* to move a figure (a new model, a fixed bug) regenerates them on
purpose and says so in its commit:

    FLEETPLAN_REGEN_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py --skip-live

Only `solver.seconds` (wall time) is left out, via `--no-timing`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "golden"
EXAMPLES = ("hybrid-chat-batch", "azure-trace", "hybrid-churn")
REGEN = os.environ.get("FLEETPLAN_REGEN_GOLDEN") == "1"


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if REGEN:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"{path} missing: regenerate with FLEETPLAN_REGEN_GOLDEN=1"
    want = path.read_text(encoding="utf-8")
    if text != want:
        got_lines, want_lines = text.splitlines(), want.splitlines()
        pairs = zip(got_lines, want_lines, strict=False)  # the shorter text may end first
        first = next((i for i, (a, b) in enumerate(pairs) if a != b),
                     min(len(got_lines), len(want_lines)))
        got = got_lines[first] if first < len(got_lines) else "<end>"
        old = want_lines[first] if first < len(want_lines) else "<end>"
        pytest.fail(f"{name} changed at line {first + 1}:\n  was: {old[:300]}\n  now: {got[:300]}")


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_outputs_unchanged(example: str, cli, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # relative paths, so no machine's folder enters the outputs
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path / "cache"))
    scenario = f"examples/{example}.yaml"
    plan = tmp_path / "plan.json"
    solved = cli("solve", scenario, "--format", "json", "--no-timing", "--out", str(plan))
    assert solved.exit_code == 0, solved.stderr
    _check(f"{example}.solve.json", solved.stdout)
    assert plan.read_text(encoding="utf-8") == solved.stdout

    simulated = cli("simulate", scenario, "--plan", str(plan), "--format", "json")
    assert simulated.exit_code == 0, simulated.stderr
    _check(f"{example}.simulate-plan.json", simulated.stdout)

    html = tmp_path / "plan.html"
    reported = cli("report", str(plan), "-s", scenario, "-o", str(html))
    assert reported.exit_code == 0, reported.stderr
    _check(f"{example}.report.html", html.read_text(encoding="utf-8"))


def test_scenario_fleet_simulation_unchanged(cli, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path / "cache"))
    simulated = cli("simulate", "examples/hybrid-chat-batch.yaml", "--format", "json")
    assert simulated.exit_code == 0, simulated.stderr
    _check("hybrid-chat-batch.simulate.json", simulated.stdout)


def test_validation_unchanged(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path / "cache"))
    validated = cli("validate", "--format", "json")
    assert validated.exit_code == 0, validated.stderr
    _check("validate.json", validated.stdout)
