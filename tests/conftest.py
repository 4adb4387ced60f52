"""Shared fixtures: the measured data the repository ships, the optional full collections, a CLI runner.

The suite runs on a fresh clone with nothing beside it: what a test needs ships under
``tests/data/`` (see its README) or ``examples/``. The full collections (``../shared/data`` in the
development checkout, or ``$FLEETPLAN_SHARED_DIR/data``) feed optional extra checks only, which
are skipped with a reason when the folder is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FLEETPLAN_SHARED_DIR", ROOT.parent / "shared"))
IONET = SHARED / "data" / "ionet-vllm-0.8.5"
AZURE = SHARED / "data" / "azure-llm-inference-2023"
MEASURED = ROOT / "tests" / "data" / "ionet-vllm-0.8.5"  # shipped subset of IONET
AZURE_SAMPLE = ROOT / "examples" / "azure-conv-10min.csv"  # shipped first 10 min of AZURE


def pytest_addoption(parser: pytest.Parser) -> None:
    # Registered here (the root conftest) so that `pytest --skip-live` works from the repo root.
    parser.addoption("--skip-live", action="store_true",
                     help="skip the live vLLM test (also: FLEETPLAN_SKIP_LIVE=1)")


@pytest.fixture(scope="session")
def measured_dir() -> Path:
    """The shipped subset of the study's measured vLLM result files (always present)."""
    assert MEASURED.is_dir(), f"shipped fixture missing: {MEASURED}"
    return MEASURED


@pytest.fixture(scope="session")
def azure_sample() -> Path:
    """The shipped first ten minutes of the Azure conversation trace (always present)."""
    assert AZURE_SAMPLE.is_file(), f"shipped example missing: {AZURE_SAMPLE}"
    return AZURE_SAMPLE


@pytest.fixture(scope="session")
def ionet_dir() -> Path:
    """The full measured collection: optional extra checks only, skipped when absent."""
    if not IONET.is_dir():
        pytest.skip(f"optional check on the full measured collection: {IONET} not present "
                    "(set FLEETPLAN_SHARED_DIR to run it)")
    return IONET


@pytest.fixture(scope="session")
def azure_dir() -> Path:
    """The full Azure trace: optional extra checks only, skipped when absent."""
    if not AZURE.is_dir():
        pytest.skip(f"optional check on the full Azure trace: {AZURE} not present "
                    "(set FLEETPLAN_SHARED_DIR to run it)")
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
