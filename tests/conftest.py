"""Shared fixtures: where the measured data live, a CLI runner."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FLEETPLAN_SHARED_DIR", ROOT.parent / "shared"))
IONET = SHARED / "data" / "ionet-vllm-0.8.5"
AZURE = SHARED / "data" / "azure-llm-inference-2023"


def pytest_addoption(parser: pytest.Parser) -> None:
    # Registered here (the root conftest) so that `pytest --skip-live` works from the repo root.
    parser.addoption("--skip-live", action="store_true",
                     help="skip the live vLLM test (also: FLEETPLAN_SKIP_LIVE=1)")


@pytest.fixture(scope="session")
def ionet_dir() -> Path:
    if not IONET.is_dir():
        pytest.fail(f"measured data not found at {IONET} (set FLEETPLAN_SHARED_DIR)")
    return IONET


@pytest.fixture(scope="session")
def azure_dir() -> Path:
    if not AZURE.is_dir():
        pytest.fail(f"Azure trace not found at {AZURE} (set FLEETPLAN_SHARED_DIR)")
    return AZURE


class CliResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.exit_code, self.stdout, self.stderr = code, out, err


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run ``fleetplan ARGS`` in-process; returns exit code, stdout, stderr."""
    from fleetplan.cli.app import main

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as exc:  # typer/click may exit directly
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run
