"""Ctrl-C ends any command with one line naming it and exit 130 (not typer's silent 130), and a
click usage error is one line too, not click's usage block (issue 16)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _interrupt_simulate(tmp_path: Path, scenario: Path, out: Path,
                        after_s: float) -> tuple[int, str, str]:
    cmd = [sys.executable, "-c", "from fleetplan.cli.app import run; run()", "simulate",
           str(scenario), "--format", "json", "--plot", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, start_new_session=True)  # its own process group
    time.sleep(after_s)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
    stdout, stderr = proc.communicate(timeout=60)
    return proc.returncode, stdout, stderr


def test_ctrl_c_during_a_long_simulate_is_one_line_and_exit_130(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "hybrid-chat-batch.yaml").read_text()
    sim = "sim: {duration_s: 300, warmup_s: 30, seed: 7, replications: 3}"
    assert sim in text
    scenario = tmp_path / "long.yaml"  # hours of simulated traffic: still running at the signal
    scenario.write_text(text.replace(sim, "sim: {duration_s: 500000, warmup_s: 30, seed: 7}"))
    out = tmp_path / "plot.png"
    # The signal must reach the command while it simulates, not while Python still imports
    # (about 2 s on an idle 2-core machine, several times that on a busy one): a Ctrl-C during
    # the imports is Python's own. So the signal comes after 2.5 s and, if the command had not
    # yet started simulating, again in a fresh process after twice as long; a handler that is
    # broken fails at every delay.
    for after_s in (2.5, 5.0, 10.0, 20.0):
        code, stdout, stderr = _interrupt_simulate(tmp_path, scenario, out, after_s)
        if "during simulate" in stderr:
            break
    assert code == 130, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("fleetplan: interrupted") and "during simulate" in lines[0]
    assert stdout == "" and not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["long.yaml"]  # no temp file left


def test_an_option_out_of_its_range_is_one_line_not_a_usage_block(cli: Any) -> None:
    r = cli("bench", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--num-prompts", "0")
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1 and "Usage:" not in r.stderr, r.stderr
    assert r.stderr.startswith("fleetplan: error: ") and "--num-prompts" in r.stderr
    assert "fleetplan bench --help" in r.stderr  # where the options are described


def test_a_missing_argument_and_an_unknown_option_are_one_line(cli: Any) -> None:
    for args, fragment in ((("simulate",), "Missing argument"),
                           (("simulate", "x.yaml", "--no-such"), "--no-such"),
                           (("--no-such",), "--no-such")):
        r = cli(*args)
        assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.stderr
        assert fragment in r.stderr and "Usage:" not in r.stderr, r.stderr


def test_help_still_prints_the_usage(cli: Any) -> None:
    r = cli("simulate", "--help")
    assert r.exit_code == 0 and r.stdout.startswith("Usage: fleetplan simulate")
    assert cli("--help").exit_code == 0


def test_ctrl_c_names_the_library_step_it_interrupted(cli: Any, tmp_path: Path,
                                                      monkeypatch: Any) -> None:
    import fleetplan.replica.calibrate as calibrate

    def interrupted(job: Any) -> Any:  # as if Ctrl-C came during the first fit
        raise KeyboardInterrupt

    monkeypatch.setattr(calibrate, "_fit_job", interrupted)
    out = tmp_path / "cal.json"
    r = cli("calibrate", "--jobs", "1", "--out", str(out), "--quiet")
    assert r.exit_code == 130 and r.stderr.count("\n") == 1, r.stderr
    assert "interrupted (Ctrl-C) during calibrate (configuration fits)" in r.stderr
    assert not out.exists()
