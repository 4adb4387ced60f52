"""What the CLI does when its standard output cannot take what it prints: the shell closed it
(``>&-``), or the reader left (``| head -c 10``). One line or a quiet exit, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cmd() -> list[str]:
    exe = Path(sys.executable).with_name("fleetplan")
    return [str(exe)] if exe.exists() else [sys.executable, "-c",
                                            "from fleetplan.cli.app import run; run()"]


@pytest.mark.skipif(os.name != "posix", reason="closing a child's stdout needs POSIX")
@pytest.mark.parametrize("args", [
    ["schema"],
    ["profiles", "--model", "DeepSeek-R1-Distill-Qwen-14B"],  # a table
    ["profiles", "--model", "DeepSeek-R1-Distill-Qwen-14B", "--format", "json"],
])
def test_a_closed_stdout_is_one_line_and_exit_2(args: list[str]) -> None:
    proc = subprocess.run([*_cmd(), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=120, preexec_fn=lambda: os.close(1))
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == ["fleetplan: error: standard output is closed"]
    assert proc.returncode == 2


@pytest.mark.skipif(os.name != "posix", reason="pipes and SIGPIPE as on POSIX")
@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_reader_that_leaves_early_ends_the_command_quietly_with_exit_0(fmt: str) -> None:
    # `fleetplan solve S | head -c 10` where head has its 10 bytes before the table comes: the
    # reader's end is closed before the command writes (its start-up alone takes longer)
    proc = subprocess.Popen([*_cmd(), "profiles", "--format", fmt], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert "Traceback" not in err and "error" not in err, err
    assert code == 0, (code, err)


def test_every_console_on_stdout_is_one_whose_reader_may_leave() -> None:
    # rich's own Console exits 1 when the reader leaves; the CLI's stdout consoles come from
    # fleetplan.cli._format.stdout_console (those on stderr and the one that only measures the
    # terminal's width are rich's own)
    import re

    bad = []
    for path in sorted((ROOT / "fleetplan").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in re.finditer(r"(?<![\w.])Console\(([^()]*)\)", line):
                if "stderr=True" not in m.group(1) and not (
                        m.group(1) == "" and line[m.end():].startswith(".width")):
                    bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bad, bad


def test_a_library_warning_is_one_line_without_its_source(monkeypatch, capsys) -> None:
    import warnings

    import numpy as np

    from fleetplan.cli import app as app_mod

    def noisy(**_kw: object) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            np.mean(np.array([]))  # numpy: "Mean of empty slice", and its source line

    monkeypatch.setattr(app_mod, "app", noisy)
    assert app_mod.main(["anything"]) == 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines and all(line.startswith("fleetplan: warning: ") for line in lines), lines
    assert any("Mean of empty slice (RuntimeWarning)" in line for line in lines), lines
