"""Lint and type checks run with the tests, so interfaces cannot drift silently."""

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
    proc = _run("mypy", "fleetplan")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
