"""Lint and type checks run with the tests, so interfaces cannot drift silently.

ruff lints the whole tree (package, tests, scripts, experiments, notebooks); mypy checks what
pyproject's ``[tool.mypy] files`` names: the package and experiments/ (whose scripts nothing
imports, so this is what tells a change in the package that it broke one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_ruff_is_clean() -> None:
    proc = _run("ruff", "check", "--no-cache", ".")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_mypy_is_clean() -> None:
    proc = _run("mypy")  # the files pyproject names
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
