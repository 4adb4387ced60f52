"""Fixtures of the live vLLM test: a cached vLLM CPU environment, a tiny model, a running server.

All three come from ``prepare.py`` (see its docstring for the steps and the cache). The root
conftest starts it in the background as soon as a live test has been collected, so that the
vLLM install and the server start overlap the unit tests, and moves live tests to the end of
the run so that nothing else competes with the measurement; ``live_setup`` waits for it. Run
without the root conftest's start (e.g. under pytest-xdist, whose controller collects nothing),
``live_setup`` starts it itself and waits.

Any failure to install or start fails the test loudly with the log's tail. To skip the live test
deliberately: ``pytest --skip-live`` (the option lives in the root conftest),
``FLEETPLAN_SKIP_LIVE=1 pytest`` or ``pytest -m "not live"``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from prepare import STATE_ENV, start_detached  # noqa: E402

PREP_TIMEOUT_S = 2400  # install (cold, pip fallback) + model + server start, generously


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers",
                            "live: runs a real vLLM server (skip: FLEETPLAN_SKIP_LIVE=1)")


@dataclass(frozen=True)
class VllmEnv:
    python: Path
    info: dict[str, Any]


@dataclass(frozen=True)
class VllmServer:
    url: str
    model: str
    model_dir: Path
    log: Path
    start_s: float


@pytest.fixture(scope="session")
def live_setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The prepared server's state (waits for the background preparation)."""
    given = os.environ.get(STATE_ENV)
    state_dir = Path(given) if given else tmp_path_factory.mktemp("live-prepare")
    if not given:
        start_detached(state_dir)
    t = time.perf_counter()
    try:
        while True:
            if (state_dir / "error.json").exists():
                err = json.loads((state_dir / "error.json").read_text())["error"]
                pytest.fail(f"live test setup: {err}", pytrace=False)
            if (state_dir / "state.json").exists():
                state = json.loads((state_dir / "state.json").read_text())
                state["info"]["waited_s"] = round(time.perf_counter() - t, 1)
                break
            if time.perf_counter() - t > PREP_TIMEOUT_S:
                log = (state_dir / "prepare.log")
                tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
                pytest.fail(f"live test setup not ready after {PREP_TIMEOUT_S} s "
                            f"({state_dir}):\n{tail}", pytrace=False)
            time.sleep(1)
        yield state
    finally:
        (state_dir / "stop").touch()  # prepare.py stops the server's process group


@pytest.fixture(scope="session")
def vllm_env(live_setup: dict[str, Any]) -> VllmEnv:
    """The cached vLLM CPU virtualenv (built on first use)."""
    return VllmEnv(Path(live_setup["python"]), live_setup["info"])


@pytest.fixture(scope="session")
def vllm_server(live_setup: dict[str, Any]) -> VllmServer:
    """A vLLM OpenAI-compatible server on 127.0.0.1 serving the tiny model."""
    return VllmServer(live_setup["url"], live_setup["model"], Path(live_setup["model_dir"]),
                      Path(live_setup["log"]), live_setup["info"]["server_start_s"])
