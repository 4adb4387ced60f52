"""Shared fixtures: shipped measured data, the optional full collections, a CLI runner, live prep.

The suite runs on a fresh clone with nothing beside it: what a test needs ships under
``tests/data/`` (see its README) or ``examples/``. The full collections (``../shared/data`` in the
development checkout, or ``$FLEETPLAN_SHARED_DIR/data``) feed optional extra checks only, which
are skipped with a reason when the folder is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from script_modules import load_file

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FLEETPLAN_SHARED_DIR", ROOT.parent / "shared"))
IONET = SHARED / "data" / "ionet-vllm-0.8.5"
AZURE = SHARED / "data" / "azure-llm-inference-2023"
MEASURED = ROOT / "tests" / "data" / "ionet-vllm-0.8.5"  # shipped subset of IONET
AZURE_SAMPLE = ROOT / "examples" / "azure-conv-10min.csv"  # shipped first 10 min of AZURE
_LIVE_PREP = pytest.StashKey[tuple[Path, subprocess.Popen[bytes]]]()


def _load_prepare() -> Any:
    """``tests/live/prepare.py`` (stdlib only, cheap), which starts the live test's server."""
    return load_file("fleetplan_live_prepare", ROOT / "tests" / "live" / "prepare.py")


_prepare = _load_prepare()


def pytest_addoption(parser: pytest.Parser) -> None:
    # Registered here (the root conftest) so that `pytest --skip-live` works from the repo root.
    parser.addoption("--skip-live", action="store_true",
                     help="skip the live vLLM test (also: FLEETPLAN_SKIP_LIVE=1)")


def _skip_live_requested(config: pytest.Config) -> bool:
    return bool(config.getoption("--skip-live")) or \
        os.environ.get("FLEETPLAN_SKIP_LIVE", "") not in ("", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    live = [item for item in items if "live" in item.keywords]
    if _skip_live_requested(config):
        mark = pytest.mark.skip(reason="live vLLM test skipped on request (FLEETPLAN_SKIP_LIVE / "
                                "--skip-live)")
        for item in live:
            item.add_marker(mark)
        return
    # live tests last: nothing else in this run competes with their measurement
    items[:] = [item for item in items if "live" not in item.keywords] + live


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start preparing the live test's server now, so it overlaps the unit tests."""
    config = session.config
    if hasattr(config, "workerinput") or _skip_live_requested(config) \
            or config.option.collectonly or _prepare.STATE_ENV in os.environ \
            or not any("live" in item.keywords for item in session.items):
        return  # (an xdist worker's live_setup fixture starts it itself)
    state_dir = Path(tempfile.mkdtemp(prefix="fleetplan-live-"))
    os.environ[_prepare.STATE_ENV] = str(state_dir)
    config.stash[_LIVE_PREP] = (state_dir, _prepare.start_detached(state_dir))


def pytest_unconfigure(config: pytest.Config) -> None:
    started = config.stash.get(_LIVE_PREP, None)
    if started is None:
        return
    _prepare.stop_detached(*started)


@pytest.fixture(autouse=True)
def _own_user_data(tmp_path_factory: pytest.TempPathFactory,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets an empty user data folder ($XDG_DATA_HOME): a developer's own store or
    calibration under ~/.local/share/fleetplan must not change what the suite reads."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))


def _shipped(path: Path) -> Path:
    assert path.exists(), f"shipped test data missing: {path}"
    return path


def _optional(path: Path, what: str) -> Path:
    if not path.is_dir():
        pytest.skip(f"optional check on {what}: {path} not present (set FLEETPLAN_SHARED_DIR "
                    "to run it)")
    return path


@pytest.fixture(scope="session")
def measured_dir() -> Path:
    """The shipped subset of the study's measured vLLM result files (always present)."""
    return _shipped(MEASURED)


STUDY_RUN_4QPS = ("vllm_200prompts4qps_DeepSeek-R1-Distill-Qwen-14B_sharegpt_"
                  "1xNVIDIA-H100-PCIe.json")


@pytest.fixture
def foreign_run(measured_dir: Path, tmp_path: Path) -> Any:
    """``foreign_run(name="theirs.json", **fields)``: the study's 4 req/s 14B H100 run as
    someone else's vLLM result file, vLLM's own fields only (no GPU, no count) and another date,
    so the store does not hold it; ``fields`` change or add fields."""
    def make(name: str = "theirs.json", **fields: object) -> Path:
        rec = json.loads((measured_dir / STUDY_RUN_4QPS).read_text().splitlines()[0])
        for key in ("gpu_name", "gpu_count"):
            rec.pop(key)
        rec["date"] = "20260101-000000"
        rec.update(fields)
        out = tmp_path / name
        out.write_text(json.dumps(rec))
        return out

    return make


@pytest.fixture(scope="session")
def azure_sample() -> Path:
    """The shipped first ten minutes of the Azure conversation trace (always present)."""
    return _shipped(AZURE_SAMPLE)


@pytest.fixture(scope="session")
def ionet_dir() -> Path:
    """The full measured collection: optional extra checks only, skipped when absent."""
    return _optional(IONET, "the full measured collection")


@pytest.fixture(scope="session")
def azure_dir() -> Path:
    """The full Azure trace: optional extra checks only, skipped when absent."""
    return _optional(AZURE, "the full Azure trace")


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
